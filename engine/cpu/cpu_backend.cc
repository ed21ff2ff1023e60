#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/prefill_attention.h"
#include "engine/cpu/sparse_attention.h"
#include "engine/model/finite_values.h"
#include "kernels/sampling_rng.h"
#include "kernels/sparse/policy_rewind.h"

namespace argen::cpu {
namespace {

// Buffers only grow, so steady-state decoding allocates nothing.
template <typename T>
T* Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  return v.data();
}

}  // namespace

struct CpuBackend::Activations {
  // Per token (prefill) or per row (decode). `sub`: a sublayer's output
  // before its norm (swin_norm only).
  std::vector<float> x, xn, qkv, attn, gate_up, mlp, rope, sub;
  std::vector<float> fp8_in;  // weight_dtype fp8: a projection's input as its e4m3 codes give it back
  // Per output point's two rows (the output stage).
  std::vector<float> last_hidden, head_in, head_mid, logits;
  std::vector<int32_t> row_steps;  // per output point: the token index it samples
  std::vector<model::SamplingSpec> output_sampling;
  model::PlannedStep step;  // what the step's plan means for its rows
  // The prompt queries: computed entries, their offsets into tokens, the
  // tokens (ids, or rows of the plan's prompt embeddings: prompt_sources).
  std::vector<int32_t> prompt_entries, prompt_offsets, prompt_tokens, entry_index;
  std::vector<model::InputSource> prompt_sources;
  std::vector<KvRow*> output_rows;  // per output point: its pair's cond row (keeps made vectors)
  std::vector<DecodeEntry> decode_entries;
  // Per pair query (decode input embeddings): its query and its cond row.
  std::vector<const model::Query*> pair_inputs;
  std::vector<const KvRow*> pair_rows;
  std::vector<int32_t> input_ids, input_at;
  std::vector<float> input_embed, input_mid, input_out, input_vectors, input_all;
  // A vector model's output stage: the conditions of the cond and uncond rows.
  std::vector<float> head_cond, head_uncond, drawn;
  const float* input = nullptr;  // the input stage's output
  // Attention scratch, one set per thread-pool participant.
  std::vector<RowScratch> per_thread;
};

// Grows every participant's attention scratch for rows of at most
// `max_prompt` prompt positions and `max_stride` attended slots.
void CpuBackend::ReserveRowScratch(int32_t max_prompt, int32_t max_stride) {
  const model::StackConfig& d = spec_.stack;
  act_->per_thread.resize(pool_->size());
  for (RowScratch& s : act_->per_thread) {
    Grow(s.attended, int64_t{d.num_kv_heads} * max_stride);
    Grow(s.counts, d.num_kv_heads);
    Grow(s.attended_probs, int64_t{d.num_kv_heads} * max_stride);
    Grow(s.decode_positions, max_stride);
    Grow(s.scratch, std::max<int64_t>(int64_t{max_prompt} + max_stride, 1));
    if (observer_) Grow(s.head_probs, int64_t{d.num_heads} * (max_prompt + max_stride));
  }
}

CpuBackend::CpuBackend(const model::ModelSpec& spec, CpuWeights weights, const model::BackendOptions& options)
    : spec_(spec),
      limits_{options.max_batch_rows, spec.text_vocab(), spec.input_rows(), spec.stack.hidden_size,
              spec.output.token_dim},
      w_(std::move(weights)),
      options_(options),
      kv_(spec.stack),
      act_(std::make_unique<Activations>()),
      sampler_(spec.logits()) {
  const model::StackConfig& dims = spec.stack;
  SetBlasThreads(options.threads);
  const int32_t threads = options.threads > 0
                              ? options.threads
                              : std::max<int32_t>(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
  pool_ = std::make_unique<parallel::ThreadPool>(threads);
  if (dims.rope == model::RopeKind::kGrid2d) {
    // LlamaGen: freqs = 1 / base ** (arange(0, half, 2)[:half // 2].float() / half), half = head_dim / 2.
    const int32_t half = dims.head_dim / 2, quarter = dims.head_dim / 4;
    inv_freq_.resize(quarter);
    for (int32_t i = 0; i < quarter; ++i) {
      const float exponent = static_cast<float>(2 * i) / static_cast<float>(half);
      inv_freq_[i] = 1.0f / std::pow(dims.rope_theta, exponent);
    }
  } else {
    const int32_t half = dims.head_dim / 2;
    inv_freq_.resize(half);
    // HF: inv_freq = 1 / theta ** (arange(0, dim, 2).float() / dim)
    for (int32_t i = 0; i < half; ++i) {
      const float exponent = static_cast<float>(2 * i) / static_cast<float>(dims.head_dim);
      inv_freq_[i] = 1.0f / std::pow(dims.rope_theta, exponent);
    }
  }
}

void CpuBackend::QueryRope(bool prompt, int32_t index, int32_t prompt_len, float* cos_sin) const {
  const model::StackConfig& d = spec_.stack;
  if (d.rope == model::RopeKind::k1d) {
    RopeAngles(inv_freq_.data(), d.head_dim / 2, prompt ? index : prompt_len + index, cos_sin);
  } else if (prompt) {
    std::fill(cos_sin, cos_sin + d.head_dim, 0.0f);  // position-free: q and k become zero
  } else {
    RopeAnglesGrid2d(inv_freq_.data(), d.head_dim / 4, index / d.rope_grid_width, index % d.rope_grid_width, cos_sin);
  }
}

void CpuBackend::ApplyQueryRope(float* x, int32_t heads, const float* cos_sin) const {
  if (spec_.stack.rope == model::RopeKind::kGrid2d) {
    ApplyRopeInterleaved(x, heads, spec_.stack.head_dim, cos_sin);
  } else {
    ApplyRope(x, heads, spec_.stack.head_dim, cos_sin);
  }
}

CpuBackend::~CpuBackend() = default;

int64_t CpuBackend::PoolBytes() const {
  return options_.kv_budget_bytes > 0 ? options_.kv_budget_bytes : std::numeric_limits<int64_t>::max();
}

model::KvPool CpuBackend::Pool() const {
  // Each row's arrays are its own host allocations: the budget counts bytes.
  return {std::max<int64_t>(options_.kv_budget_bytes, 0), false, options_.max_prompt_tokens,
          std::numeric_limits<int32_t>::max()};
}

namespace {

const float* BiasOf(const NormWeights& n) { return n.bias.empty() ? nullptr : n.bias.data(); }

}  // namespace

template <typename AttendFn>
void CpuBackend::RunLayers(int64_t first, int64_t n, AttendFn&& attend) {
  const model::StackConfig& d = spec_.stack;
  const int32_t H = d.hidden_size, I = d.intermediate_size;
  const int32_t q_dim = d.num_heads * d.head_dim;
  const int32_t qkv_dim = q_dim + 2 * d.num_kv_heads * d.head_dim;
  const float eps = d.norm_eps;
  Activations& a = *act_;
  float* x = a.x.data() + first * H;
  float* xn = a.xn.data() + first * H;
  float* qkv = a.qkv.data() + first * qkv_dim;
  float* attn = a.attn.data() + first * q_dim;
  float* gate_up = a.gate_up.data() + first * 2 * I;
  float* mlp = a.mlp.data() + first * I;
  float* sub = d.swin_norm ? a.sub.data() + first * H : nullptr;
  // A projection's input: itself, or with fp8 weights what an fp8 GEMM input gives back.
  const bool fp8 = w_.format == model::WeightFormat::kFp8;
  auto in = [&](const float* v, int32_t cols) -> const float* {
    if (!fp8) return v;
    float* q = Grow(a.fp8_in, n * cols);
    // Row by row, so the threads' split changes no value.
    pool_->ParallelForRange(n, [&](int64_t begin, int64_t end) {
      RoundRowsThroughE4m3(v + begin * cols, end - begin, cols, q + begin * cols);
    });
    return q;
  };
  for (int32_t l = 0; l < d.num_layers; ++l) {
    const LayerWeights& lw = w_.layers[l];
    // Attention: pre-norm attends norm(x); swin attends x and norms the output.
    if (!d.swin_norm) Norm(x, lw.input_norm.weight.data(), BiasOf(lw.input_norm), n, H, eps, xn);
    MatMulWT(in(d.swin_norm ? x : xn, H), lw.qkv.data(), n, H, qkv_dim, qkv);
    if (!lw.qkv_bias.empty()) AddBias(qkv, lw.qkv_bias.data(), n, qkv_dim);
    if (d.qk_norm) {
      HeadLayerNorm(qkv, n, qkv_dim, d.num_heads, d.head_dim, lw.q_norm.weight.data(), lw.q_norm.bias.data(),
                    d.qk_norm_eps);
      HeadLayerNorm(qkv + q_dim, n, qkv_dim, d.num_kv_heads, d.head_dim, lw.k_norm.weight.data(), lw.k_norm.bias.data(),
                    d.qk_norm_eps);
    }
    attend(l);
    if (d.swin_norm) {
      MatMulWT(in(attn, q_dim), lw.o.data(), n, q_dim, H, sub);
      AddNorm(sub, lw.input_norm.weight.data(), BiasOf(lw.input_norm), n, H, eps, x, xn);
    } else {
      MatMulWT(in(attn, q_dim), lw.o.data(), n, q_dim, H, x, 1.0f);
      Norm(x, lw.post_norm.weight.data(), BiasOf(lw.post_norm), n, H, eps, xn);
    }
    // MLP (SwiGLU), placed the same way.
    MatMulWT(in(d.swin_norm ? x : xn, H), lw.gate_up.data(), n, H, 2 * I, gate_up);
    SiluMul(gate_up, n, I, mlp);
    if (d.swin_norm) {
      MatMulWT(in(mlp, I), lw.down.data(), n, I, H, sub);
      AddNorm(sub, lw.post_norm.weight.data(), BiasOf(lw.post_norm), n, H, eps, x, xn);
    } else {
      MatMulWT(in(mlp, I), lw.down.data(), n, I, H, x, 1.0f);
    }
  }
}

absl::Status CpuBackend::HeadAndSample(const float* hidden, int64_t n_rows,
                                       std::span<const model::SamplingSpec> sampling, const int32_t* steps,
                                       const model::StepOutputs& out) {
  if (spec_.vector_tokens()) return HeadAndDraw(hidden, n_rows, sampling, steps, out);
  const model::StackConfig& d = spec_.stack;
  Activations& a = *act_;
  const int32_t H = d.hidden_size, V = spec_.logits(), E = spec_.head_in();
  float* normed = Grow(a.head_in, n_rows * H);
  float* logits = out.row_logits ? out.row_logits : Grow(a.logits, n_rows * V);
  Norm(hidden, w_.final_norm.weight.data(), BiasOf(w_.final_norm), n_rows, H, d.norm_eps, normed);
  const float* head_in = normed;
  if (!w_.projector.weight.empty()) {
    float* mid = Grow(a.head_mid, n_rows * E);
    MatMulWT(normed, w_.projector.weight.data(), n_rows, H, E, mid);
    AddBias(mid, w_.projector.bias.data(), n_rows, E);
    GeluInPlace(mid, n_rows * E);
    head_in = mid;
  }
  MatMulWT(head_in, w_.head.weight.data(), n_rows, E, V, logits);
  if (!w_.head.bias.empty()) AddBias(logits, w_.head.bias.data(), n_rows, V);
  // Sampling from NaN/Inf logits would return plausible token ids for a
  // broken model: fail the step instead.
  if (const int64_t bad = model::FirstNonFinite({logits, static_cast<size_t>(n_rows * V)}); bad >= 0) {
    return absl::InternalError(absl::StrCat("output-stage logits are NaN or Inf (row ", bad / V,
                                            " of this step): the model produced non-finite values"));
  }
  for (size_t i = 0; i < sampling.size(); ++i) {
    const model::SamplingSpec& s = sampling[i];
    const float u =
        kernels::SampleUniform(s.seed, static_cast<uint32_t>(s.image_index), static_cast<uint32_t>(steps[i]));
    out.sampled[i] = sampler_.Sample(logits + (2 * i) * int64_t{V}, logits + (2 * i + 1) * int64_t{V}, s, u);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::HeadAndDraw(const float* hidden, int64_t n_rows, std::span<const model::SamplingSpec> sampling,
                                     const int32_t* steps, const model::StepOutputs& out) {
  const model::StackConfig& d = spec_.stack;
  Activations& a = *act_;
  const int32_t H = d.hidden_size, W = spec_.vector_head_in(), D = spec_.output.token_dim;
  const int64_t n = n_rows / 2;
  float* normed = Grow(a.head_in, n_rows * H);
  Norm(hidden, w_.final_norm.weight.data(), BiasOf(w_.final_norm), n_rows, H, d.norm_eps, normed);
  const float* conditions = normed;
  if (!w_.vector_out.weight.empty()) {
    float* mid = Grow(a.head_mid, n_rows * W);
    MatMulWT(normed, w_.vector_out.weight.data(), n_rows, H, W, mid);
    if (!w_.vector_out.bias.empty()) AddBias(mid, w_.vector_out.bias.data(), n_rows, W);
    conditions = mid;
  }
  if (const int64_t bad = model::FirstNonFinite({conditions, static_cast<size_t>(n_rows * W)}); bad >= 0) {
    return absl::InternalError(absl::StrCat("output-stage conditions are NaN or Inf (row ", bad / W,
                                            " of this step): the model produced non-finite values"));
  }
  // Output point i's rows are 2i (cond) and 2i + 1 (uncond).
  float* cond = Grow(a.head_cond, n * W);
  float* uncond = Grow(a.head_uncond, n * W);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(cond + i * W, conditions + (2 * i) * W, sizeof(float) * W);
    std::memcpy(uncond + i * W, conditions + (2 * i + 1) * W, sizeof(float) * W);
  }
  float* drawn = Grow(a.drawn, n * D);
  if (absl::Status s =
          options_.token_head->Draw({cond, static_cast<size_t>(n * W)}, {uncond, static_cast<size_t>(n * W)}, sampling,
                                    {steps, static_cast<size_t>(n)}, {drawn, static_cast<size_t>(n * D)});
      !s.ok()) {
    return s;
  }
  if (const int64_t bad = model::FirstNonFinite({drawn, static_cast<size_t>(n * D)}); bad >= 0) {
    return absl::InternalError(
        absl::StrCat("the token head drew a NaN or Inf (output point ", bad / D, " of this step)"));
  }
  for (int64_t i = 0; i < n; ++i) {
    KvRow& row = *a.output_rows[i];
    const int32_t t = steps[i];
    if (static_cast<int32_t>(row.made.size()) <= t) {
      row.made.resize(t + 1, 0);
      row.made_vectors.resize(static_cast<size_t>(t + 1) * D);
    }
    std::memcpy(row.made_vectors.data() + int64_t{t} * D, drawn + i * D, sizeof(float) * D);
    row.made[t] = 1;
    out.sampled[i] = 0;
    if (out.token_vectors != nullptr) std::memcpy(out.token_vectors + i * D, drawn + i * D, sizeof(float) * D);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::CheckMadeVectors(const model::StepPlan& plan, const model::PlannedStep& step) const {
  for (size_t e = 0; e < plan.rows.size(); e += 2) {
    const KvRow* row = static_cast<const KvRow*>(step.rows[e]);
    for (int32_t q = plan.query_offsets[e]; q < plan.query_offsets[e + 1]; ++q) {
      const model::Query& query = plan.queries[q];
      if (query.source != model::InputSource::kMadeVector || row->Made(query.index)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "Step: rows[", e, "] = ", plan.rows[e], " query ", q - plan.query_offsets[e], ": token ", query.index,
          "'s vector has not been made (an earlier step's output point makes it; feed it as a token vector "
          "otherwise)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Forward(const model::StepPlan& plan, const model::StepOutputs& out) {
  Activations& a = *act_;
  model::PlannedStep& step = a.step;
  if (absl::Status s = model::CheckStepPlan(
          plan, out, limits_, [this](model::RowId id) { return kv_.Find(id); },
          [this](model::RowId id) -> const model::RowState* { return kv_.FindAny(id); }, &step);
      !s.ok()) {
    return s;
  }
  if (spec_.vector_tokens()) {
    if (absl::Status s = CheckMadeVectors(plan, step); !s.ok()) return s;
  }
  // Rewinding rows (speculative decoding): their policy state forgets the
  // indices the step writes again (dense: checked).
  for (size_t e = 0; e < step.rewind_to.size(); ++e) {
    if (step.rewind_to[e] < 0) continue;
    KvRow& row = *static_cast<KvRow*>(step.rows[e]);
    const int32_t heads = spec_.stack.num_layers * spec_.stack.num_kv_heads;
    for (int32_t h = 0; h < heads; ++h) sparse::RewindTo(row.policy, row.layout, row.State(h), step.rewind_to[e]);
  }
  const int32_t H = spec_.stack.hidden_size;
  const int32_t n_outputs = step.outputs;
  // The hidden state of each output point's two rows, in output order, and
  // its token index and sampling.
  float* head_hidden = Grow(a.last_hidden, int64_t{2} * n_outputs * H);
  a.output_sampling.resize(n_outputs);
  a.output_rows.resize(n_outputs);
  int32_t* token_index = Grow(a.row_steps, n_outputs);
  const int32_t n_pairs = static_cast<int32_t>(plan.rows.size()) / 2;
  for (int32_t i = 0; i < n_pairs; ++i) {
    for (int32_t o = step.output_offsets[i]; o < step.output_offsets[i + 1]; ++o) {
      a.output_sampling[o] = plan.sampling[i];
      a.output_rows[o] = static_cast<KvRow*>(step.rows[2 * i]);
    }
  }
  if (absl::Status s = RunPromptQueries(plan, step, head_hidden, token_index); !s.ok()) return s;
  if (step.decode_queries > 0) RunDecodeQueries(plan, step, head_hidden, token_index);
  model::CommitStep(plan, step);
  if (n_outputs == 0) return absl::OkStatus();  // prompt rows alone: nothing to sample
  return HeadAndSample(head_hidden, int64_t{2} * n_outputs, a.output_sampling, token_index, out);
}

absl::Status CpuBackend::RunPromptQueries(const model::StepPlan& plan, const model::PlannedStep& step,
                                          float* head_hidden, int32_t* token_index) {
  const model::StackConfig& d = spec_.stack;
  Activations& a = *act_;
  const int32_t n_all = static_cast<int32_t>(step.rows.size());
  const int32_t n_rows = static_cast<int32_t>(plan.rows.size());
  // The computed entries (rows holding their prompt) and their queries' place in x.
  std::vector<int32_t>& computed = a.prompt_entries;
  std::vector<int32_t>& offsets = a.prompt_offsets;
  std::vector<int32_t>& tokens = a.prompt_tokens;
  computed.clear();
  tokens.clear();
  a.prompt_sources.clear();
  offsets.assign(1, 0);
  std::vector<int32_t>& computed_index = a.entry_index;
  computed_index.assign(n_all, -1);
  int32_t max_len = 0;
  for (int32_t e = 0; e < n_all; ++e) {
    if (!step.computes_prompt[e]) continue;
    computed_index[e] = static_cast<int32_t>(computed.size());
    computed.push_back(e);
    for (int32_t q = plan.query_offsets[e]; q < plan.query_offsets[e + 1]; ++q) {
      tokens.push_back(plan.queries[q].input);
      a.prompt_sources.push_back(plan.queries[q].source);
    }
    offsets.push_back(static_cast<int32_t>(tokens.size()));
    max_len = std::max(max_len, step.rows[e]->prompt_len);
  }
  const int64_t n_computed = static_cast<int64_t>(computed.size());
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int32_t H = d.hidden_size, hd = d.head_dim;
  const int32_t q_dim = d.num_heads * hd, kv_dim = d.num_kv_heads * hd;
  const int32_t qkv_dim = q_dim + 2 * kv_dim;
  if (n > 0) {
    Grow(a.x, n * H);
    Grow(a.xn, n * H);
    Grow(a.qkv, n * qkv_dim);
    Grow(a.attn, n * q_dim);
    Grow(a.gate_up, n * 2 * d.intermediate_size);
    Grow(a.mlp, n * d.intermediate_size);
    Grow(a.rope, n * hd);
    if (d.swin_norm) Grow(a.sub, n * H);
    ReserveRowScratch(max_len, 0);
    if (std::ranges::find(a.prompt_sources, model::InputSource::kEmbedding) == a.prompt_sources.end()) {
      if (absl::Status s = w_.source->ReadRows(spec_.text_embed, tokens.data(), n, a.x.data()); !s.ok()) return s;
    } else {
      // Prompts given (in part) as embeddings: each position from its source.
      for (int64_t i = 0; i < n; ++i) {
        float* x = a.x.data() + i * H;
        if (a.prompt_sources[i] == model::InputSource::kEmbedding) {
          std::memcpy(x, plan.prompt_embeddings.data() + int64_t{tokens[i]} * H, sizeof(float) * H);
        } else if (absl::Status s = w_.source->ReadRows(spec_.text_embed, &tokens[i], 1, x); !s.ok()) {
          return s;
        }
      }
    }
    for (int64_t c = 0; c < n_computed; ++c) {
      const int32_t first = step.rows[computed[c]]->prompt_filled;
      for (int32_t i = offsets[c]; i < offsets[c + 1]; ++i) {
        QueryRope(/*prompt=*/true, first + i - offsets[c], 0, a.rope.data() + int64_t{i} * hd);
      }
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // One row at a time, so that a row's prompt KV is a function of its prompt
  // alone (BLAS rounding depends on a GEMM's row count and a row's place in
  // it): a request computes the same bytes alone or batched, and a prompt
  // shared between images the same bytes as a copy per image.
  for (int64_t c = 0; c < n_computed; ++c) {
    KvRow& row = *static_cast<KvRow*>(step.rows[computed[c]]);
    const int32_t first = row.prompt_filled;
    RunLayers(offsets[c], offsets[c + 1] - offsets[c], [&](int32_t layer) {
      const int32_t participant = 0;  // the calling thread (BLAS threads the GEMMs)
      float* k_block = kv_.LayerK(row, layer);
      float* v_block = kv_.LayerV(row, layer);
      const int32_t begin = offsets[c];
      for (int32_t i = begin; i < offsets[c + 1]; ++i) {
        float* q = a.qkv.data() + int64_t{i} * qkv_dim;
        float* k = q + q_dim;
        const float* v = k + kv_dim;
        ApplyQueryRope(q, d.num_heads, a.rope.data() + int64_t{i} * hd);
        ApplyQueryRope(k, d.num_kv_heads, a.rope.data() + int64_t{i} * hd);
        for (int32_t g = 0; g < d.num_kv_heads; ++g) {
          const int64_t at = (g * row.positions() + first + (i - begin)) * hd;
          StoreKv(row, k + g * hd, v + g * hd, hd, k_block + at, v_block + at);
        }
      }
      PrefillAttentionArgs args;
      args.len = offsets[c + 1] - begin;
      args.first = first;
      args.heads = d.num_heads;
      args.kv_heads = d.num_kv_heads;
      args.head_dim = hd;
      args.q = a.qkv.data() + int64_t{begin} * qkv_dim;
      args.q_stride = qkv_dim;
      args.k = k_block;
      args.v = v_block;
      args.kv_positions = row.positions();
      args.scale = scale;
      args.out = a.attn.data() + int64_t{begin} * q_dim;
      args.out_stride = q_dim;
      args.scratch = a.per_thread[participant].scratch.data();
      PrefillAttention(args);
    });
  }

  // A completing entry's last prompt position: a computed entry's, or a cached prompt row's.
  const auto source_hidden = [&](int32_t source) -> const float* {
    if (source >= 0) return a.x.data() + int64_t{offsets[computed_index[source] + 1] - 1} * H;
    return static_cast<const KvRow*>(step.cached[-1 - source])->last_hidden.data();
  };
  // Prompt rows keep theirs for the sharers prefilled after this step.
  for (int32_t e = n_rows; e < n_all; ++e) {
    KvRow& row = *static_cast<KvRow*>(step.rows[e]);
    if (step.completes_prompt[e]) {
      std::memcpy(row.last_hidden.data(), source_hidden(step.prompt_source[e]), sizeof(float) * H);
    }
  }
  // Pairs completing their prompts sample token 0 from them (their first output point).
  for (int32_t i = 0; i < n_rows / 2; ++i) {
    if (!step.completes_prompt[2 * i]) continue;
    const int32_t o = step.output_offsets[i];
    for (int32_t k = 0; k < 2; ++k) {
      std::memcpy(head_hidden + (int64_t{2} * o + k) * H, source_hidden(step.prompt_source[2 * i + k]),
                  sizeof(float) * H);
    }
    token_index[o] = 0;
  }
  return absl::OkStatus();
}

void CpuBackend::DecodeAttendLayer(int32_t layer, std::span<const DecodeEntry> entries) {
  auto one_row = [&](int64_t r, int32_t participant) {
    const DecodeEntry& e = entries[r];
    for (int32_t j = 0; j < e.queries; ++j) {
      DecodeAttendRow(layer, *e.row, e.first_x + j, e.id, e.first_query[j], e.in_order, act_->per_thread[participant]);
    }
  };
  // The observer sees rows in batch order, from the calling thread. Small
  // layers also stay on it: waking workers costs more than it saves.
  int64_t keys = 0;
  for (const DecodeEntry& e : entries) keys += int64_t{e.queries} * (e.row->prompt_len + e.row->layout.max_attended);
  const int64_t multiply_adds = keys * spec_.stack.num_heads * spec_.stack.head_dim;
  pool_->ParallelFor(static_cast<int64_t>(entries.size()), !observer_ && multiply_adds >= min_parallel_work_, one_row);
}

void CpuBackend::DecodeAttendRow(int32_t layer, KvRow& row, int64_t r, model::RowId row_id, const model::Query& query,
                                 bool in_order, RowScratch& s) {
  const int32_t t = query.index;
  const model::StackConfig& d = spec_.stack;
  Activations& a = *act_;
  const int32_t hd = d.head_dim, q_dim = d.num_heads * hd, kv_dim = d.num_kv_heads * hd;
  const int32_t qkv_dim = q_dim + 2 * kv_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int32_t stride = row.layout.max_attended;
  float* q = a.qkv.data() + r * qkv_dim;
  float* k = q + q_dim;
  const float* v = k + kv_dim;
  ApplyQueryRope(q, d.num_heads, a.rope.data() + r * hd);
  ApplyQueryRope(k, d.num_kv_heads, a.rope.data() + r * hd);
  float* k_block = kv_.LayerK(row, layer);
  float* v_block = kv_.LayerV(row, layer);
  int32_t* attended = s.attended.data();
  for (int32_t g = 0; g < d.num_kv_heads; ++g) {
    int32_t slot = 0;
    const sparse::PolicyState state = row.State(layer * d.num_kv_heads + g);
    // Out of order (parallel decoding; or in order once the row's sparse
    // state went out of order): the policy's keys before t that are written
    // and resident, and t; a provisional query's K/V lands in t's slot as
    // scratch (the key there is evicted; no other query reads the slot until
    // the real token's query writes it).
    const int32_t count = sparse::PlanQuery(row.policy, row.layout, state, t, in_order, !query.provisional, &slot,
                                            attended + int64_t{g} * stride);
    // Validated before the step (in order: t == next_step < l_dec; out of
    // order: a policy that plans it, t unwritten), so count >= 0.
    s.counts[g] = std::max(count, 0);
    const int64_t at = (g * row.positions() + row.stored_prompt + slot) * hd;
    StoreKv(row, k + g * hd, v + g * hd, hd, k_block + at, v_block + at);
  }
  DecodeAttentionShape shape{d.num_heads, d.num_kv_heads, hd, row.prompt_len, row.layout.n_slots};
  DecodeAttentionIo io;
  io.q = q;
  io.k = k_block;
  io.v = v_block;
  if (row.prompt_source != nullptr) {  // the owner's prompt KV
    io.prompt_k = kv_.PromptK(row, layer);
    io.prompt_v = kv_.PromptV(row, layer);
    io.prompt_head_stride = kv_.PromptHeadStride(row);
  }
  io.attended = attended;
  io.counts = s.counts.data();
  io.attended_stride = stride;
  io.scale = scale;
  io.out = a.attn.data() + r * q_dim;
  io.attended_probs = s.attended_probs.data();
  io.head_probs = observer_ ? s.head_probs.data() : nullptr;
  io.scratch = s.scratch.data();
  DecodeAttention(shape, io);
  for (int32_t g = 0; g < d.num_kv_heads; ++g) {
    sparse::PolicyState state = row.State(layer * d.num_kv_heads + g);
    if (sparse::ObserveNeeded(row.policy, row.layout, state, t)) {
      sparse::ObserveStep(row.policy, row.layout, state, t, attended + int64_t{g} * stride,
                          s.attended_probs.data() + int64_t{g} * stride, s.counts[g]);
    }
  }
  if (observer_) ReportAttention(layer, row, row_id, t, s);
}

void CpuBackend::ReportAttention(int32_t layer, KvRow& row, model::RowId row_id, int32_t t, RowScratch& s) {
  const model::StackConfig& d = spec_.stack;
  const int32_t group = d.num_heads / d.num_kv_heads;
  const int32_t stride = row.layout.max_attended;
  const int32_t full_stride = row.prompt_len + stride;
  for (int32_t h = 0; h < d.num_heads; ++h) {
    const int32_t g = h / group;
    const int32_t count = s.counts[g];
    const sparse::PolicyState state = row.State(layer * d.num_kv_heads + g);
    const int32_t* slots = s.attended.data() + int64_t{g} * stride;
    for (int32_t i = 0; i < count; ++i) {
      s.decode_positions[i] = sparse::SlotPosition(row.layout, state, slots[i]);
    }
    AttentionObservation obs;
    obs.layer = layer;
    obs.head = h;
    obs.row = row_id;
    obs.step = t;
    obs.prompt_len = row.prompt_len;
    obs.probs = std::span<const float>(s.head_probs.data() + int64_t{h} * full_stride, row.prompt_len + count);
    obs.decode_positions = std::span<const int32_t>(s.decode_positions.data(), count);
    observer_(obs);
  }
}

void CpuBackend::InputStage(const model::StepPlan& plan) {
  Activations& a = *act_;
  const int32_t H = spec_.stack.hidden_size;
  const int64_t n = static_cast<int64_t>(a.pair_inputs.size());
  a.input_ids.clear();
  a.input_at.clear();
  for (int64_t i = 0; i < n; ++i) {
    if (a.pair_inputs[i]->source != model::InputSource::kId) continue;
    a.input_ids.push_back(a.pair_inputs[i]->input);
    a.input_at.push_back(static_cast<int32_t>(i));
  }
  if (static_cast<int64_t>(a.input_ids.size()) == n) {  // ids only: as every code model's step
    IdInputStage(a.input_ids);
    return;
  }
  // Token vectors (given, or made by an earlier step) through vector_in; ids
  // (forced tokens of a vector model) through the table; each into its place.
  float* all = Grow(a.input_all, n * H);
  if (!a.input_ids.empty()) {
    IdInputStage(a.input_ids);
    for (size_t j = 0; j < a.input_at.size(); ++j) {
      std::memcpy(all + int64_t{a.input_at[j]} * H, a.input + j * H, sizeof(float) * H);
    }
  }
  const int32_t D = spec_.output.token_dim;
  const int64_t n_vectors = n - static_cast<int64_t>(a.input_ids.size());
  float* vectors = Grow(a.input_vectors, n_vectors * D);
  float* projected = Grow(a.input_out, n_vectors * H);
  a.input_at.clear();
  for (int64_t i = 0; i < n; ++i) {
    const model::Query& q = *a.pair_inputs[i];
    if (q.source == model::InputSource::kId) continue;
    const float* v = q.source == model::InputSource::kTokenVector
                         ? plan.token_vectors.data() + int64_t{q.input} * D
                         : a.pair_rows[i]->made_vectors.data() + int64_t{q.index} * D;
    std::memcpy(vectors + int64_t{a.input_at.size()} * D, v, sizeof(float) * D);
    a.input_at.push_back(static_cast<int32_t>(i));
  }
  MatMulWT(vectors, w_.vector_in.weight.data(), n_vectors, D, H, projected);
  if (!w_.vector_in.bias.empty()) AddBias(projected, w_.vector_in.bias.data(), n_vectors, H);
  for (size_t j = 0; j < a.input_at.size(); ++j) {
    std::memcpy(all + int64_t{a.input_at[j]} * H, projected + j * H, sizeof(float) * H);
  }
  a.input = all;
}

void CpuBackend::IdInputStage(std::span<const int32_t> ids) {
  Activations& a = *act_;
  const int32_t H = spec_.stack.hidden_size, E = spec_.input_width();
  const int64_t n = static_cast<int64_t>(ids.size());
  // The table row of each pair query's input id, then the input MLP (if
  // any), once per pair query; both rows of the pair get the result.
  float* embed = Grow(a.input_embed, n * E);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(embed + i * E, w_.input_table.data() + int64_t{ids[i]} * E, sizeof(float) * E);
  }
  a.input = embed;
  if (!w_.input_fc1.weight.empty()) {
    float* mid = Grow(a.input_mid, n * H);
    float* out = Grow(a.input_out, n * H);
    MatMulWT(embed, w_.input_fc1.weight.data(), n, E, H, mid);
    AddBias(mid, w_.input_fc1.bias.data(), n, H);
    GeluInPlace(mid, n * H);
    MatMulWT(mid, w_.input_fc2.weight.data(), n, H, H, out);
    AddBias(out, w_.input_fc2.bias.data(), n, H);
    a.input = out;
  }
}

void CpuBackend::RunDecodeQueries(const model::StepPlan& plan, const model::PlannedStep& step, float* head_hidden,
                                  int32_t* token_index) {
  const model::StackConfig& d = spec_.stack;
  Activations& a = *act_;
  const int32_t n_rows = static_cast<int32_t>(plan.rows.size());
  // The decoding rows and their queries' place in x: row-major, each row's
  // queries in order (one query per row: x row r is batch row r).
  std::vector<DecodeEntry>& entries = a.decode_entries;
  entries.clear();
  a.pair_inputs.clear();
  a.pair_rows.clear();
  int32_t n_x = 0, max_stride = 0, max_prompt = 0;
  for (int32_t e = 0; e < n_rows; ++e) {
    if (!step.has_queries[e] || step.kind[e] != model::QueryKind::kDecode) continue;
    KvRow* row = static_cast<KvRow*>(step.rows[e]);
    const int32_t first = plan.query_offsets[e], count = plan.query_offsets[e + 1] - first;
    entries.push_back({row, plan.rows[e], e, n_x, count, &plan.queries[first], step.in_order[e] != 0});
    if (e % 2 == 0) {
      for (int32_t q = first; q < first + count; ++q) {
        a.pair_inputs.push_back(&plan.queries[q]);
        a.pair_rows.push_back(row);
      }
    }
    n_x += count;
    max_stride = std::max(max_stride, row->layout.max_attended);
    max_prompt = std::max(max_prompt, row->prompt_len);
  }
  const int32_t H = d.hidden_size, hd = d.head_dim;
  const int32_t q_dim = d.num_heads * hd, qkv_dim = q_dim + 2 * d.num_kv_heads * hd;
  Grow(a.x, int64_t{n_x} * H);
  Grow(a.xn, int64_t{n_x} * H);
  Grow(a.qkv, int64_t{n_x} * qkv_dim);
  Grow(a.attn, int64_t{n_x} * q_dim);
  Grow(a.gate_up, int64_t{n_x} * 2 * d.intermediate_size);
  Grow(a.mlp, int64_t{n_x} * d.intermediate_size);
  Grow(a.rope, int64_t{n_x} * hd);
  if (d.swin_norm) Grow(a.sub, int64_t{n_x} * H);
  ReserveRowScratch(max_prompt, max_stride);

  // Pair queries in the order of the cond rows' queries; the uncond row of a
  // pair follows its cond row with the same queries.
  InputStage(plan);
  int32_t pair_query = 0;
  for (size_t k = 0; k < entries.size(); k += 2) {
    for (int32_t j = 0; j < entries[k].queries; ++j, ++pair_query) {
      for (size_t side = 0; side < 2; ++side) {
        const DecodeEntry& e = entries[k + side];
        std::memcpy(a.x.data() + int64_t{e.first_x + j} * H, a.input + int64_t{pair_query} * H, sizeof(float) * H);
        QueryRope(/*prompt=*/false, e.first_query[j].index, e.row->prompt_len,
                  a.rope.data() + int64_t{e.first_x + j} * hd);
      }
    }
  }

  RunLayers(0, n_x, [&](int32_t layer) { DecodeAttendLayer(layer, entries); });

  // Query t of a pair samples token t + 1 (after the pair's token 0, if the step made it).
  for (size_t k = 0; k < entries.size(); k += 2) {
    const int32_t pair = entries[k].entry / 2;
    const int32_t first_output = step.output_offsets[pair + 1] - entries[k].queries;
    for (int32_t j = 0; j < entries[k].queries; ++j) {
      const int32_t o = first_output + j;
      for (size_t side = 0; side < 2; ++side) {
        std::memcpy(head_hidden + (int64_t{2} * o + side) * H, a.x.data() + int64_t{entries[k + side].first_x + j} * H,
                    sizeof(float) * H);
      }
      token_index[o] = entries[k].first_query[j].index + 1;
    }
  }
}

}  // namespace argen::cpu
