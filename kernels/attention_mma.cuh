// Tensor-core key loops of the two-pass attention kernel (kernels/attention.cu)
// for four query heads a KV head (Emu3-Gen's 32 over 8), head_dim 128 and
// bf16 K/V rows: scores and weighted values as m16n8k16 bf16 MMAs with fp32
// accumulators, a warp taking 16 keys at a time.
//
// Why: with the CUDA-core loops each key costs a thread of its 16-lane group
// 8 unpacks, 32 FMAs and its share of 31 shuffles per pass, and a block's key
// rounds issued at about half a warp-instruction a cycle behind their loads
// (ncu, Emu3 16 images sparse, docs/PERFORMANCE.md); here 16 keys cost a warp
// eight MMAs a pass. Measured against those loops (H200, 2026-12-04, the
// attention micro): Emu3-Gen dense 1.08x faster at 16 and 64 images and
// 1.21x at one image, sparse 1.01-1.06x; the 16-image sparse launch waits on
// memory and barriers more than on arithmetic.
//
// Precision: a bf16 operand keeps 8 bits of mantissa, so q and the
// probabilities are each split into a bf16 head and a bf16 remainder (x = hi +
// lo to about 16 bits), and the four spare slots of the MMA's eight (rows or
// columns beyond the four heads) carry the remainders: the results are the
// fp32 loops' to within float rounding, at no extra MMAs. K and V are bf16
// already (exact).
//
// Dims and keys are permuted inside a tile (a dot product's sum does not
// care) so that every thread's operands come from whole 16-byte loads:
// - scores S = K Q^T: A = 16 keys x 16 dims of K (key rows r and r + 8 of a
//   tile, r = lane / 4), B = those dims of the 8 slots (heads 0-3 of q's
//   heads, 4-7 their remainders), C = keys x slots. Lane (r, p = lane % 4)
//   loads dims [32 i + 8 p, 32 i + 8 p + 8) of keys r and r + 8, i = 0..3 (the
//   four lanes of a key read 64 contiguous bytes a load); k-block kb takes
//   the first (kb even) or last four of load kb / 2, so the dims of its
//   column 2p + c are 32 (kb / 2) + 8 p + 4 (kb % 2) + c (c = 0, 1) and + 2 for
//   columns 2p + 8 + c.
// - values O^T = V^T P^T: A = 16 dims x 16 keys of V (transposed), B = 16 keys
//   x 8 slots of P (heads' probabilities, then remainders), C = dims x slots.
//   Lane (r, p) loads dims [64 h + 8 r, 64 h + 8 r + 8), h = 0, 1, of keys 4p ..
//   4p + 3 (eight lanes read 128 contiguous bytes a load); m-tile mt holds dims
//   d = 64 (mt / 4) + 8 r + 2 (mt % 4) in row r and d + 1 in row r + 8, and the
//   tile's k index 2p + c is key 4p + c, 2p + 8 + c key 4p + 2 + c. A pairs
//   two keys' values of one dim: a byte permute of two loaded words.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace argen::kernels::mma {

constexpr int kTileKeys = 16;  // keys a warp takes per MMA step
constexpr int kHeads = 4;      // query heads a KV head these loops serve
constexpr int kHeadDim = 128;

// d += a b: one m16n8k16 MMA, bf16 operands, fp32 accumulators.
__device__ __forceinline__ void Mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as a bf16 pair (x in the low half): their bf16 heads, or
// (remainder) what those heads leave out, rounded to bf16.
__device__ __forceinline__ unsigned PackPart(float x, float y, bool remainder) {
  __nv_bfloat16 hx = __float2bfloat16_rn(x), hy = __float2bfloat16_rn(y);
  if (remainder) {
    hx = __float2bfloat16_rn(x - __bfloat162float(hx));
    hy = __float2bfloat16_rn(y - __bfloat162float(hy));
  }
  return static_cast<unsigned>(__bfloat16_as_ushort(hx)) | (static_cast<unsigned>(__bfloat16_as_ushort(hy)) << 16);
}

__device__ __forceinline__ unsigned Word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The scores' B operand: q_scaled's 8 slots over k-block kb's dims for this
// lane (slot lane / 4: heads 0-3, then their remainders). q: the KV head's
// four query heads, [4][128] floats.
struct QueryOperand {
  unsigned b[8][2];
  __device__ void Load(const float* q, float scale, int lane) {
    const int slot = lane >> 2, p = lane & 3;
    const float* head = q + (slot & 3) * kHeadDim;
    const bool remainder = slot >= kHeads;
#pragma unroll
    for (int kb = 0; kb < 8; ++kb) {
      const float4 v = *reinterpret_cast<const float4*>(head + 32 * (kb >> 1) + 8 * p + 4 * (kb & 1));
      b[kb][0] = PackPart(v.x * scale, v.y * scale, remainder);
      b[kb][1] = PackPart(v.z * scale, v.w * scale, remainder);
    }
  }
};

// One tile's K rows as this lane loads them: keys r and r + 8, four 16-byte
// pieces each (zeros for a key without a row).
struct KeyTile {
  uint4 raw[2][4];
  int pos[2];
  template <typename Rows>
  __device__ __forceinline__ void Load(const Rows& rows, const int* positions, int tile, int len, int lane) {
    const int r = lane >> 2, p = lane & 3;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int j = tile * kTileKeys + r + 8 * k;
      pos[k] = j < len ? positions[j] : -1;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        raw[k][i] = make_uint4(0, 0, 0, 0);
        if (pos[k] >= 0) raw[k][i] = *reinterpret_cast<const uint4*>(rows.KRow(pos[k]) + 32 * i + 8 * p);
      }
    }
  }
};

// The tile's 16 x 4 logits q_g . k_j on this lane: c[2k + i] for key r + 8k
// of the tile and head 2 (p % 2) + i (lanes p and p + 2 hold the same).
__device__ __forceinline__ void TileLogits(const KeyTile& t, const QueryOperand& q, float (&c)[4]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) c[e] = 0.f;
#pragma unroll
  for (int kb = 0; kb < 8; ++kb) {
    const int i = kb >> 1, w = 2 * (kb & 1);
    const unsigned a[4] = {Word(t.raw[0][i], w), Word(t.raw[1][i], w), Word(t.raw[0][i], w + 1),
                           Word(t.raw[1][i], w + 1)};
    Mma16816(c, a, q.b[kb][0], q.b[kb][1]);
  }
  // Slot 2p + 4 (lane p + 2) holds the remainder's share of slot 2p's head.
#pragma unroll
  for (int e = 0; e < 4; ++e) c[e] += __shfl_xor_sync(0xffffffffu, c[e], 2);
}

// The tile's scores: logit(g, j) for heads g = 2p, 2p + 1 (lanes p < 2) and its
// keys r, r + 8 (-inf for a key without a row), passed to emit(g, j, logit)
// for keys j < len.
template <typename Emit>
__device__ __forceinline__ void TileScores(const KeyTile& t, const QueryOperand& q, int tile, int len, int lane,
                                           Emit emit) {
  float c[4];
  TileLogits(t, q, c);
  const int r = lane >> 2, p = lane & 3;
  if (p >= 2) return;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int j = tile * kTileKeys + r + 8 * k;
    if (j >= len) continue;
    const bool valid = t.pos[k] >= 0;
    emit(2 * p, j, valid ? c[2 * k] : -INFINITY);
    emit(2 * p + 1, j, valid ? c[2 * k + 1] : -INFINITY);
  }
}

// One tile's V rows as this lane loads them: keys 4p .. 4p + 3, two 16-byte pieces each.
struct ValueTile {
  uint4 raw[4][2];
  template <typename Rows>
  __device__ __forceinline__ void Load(const Rows& rows, const int* positions, int tile, int len, int lane) {
    const int r = lane >> 2, p = lane & 3;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int j = tile * kTileKeys + 4 * p + k;
      const int pos = j < len ? positions[j] : -1;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        raw[k][h] = make_uint4(0, 0, 0, 0);
        if (pos >= 0) raw[k][h] = *reinterpret_cast<const uint4*>(rows.VRow(pos) + 64 * h + 8 * r);
      }
    }
  }
};

// acc[mt] += the tile's V^T P^T for m-tile mt; probs: exp(s - max) per head,
// [4][stride] (entries past len are not read).
__device__ __forceinline__ void TileValues(const ValueTile& t, const float* probs, int stride, int tile, int len,
                                           int lane, float (&acc)[8][4]) {
  const int slot = lane >> 2, p = lane & 3;
  const float* row = probs + (slot & 3) * stride + tile * kTileKeys + 4 * p;
  float w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) w[k] = tile * kTileKeys + 4 * p + k < len ? row[k] : 0.f;
  const bool remainder = slot >= kHeads;
  const unsigned b0 = PackPart(w[0], w[1], remainder), b1 = PackPart(w[2], w[3], remainder);
#pragma unroll
  for (int mt = 0; mt < 8; ++mt) {
    const int h = mt >> 2, i = mt & 3;
    const unsigned w0 = Word(t.raw[0][h], i), w1 = Word(t.raw[1][h], i);
    const unsigned w2 = Word(t.raw[2][h], i), w3 = Word(t.raw[3][h], i);
    const unsigned a[4] = {__byte_perm(w0, w1, 0x5410), __byte_perm(w0, w1, 0x7632), __byte_perm(w2, w3, 0x5410),
                           __byte_perm(w2, w3, 0x7632)};
    Mma16816(acc[mt], a, b0, b1);
  }
}

// The warp's weighted values into out[g * 128 + d] (heads g = 0..3): every
// lane of the warp calls it (the remainder slots fold into the heads' with a
// shuffle); lanes p < 2 write heads 2p, 2p + 1.
__device__ __forceinline__ void StoreValues(float (&acc)[8][4], int lane, float* out) {
#pragma unroll
  for (int mt = 0; mt < 8; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[mt][e] += __shfl_xor_sync(0xffffffffu, acc[mt][e], 2);
  const int r = lane >> 2, p = lane & 3;
  if (p >= 2) return;
#pragma unroll
  for (int mt = 0; mt < 8; ++mt) {
    const int d = 64 * (mt >> 2) + 8 * r + 2 * (mt & 3);
    out[(2 * p) * kHeadDim + d] = acc[mt][0];
    out[(2 * p + 1) * kHeadDim + d] = acc[mt][1];
    out[(2 * p) * kHeadDim + d + 1] = acc[mt][2];
    out[(2 * p + 1) * kHeadDim + d + 1] = acc[mt][3];
  }
}

}  // namespace argen::kernels::mma
