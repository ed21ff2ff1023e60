// The device work of a step: decoder layers (with the spec's switches), the
// input stage, the output stage + sampling, and the whole decode step as one
// enqueue (what the CUDA graphs capture). With the switches off (RMSNorm,
// pre-norm, no QK-norm) the launches are exactly the Janus-Pro path's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/gemm.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/fault_kernels.h"
#include "kernels/query_groups.h"

namespace argen::cuda {

absl::Status CudaBackend::EnqueueNorm(const float* x, const DeviceNorm& norm, int32_t rows, bf16* out,
                                      const char* what) {
  const model::StackConfig& d = spec_.stack;
  if (norm.bias == nullptr) {
    ARGEN_CUDA_RETURN(kernels::RmsNorm(x, norm.weight, rows, d.hidden_size, d.norm_eps, out, stream_), what);
  } else {
    ARGEN_CUDA_RETURN(kernels::LayerNorm(x, norm.weight, norm.bias, rows, d.hidden_size, d.norm_eps, out, stream_),
                      what);
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::AttentionSplits(int32_t tokens, int32_t heads, int32_t max_keys, int32_t probs_stride,
                                          int32_t* splits, int32_t* chunk) const {
  const model::StackConfig& d = spec_.stack;
  kernels::ChooseAttentionSplits(tokens, d.num_kv_heads, heads / d.num_kv_heads, max_keys, sm_count_, splits, chunk);
  while (*splits > 1 &&
         kernels::AttentionWorkspaceBytes(tokens, heads, d.head_dim, *splits, probs_stride) > attn_ws_bytes_) {
    --*splits;
    *chunk = ((max_keys + *splits - 1) / *splits + 31) / 32 * 32;
  }
  if (*chunk > kernels::kMaxAttentionChunk) {
    return absl::InternalError(absl::StrCat("attention: ", max_keys, " keys do not fit the workspace"));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::RunLayers(int32_t tokens, int32_t max_keys, bool any_sparse, int32_t n_rows_plan,
                                    int32_t observe_flags, int32_t kv_formats, std::span<const int32_t> rank_ends,
                                    const QueryGroups* groups) {
  const model::StackConfig& d = spec_.stack;
  const int32_t H = d.hidden_size, hd = d.head_dim, I = d.intermediate_size;
  const int32_t q_dim = d.num_heads * hd, qkv_dim = q_dim + 2 * d.num_kv_heads * hd;
  const int64_t heads_per_layer = int64_t{n_rows_plan} * d.num_kv_heads;
  const int32_t probs_stride = any_sparse ? plan_stride_ : 0;
  // The attention's segments: rows [begin, end) each, the first `attended` attending
  // one by one (the rest as query groups), with their splits.
  struct Segment {
    int32_t begin = 0, end = 0, attended = 0, splits = 1, chunk = 0;
  };
  std::vector<Segment> segments;
  const bool by_layer = !rank_ends.empty();  // plan and apply here, segment by segment
  if (by_layer && (!any_sparse || rank_ends.back() != tokens || tokens != n_rows_plan)) {
    return absl::InternalError("RunLayers: rank segments must cover a sparse decode pass's rows");
  }
  // Query groups (one segment): its rows from plain_rows attend in groups.
  const bool grouped = groups != nullptr && !groups->empty();
  if (grouped && (by_layer || groups->plain_rows < 0 || groups->plain_rows > tokens)) {
    return absl::InternalError("RunLayers: query groups need one segment and plain rows within it");
  }
  const int32_t plain_end = grouped ? groups->plain_rows : tokens;
  for (size_t k = 0, begin = 0; k < std::max<size_t>(rank_ends.size(), 1); ++k) {
    Segment s;
    s.begin = static_cast<int32_t>(begin);
    s.end = by_layer ? rank_ends[k] : tokens;
    s.attended = std::min(s.end, plain_end) - s.begin;
    ARGEN_STATUS_RETURN(
        AttentionSplits(std::max(1, s.attended), d.num_heads, max_keys, probs_stride, &s.splits, &s.chunk));
    segments.push_back(s);
    begin = s.end;
  }
  // Each class's launch shape: its grouped heads and splits.
  struct GroupLaunch {
    QueryGroupClass c;
    int32_t heads = 0, splits = 1, chunk = 0;
  };
  std::vector<GroupLaunch> group_launches;
  if (grouped) {
    for (const QueryGroupClass& c : groups->classes) {
      GroupLaunch g{c, d.num_heads * c.size};
      ARGEN_STATUS_RETURN(AttentionSplits(c.groups, g.heads, max_keys, 0, &g.splits, &g.chunk));
      group_launches.push_back(g);
    }
  }
  PlanBuffers plan{plan_slots_.as<int32_t>(), plan_counts_.as<int32_t>(), plan_attended_.as<int32_t>(), plan_stride_};
  bf16* kv_pool = pool_.as<bf16>();
  const bool swin = d.swin_norm;
  // Swin layers read x itself: its bf16 copy for the first layer's GEMM (each
  // later GEMM input comes from the previous AddNorm).
  if (swin)
    ARGEN_CUDA_RETURN(kernels::ConvertToBf16(x_.as<float>(), int64_t{tokens} * H, xn_.as<bf16>(), stream_),
                      "layer input bf16");
  for (int32_t l = 0; l < d.num_layers; ++l) {
    const DeviceLayer& w = weights_.layers[l];
    if (!swin) ARGEN_STATUS_RETURN(EnqueueNorm(x_.as<float>(), w.input_norm, tokens, xn_.as<bf16>(), "input norm"));
    ARGEN_STATUS_RETURN(gemm_.Linear(xn_.as<bf16>(), w.qkv, tokens, H, qkv_dim, qkv_.as<float>(), 0.f, "qkv"));
    if (w.qkv_bias != nullptr) {  // before QK-norm and RoPE, as the CPU backend adds it
      ARGEN_CUDA_RETURN(kernels::AddBias(qkv_.as<float>(), w.qkv_bias, tokens, qkv_dim, stream_), "qkv bias");
    }
    if (d.qk_norm) {
      kernels::HeadLayerNormArgs hn;
      hn.qkv = qkv_.as<float>();
      hn.tokens = tokens;
      hn.heads = d.num_heads;
      hn.kv_heads = d.num_kv_heads;
      hn.head_dim = hd;
      hn.q_weight = w.q_norm.weight;
      hn.q_bias = w.q_norm.bias;
      hn.k_weight = w.k_norm.weight;
      hn.k_bias = w.k_norm.bias;
      hn.eps = d.qk_norm_eps;
      ARGEN_CUDA_RETURN(kernels::HeadLayerNorm(hn, stream_), "qk norm");
    }
    // The norm and the q|k|v GEMM are the layer's qkv stage (each segment's RoPE + KV append below adds to it);
    // by rank segments the next mark is a segment's plan, which would be charged them otherwise.
    timer_.Mark(Stage::kQkv);
    // What every attention launch of the layer shares.
    kernels::AttentionArgs layer_args;
    layer_args.kv_pool = kv_pool;
    layer_args.kv_heads = d.num_kv_heads;
    layer_args.head_dim = hd;
    layer_args.num_layers = d.num_layers;
    layer_args.layer = l;
    layer_args.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    layer_args.token_lists = token_lists_.as<int32_t>();
    layer_args.workspace = attn_ws_.as();
    layer_args.split_counters = attn_split_counters_.as<int32_t>();
    layer_args.max_keys = max_keys;
    layer_args.kv_formats = kv_formats;
    layer_args.sm_count = sm_count_;
    for (const Segment& seg : segments) {
      const int32_t first = seg.begin, count = seg.end - seg.begin;
      const kernels::PlanScope scope{first, count, l};
      if (by_layer) {
        ARGEN_CUDA_RETURN(kernels::PlanDecodeStep(inputs_.plans, n_rows_plan, d.num_layers, d.num_kv_heads,
                                                  pool_.as<int32_t>(), pool_.as<float>(), plan, stream_, scope),
                          "policy plan");
        timer_.Mark(Stage::kPlan);
      }
      // The segment's rows: every per-token array offset by its first row.
      const int64_t head_at = int64_t{l} * heads_per_layer + int64_t{first} * d.num_kv_heads;
      kernels::RopeAppendArgs ra;
      ra.qkv = qkv_.as<float>() + int64_t{first} * qkv_dim;
      ra.rope = rope_.as<float>();
      ra.max_pos = max_pos_;
      ra.meta = inputs_.meta + first;
      ra.tokens = count;
      ra.heads = d.num_heads;
      ra.kv_heads = d.num_kv_heads;
      ra.head_dim = hd;
      ra.num_layers = d.num_layers;
      ra.layer = l;
      ra.write_slots = any_sparse ? plan.write_slots + head_at : nullptr;
      ra.interleaved = d.rope == model::RopeKind::kGrid2d;
      ra.q_out = q_.as<float>() + int64_t{first} * q_dim;
      ra.kv_pool = kv_pool;
      ARGEN_CUDA_RETURN(kernels::RopeAppend(ra, stream_), "rope + kv append");
      timer_.Mark(Stage::kQkv);

      kernels::AttentionArgs aa = layer_args;
      aa.q = q_.as<float>() + int64_t{first} * q_dim;
      aa.meta = inputs_.meta + first;
      aa.tokens = seg.attended;  // the grouped rows attend below
      aa.heads = d.num_heads;
      if (any_sparse) {
        aa.decode_idx = plan.attended + head_at * plan.stride;
        aa.idx_stride = plan.stride;
        aa.counts = plan.counts + head_at;
        aa.probs_stride = plan.stride;
        aa.observe = inputs_.observe + first;  // per row: probs, argmin from the sinks' end, or nothing
        if (observe_flags & kObserveScores)
          aa.probs = probs_.as<float>() + int64_t{first} * d.num_kv_heads * plan.stride;
        if (observe_flags & kObserveArgmin) aa.argmin = argmin_.as<int32_t>() + head_at;
      }
      aa.out = attn_.as<bf16>() + int64_t{first} * q_dim;
      aa.splits = seg.splits;
      aa.chunk = seg.chunk;
      aa.variant = attention_variant_;
      ARGEN_CUDA_RETURN(kernels::DecodeAttention(aa, stream_), "decode attention");
      timer_.Mark(Stage::kAttention);
      if (any_sparse && (observe_flags & kObserveScores)) {
        ARGEN_CUDA_RETURN(
            kernels::ObserveDecodeStep(inputs_.plans, n_rows_plan, d.num_layers, d.num_kv_heads, l, pool_.as<int32_t>(),
                                       pool_.as<float>(), plan, probs_.as<float>(), plan.stride, stream_,
                                       /*skip_diagonal=*/(observe_flags & kObserveArgmin) != 0, scope),
            "policy observe");
        timer_.Mark(Stage::kObserve);
      }
      if (by_layer && (observe_flags & kObserveArgmin)) {
        ARGEN_CUDA_RETURN(kernels::ApplyDiagonalSelections(inputs_.plans, n_rows_plan, d.num_layers, d.num_kv_heads,
                                                           pool_.as<int32_t>(), pool_.as<float>(), plan,
                                                           argmin_.as<int32_t>(), stream_, scope),
                          "policy apply");
        timer_.Mark(Stage::kApply);
      }
    }
    for (const GroupLaunch& g : group_launches) {
      // The groups' queries into qkv_ and their outputs through gate_up_ (both free until o_proj).
      const int32_t* members = inputs_.group_members + g.c.first_slot;
      ARGEN_CUDA_RETURN(kernels::GatherQueryGroups(q_.as<float>(), members, g.c.groups, g.c.size, d.num_heads,
                                                   d.num_kv_heads, hd, qkv_.as<float>(), stream_),
                        "query groups");
      kernels::AttentionArgs ga = layer_args;
      ga.q = qkv_.as<float>();
      ga.meta = inputs_.group_meta + g.c.first_group;
      ga.tokens = g.c.groups;
      ga.heads = g.heads;
      ga.out = gate_up_.as<bf16>();
      ga.splits = g.splits;
      ga.chunk = g.chunk;
      ga.variant = kernels::AttentionVariant::kTwoPass;
      ga.key_limits = inputs_.group_limits + g.c.first_slot;
      ga.key_limit_heads = d.num_heads / d.num_kv_heads;
      ARGEN_CUDA_RETURN(kernels::DecodeAttention(ga, stream_), "grouped decode attention");
      ARGEN_CUDA_RETURN(kernels::ScatterQueryGroups(gate_up_.as<bf16>(), members, g.c.groups, g.c.size, d.num_heads,
                                                    d.num_kv_heads, hd, attn_.as<bf16>(), stream_),
                        "query groups out");
      timer_.Mark(Stage::kAttention);
    }
    if (!swin) {
      ARGEN_STATUS_RETURN(gemm_.Linear(attn_.as<bf16>(), w.o, tokens, q_dim, H, x_.as<float>(), 1.f, "o_proj"));
      timer_.Mark(Stage::kOProj);
      ARGEN_STATUS_RETURN(EnqueueNorm(x_.as<float>(), w.post_norm, tokens, xn_.as<bf16>(), "post norm"));
    } else {
      // h = x + norm(o(attn)); xn = bf16(h), the MLP's input.
      ARGEN_STATUS_RETURN(gemm_.Linear(attn_.as<bf16>(), w.o, tokens, q_dim, H, sub_.as<float>(), 0.f, "o_proj"));
      timer_.Mark(Stage::kOProj);
      ARGEN_CUDA_RETURN(kernels::AddNorm(sub_.as<float>(), w.input_norm.weight, w.input_norm.bias, tokens, H,
                                         d.norm_eps, x_.as<float>(), xn_.as<bf16>(), stream_),
                        "attention norm + residual");
    }
    ARGEN_STATUS_RETURN(
        gemm_.Linear(xn_.as<bf16>(), w.gate_up, tokens, H, 2 * I, gate_up_.as<float>(), 0.f, "gate_up"));
    ARGEN_CUDA_RETURN(kernels::SwiGlu(gate_up_.as<float>(), tokens, I, mlp_.as<bf16>(), stream_), "swiglu");
    if (!swin) {
      ARGEN_STATUS_RETURN(gemm_.Linear(mlp_.as<bf16>(), w.down, tokens, I, H, x_.as<float>(), 1.f, "down"));
    } else {
      // x = h + norm(down(mlp)); xn = bf16(x), the next layer's input.
      ARGEN_STATUS_RETURN(gemm_.Linear(mlp_.as<bf16>(), w.down, tokens, I, H, sub_.as<float>(), 0.f, "down"));
      ARGEN_CUDA_RETURN(kernels::AddNorm(sub_.as<float>(), w.post_norm.weight, w.post_norm.bias, tokens, H, d.norm_eps,
                                         x_.as<float>(), xn_.as<bf16>(), stream_),
                        "mlp norm + residual");
    }
    timer_.Mark(Stage::kFfn);
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueHead(const float* hidden, int32_t rows) {
  if (spec_.vector_tokens()) return EnqueueVectorHead(hidden, rows);  // cuda_vectors.cc
  const model::StackConfig& d = spec_.stack;
  const int32_t H = d.hidden_size, HE = spec_.head_in(), V = spec_.logits(), pairs = rows / 2;
  ARGEN_STATUS_RETURN(EnqueueNorm(hidden, weights_.final_norm, rows, head_in_.as<bf16>(), "final norm"));
  const bf16* head_input = head_in_.as<bf16>();
  if (weights_.projector_w != nullptr) {
    ARGEN_STATUS_RETURN(gemm_.Linear(head_in_.as<bf16>(), weights_.projector_w, rows, H, HE, head_mid_.as<float>(), 0.f,
                                     "output projector"));
    ARGEN_CUDA_RETURN(
        kernels::BiasGelu(head_mid_.as<float>(), weights_.projector_b, rows, HE, head_mid_bf16_.as<bf16>(), stream_),
        "output projector gelu");
    head_input = head_mid_bf16_.as<bf16>();
  }
  ARGEN_STATUS_RETURN(gemm_.Linear(head_input, weights_.head_w, rows, HE, V, logits_.as<float>(), 0.f, "output head"));
  if (weights_.head_b != nullptr) {
    ARGEN_CUDA_RETURN(kernels::AddBias(logits_.as<float>(), weights_.head_b, rows, V, stream_), "output head bias");
  }
  if (inject_nan_logits_) {  // fault injection (testing only): all-ones bits are a NaN
    inject_nan_logits_ = false;
    ARGEN_CUDA_RETURN(cudaMemsetAsync(logits_.as(), 0xff, sizeof(float) * rows * int64_t{V}, stream_),
                      "inject NaN logits");
  }
  // NaN/Inf logits would still sample plausible ids: flag them for FinishStep.
  ARGEN_CUDA_RETURN(cudaMemsetAsync(nonfinite_flag_.as(), 0, sizeof(int32_t), stream_), "clear non-finite flag");
  ARGEN_CUDA_RETURN(
      kernels::FlagNonFinite(logits_.as<float>(), int64_t{rows} * V, nonfinite_flag_.as<int32_t>(), stream_),
      "non-finite logits check");
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(host_nonfinite_flag_.as(), nonfinite_flag_.as(), sizeof(int32_t),
                                    cudaMemcpyDeviceToHost, stream_),
                    "download non-finite flag");
  ARGEN_CUDA_RETURN(kernels::CfgSample(logits_.as<float>(), pairs, V, inputs_.sampling, inputs_.sampled, stream_),
                    "cfg sampling");
  ARGEN_CUDA_RETURN(
      cudaMemcpyAsync(host_sampled_.as(), inputs_.sampled, sizeof(int32_t) * pairs, cudaMemcpyDeviceToHost, stream_),
      "download tokens");
  timer_.Mark(Stage::kHead);
  return absl::OkStatus();
}

absl::Status CudaBackend::FinishStep(int32_t rows, int32_t* sampled, float* logits) {
  const int32_t V = spec_.logits(), pairs = rows / 2;
  if (logits != nullptr) {
    ARGEN_CUDA_RETURN(
        cudaMemcpyAsync(logits, logits_.as(), sizeof(float) * rows * int64_t{V}, cudaMemcpyDeviceToHost, stream_),
        "download logits");
  }
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream_), "step");
  if (*host_nonfinite_flag_.as<int32_t>() != 0) {
    return absl::InternalError(spec_.vector_tokens() ? "output-stage conditions or drawn token vectors are NaN or Inf "
                                                       "in this step: the model produced non-finite values"
                                                     : "output-stage logits are NaN or Inf in this step: the model "
                                                       "produced non-finite values");
  }
  if (spec_.vector_tokens()) {
    std::fill(sampled, sampled + pairs, 0);  // a vector model's tokens are its vectors (HandOutVectors)
  } else {
    std::memcpy(sampled, host_sampled_.as(), sizeof(int32_t) * pairs);
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueInput(int32_t R) {
  if (spec_.vector_tokens()) return EnqueueVectorInput(R);  // cuda_vectors.cc
  const int32_t P = R / 2, H = spec_.stack.hidden_size, E = spec_.input_width(), rows = spec_.input_rows();
  if (weights_.fc1_w != nullptr) {
    // Table row -> Linear, GELU, Linear (Janus: gen_embed -> gen_aligner), once per pair.
    ARGEN_CUDA_RETURN(
        kernels::EmbeddingGatherBf16(weights_.input_table, rows, E, inputs_.ids, P, pair_embed_.as<bf16>(), stream_),
        "input table");
    ARGEN_STATUS_RETURN(
        gemm_.Linear(pair_embed_.as<bf16>(), weights_.fc1_w, P, E, H, pair_mid_.as<float>(), 0.f, "input fc1"));
    ARGEN_CUDA_RETURN(
        kernels::BiasGelu(pair_mid_.as<float>(), weights_.fc1_b, P, H, pair_mid_bf16_.as<bf16>(), stream_),
        "input gelu");
    ARGEN_STATUS_RETURN(
        gemm_.Linear(pair_mid_bf16_.as<bf16>(), weights_.fc2_w, P, H, H, pair_out_.as<float>(), 0.f, "input fc2"));
    ARGEN_CUDA_RETURN(kernels::AddBias(pair_out_.as<float>(), weights_.fc2_b, P, H, stream_), "input fc2 bias");
  } else {
    // The table row is the input (width == hidden).
    ARGEN_CUDA_RETURN(
        kernels::EmbeddingGatherF32(weights_.input_table, rows, H, inputs_.ids, P, pair_out_.as<float>(), stream_),
        "input table");
  }
  ARGEN_CUDA_RETURN(kernels::GatherRowsF32(pair_out_.as<float>(), inputs_.gather, R, H, x_.as<float>(), stream_),
                    "pair -> rows");
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueDecode(int32_t R, bool any_sparse, int32_t max_keys, int32_t observe_flags,
                                        int32_t kv_formats, std::span<const int32_t> rank_ends,
                                        const QueryGroups& groups) {
  const model::StackConfig& d = spec_.stack;
  const bool by_layer = !rank_ends.empty();  // RunLayers plans and applies rank by rank
  if (any_sparse && !by_layer) {
    PlanBuffers plan{plan_slots_.as<int32_t>(), plan_counts_.as<int32_t>(), plan_attended_.as<int32_t>(), plan_stride_};
    ARGEN_CUDA_RETURN(kernels::PlanDecodeStep(inputs_.plans, R, d.num_layers, d.num_kv_heads, pool_.as<int32_t>(),
                                              pool_.as<float>(), plan, stream_),
                      "policy plan");
    timer_.Mark(Stage::kPlan);
  }
  ARGEN_STATUS_RETURN(EnqueueInput(R));
  timer_.Mark(Stage::kEmbed);
  ARGEN_STATUS_RETURN(RunLayers(R, max_keys, any_sparse, R, observe_flags, kv_formats, rank_ends, &groups));
  if (any_sparse && !by_layer && (observe_flags & kObserveArgmin)) {
    // The diagonal rows' selections of every layer, from the attention kernel's argmin.
    PlanBuffers plan{plan_slots_.as<int32_t>(), plan_counts_.as<int32_t>(), plan_attended_.as<int32_t>(), plan_stride_};
    ARGEN_CUDA_RETURN(
        kernels::ApplyDiagonalSelections(inputs_.plans, R, d.num_layers, d.num_kv_heads, pool_.as<int32_t>(),
                                         pool_.as<float>(), plan, argmin_.as<int32_t>(), stream_),
        "policy apply");
    timer_.Mark(Stage::kApply);
  }
  return EnqueueHead(x_.as<float>(), R);
}

}  // namespace argen::cuda
