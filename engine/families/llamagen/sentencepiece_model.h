// A SentencePiece model (libsentencepiece, Debian) behind std types. The
// library lives in its own module, libargen_sentencepiece.so
// (sentencepiece_shim.cc), loaded on first use with RTLD_LOCAL |
// RTLD_DEEPBIND: Debian's libsentencepiece exports a bundled protobuf-lite
// 3.14 that cannot share a process's symbol namespace with libprotobuf 3.21
// (gRPC). The module is looked for at $ARGEN_SENTENCEPIECE_MODULE, next to
// the executable, in <exe dir>/../lib/argen/, then where the build made it.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace argen::llamagen {

class SentencePieceModel {
 public:
  // Null with *error set when the module cannot be loaded or `path` is not a
  // readable SentencePiece model.
  static std::unique_ptr<SentencePieceModel> Load(const std::string& path, std::string* error);
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  // The pieces' ids of `text` (no special tokens); false with *error set on failure. Thread-safe.
  bool Encode(const std::string& text, std::vector<int>* ids, std::string* error) const;
  int size() const;

 private:
  explicit SentencePieceModel(void* handle) : handle_(handle) {}
  void* handle_;
};

}  // namespace argen::llamagen
