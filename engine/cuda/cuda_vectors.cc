// A vector model's step on the CUDA backend (engine/model/step_plan.h,
// "Vector inputs and outputs"): decode inputs as token vectors (given by the
// plan, or kept on the device from an earlier step's draw) through
// vector_in, and the output stage's conditions (vector_out of the
// final-normed rows) through the device flow head, whose tokens are kept in
// the pair's cond row ([l_dec][token_dim] after its other parts, row_layout.h)
// and handed out when StepOutputs::token_vectors asks. Nothing crosses the
// bus for kMadeVector inputs; the drawn tokens come back once per step.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/pool_sizing.h"
#include "kernels/elementwise.h"
#include "kernels/fault_kernels.h"
#include "kernels/flow_head_kernels.h"

namespace argen::cuda {
namespace {

// The host and device vector_io_ layout: sources, kept places, given vectors.
size_t PerPairBytes(int32_t max_batch_rows) { return AlignStaging(sizeof(int64_t) * (max_batch_rows / 2)); }

}  // namespace

absl::Status CudaBackend::CheckVectorInputs(const model::StepPlan& plan) const {
  for (size_t e = 0; e < plan.rows.size(); e += 2) {
    const Row* row = static_cast<const Row*>(planned_.rows[e]);
    for (int32_t q = plan.query_offsets[e]; q < plan.query_offsets[e + 1]; ++q) {
      const model::Query& query = plan.queries[q];
      if (query.kind != model::QueryKind::kDecode) continue;
      if (query.source == model::InputSource::kId) {
        return absl::UnimplementedError(absl::StrCat(
            "Step: rows[", e, "] = ", plan.rows[e], " query ", q - plan.query_offsets[e],
            ": the cuda backend feeds a vector model's decode queries as token vectors only (kTokenVector or "
            "kMadeVector), not input ids"));
      }
      if (query.source != model::InputSource::kMadeVector || row->Made(query.index)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "Step: rows[", e, "] = ", plan.rows[e], " query ", q - plan.query_offsets[e], ": token ", query.index,
          "'s vector has not been made (an earlier step's output point makes it; feed it as a token vector "
          "otherwise)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::StageVectorInputs(std::span<const DecodeQuery> queries) {
  const int64_t D = spec_.output.token_dim;
  const size_t per_pair = PerPairBytes(options_.max_batch_rows);
  auto* sources = host_vectors_.as<int64_t>();
  auto* kept = reinterpret_cast<int64_t*>(host_vectors_.as<char>() + per_pair);
  auto* given = reinterpret_cast<float*>(host_vectors_.as<char>() + 2 * per_pair);
  int64_t n_given = 0;
  for (size_t i = 0; i < queries.size(); ++i) {
    const DecodeQuery& q = queries[i];
    if (q.source == model::InputSource::kTokenVector) {
      std::memcpy(given + n_given * D, q.vector, sizeof(float) * D);
      sources[i] = -1 - n_given++;
    } else {  // kMadeVector (CheckVectorInputs): token t as the pair drew it
      sources[i] = q.cond->vectors_offset + int64_t{q.t} * D;
    }
    const int32_t token = q.t + 1;  // what the query's output point draws
    kept[i] = token < q.cond->policy.l_dec ? q.cond->vectors_offset + int64_t{token} * D : -1;
  }
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(vector_io_.as(), host_vectors_.as(), 2 * per_pair + sizeof(float) * n_given * D,
                                    cudaMemcpyHostToDevice, stream_),
                    "upload token vector inputs");
  return absl::OkStatus();
}

absl::Status CudaBackend::StageVectorOutputs(std::span<Row* const> conds, std::span<const int32_t> tokens) {
  const int64_t D = spec_.output.token_dim;
  const size_t per_pair = PerPairBytes(options_.max_batch_rows);
  auto* kept = reinterpret_cast<int64_t*>(host_vectors_.as<char>() + per_pair);
  for (size_t i = 0; i < conds.size(); ++i) {
    kept[i] = tokens[i] < conds[i]->policy.l_dec ? conds[i]->vectors_offset + int64_t{tokens[i]} * D : -1;
  }
  ARGEN_CUDA_RETURN(
      cudaMemcpyAsync(vector_kept_, kept, sizeof(int64_t) * conds.size(), cudaMemcpyHostToDevice, stream_),
      "upload kept token places");
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueVectorInput(int32_t R) {
  const int32_t P = R / 2, H = spec_.stack.hidden_size, D = spec_.output.token_dim;
  ARGEN_CUDA_RETURN(kernels::GatherTokenVectors(pool_.as<float>(), vectors_given_, vector_sources_, P, D,
                                                vector_in_bf16_.as<bf16>(), stream_),
                    "token vector inputs");
  ARGEN_STATUS_RETURN(
      gemm_.Linear(vector_in_bf16_.as<bf16>(), weights_.vector_in_w, P, D, H, pair_out_.as<float>(), 0.f, "vector_in"));
  if (weights_.vector_in_b != nullptr) {
    ARGEN_CUDA_RETURN(kernels::AddBias(pair_out_.as<float>(), weights_.vector_in_b, P, H, stream_), "vector_in bias");
  }
  ARGEN_CUDA_RETURN(kernels::GatherRowsF32(pair_out_.as<float>(), inputs_.gather, R, H, x_.as<float>(), stream_),
                    "pair -> rows");
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueVectorHead(const float* hidden, int32_t rows) {
  const int32_t H = spec_.stack.hidden_size, W = spec_.vector_head_in(), D = spec_.output.token_dim, pairs = rows / 2;
  ARGEN_STATUS_RETURN(EnqueueNorm(hidden, weights_.final_norm, rows, head_in_.as<bf16>(), "final norm"));
  ARGEN_STATUS_RETURN(
      gemm_.Linear(head_in_.as<bf16>(), weights_.vector_out_w, rows, H, W, conditions_.as<float>(), 0.f, "vector_out"));
  if (weights_.vector_out_b != nullptr) {
    ARGEN_CUDA_RETURN(kernels::AddBias(conditions_.as<float>(), weights_.vector_out_b, rows, W, stream_),
                      "vector_out bias");
  }
  if (inject_nan_logits_) {  // fault injection (testing only): all-ones bits are a NaN
    inject_nan_logits_ = false;
    ARGEN_CUDA_RETURN(cudaMemsetAsync(conditions_.as(), 0xff, sizeof(float) * rows * int64_t{W}, stream_),
                      "inject NaN conditions");
  }
  // NaN/Inf conditions or tokens: flagged for FinishStep (the head flags its tokens).
  ARGEN_CUDA_RETURN(cudaMemsetAsync(nonfinite_flag_.as(), 0, sizeof(int32_t), stream_), "clear non-finite flag");
  ARGEN_CUDA_RETURN(
      kernels::FlagNonFinite(conditions_.as<float>(), int64_t{rows} * W, nonfinite_flag_.as<int32_t>(), stream_),
      "non-finite conditions check");
  ARGEN_STATUS_RETURN(flow_head_->EnqueueSample(gemm_, stream_, conditions_.as<float>(), inputs_.sampling, pairs,
                                                drawn_.as<float>(), pool_.as<float>(), vector_kept_,
                                                nonfinite_flag_.as<int32_t>()));
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(host_nonfinite_flag_.as(), nonfinite_flag_.as(), sizeof(int32_t),
                                    cudaMemcpyDeviceToHost, stream_),
                    "download non-finite flag");
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(host_drawn_.as(), drawn_.as(), sizeof(float) * pairs * int64_t{D},
                                    cudaMemcpyDeviceToHost, stream_),
                    "download token vectors");
  timer_.Mark(Stage::kHead);
  return absl::OkStatus();
}

void CudaBackend::HandOutVectors(std::span<Row* const> conds, std::span<const int32_t> tokens,
                                 std::span<const int32_t> outputs, const model::StepOutputs& out) {
  const int64_t D = spec_.output.token_dim;
  for (size_t i = 0; i < conds.size(); ++i) {
    if (out.token_vectors != nullptr) {
      std::memcpy(out.token_vectors + int64_t{outputs[i]} * D, host_drawn_.as<float>() + i * D, sizeof(float) * D);
    }
    Row& cond = *conds[i];
    const int32_t t = tokens[i];
    if (t >= cond.policy.l_dec) continue;  // not kept: no query can feed it
    if (static_cast<int32_t>(cond.made.size()) <= t) cond.made.resize(t + 1, 0);
    cond.made[t] = 1;
  }
}

}  // namespace argen::cuda
