#include "engine/model/weight_source.h"

#include <functional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/finite_values.h"

namespace argen::model {
namespace {

std::string ShapeString(const std::vector<int64_t>& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

class CheckpointSource final : public WeightSource {
 public:
  explicit CheckpointSource(std::shared_ptr<const checkpoint::Checkpoint> ckpt) : ckpt_(std::move(ckpt)) {}

  // Every tensor the devices load passes here: NaN/Inf in it is an error
  // naming the tensor (engine/model/finite_values.h).
  absl::StatusOr<std::vector<float>> Load(const TensorRef& t) const override {
    absl::StatusOr<const checkpoint::TensorInfo*> info = ckpt_->Find(t.name);
    if (!info.ok()) return info.status();
    if (t.repeat > 1) {  // a stored row repeated (Lumina's [1, head_dim] q/k-norm per head)
      absl::StatusOr<std::vector<float>> stored = ckpt_->LoadF32(t.name, t.shape);
      if (!stored.ok()) return stored.status();
      if (absl::Status s = CheckFiniteTensor(**info, *stored); !s.ok()) return s;
      const int64_t width = t.row_elements();
      std::vector<float> out;
      out.reserve(t.used_elements());
      for (int64_t r = 0; r * width < static_cast<int64_t>(stored->size()); ++r) {
        for (int32_t k = 0; k < t.repeat; ++k) {
          out.insert(out.end(), stored->begin() + r * width, stored->begin() + (r + 1) * width);
        }
      }
      return out;
    }
    if (t.rows < 0) {
      absl::StatusOr<std::vector<float>> all = ckpt_->LoadF32(t.name, t.shape);
      if (!all.ok()) return all;
      if (absl::Status s = CheckFiniteTensor(**info, *all); !s.ok()) return s;
      return all;
    }
    if ((*info)->shape != t.shape) {
      return absl::InvalidArgumentError(absl::StrCat((*info)->file, ": tensor '", t.name, "' has shape ",
                                                     ShapeString((*info)->shape), ", expected ", ShapeString(t.shape)));
    }
    std::vector<int32_t> ids(t.rows);
    for (int64_t i = 0; i < t.rows; ++i) ids[i] = static_cast<int32_t>(t.row_begin + i);
    std::vector<float> out(t.used_elements());
    if (absl::Status s = ckpt_->ReadRowsF32(t.name, ids.data(), t.rows, out.data()); !s.ok()) return s;
    if (absl::Status s = CheckFiniteTensor(**info, out); !s.ok()) return s;
    return out;
  }

  // Embedding rows read at request time are checked too (a table the
  // devices do not load whole).
  absl::Status ReadRows(const TensorRef& t, const int32_t* ids, int64_t n, float* out) const override {
    if (absl::Status s = ckpt_->ReadRowsF32(t.name, ids, n, out); !s.ok()) return s;
    absl::StatusOr<const checkpoint::TensorInfo*> info = ckpt_->Find(t.name);
    if (!info.ok()) return info.status();
    return CheckFiniteRows(**info, ids, n, {out, static_cast<size_t>(n * t.row_elements())});
  }

 private:
  std::shared_ptr<const checkpoint::Checkpoint> ckpt_;
};

uint64_t Mix(uint64_t z) {  // SplitMix64 finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class RandomSource final : public WeightSource {
 public:
  RandomSource(uint64_t seed, float scale) : seed_(seed), scale_(scale) {}

  absl::StatusOr<std::vector<float>> Load(const TensorRef& t) const override {
    std::vector<float> v(t.used_elements());
    if (t.fill == TensorFill::kOne || t.fill == TensorFill::kZero) {
      std::fill(v.begin(), v.end(), t.fill == TensorFill::kOne ? 1.0f : 0.0f);
      return v;
    }
    // Uniform with standard deviation scale: a counter hash, so a 1B-parameter
    // model fills in seconds and every tensor is independent of load order.
    const uint64_t key = Mix(seed_ * 0x9E3779B97F4A7C15ull ^ std::hash<std::string_view>{}(t.name));
    const float half_width = scale_ * 1.7320508f;  // sqrt(3) * sigma
    const int64_t first = t.row_begin * t.row_elements();
    for (size_t i = 0; i < v.size(); ++i) {
      const uint64_t z = Mix(key + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(first + i + 1));
      v[i] = half_width * (static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
    }
    return v;
  }

  absl::Status ReadRows(const TensorRef& t, const int32_t* ids, int64_t n, float* out) const override {
    // Deterministic pseudo-embeddings: a hash of (id, column), no table.
    const int64_t width = t.row_elements();
    for (int64_t r = 0; r < n; ++r) {
      uint64_t h = 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(ids[r]) + 1);
      for (int64_t c = 0; c < width; ++c) {
        h ^= h >> 33;
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 29;
        out[r * width + c] = scale_ * (static_cast<float>(h >> 40) / 8388608.0f - 1.0f);
      }
    }
    return absl::OkStatus();
  }

 private:
  uint64_t seed_;
  float scale_;
};

}  // namespace

std::shared_ptr<const WeightSource> CheckpointWeights(std::shared_ptr<const checkpoint::Checkpoint> checkpoint) {
  return std::make_shared<CheckpointSource>(std::move(checkpoint));
}

std::shared_ptr<const WeightSource> RandomWeights(uint64_t seed, float scale) {
  return std::make_shared<RandomSource>(seed, scale);
}

absl::Status ValidateTensors(const checkpoint::Checkpoint& checkpoint, const ModelSpec& spec) {
  for (const TensorRef* t : AllTensors(spec)) {
    absl::StatusOr<const checkpoint::TensorInfo*> info = checkpoint.Find(t->name);
    if (!info.ok()) return info.status();
    if ((*info)->shape != t->shape) {
      return absl::InvalidArgumentError(absl::StrCat((*info)->file, ": tensor '", t->name, "' has shape ",
                                                     ShapeString((*info)->shape), ", expected ",
                                                     ShapeString(t->shape)));
    }
  }
  return absl::OkStatus();
}

}  // namespace argen::model
