// Decode attention alone, at the last decode step: dense (L_p + L_dec keys)
// against a sparse slot list (L_p + n_att keys), with bytes moved compared to
// a device-to-device copy measured in the same run. The buffers are laid out
// as the CUDA backend's (attention_micro_layout.h), grouped-query models
// included: K and V, the slot lists, counts and probabilities per KV head.
#pragma once

#include <string>
#include <vector>

#include "bench/gpu/attention_micro_layout.h"
#include "kernels/attention.h"

namespace argen::bench {

struct AttentionMicroResult {
  double copy_gbs = 0;                   // cudaMemcpy D2D, bytes read + written per second
  double dense_us = 0, sparse_us = 0;    // the two-pass kernel
  double dense_gbs = 0, sparse_gbs = 0;  // KV (+ index) bytes read per second
  // The sparse launch with the staged kernel forced (kernels::AttentionVariant::kStaged);
  // staged_ran is false (and these 0) when it does not fit and the two-pass kernel would run.
  bool staged_ran = false;
  double staged_us = 0, staged_gbs = 0;
  // The warp kernel forced (kWarp) on the dense and the sparse launch; *_warp_ran
  // is false (and these 0) where it does not apply (split keys or over 1024 keys).
  bool dense_warp_ran = false, sparse_warp_ran = false;
  double dense_warp_us = 0, dense_warp_gbs = 0, sparse_warp_us = 0, sparse_warp_gbs = 0;
  // The one-pass kernel forced (kOnePass) on the dense and the sparse launch, the engine's splits.
  double dense_one_pass_us = 0, dense_one_pass_gbs = 0, sparse_one_pass_us = 0, sparse_one_pass_gbs = 0;
  // The two-pass launches run alone (a sync before and after each) with phase
  // stamps (kernels::AttentionArgs::phase_clocks; builds with ARGEN_ATTENTION_PHASES,
  // else blocks stays 0): for each phase p >= 1
  // (kernels::AttentionPhase), the median and the largest time a block spent
  // in it; the launch's span from its first block's start to its last
  // block's end, and how far apart the blocks started. Cycles are turned into
  // us at the rate %globaltimer measured over the same blocks.
  struct Phases {
    int blocks = 0, threads = 0;
    double median_us[kernels::kAttentionPhaseCount] = {};
    double max_us[kernels::kAttentionPhaseCount] = {};
    double span_us = 0, start_spread_us = 0, ns_per_cycle = 0;
  };
  Phases dense_phases, sparse_phases;
  // The two-pass launches with ChooseAttentionSplits aiming at fixed blocks an SM
  // instead of the engine's kAutoBlocksPerSm (sparse: 1, 2, 4, 8; dense: 1, 2; only
  // targets that change the launch's splits are timed).
  struct SplitTarget {
    int blocks_per_sm = 0, splits = 0;
    double us = 0, gbs = 0;
  };
  int sparse_splits = 1, dense_splits = 1;  // the engine's choices
  // A split launch (splits > 1) with a combine launch of its own instead of the
  // last chunk's block combining (AttentionArgs::split_counters); 0 when not split.
  double dense_combine_us = 0, sparse_combine_us = 0;
  std::vector<SplitTarget> sparse_targets, dense_targets;
  // What kAuto picks for each launch, as the engine calls it (with the device's SM count).
  kernels::AttentionVariant auto_dense = kernels::AttentionVariant::kTwoPass;
  kernels::AttentionVariant auto_sparse = kernels::AttentionVariant::kTwoPass;
  bool auto_staged = false;  // auto_sparse == kStaged
};

// "auto", "two-pass", "staged", "warp" or "one-pass".
const char* AttentionVariantName(kernels::AttentionVariant variant);

// `shape.rows`: CFG rows; heads / kv_heads / head_dim: the model's; n_att: attended decode keys.
bool RunAttentionMicro(const AttentionMicroShape& shape, AttentionMicroResult* out, std::string* error);

}  // namespace argen::bench
