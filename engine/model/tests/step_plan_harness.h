// Teacher-forced equivalence of the step plan (engine/model/step_plan.h) on
// any backend: feeding a pair's prompt in chunks and its image tokens k at a
// time in one step must write the same KV and give the same logits and
// samples as a whole prompt and one token per step. Header-only so the CPU
// tests (CI) and the CUDA tests (label gpu) share it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/kv/kv_manager.h"
#include "engine/model/backend.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"

namespace argen::model::testing {

// A pair's prompts (cond, and a shorter guidance row as Lumina-mGPT's) and
// the image tokens fed back, as input-table ids.
inline const std::vector<int32_t> kForcedCond = {5, 17, 3, 99, 42, 7, 1, 64, 12, 33, 8};
inline const std::vector<int32_t> kForcedUncond = {5, 0, 0, 12};

// Every policy kind at 50% sparsity on a square grid of l_dec tokens (ssd
// with a classification of alternating heads), plus dense and diagonal with
// fp8 KV.
struct PolicyCase {
  std::string name;
  sparse::ResolvedPolicy policy;
};
inline std::vector<PolicyCase> EveryPolicyCase(int32_t l_dec, int32_t layers, int32_t kv_heads) {
  static sparse::HeadClasses heads;
  heads.layers = layers;
  heads.kv_heads = kv_heads;
  heads.semantic.assign(static_cast<size_t>(layers) * kv_heads, 0);
  for (size_t i = 0; i < heads.semantic.size(); i += 2) heads.semantic[i] = 1;
  std::vector<PolicyCase> cases;
  for (sparse::PolicyKind kind : sparse::kAllPolicyKinds) {
    for (sparse::KvFormat format : {sparse::KvFormat::kAuto, sparse::KvFormat::kFp8E4m3}) {
      if (format == sparse::KvFormat::kFp8E4m3 && kind != sparse::PolicyKind::kDense &&
          kind != sparse::PolicyKind::kDiagonal) {
        continue;
      }
      sparse::PolicyParams params;
      params.kind = kind;
      params.sparsity = kind == sparse::PolicyKind::kDense ? 0.0 : 0.5;
      params.kv_format = format;
      absl::StatusOr<sparse::ResolvedPolicy> p =
          sparse::ResolvePolicy(params, sparse::SquareGrid(l_dec), kind == sparse::PolicyKind::kSsd ? &heads : nullptr);
      EXPECT_TRUE(p.ok()) << sparse::PolicyName(kind) << ": " << p.status();
      if (!p.ok()) continue;
      cases.push_back(
          {std::string(sparse::PolicyName(kind)) + (format == sparse::KvFormat::kFp8E4m3 ? " fp8" : ""), *p});
    }
  }
  return cases;
}

// Deterministic image tokens (ids of the input table).
inline std::vector<int32_t> ForcedTokens(int32_t n, int32_t input_rows) {
  std::vector<int32_t> t(n);
  for (int32_t i = 0; i < n; ++i) t[i] = (7 * i + 3) % input_rows;
  return t;
}

// One teacher-forced run of a pair: its logits and samples at every output
// point (token 0, then token t + 1 after each decode query t).
struct ForcedRun {
  std::vector<std::vector<float>> logits;  // [output point][2 x vocab]
  std::vector<int32_t> sampled;            // [output point]
};

// The two prompts as embeddings instead of ids (step_plan.h kEmbedding):
// [prompt_len x hidden] each, e.g. the text_embed rows of their ids.
struct ForcedEmbeddings {
  std::vector<float> rows[2];  // cond, uncond
  int32_t width = 0;
};

// Feeds the prompts in chunks of `prompt_chunk` positions (0: whole) and
// the tokens `k` per step, through Backend::Forward; the prompts as
// `embeddings` when given.
// `kv` manages `be`'s rows; the rows are freed at the end unless `rows_out` takes them.
inline absl::Status RunForced(Backend& be, kv::KvManager& kv, const sparse::ResolvedPolicy& policy,
                              const std::vector<int32_t>& tokens, int32_t prompt_chunk, int32_t k, ForcedRun* run,
                              std::vector<RowId>* rows_out = nullptr, const ForcedEmbeddings* embeddings = nullptr) {
  const int32_t vocab = be.spec().logits();
  const std::vector<int32_t>* prompts[2] = {&kForcedCond, &kForcedUncond};
  RowId rows[2];
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<RowId> r = kv.AllocateRow(static_cast<int32_t>(prompts[i]->size()), policy);
    if (!r.ok()) return r.status();
    rows[i] = *r;
  }
  SamplingSpec sampling;
  sampling.seed = 1234;
  sampling.temperature = 1.0f;
  sampling.cfg_weight = 3.0f;
  StepPlanBuilder builder;
  std::vector<int32_t> sampled;
  std::vector<float> logits;
  const auto step = [&](int32_t outputs) -> absl::Status {
    sampled.assign(outputs, -1);
    logits.assign(static_cast<size_t>(outputs) * 2 * vocab, 0.0f);
    absl::Status s = be.Forward(builder.Plan(), {sampled, outputs > 0 ? logits.data() : nullptr});
    if (!s.ok()) return s;
    for (int32_t o = 0; o < outputs; ++o) {
      run->logits.emplace_back(logits.begin() + static_cast<size_t>(o) * 2 * vocab,
                               logits.begin() + static_cast<size_t>(o + 1) * 2 * vocab);
      run->sampled.push_back(sampled[o]);
    }
    return absl::OkStatus();
  };
  // The prompts: chunks of both rows, the shorter one starting later so that
  // both complete in the last prompt step, which samples token 0.
  const int32_t lens[2] = {static_cast<int32_t>(kForcedCond.size()), static_cast<int32_t>(kForcedUncond.size())};
  const int32_t chunk = prompt_chunk > 0 ? prompt_chunk : std::max(lens[0], lens[1]);
  const int32_t row_steps[2] = {(lens[0] + chunk - 1) / chunk, (lens[1] + chunk - 1) / chunk};
  const int32_t prompt_steps = std::max(row_steps[0], row_steps[1]);
  int32_t filled[2] = {0, 0};
  for (int32_t s = 0; s < prompt_steps; ++s) {
    builder.Clear();
    for (int i = 0; i < 2; ++i) {
      const int32_t n = s < prompt_steps - row_steps[i] ? 0 : std::min(chunk, lens[i] - filled[i]);
      builder.AddRow(rows[i]);
      if (embeddings != nullptr) {
        builder.AddPromptEmbeddings(embeddings->rows[i], embeddings->width, filled[i], n);
      } else {
        builder.AddPromptQueries(*prompts[i], filled[i], n);
      }
      filled[i] += n;
    }
    builder.AddSampling(sampling);
    if (absl::Status st = step(s + 1 == prompt_steps ? 1 : 0); !st.ok()) return st;
  }
  // Decode: token t is fed at index t; k per step.
  for (int32_t t = 0; t < static_cast<int32_t>(tokens.size());) {
    const int32_t n = std::min<int32_t>(k, static_cast<int32_t>(tokens.size()) - t);
    builder.Clear();
    for (int i = 0; i < 2; ++i) {
      builder.AddRow(rows[i]);
      for (int32_t j = 0; j < n; ++j) builder.AddQuery(QueryKind::kDecode, tokens[t + j], t + j);
    }
    builder.AddSampling(sampling);
    if (absl::Status s = step(n); !s.ok()) return s;
    t += n;
  }
  if (rows_out != nullptr) {
    rows_out->assign(rows, rows + 2);
  } else {
    for (RowId r : rows) kv.FreeRow(r);
  }
  return absl::OkStatus();
}

// The largest |a - b| / max(1, |b|) between two runs' logits, and whether
// every sample agrees.
struct RunDifference {
  double worst = 0;
  int differing_samples = 0;
  bool bitwise = true;
};
// Over the first `outputs` output points (all by default).
inline RunDifference Difference(const ForcedRun& got, const ForcedRun& want, size_t outputs = SIZE_MAX) {
  RunDifference d;
  EXPECT_EQ(got.logits.size(), want.logits.size());
  for (size_t o = 0; o < got.logits.size() && o < want.logits.size() && o < outputs; ++o) {
    d.bitwise = d.bitwise && got.logits[o] == want.logits[o];
    for (size_t v = 0; v < want.logits[o].size(); ++v) {
      const double a = got.logits[o][v], b = want.logits[o][v];
      d.worst = std::max(d.worst, std::isfinite(a) ? std::abs(a - b) / std::max(1.0, std::abs(b)) : INFINITY);
    }
    d.differing_samples += got.sampled[o] != want.sampled[o];
  }
  return d;
}

// The forced prompts' rows of the text embedding table, read from `source`.
inline ForcedEmbeddings ForcedPromptEmbeddings(const WeightSource& source, const ModelSpec& spec) {
  ForcedEmbeddings e;
  e.width = spec.stack.hidden_size;
  const std::vector<int32_t>* prompts[2] = {&kForcedCond, &kForcedUncond};
  for (int i = 0; i < 2; ++i) {
    e.rows[i].resize(prompts[i]->size() * e.width);
    EXPECT_TRUE(
        source.ReadRows(spec.text_embed, prompts[i]->data(), static_cast<int64_t>(prompts[i]->size()), e.rows[i].data())
            .ok());
  }
  return e;
}

}  // namespace argen::model::testing
