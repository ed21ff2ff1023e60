#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/pool_sizing.h"
#include "engine/cuda/step_staging.h"
#include "engine/sparse/policy_params.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/fault_kernels.h"

namespace argen::cuda {
namespace {

constexpr int32_t kMaxDecodePositions = 16384;  // rotary table covers prompt + this many tokens

}  // namespace

CudaBackend::CudaBackend(const model::ModelSpec& spec, DeviceWeights weights,
                         std::shared_ptr<const model::WeightSource> source, const model::BackendOptions& options)
    : spec_(spec),
      limits_{options.max_batch_rows, spec.text_vocab(), spec.input_rows(), spec.stack.hidden_size,
              spec.output.token_dim},
      weights_(std::move(weights)),
      source_(std::move(source)),
      options_(options),
      sizer_(spec.stack, spec.output.token_dim) {
  lookup_ = [this](model::RowId id) -> model::RowState* { return table_ == nullptr ? nullptr : table_->Find(id); };
}

CudaBackend::~CudaBackend() {
  if (stream_) cudaStreamSynchronize(stream_);
  ClearGraphs();
  gemm_.Reset();
  if (stream_) cudaStreamDestroy(stream_);
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const model::ModelSpec& spec, DeviceWeights weights,
                                                                 std::shared_ptr<const model::WeightSource> source,
                                                                 const model::BackendOptions& options,
                                                                 std::unique_ptr<DeviceFlowHead> head) {
  const model::StackConfig& dims = spec.stack;
  if (spec.vector_tokens() != (head != nullptr)) {
    return absl::InvalidArgumentError(
        spec.vector_tokens() ? "cuda backend: a vector model (output.token_dim > 0) needs its device token head"
                             : "cuda backend: a device token head was given for a model whose tokens are codes");
  }
  if (head != nullptr && (head->cond_dim() != spec.vector_head_in() || head->token_dim() != spec.output.token_dim)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda backend: the device token head takes ", head->cond_dim(),
                                                   " floats and draws ", head->token_dim(), "; the model gives ",
                                                   spec.vector_head_in(), " and feeds back ", spec.output.token_dim));
  }
  if (!kernels::AttentionShapeSupported(dims.num_heads, dims.num_kv_heads, dims.head_dim)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda backend: head_dim ", dims.head_dim, " with ", dims.num_heads, " heads / ", dims.num_kv_heads,
                     " kv heads is not supported (head_dim 16, 32, 64 or 128; heads/kv_heads 1, 2, 4, 5 or 8)"));
  }
  if (spec.logits() > kernels::kMaxSampleVocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda backend: ", spec.logits(), " logits exceed the sampler's ", kernels::kMaxSampleVocab));
  }
  model::BackendOptions sized = options;
  std::string sizing;
  if (options.max_batch_rows == 0 || options.kv_budget_bytes == 0) {
    // Auto: split what is free now (weights and the VQ decoder are placed) into
    // the workspaces and the pool (engine/cuda/pool_sizing.h).
    size_t free_bytes = 0, total_bytes = 0;
    ARGEN_CUDA_RETURN(cudaMemGetInfo(&free_bytes, &total_bytes), "memory info");
    int device = 0, sms = 0;
    ARGEN_CUDA_RETURN(cudaGetDevice(&device), "device");
    ARGEN_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "sm count");
    PoolSizingInput in;
    in.free_bytes = static_cast<int64_t>(free_bytes);
    in.total_bytes = static_cast<int64_t>(total_bytes);
    in.max_batch_rows = options.max_batch_rows;
    in.kv_budget_bytes = options.kv_budget_bytes;
    in.plan_stride = options.decode_tokens;
    in.max_prompt_tokens = options.max_prompt_tokens;
    in.sm_count = sms;
    in.fp8_weights = weights.format == model::WeightFormat::kFp8;
    if (options.max_batch_rows == 0) {
      absl::StatusOr<int64_t> row = ReferenceRowBytes(spec.stack, options.decode_tokens, options.reference_kv_format,
                                                      options.reference_guidance_shared);
      if (!row.ok()) return row.status();
      in.reference_row_bytes = *row;
    }
    absl::StatusOr<PoolSizing> s = SizePool(spec, in);
    if (!s.ok()) return s.status();
    sized.max_batch_rows = s->max_batch_rows;
    sized.kv_budget_bytes = s->kv_budget_bytes;
    sizing = s->Describe(in.free_bytes, in.total_bytes);
  }
  if (sized.max_batch_rows < 2 || sized.max_batch_rows % 2 != 0) {
    return absl::InvalidArgumentError("cuda backend: max_batch_rows must be even and >= 2");
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend(spec, std::move(weights), std::move(source), sized));
  b->sizing_ = std::move(sizing);
  b->flow_head_ = std::move(head);
  ARGEN_STATUS_RETURN(b->Init());
  return b;
}

absl::Status CudaBackend::Init() {
  const model::StackConfig& d = spec_.stack;
  // The highest priority: a decode step's kernels are scheduled before the GPU VQ decoder's
  // (its stream has the lowest), so image decoding never stalls a step.
  int least_priority = 0, greatest_priority = 0;
  ARGEN_CUDA_RETURN(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority), "stream priorities");
  ARGEN_CUDA_RETURN(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest_priority), "stream");
  int device = 0;
  ARGEN_CUDA_RETURN(cudaGetDevice(&device), "device");
  ARGEN_CUDA_RETURN(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device), "sm count");

  auto alloc = [](DeviceBuffer& buf, size_t bytes, const char* what) -> absl::Status {
    absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(bytes, what);
    if (!b.ok()) return b.status();
    buf = *std::move(b);
    return absl::OkStatus();
  };
  const int32_t R = options_.max_batch_rows, P = R / 2;
  max_tokens_ = std::max(R, 512);
  const int64_t T = max_tokens_, H = d.hidden_size, hd = d.head_dim;
  // The cuBLAS handle with one fixed workspace (no allocation during a step),
  // before the KV pool takes what is left.
  ARGEN_STATUS_RETURN(gemm_.Init(stream_));
  if (weights_.format == model::WeightFormat::kFp8) {
    ARGEN_STATUS_RETURN(gemm_.ReserveFp8Inputs(max_tokens_, WidestProjectionInput(d)));
  }
  const int64_t q_dim = int64_t{d.num_heads} * hd, qkv_dim = q_dim + 2LL * d.num_kv_heads * hd;
  const int64_t I = d.intermediate_size, E = spec_.input_width(), HE = spec_.projector_out(), V = spec_.logits();

  // Rotary table with the CPU's rounding: inv_freq and angle in f32.
  max_pos_ = options_.max_prompt_tokens + kMaxDecodePositions;
  if (d.rope == model::RopeKind::kGrid2d) {
    // 2-D RoPE (model_spec.h): row 0 is the position-free prompt (cos = sin =
    // 0), row 1 + t decode index t's grid cell (RopePosition).
    const int32_t half = d.head_dim / 2, quarter = d.head_dim / 4;
    std::vector<float> inv_freq(quarter), table(static_cast<size_t>(max_pos_) * half * 2, 0.0f);
    for (int32_t i = 0; i < quarter; ++i)
      inv_freq[i] = 1.0f / std::pow(d.rope_theta, static_cast<float>(2 * i) / static_cast<float>(half));
    for (int32_t t = 0; t + 1 < max_pos_; ++t) {
      const float row = static_cast<float>(t / d.rope_grid_width), col = static_cast<float>(t % d.rope_grid_width);
      float* cs = table.data() + static_cast<size_t>(t + 1) * half * 2;
      for (int32_t i = 0; i < quarter; ++i) {
        const float row_angle = row * inv_freq[i], col_angle = col * inv_freq[i];
        cs[2 * i] = std::cos(row_angle);
        cs[2 * i + 1] = std::sin(row_angle);
        cs[2 * (quarter + i)] = std::cos(col_angle);
        cs[2 * (quarter + i) + 1] = std::sin(col_angle);
      }
    }
    ARGEN_STATUS_RETURN(alloc(rope_, table.size() * 4, "rope table"));
    ARGEN_CUDA_RETURN(cudaMemcpy(rope_.as(), table.data(), table.size() * 4, cudaMemcpyHostToDevice), "rope table");
  } else {
    const int32_t half = d.head_dim / 2;
    std::vector<float> inv_freq(half), table(static_cast<size_t>(max_pos_) * half * 2);
    for (int32_t i = 0; i < half; ++i)
      inv_freq[i] = 1.0f / std::pow(d.rope_theta, static_cast<float>(2 * i) / static_cast<float>(d.head_dim));
    for (int32_t p = 0; p < max_pos_; ++p)
      for (int32_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(p) * inv_freq[i];
        table[(static_cast<size_t>(p) * half + i) * 2] = std::cos(angle);
        table[(static_cast<size_t>(p) * half + i) * 2 + 1] = std::sin(angle);
      }
    ARGEN_STATUS_RETURN(alloc(rope_, table.size() * 4, "rope table"));
    ARGEN_CUDA_RETURN(cudaMemcpy(rope_.as(), table.data(), table.size() * 4, cudaMemcpyHostToDevice), "rope table");
  }

  ARGEN_STATUS_RETURN(alloc(x_, T * H * 4, "x"));
  ARGEN_STATUS_RETURN(alloc(xn_, T * H * 2, "xn"));
  ARGEN_STATUS_RETURN(alloc(qkv_, T * qkv_dim * 4, "qkv"));
  ARGEN_STATUS_RETURN(alloc(q_, T * q_dim * 4, "q"));
  ARGEN_STATUS_RETURN(alloc(attn_, T * q_dim * 2, "attention output"));
  ARGEN_STATUS_RETURN(alloc(gate_up_, T * 2 * I * 4, "gate_up"));
  ARGEN_STATUS_RETURN(alloc(mlp_, T * I * 2, "mlp"));
  if (d.swin_norm) ARGEN_STATUS_RETURN(alloc(sub_, T * H * 4, "sublayer output"));
  const bool input_mlp = weights_.fc1_w != nullptr;
  ARGEN_STATUS_RETURN(alloc(pair_embed_, input_mlp ? P * E * 2 : 0, "input table rows"));
  ARGEN_STATUS_RETURN(alloc(pair_mid_, input_mlp ? P * H * 4 : 0, "input MLP hidden"));
  ARGEN_STATUS_RETURN(alloc(pair_mid_bf16_, input_mlp ? P * H * 2 : 0, "input MLP hidden bf16"));
  ARGEN_STATUS_RETURN(alloc(pair_out_, P * H * 4, "input stage out"));
  ARGEN_STATUS_RETURN(alloc(last_hidden_, int64_t{R} * H * 4, "last hidden"));
  ARGEN_STATUS_RETURN(alloc(head_in_, int64_t{R} * H * 2, "head input"));
  ARGEN_STATUS_RETURN(alloc(head_mid_, int64_t{R} * HE * 4, "head hidden"));
  ARGEN_STATUS_RETURN(alloc(head_mid_bf16_, int64_t{R} * HE * 2, "head hidden bf16"));
  ARGEN_STATUS_RETURN(alloc(logits_, int64_t{R} * V * 4, "logits"));

  const StagingLayout layout(max_tokens_, R);
  ARGEN_STATUS_RETURN(alloc(step_in_, layout.total + AlignStaging(sizeof(int32_t) * P), "step inputs"));
  {
    absl::StatusOr<PinnedBuffer> h = PinnedBuffer::Allocate(layout.total, "step inputs");
    if (!h.ok()) return h.status();
    host_in_ = *std::move(h);
    absl::StatusOr<PinnedBuffer> s = PinnedBuffer::Allocate(sizeof(int32_t) * P, "sampled tokens");
    if (!s.ok()) return s.status();
    host_sampled_ = *std::move(s);
    absl::StatusOr<PinnedBuffer> xh = PinnedBuffer::Allocate(T * H * 4, "prefill embeddings");
    if (!xh.ok()) return xh.status();
    host_x_pinned_ = *std::move(xh);
    absl::StatusOr<PinnedBuffer> nf = PinnedBuffer::Allocate(sizeof(int32_t), "non-finite flag");
    if (!nf.ok()) return nf.status();
    host_nonfinite_flag_ = *std::move(nf);
  }
  ARGEN_STATUS_RETURN(alloc(nonfinite_flag_, sizeof(int32_t), "non-finite flag"));
  if (spec_.vector_tokens()) {
    // Sources and kept places per pair, then the given vectors (vector_io_ and its pinned twin).
    const int64_t D = spec_.output.token_dim, W = spec_.vector_head_in();
    const size_t per_pair = AlignStaging(sizeof(int64_t) * P);
    const size_t io_bytes = 2 * per_pair + sizeof(float) * P * D;
    ARGEN_STATUS_RETURN(alloc(vector_io_, io_bytes, "token vector inputs"));
    vector_sources_ = vector_io_.as<int64_t>();
    vector_kept_ = reinterpret_cast<int64_t*>(vector_io_.as<char>() + per_pair);
    vectors_given_ = reinterpret_cast<float*>(vector_io_.as<char>() + 2 * per_pair);
    ARGEN_STATUS_RETURN(alloc(conditions_, sizeof(float) * R * W, "token head conditions"));
    ARGEN_STATUS_RETURN(alloc(vector_in_bf16_, sizeof(bf16) * P * D, "token vector inputs bf16"));
    ARGEN_STATUS_RETURN(alloc(drawn_, sizeof(float) * P * D, "drawn token vectors"));
    absl::StatusOr<PinnedBuffer> hv = PinnedBuffer::Allocate(io_bytes, "token vector inputs");
    if (!hv.ok()) return hv.status();
    host_vectors_ = *std::move(hv);
    absl::StatusOr<PinnedBuffer> hd = PinnedBuffer::Allocate(sizeof(float) * P * D, "drawn token vectors");
    if (!hd.ok()) return hd.status();
    host_drawn_ = *std::move(hd);
  }
  char* dev = step_in_.as<char>();
  inputs_.meta = reinterpret_cast<kernels::TokenMeta*>(dev + layout.meta);
  inputs_.plans = reinterpret_cast<RowPlan*>(dev + layout.plans);
  inputs_.ids = reinterpret_cast<int32_t*>(dev + layout.ids);
  inputs_.gather = reinterpret_cast<int32_t*>(dev + layout.gather);
  inputs_.sampling = reinterpret_cast<kernels::PairSampling*>(dev + layout.sampling);
  inputs_.observe = reinterpret_cast<int32_t*>(dev + layout.observe);
  inputs_.group_meta = reinterpret_cast<kernels::TokenMeta*>(dev + layout.group_meta);
  inputs_.group_members = reinterpret_cast<int32_t*>(dev + layout.group_members);
  inputs_.group_limits = reinterpret_cast<int32_t*>(dev + layout.group_limits);
  ARGEN_STATUS_RETURN(alloc(argmin_, sizeof(int32_t) * int64_t{d.num_layers} * R * d.num_kv_heads, "argmin"));
  inputs_.sampled = reinterpret_cast<int32_t*>(dev + layout.total);

  // Auto sizing counted the plans for every policy (up to L_dec attended keys):
  // made now, they never grow into the memory the pool took.
  ARGEN_STATUS_RETURN(EnsurePlanCapacity(sizing_.empty() ? 1 : std::max(1, options_.decode_tokens)));

  // The pool: the configured budget, or most of what is left on the device.
  // Rows' KV and policy state both come out of it (row_layout.h).
  int64_t budget = options_.kv_budget_bytes;
  if (budget <= 0) {
    size_t free_bytes = 0, total_bytes = 0;
    ARGEN_CUDA_RETURN(cudaMemGetInfo(&free_bytes, &total_bytes), "memory info");
    budget = static_cast<int64_t>(static_cast<double>(free_bytes) * 0.85) - (int64_t{1} << 30);
    budget = std::max<int64_t>(budget, int64_t{64} << 20);
  }
  budget = budget / kPoolAlignment * kPoolAlignment;
  ARGEN_STATUS_RETURN(CheckDeviceMemoryFits(
      budget, absl::StrCat("kv_budget_bytes ", GiB(budget), " (the pool of every row's KV and policy state)"),
      "lower kv_budget_bytes, or set it to 0 to size the pool from what is free after the weights"));
  ARGEN_STATUS_RETURN(alloc(pool_, budget, "KV pool (kv_budget_bytes)"));
  pool_bytes_ = budget;
  return absl::OkStatus();
}

absl::Status CudaBackend::InjectFault(model::FaultKind kind) {
  switch (kind) {
    case model::FaultKind::kStepError:
      return CudaStatus(kernels::LaunchInvalidConfiguration(stream_), "fault injection: step_error");
    case model::FaultKind::kDeviceLost:
      return CudaStatus(kernels::LaunchIllegalAddressWrite(stream_), "fault injection: device_lost");
    case model::FaultKind::kNanLogits:
      inject_nan_logits_ = true;  // the step runs; its check must catch the NaN
      return absl::OkStatus();
    case model::FaultKind::kNone:
      break;
  }
  return absl::OkStatus();
}

void CudaBackend::ClearGraphs() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
  seen_.clear();
}

absl::Status CudaBackend::EnsurePlanCapacity(int32_t stride) {
  if (stride <= plan_stride_) return absl::OkStatus();
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream_), "plan buffers");
  ClearGraphs();  // they point at the buffers replaced here
  const model::StackConfig& d = spec_.stack;
  const int64_t R = options_.max_batch_rows, heads = int64_t{d.num_layers} * R * d.num_kv_heads;
  auto alloc = [](DeviceBuffer& buf, size_t bytes, const char* what) -> absl::Status {
    buf = DeviceBuffer();
    absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(bytes, what);
    if (!b.ok()) return b.status();
    buf = *std::move(b);
    return absl::OkStatus();
  };
  ARGEN_STATUS_RETURN(alloc(plan_slots_, heads * 4, "plan write slots"));
  ARGEN_STATUS_RETURN(alloc(plan_counts_, heads * 4, "plan counts"));
  ARGEN_STATUS_RETURN(alloc(plan_attended_, heads * stride * 4, "plan attended slots"));
  ARGEN_STATUS_RETURN(alloc(probs_, R * d.num_kv_heads * stride * 4, "attention probabilities"));
  // Split-K partials: tokens * kv_heads * splits stays under 2 SMs' worth plus one
  // per (token, kv_head) (ChooseAttentionSplits), times the query group.
  const int64_t group = d.num_heads / d.num_kv_heads;
  const int64_t parts = (2LL * sm_count_ + int64_t{max_tokens_} * d.num_kv_heads) * group;
  attn_ws_bytes_ = parts * (d.head_dim + 2) * 4 + int64_t{max_tokens_} * d.num_heads * stride * 4;
  ARGEN_STATUS_RETURN(alloc(attn_ws_, attn_ws_bytes_, "attention workspace"));
  // Zero once: each split launch leaves them zero (kernels/attention.h).
  const size_t counter_bytes = size_t{4} * max_tokens_ * d.num_kv_heads;
  ARGEN_STATUS_RETURN(alloc(attn_split_counters_, counter_bytes, "attention split counters"));
  ARGEN_CUDA_RETURN(cudaMemset(attn_split_counters_.as(), 0, counter_bytes), "attention split counters");
  plan_stride_ = stride;
  return absl::OkStatus();
}

int64_t CudaBackend::KvBytesPerTokenRow() const {
  return 2LL * spec_.stack.num_layers * spec_.stack.num_kv_heads * spec_.stack.head_dim * 2;  // K and V, bf16
}

model::KvPool CudaBackend::Pool() const { return {pool_bytes_, true, options_.max_prompt_tokens, kMaxDecodePositions}; }

absl::Status CudaBackend::RowPlaced(model::RowState& state, const model::RowState* prompt_source) {
  const model::StackConfig& d = spec_.stack;
  Row& row = static_cast<Row&>(state);
  const sparse::ResolvedPolicy& policy = row.policy;
  row.sparse = policy.kind != sparse::PolicyKind::kDense;
  const RowLayout layout = row.prompt_row ? CudaPromptRowLayout(d, row.prompt_len, policy.kv_format)
                           : prompt_source != nullptr
                               ? CudaRowLayout(d, 0, policy, spec_.output.token_dim)
                               : CudaRowLayout(d, row.prompt_len, policy, spec_.output.token_dim);
  // A sharing row's prompt positions: all prompt_len of them, in the owner's region.
  if (prompt_source != nullptr) {
    const Row& owner = static_cast<const Row&>(*prompt_source);
    row.capacity = policy.n_slots;
    row.shared_prompt = owner.prompt_len;
    row.prompt_kv_offset = owner.kv_offset;
    row.prompt_capacity = owner.capacity;
  } else {
    row.capacity = row.prompt_len + policy.n_slots;  // a prompt row has no decode slots
  }
  if (row.sparse) ARGEN_STATUS_RETURN(EnsurePlanCapacity(row.layout.max_attended));
  row.kv_offset = row.pool_offset / 2;
  row.ints_offset = (row.pool_offset + layout.kv_bytes) / 4;
  row.floats_offset = (row.pool_offset + layout.kv_bytes + layout.ints_bytes) / 4;
  row.hidden_offset = (row.pool_offset + layout.kv_bytes + layout.ints_bytes + layout.floats_bytes) / 4;
  row.vectors_offset = row.hidden_offset + layout.hidden_bytes / 4;
  row.made.clear();
  if (row.sparse) {
    const int64_t heads = int64_t{d.num_layers} * d.num_kv_heads;
    ARGEN_CUDA_RETURN(
        kernels::InitPolicyState(policy, row.layout, static_cast<int32_t>(heads), pool_.as<int32_t>() + row.ints_offset,
                                 pool_.as<float>() + row.floats_offset, stream_),
        "init policy state");
  }
  return absl::OkStatus();
}

void CudaBackend::RowFreed(model::RowState& /*row*/) {
  // Work queued on the stream may still read the region.
  cudaStreamSynchronize(stream_);
}

absl::Status CudaBackend::Upload(size_t bytes) {
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(step_in_.as(), host_in_.as(), bytes, cudaMemcpyHostToDevice, stream_),
                    "upload step inputs");
  return absl::OkStatus();
}

}  // namespace argen::cuda
