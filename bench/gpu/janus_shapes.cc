#include "bench/gpu/janus_shapes.h"

#include <cctype>
#include <cstdlib>

#include "bench/gpu/nextstep_shapes.h"
#include "engine/families/anole/anole_shapes.h"
#include "engine/families/emu3/emu3_shapes.h"
#include "engine/families/janus/janus_shapes.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/families/llamagen/llamagen_config.h"
#include "engine/families/llamagen/llamagen_spec.h"
#include "engine/families/lumina/lumina_shapes.h"
#include "engine/families/nextstep/nextstep_spec.h"
#include "engine/sparse/policy_params.h"

namespace argen::bench {

absl::StatusOr<model::ModelSpec> JanusSpec(const std::string& name) {
  absl::StatusOr<janus::JanusConfig> config = janus::PublishedJanusConfig(name);
  if (!config.ok()) return absl::InvalidArgumentError("--model: expected 1b or 7b, got " + name);
  return janus::JanusSpec(*config);
}

absl::StatusOr<BenchModel> BenchModelFor(const std::string& name) {
  BenchModel m;
  for (auto [label, target] : {std::pair{"lumina-512", 512}, {"lumina-768", 768}, {"lumina-1024", 1024}}) {
    if (name != label) continue;
    absl::StatusOr<lumina::PublishedLumina> p = lumina::PublishedLumina7B(target);
    if (!p.ok()) return p.status();
    m.spec = std::move(p->spec);
    m.grid = p->schedule.grid;
    m.uncond_len = 3;  // <racm3:break>, height, width
    return m;
  }
  // Anole-7b (Chameleon-7B) at 512 px: 32 x 32 codes without row breaks; the guidance row is [<s>, <racm3:break>].
  if (name == "anole-512") {
    absl::StatusOr<anole::PublishedAnole> p = anole::PublishedAnole7B();
    if (!p.ok()) return p.status();
    m.spec = std::move(p->spec);
    m.grid = p->grid;
    m.uncond_len = anole::kPublishedUncondTokens;
    return m;
  }
  // Emu3-Gen as published (image_area 720^2: 90 x 90 codes) or "emu3-512" (image_area 512^2 in
  // config.json: 64 x 64 codes, 4,163 tokens; the same header length).
  if (name == "emu3" || name == "emu3-512") {
    absl::StatusOr<emu3::PublishedEmu3> p =
        name == "emu3" ? emu3::PublishedEmu3Gen() : emu3::PublishedEmu3Gen(0, 0, 512 * 512);
    if (!p.ok()) return p.status();
    m.spec = std::move(p->spec);
    m.grid = p->schedule.grid;
    m.uncond_len = emu3::kPublishedUncondTokens;  // BOS, the default negative prompt, the 720 px header
    return m;
  }
  if (name == "nextstep-14b") {
    absl::StatusOr<nextstep::NextStepConfig> config = PublishedNextStepConfig();
    if (!config.ok()) return config.status();
    absl::StatusOr<model::ModelSpec> spec = nextstep::NextStepSpec(*config);
    if (!spec.ok()) return spec.status();
    m.spec = *std::move(spec);
    // As the family lays out its one size (nextstep_family.cc): a square grid of latent_size
    // tokens a side, raster order, no row breaks; N_r 2 2/3 rows.
    const int32_t side = config->latent_size;
    m.grid = sparse::GridGeometry{side, 0, side * side};
    m.grid.default_n_recent = sparse::RecentRowsWindow(m.grid, 8, 3);
    m.nextstep = *config;
    return m;
  }
  // LlamaGen c2i: llamagen-<size>-<px> (llamagen-xl-384, llamagen-l-256, ...); one class token
  // (run with --prompt-len 1), the unconditional class as the guidance row, a square grid.
  if (name.rfind("llamagen-", 0) == 0) {
    const size_t dash = name.rfind('-');
    std::string size = name.substr(9, dash - 9);
    for (char& ch : size) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    absl::StatusOr<llamagen::LlamaGenConfig> config =
        llamagen::PublishedLlamaGenConfig(size, dash == 8 ? 0 : std::atoi(name.c_str() + dash + 1));
    if (!config.ok())
      return absl::InvalidArgumentError("--model " + name + ": " + std::string(config.status().message()));
    absl::StatusOr<model::ModelSpec> spec = llamagen::LlamaGenSpec(*config);
    if (!spec.ok()) return spec.status();
    m.spec = *std::move(spec);
    m.grid = sparse::SquareGrid(config->image_tokens());
    m.uncond_len = 1;
    return m;
  }
  absl::StatusOr<model::ModelSpec> spec = JanusSpec(name);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        "--model: expected 1b, 7b, lumina-512, lumina-768, lumina-1024, anole-512, emu3, emu3-512, "
        "llamagen-<size>-<px> or "
        "nextstep-14b, got " +
        name);
  }
  m.spec = *std::move(spec);
  m.grid = sparse::SquareGrid(kJanusImageTokens);
  return m;
}

}  // namespace argen::bench
