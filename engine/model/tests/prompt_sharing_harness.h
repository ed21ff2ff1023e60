// Prompt-KV sharing checks any backend runs (engine/model/backend.h): one
// request's images with and without sharing, and a randomised ledger walk.
// Header-only so the CPU tests (CI) and the CUDA tests (label gpu) share it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/model/backend.h"
#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"

namespace argen::model::testing {

// One request's prompts: a caption's ids and its guidance row (the ends kept,
// the inside padded, as the official generation script builds it).
inline const std::vector<int32_t> kSharingCond = {5, 17, 3, 99, 42, 7, 1, 64, 12};
inline const std::vector<int32_t> kSharingUncond = {5, 0, 0, 0, 0, 0, 0, 0, 12};

inline sparse::ResolvedPolicy SharingPolicy(sparse::PolicyKind kind, double sparsity, sparse::KvFormat format,
                                            int32_t l_dec) {
  sparse::PolicyParams params;
  params.kind = kind;
  params.sparsity = sparsity;
  params.kv_format = format;
  absl::StatusOr<sparse::ResolvedPolicy> p = sparse::ResolvePolicy(params, l_dec);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : sparse::ResolvedPolicy{};
}

// ||got - want|| / ||want|| over row `row` of [rows x vocab] logits; inf when got is not finite.
inline double LogitsRowError(const std::vector<float>& got, const std::vector<float>& want, int row, int vocab) {
  double num = 0, den = 0;
  for (int v = 0; v < vocab; ++v) {
    const double a = got[static_cast<size_t>(row) * vocab + v], b = want[static_cast<size_t>(row) * vocab + v];
    if (!std::isfinite(a)) return INFINITY;
    num += (a - b) * (a - b);
    den += b * b;
  }
  return std::sqrt(num / den);
}

struct GroupRun {
  std::vector<std::vector<float>> logits;     // [step][row x logits], step 0 from the prefill
  std::vector<std::vector<int32_t>> sampled;  // [step][image]
  int64_t kv_bytes = 0;                       // KvBytesInUse() while the rows were live
};

struct GroupOptions {
  int images = 3;
  bool share = false;
  int steps = 0;              // decode steps after the prefill
  bool owners_first = false;  // free order: the owners first (their regions must outlive them) or last
  bool feed_back = true;      // decode inputs: the sampled ids, or a fixed sequence (teacher forcing)
};

// Allocates one request of `images` CFG pairs (image 0 owning the prompts
// when `share`), prefills it, decodes, and frees the rows.
inline void RunGroup(Backend& be, const sparse::ResolvedPolicy& policy, const std::vector<int32_t>& cond,
                     const std::vector<int32_t>& uncond, const GroupOptions& o, GroupRun* run) {
  const int images = o.images, steps = o.steps;
  const bool share = o.share, owners_first = o.owners_first;
  const int64_t before = be.KvBytesInUse();
  std::vector<RowId> rows;
  std::vector<int32_t> tokens, offsets = {0};
  for (int i = 0; i < images; ++i) {
    for (int k = 0; k < 2; ++k) {
      const std::vector<int32_t>& prompt = k == 0 ? cond : uncond;
      absl::StatusOr<RowId> r =
          share && i > 0 ? be.AllocateSharingRow(rows[k]) : be.AllocateRow(static_cast<int32_t>(prompt.size()), policy);
      ASSERT_TRUE(r.ok()) << r.status();
      rows.push_back(*r);
      tokens.insert(tokens.end(), prompt.begin(), prompt.end());
      offsets.push_back(static_cast<int32_t>(tokens.size()));
    }
  }
  run->kv_bytes = be.KvBytesInUse() - before;
  std::vector<SamplingSpec> sampling(images);
  for (int i = 0; i < images; ++i) {
    sampling[i].temperature = 1.0f;
    sampling[i].cfg_weight = 3.0f;
    sampling[i].seed = 77;
    sampling[i].image_index = i;
  }
  const int vocab = be.spec().logits();
  std::vector<int32_t> sampled(images);
  std::vector<float> logits(static_cast<size_t>(2 * images) * vocab);
  absl::Status s = be.Prefill({rows, offsets, tokens, sampling}, {sampled, logits.data()});
  ASSERT_TRUE(s.ok()) << s;
  run->logits.push_back(logits);
  run->sampled.push_back(sampled);
  const int32_t offset = be.spec().input.sampled_offset;
  for (int t = 0; t < steps; ++t) {
    std::vector<int32_t> inputs(images), step(images, t);
    for (int i = 0; i < images; ++i)
      inputs[i] = o.feed_back ? offset + sampled[i] : (offset + 7 * t + 3 * i) % be.spec().input_rows();
    s = be.Decode({rows, inputs, step, sampling}, {sampled, logits.data()});
    ASSERT_TRUE(s.ok()) << s;
    run->logits.push_back(logits);
    run->sampled.push_back(sampled);
  }
  if (!owners_first) std::reverse(rows.begin(), rows.end());
  for (size_t i = 0; i < rows.size(); ++i) {
    be.FreeRow(rows[i]);
    // An owner's region stays until its last sharer is freed.
    if (share && owners_first && images > 1 && i < 2) {
      EXPECT_EQ(be.KvBytesInUse() - before, run->kv_bytes);
    }
  }
  EXPECT_EQ(be.KvBytesInUse(), before);
}

// Random requests (1-4 images, shared or not, two prompt lengths) are added
// while CanAllocateGroup says they fit and freed in random row order; the
// ledger must equal the sum of the live requests' bytes after every step,
// CanAllocateGroup must agree with what allocation does, and everything
// returns to zero.
inline void RandomLedgerWalk(Backend& be, const std::vector<const sparse::ResolvedPolicy*>& policies, int iterations,
                             uint32_t seed) {
  struct Live {
    std::vector<RowId> rows;
    int64_t bytes = 0;
  };
  std::mt19937 rng(seed);
  std::vector<Live> live;
  int64_t expected = 0;
  const int64_t base = be.KvBytesInUse();
  int added = 0, refused = 0;
  for (int it = 0; it < iterations; ++it) {
    if (live.empty() || rng() % 3 != 0) {
      const sparse::ResolvedPolicy& p = *policies[rng() % policies.size()];
      const int images = 1 + static_cast<int>(rng() % 4);
      const bool share = rng() % 2 == 0;
      const int32_t cond_len = 3 + static_cast<int32_t>(rng() % 9), uncond_len = 2 + static_cast<int32_t>(rng() % 5);
      const bool fits = be.CanAllocateGroup(cond_len, uncond_len, p, images, share);
      Live g;
      bool ok = true;
      for (int i = 0; ok && i < 2 * images; ++i) {
        absl::StatusOr<RowId> r = share && i >= 2 ? be.AllocateSharingRow(g.rows[i % 2])
                                                  : be.AllocateRow(i % 2 == 0 ? cond_len : uncond_len, p);
        ok = r.ok();
        if (ok) g.rows.push_back(*r);
      }
      ASSERT_EQ(ok, fits) << "iteration " << it << ": CanAllocateGroup disagrees with allocation";
      if (!ok) {
        for (RowId r : g.rows) be.FreeRow(r);
        ++refused;
      } else {
        g.bytes = share ? be.RowBytes(cond_len, p) + be.RowBytes(uncond_len, p) +
                              (images - 1) * (be.SharingRowBytes(cond_len, p) + be.SharingRowBytes(uncond_len, p))
                        : images * (be.RowBytes(cond_len, p) + be.RowBytes(uncond_len, p));
        expected += g.bytes;
        live.push_back(std::move(g));
        ++added;
      }
    } else {
      const size_t victim = rng() % live.size();
      Live g = std::move(live[victim]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
      std::shuffle(g.rows.begin(), g.rows.end(), rng);
      for (RowId r : g.rows) be.FreeRow(r);
      expected -= g.bytes;
    }
    ASSERT_EQ(be.KvBytesInUse() - base, expected) << "iteration " << it;
  }
  for (Live& g : live)
    for (RowId r : g.rows) be.FreeRow(r);
  EXPECT_EQ(be.KvBytesInUse(), base);
  EXPECT_GT(added, 10);
  EXPECT_GT(refused, 0) << "the walk never filled the pool";
}

}  // namespace argen::model::testing
