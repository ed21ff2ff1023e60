// No Abseil header here: see sentencepiece_model.h.
#include "engine/families/llamagen/sentencepiece_model.h"

#include <sentencepiece_processor.h>

namespace argen::llamagen {

struct SentencePieceModel::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceModel::SentencePieceModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SentencePieceModel::~SentencePieceModel() = default;

std::unique_ptr<SentencePieceModel> SentencePieceModel::Load(const std::string& path, std::string* error) {
  auto impl = std::make_unique<Impl>();
  if (const sentencepiece::util::Status s = impl->processor.Load(path); !s.ok()) {
    *error = s.ToString();
    return nullptr;
  }
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(std::move(impl)));
}

bool SentencePieceModel::Encode(const std::string& text, std::vector<int>* ids, std::string* error) const {
  if (const sentencepiece::util::Status s = impl_->processor.Encode(text, ids); !s.ok()) {
    *error = s.ToString();
    return false;
  }
  return true;
}

int SentencePieceModel::size() const { return impl_->processor.GetPieceSize(); }

}  // namespace argen::llamagen
