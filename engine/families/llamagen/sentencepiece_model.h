// libsentencepiece behind std types only: Debian's sentencepiece_processor.h
// declares its own absl::string_view, which clashes with Abseil's in any
// translation unit that includes both, so only sentencepiece_model.cc
// includes it (and no Abseil header).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace argen::llamagen {

class SentencePieceModel {
 public:
  // Null with *error set when `path` is not a readable SentencePiece model.
  static std::unique_ptr<SentencePieceModel> Load(const std::string& path, std::string* error);
  ~SentencePieceModel();

  // The pieces' ids of `text` (no special tokens); false with *error set on failure.
  bool Encode(const std::string& text, std::vector<int>* ids, std::string* error) const;
  int size() const;

 private:
  struct Impl;
  explicit SentencePieceModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace argen::llamagen
