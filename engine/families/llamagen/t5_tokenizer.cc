#include "engine/families/llamagen/t5_tokenizer.h"

#include "absl/strings/str_cat.h"

namespace argen::llamagen {

T5Tokenizer::~T5Tokenizer() = default;

absl::StatusOr<std::unique_ptr<T5Tokenizer>> T5Tokenizer::Open(const std::string& spiece_path, int32_t eos_id,
                                                               int32_t max_length) {
  if (max_length < 1) return absl::InvalidArgumentError(absl::StrCat("T5 tokenizer: max_length ", max_length, " < 1"));
  std::unique_ptr<T5Tokenizer> t(new T5Tokenizer());
  std::string error;
  t->sp_ = SentencePieceModel::Load(spiece_path, &error);
  if (t->sp_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(spiece_path, ": not a SentencePiece model (", error, ")"));
  }
  t->eos_id_ = eos_id;
  t->max_length_ = max_length;
  return t;
}

int32_t T5Tokenizer::vocab_size() const { return sp_->size(); }

absl::StatusOr<std::vector<int32_t>> T5Tokenizer::Encode(const std::string& text) const {
  std::vector<int> pieces;
  std::string error;
  if (!sp_->Encode(text, &pieces, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("prompt: the T5 tokenizer failed (", error, ")"));
  }
  // Truncation keeps room for the eos that add_special_tokens appends.
  if (static_cast<int32_t>(pieces.size()) > max_length_ - 1) pieces.resize(max_length_ - 1);
  std::vector<int32_t> ids(pieces.begin(), pieces.end());
  ids.push_back(eos_id_);
  return ids;
}

}  // namespace argen::llamagen
