// Decode attention over a row's KV region: dense (contiguous slots) or sparse
// (a policy-given slot list read inside the kernel: no gather buffer).
//
// For query token t the key set is region positions [0, prefix_len) followed by
// decode entries e in [0, count): position decode_base + slot(e), where
// slot(e) = e (dense tokens), decode_idx[t][kv_head][e] (kTokenSparse tokens) or
// token_lists[list_offset + e] (kTokenListed tokens: every layer and head alike).
// Keys are split over `splits` chunks (flash-decoding) when there are few
// (token, kv_head) pairs; a combine pass then merges the partial softmaxes (a
// launch of its own, or with split_counters the last chunk's block).
//
// Sparse extras for the policies' observe step (optional; kTokenSparse tokens
// whose count fits probs_stride, which must then be > 0; per kv head, the mean
// over its query heads of the final softmax probability over prompt + attended
// keys, p(e)):
//   probs[t][kv_head][e]  p(e) for every decode entry e
//   argmin[t][kv_head]    the entry e in [from, count) with the smallest p(e),
//                         the lowest e on ties (-1 when the range is empty),
//                         computed from exactly the p(e) probs would hold
//                         (sparse::ArgminFrom over them gives the same entry)
// `from` is AttentionArgs::argmin_from, or per token AttentionArgs::observe.
//
// Four kernels: the two-pass kernel (any key count, split-K), the one-pass kernel (the same blocks, an online
// softmax per key group: AttentionVariant::kOnePass); for key sets of
// at most 1024 with splits == 1, the warp kernel (one warp per (token,
// kv_head), four per block, warp reductions only: more pairs in flight per
// SM when there are many pairs; kAuto's rule is kWarpAuto* below); and a staged kernel that first issues every K and V
// load of its (token, kv_head) as cp.async copies into shared memory. AttentionArgs::variant picks.
//
// A kTokenKvFp8 token's region holds e4m3 codes and per-vector scales
// (kernels/kv_fp8.h): its keys and values are decoded exactly and scaled.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/token_meta.h"

namespace argen::kernels {

// The kernels (see the top of this file). The two-pass kernel: scores into
// shared memory, block softmax, then V. The one-pass kernel: each key group
// keeps a running (online) softmax, loading K and V together, merged at the
// end: faster where a launch has few blocks, slower with many or with 4+
// query heads a KV head (kOnePassAutoPairsPerSm; docs/PERFORMANCE.md).
enum class AttentionVariant : int32_t {
  kAuto = 0,     // the measured faster one: kOnePassAuto*, kWarpAuto*, else two-pass (kStagedAutoBytes is 0)
  kTwoPass = 1,  // always the two-pass kernel
  kStaged = 2,   // staged when splits == 1 and it fits the shared memory at all
  kWarp = 3,     // one warp per (token, kv head) when splits == 1 and every key set fits 1024 keys
  kOnePass = 4,  // always the one-pass kernel (any splits, formats, observe outputs, key limits)
};

// When kAuto takes the one-pass kernel: one query head a KV head (Janus-Pro,
// Lumina-mGPT, LlamaGen, Anole), fewer than kOnePassAutoPairsPerSm (token, kv
// head) pairs per multiprocessor (AttentionArgs::sm_count; 0: never), and no
// key limits (query groups were measured with the two-pass kernel). Measured
// on the H200 (2026-12-03, micro, docs/PERFORMANCE.md): 0.65-0.87x the
// two-pass time at 1 and 8 images (64-512 pairs: a short block's three passes
// run its memory latency three times over), 0.95-1.13x at 16 images (1,024
// pairs), and 1.1-1.9x with 4-5 heads a KV head (Emu3-Gen, NextStep-1: the
// group's running states take the registers that hold two blocks' loads).
inline constexpr int32_t kOnePassAutoPairsPerSm = 4;

// When kAuto takes the warp kernel (with splits == 1): every key set (rounded
// up to 32) at most kWarpAutoMaxKeys and at least kWarpAutoPairsPerSm
// (token, kv head) pairs per multiprocessor (AttentionArgs::sm_count; 0: never).
// Measured on the H200 (docs/PERFORMANCE.md, item 4): at 79 keys it takes 0.81x
// (bf16) / 0.70x (fp8) of the two-pass kernel's time with 71,616 pairs (7B,
// 1,119 images) and 0.86x / 0.83x with 4,096 (64 images), but 1.6x with 1,024
// (16 images; Lumina 768 px at 158 keys: 2.1x): a warp per pair leaves the SMs
// idle where the two-pass kernel puts four warps on each; at 626 keys (dense, 64
// images) 1.02x / 1.17x. Between the measured points: 24 pairs per SM (3,168).
inline constexpr int32_t kWarpAutoMaxKeys = 256;
inline constexpr int32_t kWarpAutoPairsPerSm = 24;

// Per-token observe choices (AttentionArgs::observe); values >= 0 are argmin starts.
constexpr int32_t kObserveNothing = -2;  // no observe output for the token
constexpr int32_t kObserveProbs = -1;    // probs only

// Where a two-pass block is when it stamps AttentionArgs::phase_clocks: each
// stamp ends the phase of its name (kPhaseStart: the block began).
enum AttentionPhase : int32_t {
  kPhaseStart = 0,
  kPhasePrologue = 1,  // metadata, slot lists, staged key positions (before the dependency wait)
  kPhaseWait = 2,      // the programmatic-dependent wait returned
  kPhaseKeys = 3,      // pass 1: every key's scores (and the block barrier after it)
  kPhaseSoftmax = 4,   // pass 2: the softmax statistics
  kPhaseValues = 5,    // pass 3: the weighted values, reduced over warps
  kPhaseEnd = 6,       // the output (or partials and the merge) and the observe outputs written
  kAttentionPhaseCount = 7,
};

struct AttentionArgs {
  const float* q = nullptr;  // [tokens][heads][head_dim], RoPE applied
  const __nv_bfloat16* kv_pool = nullptr;
  const TokenMeta* meta = nullptr;  // [tokens]
  int32_t tokens = 0;
  int32_t heads = 0, kv_heads = 0, head_dim = 0, num_layers = 0, layer = 0;
  float scale = 0.f;  // softmax scale, usually 1/sqrt(head_dim)
  // Slot lists of this layer, [tokens][kv_heads][idx_stride], read for kTokenSparse
  // tokens; their per-head lengths in counts[tokens][kv_heads] (nullptr: meta.decode_count).
  const int32_t* decode_idx = nullptr;
  int32_t idx_stride = 0;
  const int32_t* counts = nullptr;
  // Slot lists of kTokenListed tokens (TokenMeta::list_offset), every layer's.
  const int32_t* token_lists = nullptr;
  // Optional outputs (sparse observe), [tokens][kv_heads][probs_stride] and [tokens][kv_heads].
  float* probs = nullptr;
  int32_t probs_stride = 0;
  int32_t* argmin = nullptr;
  int32_t argmin_from = 0;  // argmin over entries [argmin_from, count)
  // Optional per-token choice, [tokens]; when given it replaces the above per token:
  // kObserveNothing, kObserveProbs, or e >= 0: argmin over [e, count) only (no probs).
  const int32_t* observe = nullptr;
  __nv_bfloat16* out = nullptr;  // [tokens][heads][head_dim]
  // Split-K: number of key chunks and chunk length; workspace from AttentionWorkspaceBytes.
  int32_t splits = 1;
  int32_t chunk = 0;
  void* workspace = nullptr;
  // Optional, [tokens][kv_heads], all zero before a launch and left zero by it:
  // with splits > 1 the last chunk of a (token, kv head) to finish merges the
  // partial softmaxes itself (no combine launch). nullptr: a combine launch.
  int32_t* split_counters = nullptr;
  // Bound on every token's key count (prefix_len + count); sizes the staged
  // kernel's shared memory (0: chunk). Keys past it are not attended.
  int32_t max_keys = 0;
  AttentionVariant variant = AttentionVariant::kAuto;
  // Formats of the tokens' regions (kKvFormatsBf16 | kKvFormatsFp8; 0: bf16 only),
  // plus kKvSharedPrompts when some token reads its prompt from another row's
  // region (kernels/token_meta.h; without it shared_prompt is ignored). Each
  // format present is one launch; the staged kernel reads bf16 only.
  int32_t kv_formats = 0;
  // The device's multiprocessors, for kAuto's choice of the warp kernel (0: not given).
  int32_t sm_count = 0;
  // Optional per-head key limits (query groups, kernels/query_groups.h):
  // query head h of token t attends only its first
  // key_limits[t * (G / key_limit_heads) + (h % G) / key_limit_heads] keys
  // (prompt keys first, then decode entries; G = heads / kv_heads), each
  // limit covering key_limit_heads consecutive heads of a KV head's group.
  // Dense tokens only (no observe outputs); the two-pass kernel runs them.
  const int32_t* key_limits = nullptr;
  int32_t key_limit_heads = 0;
  // Diagnostics (argen_bench --attention-micro; the engine leaves it null), in
  // builds with ARGEN_ATTENTION_PHASES (AttentionPhaseStampsBuilt; ignored otherwise):
  // [blocks][kAttentionPhaseCount][2], the two-pass kernel's block b = (split *
  // kv_heads + kv_head) * tokens + token writes, for each phase, clock64() (the
  // SM's cycles) and %globaltimer (ns) at its end. Blocks of the other format's
  // launch write nothing. Only for launches run alone: a block writes the
  // buffer after its dependency wait, so an overlapping launch would race.
  uint64_t* phase_clocks = nullptr;
};

// Largest shared memory (bytes per block) kAuto gives the staged kernel. 0: the
// staged kernel was slower than the two-pass one at every measured shape on the
// H200 (1.13-1.63x the time, 7B, 32 and 64 images, 80-95% sparsity;
// docs/PERFORMANCE.md), so kAuto always picks two-pass; kStaged still runs it.
constexpr size_t kStagedAutoBytes = 0;

// The kernel DecodeAttention runs for these arguments (never kAuto).
AttentionVariant ChosenAttentionVariant(const AttentionArgs& args);

// Threads a block of the two-pass kernel takes for these arguments: 256 for an
// unsplit launch of head_dim 128 with 4+ query heads a KV head, a chunk of 256+
// keys and at most 2 (token, kv head) pairs an SM (sm_count set), where blocks of
// 128 leave each SM too few warps to hide a key round's arithmetic; else 128.
int TwoPassBlockThreads(const AttentionArgs& args);

// Longest key chunk one block holds in shared memory.
constexpr int32_t kMaxAttentionChunk = 1024;

// Picks splits and chunk for `max_keys` (the longest key set of any token) so that
// (tokens * kv_heads * splits) makes `blocks_per_sm` blocks for each of `sm_count`
// multiprocessors (chunks of at least 64 keys). The engine's target
// (kAutoBlocksPerSm) is 2, except for groups of kUnsplitQueryGroup or more query
// heads a KV head once the (token, kv head) pairs fill the multiprocessors: 1 there
// (no split). Emu3's 16-image sparse launch (4 heads a KV head, 256 pairs) ran
// 0.90-0.91x the time of 2 splits unsplit (3 splits 1.27x, 5 splits 1.33x), where
// 7B's 4-image dense launch (one head a KV head, 256 pairs) ran 1.46x the time of 2
// splits unsplit (H200, 2026-12-03, docs/PERFORMANCE.md). The attention micro times
// other targets against it.
constexpr int32_t kAutoBlocksPerSm = 0;
constexpr int32_t kUnsplitQueryGroup = 4;
void ChooseAttentionSplits(int32_t tokens, int32_t kv_heads, int32_t query_group, int32_t max_keys, int32_t sm_count,
                           int32_t* splits, int32_t* chunk, int32_t blocks_per_sm = kAutoBlocksPerSm);

// Workspace bytes for a launch with these sizes (0 when splits == 1 and no probs).
size_t AttentionWorkspaceBytes(int32_t tokens, int32_t heads, int32_t head_dim, int32_t splits, int32_t probs_stride);

// Whether this build's two-pass kernel writes AttentionArgs::phase_clocks
// (CMake option ARGEN_ATTENTION_PHASES, off by default).
bool AttentionPhaseStampsBuilt();

// Supported: head_dim in {16, 32, 64, 128}, heads / kv_heads in {1, 2, 4, 8}.
bool AttentionShapeSupported(int32_t heads, int32_t kv_heads, int32_t head_dim);

// cudaErrorInvalidValue for an unsupported shape or a chunk too short for the keys.
cudaError_t DecodeAttention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace argen::kernels
