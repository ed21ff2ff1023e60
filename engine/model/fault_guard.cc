#include "engine/model/fault_guard.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/device_errors.h"
#include "engine/model/batch_checks.h"

namespace argen::model {
namespace {

using engine::FatalDeviceError;
using engine::IsFatalDeviceError;

const char* KindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kStepError:
      return "step_error";
    case FaultKind::kDeviceLost:
      return "device_lost";
    case FaultKind::kNanLogits:
      return "nan_logits";
    case FaultKind::kNone:
      break;
  }
  return "none";
}

class FaultGuardBackend final : public Backend {
 public:
  FaultGuardBackend(std::unique_ptr<Backend> inner, FaultPlan plan, FaultHooks hooks)
      : inner_(std::move(inner)), plan_(std::move(plan)), hooks_(std::move(hooks)) {}

  const ModelSpec& spec() const override { return inner_->spec(); }
  std::string name() const override { return inner_->name(); }
  int64_t KvBytesPerTokenRow() const override { return inner_->KvBytesPerTokenRow(); }
  int64_t RowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override {
    return inner_->RowBytes(prompt_len, policy);
  }
  int64_t SharingRowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const override {
    return inner_->SharingRowBytes(prompt_len, policy);
  }
  int64_t PromptRowBytes(int32_t prompt_len, sparse::KvFormat format) const override {
    return inner_->PromptRowBytes(prompt_len, format);
  }
  int64_t PoolBytes() const override { return inner_->PoolBytes(); }
  int32_t MaxBatchRows() const override { return inner_->MaxBatchRows(); }
  std::string MemorySizing() const override { return inner_->MemorySizing(); }
  KvPool Pool() const override { return inner_->Pool(); }
  void SetRowTable(const RowTable* rows) override { inner_->SetRowTable(rows); }
  std::unique_ptr<RowState> NewRow() const override { return inner_->NewRow(); }
  absl::Status RowPlaced(RowState& row, const RowState* prompt_source) override {
    return inner_->RowPlaced(row, prompt_source);
  }
  void RowFreed(RowState& row) override { inner_->RowFreed(row); }

  absl::Status Forward(const StepPlan& plan, const StepOutputs& out) override {
    if (absl::Status s = BeforeCall(); !s.ok()) return Classify(std::move(s));
    return Classify(inner_->Forward(plan, out));
  }
  RowState* FindLiveRow(RowId id) override { return inner_->FindLiveRow(id); }
  BatchLimits Limits() const override { return inner_->Limits(); }

 private:
  absl::Status BeforeCall() {
    ++calls_;
    const FaultKind kind = plan_.At(calls_);
    if (kind == FaultKind::kNone) return absl::OkStatus();
    std::cerr << "argen: fault injection (" << kFaultInjectionEnv << "): " << KindName(kind) << " at call " << calls_
              << std::endl;
    if (hooks_.inject) return hooks_.inject(kind);
    const std::string what = absl::StrCat("fault injection: ", KindName(kind), " at backend call ", calls_);
    if (kind == FaultKind::kDeviceLost) return FatalDeviceError(what);
    return absl::InternalError(what);
  }

  // A failure after which the device does not work any more is fatal.
  absl::Status Classify(absl::Status status) {
    if (!hooks_.device_usable) return status;
    return FatalIfDeviceUnusable(std::move(status), hooks_.device_usable);
  }

  std::unique_ptr<Backend> inner_;
  const FaultPlan plan_;
  const FaultHooks hooks_;
  int64_t calls_ = 0;
};

}  // namespace

FaultKind FaultPlan::At(int64_t call) const {
  for (const Fault& f : faults) {
    if (f.call == call) return f.kind;
  }
  return FaultKind::kNone;
}

absl::StatusOr<FaultPlan> ParseFaultPlan(const std::string& text) {
  FaultPlan plan;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('@', 1));
    FaultPlan::Fault f;
    const absl::string_view kind = absl::StripAsciiWhitespace(kv.first);
    if (kind == "step_error")
      f.kind = FaultKind::kStepError;
    else if (kind == "device_lost")
      f.kind = FaultKind::kDeviceLost;
    else if (kind == "nan_logits")
      f.kind = FaultKind::kNanLogits;
    if (f.kind == FaultKind::kNone || !absl::SimpleAtoi(absl::StripAsciiWhitespace(kv.second), &f.call) || f.call < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kFaultInjectionEnv, ": \"", item,
                       "\" is not <kind>@<call> (kinds step_error, device_lost, nan_logits; call >= 1)"));
    }
    plan.faults.push_back(f);
  }
  return plan;
}

absl::StatusOr<FaultPlan> FaultPlanFromEnv() {
  const char* value = std::getenv(kFaultInjectionEnv);
  return ParseFaultPlan(value == nullptr ? "" : value);
}

absl::Status FatalIfDeviceUnusable(absl::Status status, const std::function<bool()>& device_usable) {
  if (status.ok() || IsFatalDeviceError(status) || device_usable()) return status;
  return FatalDeviceError(absl::StrCat(status.message(), " (the device is unusable after this error)"));
}

std::unique_ptr<Backend> WithFaultGuard(std::unique_ptr<Backend> inner, FaultPlan plan, FaultHooks hooks) {
  if (plan.empty()) return inner;
  return std::make_unique<FaultGuardBackend>(std::move(inner), std::move(plan), std::move(hooks));
}

}  // namespace argen::model
