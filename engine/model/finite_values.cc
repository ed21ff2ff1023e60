#include "engine/model/finite_values.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace argen::model {
namespace {

bool NonFinite(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return (bits & 0x7f800000u) == 0x7f800000u;  // exponent all ones: Inf or NaN
}

class FiniteCheckpoint final : public checkpoint::Checkpoint {
 public:
  explicit FiniteCheckpoint(std::shared_ptr<const checkpoint::Checkpoint> inner) : inner_(std::move(inner)) {}

  const std::string& dir() const override { return inner_->dir(); }
  bool Has(std::string_view name) const override { return inner_->Has(name); }
  absl::StatusOr<const checkpoint::TensorInfo*> Find(std::string_view name) const override {
    return inner_->Find(name);
  }
  absl::StatusOr<std::vector<float>> LoadF32(std::string_view name, const std::vector<int64_t>& shape) const override {
    absl::StatusOr<std::vector<float>> values = inner_->LoadF32(name, shape);
    if (!values.ok() || FirstNonFinite(*values) < 0) return values;
    absl::StatusOr<const checkpoint::TensorInfo*> info = inner_->Find(name);
    if (!info.ok()) return info.status();
    return CheckFiniteTensor(**info, *values);
  }
  absl::Status ReadRowsF32(std::string_view name, const int32_t* rows, int64_t n_rows, float* out) const override {
    if (absl::Status s = inner_->ReadRowsF32(name, rows, n_rows, out); !s.ok()) return s;
    absl::StatusOr<const checkpoint::TensorInfo*> info = inner_->Find(name);
    if (!info.ok()) return info.status();
    const int64_t width = (*info)->shape.size() == 2 ? (*info)->shape[1] : 0;
    return CheckFiniteRows(**info, rows, n_rows, {out, static_cast<size_t>(n_rows * width)});
  }

 private:
  std::shared_ptr<const checkpoint::Checkpoint> inner_;
};

}  // namespace

int64_t FirstNonFinite(std::span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (NonFinite(values[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

absl::Status CheckFiniteTensor(const checkpoint::TensorInfo& tensor, std::span<const float> values) {
  const int64_t first = FirstNonFinite(values);
  if (first < 0) return absl::OkStatus();
  int64_t count = 0;
  for (float v : values) count += NonFinite(v) ? 1 : 0;
  return absl::InvalidArgumentError(absl::StrCat(tensor.file, ": tensor '", tensor.name, "': ", count, " of ",
                                                 values.size(), " values are NaN or Inf (first at index ", first,
                                                 "): the checkpoint is corrupt"));
}

absl::Status CheckFiniteRows(const checkpoint::TensorInfo& tensor, const int32_t* rows, int64_t n_rows,
                             std::span<const float> values) {
  const int64_t bad = FirstNonFinite(values);
  if (bad < 0 || n_rows <= 0) return absl::OkStatus();
  const int64_t width = static_cast<int64_t>(values.size()) / n_rows;
  return absl::DataLossError(absl::StrCat(tensor.file, ": tensor '", tensor.name, "': row ",
                                          rows[width > 0 ? bad / width : 0],
                                          " holds NaN or Inf: the checkpoint is corrupt"));
}

std::shared_ptr<const checkpoint::Checkpoint> FiniteWeightsView(std::shared_ptr<const checkpoint::Checkpoint> inner) {
  return std::make_shared<FiniteCheckpoint>(std::move(inner));
}

}  // namespace argen::model
