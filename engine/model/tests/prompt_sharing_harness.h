// Prompt-KV sharing checks any backend runs (engine/model/backend.h): one
// request's images with and without sharing, and a randomised ledger walk.
// Header-only so the CPU tests (CI) and the CUDA tests (label gpu) share it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/kv/kv_manager.h"
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

struct NamedPolicy {
  const char* name;
  sparse::ResolvedPolicy policy;
};
// The policies the sharing tests run: dense, diagonal, a score policy (h2o)
// and fp8 KV.
inline std::vector<NamedPolicy> SharingCases(int32_t l_dec) {
  return {{"dense", SharingPolicy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto, l_dec)},
          {"diagonal", SharingPolicy(sparse::PolicyKind::kDiagonal, 0.5, sparse::KvFormat::kAuto, l_dec)},
          {"h2o", SharingPolicy(sparse::PolicyKind::kH2O, 0.5, sparse::KvFormat::kAuto, l_dec)},
          {"diagonal fp8", SharingPolicy(sparse::PolicyKind::kDiagonal, 0.5, sparse::KvFormat::kFp8E4m3, l_dec)}};
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
  kv::KvManager kv(be);
  const bool share = o.share, owners_first = o.owners_first;
  const int64_t before = kv.BytesInUse();
  std::vector<RowId> rows;
  std::vector<int32_t> tokens, offsets = {0};
  for (int i = 0; i < images; ++i) {
    for (int k = 0; k < 2; ++k) {
      const std::vector<int32_t>& prompt = k == 0 ? cond : uncond;
      absl::StatusOr<RowId> r = share && i > 0 ? kv.AllocateSharingRow(rows[k], policy)
                                               : kv.AllocateRow(static_cast<int32_t>(prompt.size()), policy);
      ASSERT_TRUE(r.ok()) << r.status();
      rows.push_back(*r);
      tokens.insert(tokens.end(), prompt.begin(), prompt.end());
      offsets.push_back(static_cast<int32_t>(tokens.size()));
    }
  }
  run->kv_bytes = kv.BytesInUse() - before;
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
    kv.FreeRow(rows[i]);
    // An owner's region stays until its last sharer is freed.
    if (share && owners_first && images > 1 && i < 2) {
      EXPECT_EQ(kv.BytesInUse() - before, run->kv_bytes);
    }
  }
  EXPECT_EQ(kv.BytesInUse(), before);
}

// Random requests (1-4 images, shared or not, two prompt lengths) are added
// while the KV manager's CanPlace says they fit and freed in random row
// order; the ledger must equal the sum of the live requests' bytes after
// every step, CanPlace must agree with what allocation does, and everything
// returns to zero.
inline void RandomLedgerWalk(Backend& be, const std::vector<const sparse::ResolvedPolicy*>& policies, int iterations,
                             uint32_t seed) {
  kv::KvManager kv(be);
  struct Live {
    std::vector<RowId> rows;
    int64_t bytes = 0;
  };
  std::mt19937 rng(seed);
  std::vector<Live> live;
  int64_t expected = 0;
  const int64_t base = kv.BytesInUse();
  int added = 0, refused = 0;
  for (int it = 0; it < iterations; ++it) {
    if (live.empty() || rng() % 3 != 0) {
      const sparse::ResolvedPolicy& p = *policies[rng() % policies.size()];
      const int images = 1 + static_cast<int>(rng() % 4);
      const bool share = rng() % 2 == 0;
      const int32_t cond_len = 3 + static_cast<int32_t>(rng() % 9), uncond_len = 2 + static_cast<int32_t>(rng() % 5);
      const std::vector<int32_t> cond(cond_len, 1), uncond(uncond_len, 2);
      const bool fits = kv.CanPlace(
          kv::RequestShape{cond, uncond, p, images, share ? kv::Sharing::kWithinRequest : kv::Sharing::kNone});
      Live g;
      bool ok = true;
      for (int i = 0; ok && i < 2 * images; ++i) {
        absl::StatusOr<RowId> r = share && i >= 2 ? kv.AllocateSharingRow(g.rows[i % 2], p)
                                                  : kv.AllocateRow(i % 2 == 0 ? cond_len : uncond_len, p);
        ok = r.ok();
        if (ok) g.rows.push_back(*r);
      }
      ASSERT_EQ(ok, fits) << "iteration " << it << ": CanPlace disagrees with allocation";
      if (!ok) {
        for (RowId r : g.rows) kv.FreeRow(r);
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
      for (RowId r : g.rows) kv.FreeRow(r);
      expected -= g.bytes;
    }
    ASSERT_EQ(kv.BytesInUse() - base, expected) << "iteration " << it;
  }
  for (Live& g : live)
    for (RowId r : g.rows) kv.FreeRow(r);
  EXPECT_EQ(kv.BytesInUse(), base);
  EXPECT_GT(added, 10);
  EXPECT_GT(refused, 0) << "the walk never filled the pool";
}

// Prompt rows (sharing across requests): request A (2 images) is prefilled
// with its prompts; request B (1 image, another caption, A's guidance
// prompt) joins 3 steps later, reading A's uncond prompt row, which its
// prefill takes from the row's stored last position; both then decode
// together, A finishes, and B goes on after its uncond prompt row was freed
// (hidden: B still reads it). With `prompt_rows` false every row holds its
// own prompt (the reference): the calls carry the same rows in the same
// order, so the logits must agree.
inline const std::vector<int32_t> kSharingCond2 = {5, 88, 21, 30, 9, 3, 61, 2, 44, 71, 12};

struct AcrossRun {
  std::vector<std::vector<float>> logits;     // per backend call, [rows x logits]
  std::vector<std::vector<int32_t>> sampled;  // per backend call
  std::vector<int64_t> kv_bytes;              // KvBytesInUse() after each stage
};

// feed_back false: decode inputs are a fixed sequence (teacher forcing), so a
// token drawn differently cannot change the later inputs.
inline void RunAcrossRequests(Backend& be, const sparse::ResolvedPolicy& policy, bool prompt_rows, int steps,
                              AcrossRun* run, bool feed_back = true) {
  const std::vector<int32_t>& cond_a = kSharingCond;
  const std::vector<int32_t>& cond_b = kSharingCond2;
  const std::vector<int32_t>& uncond = kSharingUncond;
  const auto len = [](const std::vector<int32_t>& v) { return static_cast<int32_t>(v.size()); };
  const int vocab = be.spec().logits();
  const int32_t offset = be.spec().input.sampled_offset;
  kv::KvManager kv(be);
  const int64_t base = kv.BytesInUse();
  const auto record_bytes = [&] { run->kv_bytes.push_back(kv.BytesInUse() - base); };
  // A row reading prompt row `owner`, or one with its own prompt.
  const auto row_for = [&](RowId owner, const std::vector<int32_t>& prompt) -> RowId {
    absl::StatusOr<RowId> r = prompt_rows ? kv.AllocateSharingRow(owner, policy) : kv.AllocateRow(len(prompt), policy);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : kNoRow;
  };
  RowId pa = kNoRow, pu = kNoRow, pb = kNoRow;
  if (prompt_rows) {
    absl::StatusOr<RowId> a = kv.AllocatePromptRow(len(cond_a), policy.kv_format);
    absl::StatusOr<RowId> u = kv.AllocatePromptRow(len(uncond), policy.kv_format);
    ASSERT_TRUE(a.ok() && u.ok());
    pa = *a;
    pu = *u;
  }
  std::vector<RowId> rows_a;
  for (int i = 0; i < 2; ++i) {
    rows_a.push_back(row_for(pa, cond_a));
    rows_a.push_back(row_for(pu, uncond));
  }
  record_bytes();
  std::vector<SamplingSpec> sampling(3);
  for (int i = 0; i < 3; ++i) {
    sampling[i].temperature = 1.0f;
    sampling[i].cfg_weight = 3.0f;
    sampling[i].seed = 91 + (i == 2 ? 1 : 0);
    sampling[i].image_index = i == 2 ? 0 : i;
  }
  std::vector<int32_t> sampled(3), step_of(3, 0);
  const auto prefill = [&](std::span<const RowId> rows, const std::vector<const std::vector<int32_t>*>& prompts,
                           std::span<const RowId> fills, const std::vector<const std::vector<int32_t>*>& fill_prompts,
                           std::span<const SamplingSpec> specs, std::span<int32_t> out) {
    std::vector<int32_t> tokens, offsets = {0};
    for (const auto* list : {&prompts, &fill_prompts}) {
      for (const std::vector<int32_t>* p : *list) {
        tokens.insert(tokens.end(), p->begin(), p->end());
        offsets.push_back(static_cast<int32_t>(tokens.size()));
      }
    }
    std::vector<float> logits(rows.size() * static_cast<size_t>(vocab));
    absl::Status s = be.Prefill({rows, offsets, tokens, specs, fills}, {out, logits.data()});
    ASSERT_TRUE(s.ok()) << s;
    run->logits.push_back(logits);
    run->sampled.emplace_back(out.begin(), out.end());
  };
  const auto decode = [&](std::span<const RowId> rows, int first_pair, int pairs) {
    std::vector<int32_t> inputs, steps_now;
    for (int i = first_pair; i < first_pair + pairs; ++i) {
      inputs.push_back(feed_back ? offset + sampled[i] : (offset + 7 * step_of[i] + 3 * i) % be.spec().input_rows());
      steps_now.push_back(step_of[i]++);
    }
    std::vector<float> logits(rows.size() * static_cast<size_t>(vocab));
    std::span<int32_t> out(sampled.data() + first_pair, pairs);
    absl::Status s =
        be.Decode({rows, inputs, steps_now, std::span(sampling).subspan(first_pair, pairs)}, {out, logits.data()});
    ASSERT_TRUE(s.ok()) << s;
    run->logits.push_back(logits);
    run->sampled.emplace_back(out.begin(), out.end());
  };
  // A: both prompts filled in its prefill.
  const std::vector<RowId> fills_a = prompt_rows ? std::vector<RowId>{pa, pu} : std::vector<RowId>{};
  const std::vector<const std::vector<int32_t>*> fill_prompts_a =
      prompt_rows ? std::vector<const std::vector<int32_t>*>{&cond_a, &uncond}
                  : std::vector<const std::vector<int32_t>*>{};
  ASSERT_NO_FATAL_FAILURE(prefill(rows_a, {&cond_a, &uncond, &cond_a, &uncond}, fills_a, fill_prompts_a,
                                  std::span(sampling).first(2), std::span(sampled).first(2)));
  for (int t = 0; t < 3; ++t) ASSERT_NO_FATAL_FAILURE(decode(rows_a, 0, 2));
  // B: its caption's prompt row filled now, A's uncond prompt row read as it is.
  if (prompt_rows) {
    absl::StatusOr<RowId> b = kv.AllocatePromptRow(len(cond_b), policy.kv_format);
    ASSERT_TRUE(b.ok());
    pb = *b;
  }
  const std::vector<RowId> rows_b = {row_for(pb, cond_b), row_for(pu, uncond)};
  record_bytes();
  const std::vector<RowId> fills_b = prompt_rows ? std::vector<RowId>{pb} : std::vector<RowId>{};
  const std::vector<const std::vector<int32_t>*> fill_prompts_b =
      prompt_rows ? std::vector<const std::vector<int32_t>*>{&cond_b} : std::vector<const std::vector<int32_t>*>{};
  ASSERT_NO_FATAL_FAILURE(prefill(rows_b, {&cond_b, &uncond}, fills_b, fill_prompts_b,
                                  std::span(sampling).subspan(2, 1), std::span(sampled).subspan(2, 1)));
  std::vector<RowId> both = rows_a;
  both.insert(both.end(), rows_b.begin(), rows_b.end());
  for (int t = 0; t < steps; ++t) ASSERT_NO_FATAL_FAILURE(decode(both, 0, 3));
  // A finishes: its caption's prompt row goes with it; the shared one is
  // freed as well but stays (hidden) while B reads it.
  for (RowId r : rows_a) kv.FreeRow(r);
  if (prompt_rows) {
    kv.FreeRow(pa);
    kv.FreeRow(pu);
  }
  record_bytes();
  for (int t = 0; t < 2; ++t) ASSERT_NO_FATAL_FAILURE(decode(rows_b, 2, 1));
  for (RowId r : rows_b) kv.FreeRow(r);
  if (prompt_rows) kv.FreeRow(pb);
  record_bytes();
}

// The bytes in use RunAcrossRequests recorded with prompt rows: after A's
// allocation, after B's, after A left (B's prompt row and the hidden shared
// one stay) and at the end.
inline void ExpectAcrossLedger(const Backend& be, const sparse::ResolvedPolicy& p, const AcrossRun& run) {
  const auto len = [](const std::vector<int32_t>& v) { return static_cast<int32_t>(v.size()); };
  const int32_t lc = len(kSharingCond), lu = len(kSharingUncond), lb = len(kSharingCond2);
  const sparse::KvFormat f = p.kv_format;
  const int64_t sa = be.SharingRowBytes(lc, p), su = be.SharingRowBytes(lu, p), sb = be.SharingRowBytes(lb, p);
  const int64_t a = be.PromptRowBytes(lc, f) + be.PromptRowBytes(lu, f) + 2 * (sa + su);
  ASSERT_EQ(run.kv_bytes.size(), 4u);
  EXPECT_EQ(run.kv_bytes[0], a);
  EXPECT_EQ(run.kv_bytes[1], a + be.PromptRowBytes(lb, f) + sb + su);
  EXPECT_EQ(run.kv_bytes[2], be.PromptRowBytes(lb, f) + be.PromptRowBytes(lu, f) + sb + su)
      << "the freed uncond prompt row stays while B reads it";
  EXPECT_EQ(run.kv_bytes[3], 0);
}

// Random requests as the engine places them under sharing across requests
// (prompt rows from a few captions and guidance rows of two lengths, found or
// made, then one sharing row per row) are added while CanPlace says they fit
// and freed in random order with their unread prompt rows; the ledger must
// equal the live rows' and prompt rows' bytes after every step, CanPlace
// must agree with allocation, and everything returns to zero.
inline void RandomPromptRowWalk(Backend& be, const std::vector<const sparse::ResolvedPolicy*>& policies, int iterations,
                                uint32_t seed) {
  kv::KvManager kv(be);
  struct Prompt {
    RowId row = kNoRow;
    int readers = 0;
    int64_t bytes = 0;
  };
  std::map<std::pair<int32_t, int32_t>, Prompt> prompts;  // (kv format, prompt id) -> its prompt row
  struct Live {
    std::vector<RowId> rows;
    std::pair<int32_t, int32_t> keys[2];
    int64_t bytes = 0;  // its rows'
  };
  std::mt19937 rng(seed);
  std::vector<Live> live;
  int64_t expected = 0;
  const int64_t base = kv.BytesInUse();
  int added = 0, refused = 0;
  const int32_t kLens[] = {3, 5, 8, 11, 6, 4};  // prompt ids 0-3 captions, 4-5 guidance rows
  const auto release = [&](Live& g) {
    for (RowId r : g.rows) kv.FreeRow(r);
    expected -= g.bytes;
    for (int k = 0; k < 2; ++k) {
      Prompt& p = prompts.at(g.keys[k]);
      p.readers -= static_cast<int>(g.rows.size()) / 2;
    }
    for (int k = 0; k < 2; ++k) {
      auto it = prompts.find(g.keys[k]);
      if (it == prompts.end() || it->second.readers > 0) continue;
      kv.FreeRow(it->second.row);
      expected -= it->second.bytes;
      prompts.erase(it);
    }
  };
  for (int it = 0; it < iterations; ++it) {
    if (live.empty() || rng() % 3 != 0) {
      const sparse::ResolvedPolicy& p = *policies[rng() % policies.size()];
      const int images = 1 + static_cast<int>(rng() % 3);
      Live g;
      g.keys[0] = {static_cast<int32_t>(p.kv_format), static_cast<int32_t>(rng() % 4)};
      g.keys[1] = {static_cast<int32_t>(p.kv_format), 4 + static_cast<int32_t>(rng() % 2)};
      std::vector<int64_t> sizes;
      for (const auto& key : g.keys) {
        if (!prompts.contains(key)) sizes.push_back(be.PromptRowBytes(kLens[key.second], p.kv_format));
      }
      for (int i = 0; i < images; ++i) {
        for (const auto& key : g.keys) sizes.push_back(be.SharingRowBytes(kLens[key.second], p));
      }
      const bool fits = kv.CanPlace(sizes);
      bool ok = true;
      std::vector<std::pair<int32_t, int32_t>> made;
      for (const auto& key : g.keys) {
        if (!ok || prompts.contains(key)) continue;
        absl::StatusOr<RowId> r = kv.AllocatePromptRow(kLens[key.second], p.kv_format);
        ok = r.ok();
        if (!ok) break;
        const int64_t bytes = be.PromptRowBytes(kLens[key.second], p.kv_format);
        prompts[key] = {*r, 0, bytes};
        expected += bytes;
        made.push_back(key);
      }
      for (int i = 0; ok && i < 2 * images; ++i) {
        Prompt& owner = prompts.at(g.keys[i % 2]);
        absl::StatusOr<RowId> r = kv.AllocateSharingRow(owner.row, p);
        ok = r.ok();
        if (!ok) break;
        g.rows.push_back(*r);
        g.bytes += be.SharingRowBytes(kLens[g.keys[i % 2].second], p);
        ++owner.readers;
      }
      if (ok) expected += g.bytes;
      ASSERT_EQ(ok, fits) << "iteration " << it << ": CanPlace disagrees with allocation";
      if (!ok) {
        // Undo as the engine does: the rows, then the prompt rows nobody reads.
        for (int i = 0; i < static_cast<int>(g.rows.size()); ++i) --prompts.at(g.keys[i % 2]).readers;
        for (RowId r : g.rows) kv.FreeRow(r);
        for (const auto& key : made) {
          auto m = prompts.find(key);
          if (m == prompts.end() || m->second.readers > 0) continue;
          kv.FreeRow(m->second.row);
          expected -= m->second.bytes;
          prompts.erase(m);
        }
        ++refused;
      } else {
        live.push_back(std::move(g));
        ++added;
      }
    } else {
      const size_t victim = rng() % live.size();
      Live g = std::move(live[victim]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
      std::shuffle(g.rows.begin(), g.rows.end(), rng);
      release(g);
    }
    ASSERT_EQ(kv.BytesInUse() - base, expected) << "iteration " << it;
  }
  for (Live& g : live) release(g);
  EXPECT_TRUE(prompts.empty());
  EXPECT_EQ(kv.BytesInUse(), base);
  EXPECT_GT(added, 10);
  EXPECT_GT(refused, 0) << "the walk never filled the pool";
}

}  // namespace argen::model::testing
