// The one translation unit that calls libsentencepiece, built as its own
// loadable module (libargen_sentencepiece.so) behind a C interface. Debian's
// libsentencepiece carries its own copy of protobuf-lite 3.14 and exports it:
// in a process that also links libprotobuf (every gRPC binary) the two
// interpose each other and abort at start-up. sentencepiece_model.cc loads
// this module with RTLD_LOCAL | RTLD_DEEPBIND, so the library binds to its own
// copy and the process's protobuf never sees it.
#include <sentencepiece_processor.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

void SetError(const sentencepiece::util::Status& s, char* error, int error_size) {
  if (error_size <= 0) return;
  const std::string text = s.ToString();
  std::strncpy(error, text.c_str(), static_cast<size_t>(error_size) - 1);
  error[error_size - 1] = '\0';
}

}  // namespace

extern "C" {

// A loaded model, or null with `error` set.
__attribute__((visibility("default"))) void* argen_spm_load(const char* path, char* error, int error_size) {
  auto* processor = new sentencepiece::SentencePieceProcessor();
  if (const sentencepiece::util::Status s = processor->Load(path); !s.ok()) {
    SetError(s, error, error_size);
    delete processor;
    return nullptr;
  }
  return processor;
}

__attribute__((visibility("default"))) void argen_spm_free(void* model) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(model);
}

__attribute__((visibility("default"))) int argen_spm_size(void* model) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(model)->GetPieceSize();
}

// The ids of `text` (`size` bytes) into `ids` (at most `capacity`); returns
// how many there are (more than `capacity`: call again with room), or -1 with
// `error` set.
__attribute__((visibility("default"))) int argen_spm_encode(void* model, const char* text, int size, int* ids,
                                                            int capacity, char* error, int error_size) {
  std::vector<int> out;
  const sentencepiece::util::Status s = static_cast<sentencepiece::SentencePieceProcessor*>(model)->Encode(
      std::string_view(text, static_cast<size_t>(size)), &out);
  if (!s.ok()) {
    SetError(s, error, error_size);
    return -1;
  }
  for (size_t i = 0; i < out.size() && static_cast<int>(i) < capacity; ++i) ids[i] = out[i];
  return static_cast<int>(out.size());
}

}  // extern "C"
