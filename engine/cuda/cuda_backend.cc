#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/gemm.h"
#include "engine/cuda/pool_sizing.h"
#include "engine/sparse/policy_params.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/fault_kernels.h"

namespace argen::cuda {
namespace {

constexpr int32_t kMaxDecodePositions = 16384;  // rotary table covers prompt + this many tokens

// The rotary table row of a query: 1-D, its position (prompt p, or
// prompt_len + t); 2-D (LlamaGen), row 0 for every prompt query (position-
// free) and 1 + t for decode index t (the table's layout, Init).
int32_t RopePosition(const model::StackConfig& d, bool prompt, int32_t index, int32_t prompt_len) {
  if (d.rope == model::RopeKind::kGrid2d) return prompt ? 0 : 1 + index;
  return prompt ? index : prompt_len + index;
}

// The token flag and the launch's kv_formats bit of a row's KV format.
int32_t KvFormatFlag(const sparse::ResolvedPolicy& p) {
  return p.kv_format == sparse::KvFormat::kFp8E4m3 ? kernels::kTokenKvFp8 : 0;
}
int32_t KvFormatsBit(const sparse::ResolvedPolicy& p) {
  return p.kv_format == sparse::KvFormat::kFp8E4m3 ? kernels::kKvFormatsFp8 : kernels::kKvFormatsBf16;
}

kernels::PairSampling ToDevice(const model::SamplingSpec& s, int32_t step) {
  kernels::PairSampling p;
  p.temperature = s.temperature;
  p.top_k = s.top_k;
  p.top_p = s.top_p;
  p.cfg_weight = s.cfg_weight;
  p.seed = s.seed;
  p.image_index = s.image_index;
  p.step = step;
  return p;
}

}  // namespace

CudaBackend::CudaBackend(const model::ModelSpec& spec, DeviceWeights weights,
                         std::shared_ptr<const model::WeightSource> source, const model::BackendOptions& options)
    : spec_(spec),
      limits_{options.max_batch_rows, spec.text_vocab(), spec.input_rows()},
      weights_(std::move(weights)),
      source_(std::move(source)),
      options_(options),
      sizer_(spec.stack) {
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
                                                                 const model::BackendOptions& options) {
  const model::StackConfig& dims = spec.stack;
  if (!kernels::AttentionShapeSupported(dims.num_heads, dims.num_kv_heads, dims.head_dim)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda backend: head_dim ", dims.head_dim, " with ", dims.num_heads, " heads / ", dims.num_kv_heads,
                     " kv heads is not supported (head_dim 16, 32, 64 or 128; heads/kv_heads 1, 2, 4 or 8)"));
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
  char* dev = step_in_.as<char>();
  inputs_.meta = reinterpret_cast<kernels::TokenMeta*>(dev + layout.meta);
  inputs_.plans = reinterpret_cast<RowPlan*>(dev + layout.plans);
  inputs_.ids = reinterpret_cast<int32_t*>(dev + layout.ids);
  inputs_.gather = reinterpret_cast<int32_t*>(dev + layout.gather);
  inputs_.sampling = reinterpret_cast<kernels::PairSampling*>(dev + layout.sampling);
  inputs_.observe = reinterpret_cast<int32_t*>(dev + layout.observe);
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
  const RowLayout layout = row.prompt_row             ? CudaPromptRowLayout(d, row.prompt_len, policy.kv_format)
                           : prompt_source != nullptr ? CudaRowLayout(d, 0, policy)
                                                      : CudaRowLayout(d, row.prompt_len, policy);
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

absl::Status CudaBackend::PrefillStep(const model::PrefillBatch& b, const model::StepOutputs& out) {
  const model::StackConfig& d = spec_.stack;
  const int64_t n_rows = static_cast<int64_t>(b.rows.size()), n_pairs = n_rows / 2;
  std::vector<model::RowState*> states;
  ARGEN_STATUS_RETURN(model::CheckPrefillBatch(b, out, limits_, lookup_, &states));
  // Only the rows that hold their prompt compute (model::PlanPrefill).
  model::PrefillPlan& plan = prefill_plan_;
  ARGEN_STATUS_RETURN(model::PlanPrefill(
      b, states,
      [this](model::RowId id) -> const model::RowState* { return table_ == nullptr ? nullptr : table_->FindAny(id); },
      &plan));
  std::vector<Row*> rows(states.size());  // the rows, then the prompt rows
  for (size_t r = 0; r < states.size(); ++r) rows[r] = static_cast<Row*>(states[r]);
  const int64_t n_computed = static_cast<int64_t>(plan.computed.size());
  const StagingLayout layout(max_tokens_, options_.max_batch_rows);
  char* host = host_in_.as<char>();
  auto* meta = reinterpret_cast<kernels::TokenMeta*>(host + layout.meta);
  auto* gather = reinterpret_cast<int32_t*>(host + layout.gather);
  const int32_t H = d.hidden_size;
  const std::vector<int32_t>& offsets = plan.offsets;
  const int64_t n = static_cast<int64_t>(plan.tokens.size());
  // last_hidden_ row c: the last prompt position of computed row c.
  int64_t row = 0;
  for (int64_t c0 = 0; c0 < n; c0 += max_tokens_) {
    const int64_t c1 = std::min<int64_t>(n, c0 + max_tokens_);
    const int32_t count = static_cast<int32_t>(c1 - c0);
    ARGEN_STATUS_RETURN(
        source_->ReadRows(spec_.text_embed, plan.tokens.data() + c0, count, host_x_pinned_.as<float>()));
    int32_t max_keys = 1, n_last = 0, kv_formats = 0;
    int64_t first_last_row = -1;
    while (offsets[row + 1] <= c0) ++row;
    int64_t c = row;
    for (int64_t i = c0; i < c1; ++i) {
      while (offsets[c + 1] <= i) ++c;
      const Row& rw = *rows[plan.computed[c]];
      const int32_t local = static_cast<int32_t>(i - offsets[c]);
      kernels::TokenMeta m;
      m.kv_offset = rw.kv_offset;
      m.capacity = rw.capacity;
      m.rope_pos = RopePosition(spec_.stack, /*prompt=*/true, local, rw.prompt_len);
      m.kv_index = local;
      m.prefix_len = local + 1;
      m.decode_base = rw.prompt_len;
      m.flags = KvFormatFlag(rw.policy);
      kv_formats |= KvFormatsBit(rw.policy);
      meta[i - c0] = m;
      max_keys = std::max(max_keys, local + 1);
      if (i == offsets[c + 1] - 1) {  // the row's last prompt token
        if (first_last_row < 0) first_last_row = c;
        gather[n_last++] = static_cast<int32_t>(i - c0);
      }
    }
    ARGEN_CUDA_RETURN(cudaMemcpyAsync(x_.as(), host_x_pinned_.as(), sizeof(float) * count * int64_t{H},
                                      cudaMemcpyHostToDevice, stream_),
                      "upload prompt embeddings");
    ARGEN_STATUS_RETURN(Upload(layout.sampling));
    ARGEN_STATUS_RETURN(RunLayers(count, max_keys, false, 0, 0, kv_formats));
    if (n_last > 0) {
      ARGEN_CUDA_RETURN(kernels::GatherRowsF32(x_.as<float>(), inputs_.gather, n_last, H,
                                               last_hidden_.as<float>() + first_last_row * H, stream_),
                        "last prompt positions");
    }
    // The staging area is refilled by the next chunk.
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream_), "prefill chunk");
  }
  // Prompt rows keep their last position for the sharers prefilled after
  // this call; cached ones give theirs as sources n_computed + i.
  const size_t hidden_bytes = sizeof(float) * H;
  for (int64_t c = 0; c < n_computed; ++c) {
    const Row& rw = *rows[plan.computed[c]];
    if (!rw.prompt_row) continue;
    ARGEN_CUDA_RETURN(cudaMemcpyAsync(pool_.as<float>() + rw.hidden_offset, last_hidden_.as<float>() + c * H,
                                      hidden_bytes, cudaMemcpyDeviceToDevice, stream_),
                      "store a prompt row's last position");
  }
  for (size_t i = 0; i < plan.cached.size(); ++i) {
    const Row& rw = *static_cast<const Row*>(plan.cached[i]);
    ARGEN_CUDA_RETURN(
        cudaMemcpyAsync(last_hidden_.as<float>() + (n_computed + static_cast<int64_t>(i)) * H,
                        pool_.as<float>() + rw.hidden_offset, hidden_bytes, cudaMemcpyDeviceToDevice, stream_),
        "a prompt row's stored last position");
  }
  if (n_rows == 0) {  // prompt rows alone: nothing to sample
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream_), "prefill of prompt rows");
    model::MarkPrefilled(b, states);
    return absl::OkStatus();
  }
  const float* head_hidden = last_hidden_.as<float>();
  if (!plan.identity) {
    // Every row's hidden state from its source's computed row (x_ is free now).
    std::copy(plan.logits_row.begin(), plan.logits_row.end(), gather);
    ARGEN_CUDA_RETURN(
        cudaMemcpyAsync(inputs_.gather, gather, sizeof(int32_t) * n_rows, cudaMemcpyHostToDevice, stream_),
        "upload prompt sources");
    ARGEN_CUDA_RETURN(kernels::GatherRowsF32(last_hidden_.as<float>(), inputs_.gather, static_cast<int32_t>(n_rows), H,
                                             x_.as<float>(), stream_),
                      "shared prompt positions");
    head_hidden = x_.as<float>();
  }
  auto* sampling = reinterpret_cast<kernels::PairSampling*>(host + layout.sampling);
  for (int64_t i = 0; i < n_pairs; ++i) sampling[i] = ToDevice(b.sampling[i], 0);
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(inputs_.sampling, sampling, sizeof(kernels::PairSampling) * n_pairs,
                                    cudaMemcpyHostToDevice, stream_),
                    "upload sampling");
  const bool timing = timer_.enabled();
  timer_.Enable(false, stream_);
  absl::Status s = EnqueueHead(head_hidden, static_cast<int32_t>(n_rows));
  if (s.ok()) s = FinishStep(static_cast<int32_t>(n_rows), out);
  timer_.Enable(timing, stream_);
  ARGEN_STATUS_RETURN(s);
  model::MarkPrefilled(b, states);
  return absl::OkStatus();
}

absl::Status CudaBackend::DecodeStep(const model::DecodeBatch& b, const model::StepOutputs& out) {
  const int64_t n_rows = static_cast<int64_t>(b.rows.size()), n_pairs = n_rows / 2;
  std::vector<model::RowState*>& rows = decode_rows_;
  ARGEN_STATUS_RETURN(model::CheckDecodeBatch(b, out, limits_, lookup_, &rows));
  const StagingLayout layout(max_tokens_, options_.max_batch_rows);
  char* host = host_in_.as<char>();
  auto* meta = reinterpret_cast<kernels::TokenMeta*>(host + layout.meta);
  auto* plans = reinterpret_cast<RowPlan*>(host + layout.plans);
  auto* ids = reinterpret_cast<int32_t*>(host + layout.ids);
  auto* gather = reinterpret_cast<int32_t*>(host + layout.gather);
  auto* sampling = reinterpret_cast<kernels::PairSampling*>(host + layout.sampling);
  auto* observe = reinterpret_cast<int32_t*>(host + layout.observe);
  bool any_sparse = false;
  int32_t observe_flags = 0, kv_formats = 0;
  int32_t key_bound = 1;
  for (int64_t r = 0; r < n_rows; ++r) {
    const int32_t t = b.steps[r / 2];
    const Row& rw = *static_cast<const Row*>(rows[r]);
    kernels::TokenMeta m;
    m.kv_offset = rw.kv_offset;
    m.capacity = rw.capacity;
    m.shared_prompt = rw.shared_prompt;
    m.prompt_kv_offset = rw.prompt_kv_offset;
    m.prompt_capacity = rw.prompt_capacity;
    m.rope_pos = RopePosition(spec_.stack, /*prompt=*/false, t, rw.prompt_len);
    m.prefix_len = rw.prompt_len;
    m.decode_base = rw.prompt_len - rw.shared_prompt;  // own-region position of slot 0
    m.flags = KvFormatFlag(rw.policy);
    kv_formats |= KvFormatsBit(rw.policy) | (rw.shared_prompt > 0 ? kernels::kKvSharedPrompts : 0);
    if (rw.sparse) {
      m.kv_index = -1;
      m.decode_count = 0;
      m.flags |= kernels::kTokenSparse;
      key_bound = std::max(key_bound, rw.prompt_len + rw.layout.max_attended);
    } else {
      m.kv_index = m.decode_base + t;  // dense: slot t, attends slots [0, t]
      m.decode_count = t + 1;
      key_bound = std::max(key_bound, rw.prompt_len + rw.policy.l_dec);
    }
    meta[r] = m;
    RowPlan p;
    p.policy = rw.policy;
    p.layout = rw.layout;
    p.ints_offset = rw.ints_offset;
    p.floats_offset = rw.floats_offset;
    p.step = t;
    p.sparse = rw.sparse ? 1 : 0;
    plans[r] = p;
    gather[r] = static_cast<int32_t>(r / 2);
    any_sparse = any_sparse || rw.sparse;
    // Observe outputs of the attention kernel: the diagonal rows' argmin over the
    // non-sink entries (the selection), the score policies' probabilities.
    const bool diagonal = sparse::SelectsByArgmin(rw.policy.kind);  // diagonal, diagonal_sink4, diagonal_grid
    const bool scores = sparse::ObservesScores(rw.policy.kind);     // h2o, tova, alisa, ssd
    if (diagonal && fused_argmin_) {
      observe[r] = sparse::DiagonalSelectionFirst(rw.policy);
      observe_flags |= kObserveArgmin;
    } else if (scores || diagonal) {
      observe[r] = kernels::kObserveProbs;
      observe_flags |= kObserveScores;
    } else {
      observe[r] = kernels::kObserveNothing;
    }
  }
  for (int64_t i = 0; i < n_pairs; ++i) {
    ids[i] = b.image_tokens[i];
    sampling[i] = ToDevice(b.sampling[i], b.steps[i] + 1);
  }
  ARGEN_STATUS_RETURN(Upload(layout.total));
  const int32_t R = static_cast<int32_t>(n_rows);
  if (!use_graphs_ || timer_.enabled() || out.row_logits != nullptr || inject_nan_logits_) {
    timer_.BeginStep();
    ARGEN_STATUS_RETURN(
        EnqueueDecode(R, any_sparse, key_bound, observe_flags, kv_formats));  // same split as the graphs
  } else {
    // The key bound (not this step's count) sizes the attention split, so one
    // graph serves every step of a batch; chunks past a row's keys are empty.
    const GraphKey key{R, any_sparse, key_bound, plan_stride_, observe_flags, kv_formats};
    auto it = graphs_.find(key);
    if (it == graphs_.end() && seen_.insert(key).second) {
      ARGEN_STATUS_RETURN(
          EnqueueDecode(R, any_sparse, key_bound, observe_flags, kv_formats));  // first use: eager (lazy inits)
    } else {
      if (it == graphs_.end()) {
        if (graphs_.size() >= 32) ClearGraphs();
        ARGEN_CUDA_RETURN(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "begin capture");
        const absl::Status enq = EnqueueDecode(R, any_sparse, key_bound, observe_flags, kv_formats);
        cudaGraph_t graph = nullptr;
        const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
        ARGEN_STATUS_RETURN(enq);
        ARGEN_CUDA_RETURN(end, "end capture");
        cudaGraphExec_t exec = nullptr;
        const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        ARGEN_CUDA_RETURN(inst, "instantiate decode graph");
        it = graphs_.emplace(key, exec).first;
        seen_.insert(key);
      }
      ARGEN_CUDA_RETURN(cudaGraphLaunch(it->second, stream_), "launch decode graph");
    }
  }
  ARGEN_STATUS_RETURN(FinishStep(R, out));
  timer_.EndStep();
  model::AdvanceStep(rows);
  return absl::OkStatus();
}

}  // namespace argen::cuda
