// An independent reference of parallel decoding (engine/model/step_plan.h,
// engine/model/parallel_schedule.h) for the engine tests: ZipAR's rules
// written again, plainly, as per-query state (which chain indices are done,
// which are written), and every query of a step run as its own
// Backend::Forward call of one query, in index order. The engine's run must
// give the same tokens, made in the same steps. Header-only: the CPU tests
// and the Lumina-mGPT engine test share it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend.h"
#include "engine/model/create_engine.h"
#include "engine/model/step_plan.h"
#include "engine/request_rules.h"

namespace argen::model::testing {

struct ReferenceImage {
  std::vector<int32_t> tokens;        // input ids by index (the recorded tokens)
  std::vector<int32_t> leading_runs;  // after each step (the prefill's first): the made tokens' leading run
  int32_t steps = 0;
};

struct ReferenceSetup {
  std::vector<int32_t> cond, uncond;  // prompt ids
  sparse::ResolvedPolicy policy;
  SamplingSpec sampling;
  int32_t period = 0;           // tokens per image row (row breaks included)
  int32_t window = 0;           // parallel_window (> 0)
  std::vector<int32_t> forced;  // [l_dec] input id or -1; empty: none
  int32_t sampled_offset = 0;   // input id of logit 0
  // Poisons the rows' decode slots once placed (the poisoned-slot test); may be null.
  std::function<void(RowId)> on_placed;
};

// Runs one image (a CFG pair) of `setup` on `backend`, whose rows `kv` places.
inline absl::StatusOr<ReferenceImage> RunParallelReference(Backend& backend, kv::KvManager& kv,
                                                           const ReferenceSetup& setup) {
  const int32_t l_dec = setup.policy.l_dec, P = setup.period;
  absl::StatusOr<RowId> cond = kv.AllocateRow(static_cast<int32_t>(setup.cond.size()), setup.policy);
  if (!cond.ok()) return cond.status();
  absl::StatusOr<RowId> uncond = kv.AllocateRow(static_cast<int32_t>(setup.uncond.size()), setup.policy);
  if (!uncond.ok()) return uncond.status();
  const std::vector<RowId> rows = {*cond, *uncond};
  if (setup.on_placed) {
    for (RowId r : rows) setup.on_placed(r);
  }
  ReferenceImage out;
  out.tokens.assign(l_dec, -1);
  for (int32_t t = 0; t < l_dec && t < static_cast<int32_t>(setup.forced.size()); ++t) out.tokens[t] = setup.forced[t];
  const auto leading = [&] {
    int32_t n = 0;
    while (n < l_dec && out.tokens[n] >= 0) ++n;
    return n;
  };
  const std::vector<SamplingSpec> sampling = {setup.sampling};
  // Token 0: the prefill.
  {
    std::vector<int32_t> tokens = setup.cond, sampled(1);
    tokens.insert(tokens.end(), setup.uncond.begin(), setup.uncond.end());
    const std::vector<int32_t> offsets = {0, static_cast<int32_t>(setup.cond.size()),
                                          static_cast<int32_t>(tokens.size())};
    if (absl::Status s = backend.Prefill({rows, offsets, tokens, sampling}, {sampled, nullptr}); !s.ok()) return s;
    if (out.tokens[0] < 0) out.tokens[0] = setup.sampled_offset + sampled[0];
    out.steps = 1;
    out.leading_runs.push_back(leading());
  }
  // Image row r samples tokens [r P, (r + 1) P) with the queries of its chain.
  const int32_t n_rows = (l_dec + P - 1) / P;
  const auto chain_first = [&](int32_t r) { return r == 0 ? 0 : r * P - 1; };
  const auto chain_last = [&](int32_t r) { return std::min((r + 1) * P - 2, l_dec - 2); };
  const auto row_made = [&](int32_t r) {  // leading made tokens of image row r
    int32_t c = 0;
    while (c < P && r * P + c < l_dec && out.tokens[r * P + c] >= 0) ++c;
    return c;
  };
  std::vector<uint8_t> done(l_dec, 0), written(l_dec, 0), provisional(l_dec, 0);
  std::vector<uint8_t> started(n_rows, 0);
  started[0] = 1;
  while (leading() < l_dec) {
    // Rows that start now: the row above has `window` tokens (all, if shorter),
    // and its last token is made or the row two above can stand in for it.
    for (int32_t r = 1; r < n_rows; ++r) {
      if (started[r] || !started[r - 1]) continue;
      if (row_made(r - 1) < std::min(setup.window, std::min(P, l_dec - (r - 1) * P))) continue;
      if (out.tokens[chain_first(r)] >= 0 || r >= 2) started[r] = 1;
    }
    struct One {
      int32_t index, input;
      bool provisional;
    };
    std::vector<One> step;
    for (int32_t q = 0; q + 1 < l_dec; ++q) {  // fills: a provisional index whose token is made now
      if (provisional[q] && !written[q] && out.tokens[q] >= 0) step.push_back({q, out.tokens[q], false});
    }
    for (int32_t r = 0; r < n_rows; ++r) {
      if (!started[r]) continue;
      int32_t q = chain_first(r);
      while (q <= chain_last(r) && done[q]) ++q;
      if (q > chain_last(r)) continue;
      if (out.tokens[q] >= 0) {
        step.push_back({q, out.tokens[q], false});
      } else {
        const int32_t above = r - 2;
        step.push_back({q, out.tokens[above * P + row_made(above) - 1], true});
      }
    }
    std::sort(step.begin(), step.end(), [](const One& a, const One& b) { return a.index < b.index; });
    std::vector<std::pair<int32_t, int32_t>> made;  // (token index, id), recorded after the step
    for (const One& one : step) {
      StepPlanBuilder b;
      b.AllowOutOfOrder();
      for (RowId r : rows) {
        b.AddRow(r);
        b.AddQuery(QueryKind::kDecode, one.input, one.index, one.provisional);
      }
      b.AddSampling(setup.sampling);
      std::vector<int32_t> sampled(1);
      if (absl::Status s = backend.Forward(b.Plan(), {sampled, nullptr}); !s.ok()) return s;
      if (out.tokens[one.index + 1] < 0) made.push_back({one.index + 1, setup.sampled_offset + sampled[0]});
      done[one.index] = 1;
      if (one.provisional) {
        provisional[one.index] = 1;
      } else {
        written[one.index] = 1;
      }
    }
    if (step.empty()) return absl::InternalError("reference: no query to run before the image is complete");
    for (auto [k, id] : made) out.tokens[k] = id;
    ++out.steps;
    out.leading_runs.push_back(leading());
  }
  for (RowId r : rows) kv.FreeRow(r);
  return out;
}

// The engine's side of a comparison: a prepared request run alone to the
// end, its images' tokens, the leading run of made tokens after each step
// (the prefill's first) and its step count.
struct EngineRun {
  std::vector<std::vector<int32_t>> tokens;  // [image][index]
  std::vector<int32_t> leading_runs;
  int32_t steps = 0;
};

inline absl::StatusOr<EngineRun> RunEngineRequest(GenericEngine& e, const engine::PreparedRequest& prepared) {
  engine::RequestPtr request = engine::MakeRequest(prepared);
  absl::StatusOr<engine::GroupId> id = e.Add(request);
  if (!id.ok()) return id.status();
  EngineRun out;
  for (int i = 0; i < 100000 && !request->progress.finished; ++i) {
    absl::StatusOr<engine::StepReport> s = e.Step();
    if (!s.ok()) return s.status();
    out.leading_runs.push_back(request->progress.tokens_done);
  }
  if (!request->progress.finished) return absl::InternalError("engine: the request did not finish");
  out.tokens = request->progress.tokens;
  out.steps = request->progress.steps;
  e.Remove(*id);
  return out;
}

// The reference's setup for a prepared request: its prompt ids, policy,
// sampling, the grid's period and the request's window (a family's forced
// tokens, if any, are the caller's to add).
inline ReferenceSetup SetupOf(GenericEngine& e, const engine::PreparedRequest& p) {
  ReferenceSetup s;
  s.cond = p.cond_ids;
  s.uncond = p.uncond_ids;
  s.policy = p.policy;
  const engine::SamplingParams& sp = p.request.sampling;
  s.sampling = {sp.temperature, sp.top_k, sp.top_p, sp.cfg_weight, sp.seed, 0};
  const sparse::GridGeometry grid = engine::PolicyGrid(p.layout);
  s.period = grid.width + grid.row_break_tokens;
  s.window = p.request.parallel_window;
  s.sampled_offset = e.backend().spec().input.sampled_offset;
  return s;
}

}  // namespace argen::model::testing
