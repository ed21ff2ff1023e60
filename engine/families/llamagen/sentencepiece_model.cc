#include "engine/families/llamagen/sentencepiece_model.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace argen::llamagen {
namespace {

struct Module {
  void* (*load)(const char* path, char* error, int error_size) = nullptr;
  void (*free)(void* model) = nullptr;
  int (*size)(void* model) = nullptr;
  int (*encode)(void* model, const char* text, int size, int* ids, int capacity, char* error, int error_size) = nullptr;
  std::string error;  // why it is not loaded
};

std::vector<std::string> Candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("ARGEN_SENTENCEPIECE_MODULE"); env != nullptr && *env != '\0') out.push_back(env);
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path() / ARGEN_SENTENCEPIECE_MODULE_NAME).string());
    out.push_back((exe.parent_path().parent_path() / "lib" / "argen" / ARGEN_SENTENCEPIECE_MODULE_NAME).string());
  }
  out.push_back(ARGEN_SENTENCEPIECE_MODULE_BUILT);
  return out;
}

const Module& LoadModule() {
  static const Module* module = [] {
    auto* m = new Module();
    // DEEPBIND keeps the library's protobuf-lite to itself; sanitizers refuse
    // it (their interceptors must see every call), so those builds bind
    // normally: fine in a process without libprotobuf, not in a gRPC server.
#if defined(__SANITIZE_ADDRESS__)
    const int flags = RTLD_NOW | RTLD_LOCAL;
#else
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif
    void* handle = nullptr;
    std::string tried;
    for (const std::string& path : Candidates()) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(path, ec)) {
        tried += (tried.empty() ? "" : ", ") + path;
        continue;
      }
      handle = dlopen(path.c_str(), flags);
      if (handle == nullptr) {
        m->error = path + ": " + dlerror();
        return m;
      }
      break;
    }
    if (handle == nullptr) {
      m->error = std::string("the SentencePiece module ") + ARGEN_SENTENCEPIECE_MODULE_NAME +
                 " is not installed (looked in " + tried + "; set ARGEN_SENTENCEPIECE_MODULE)";
      return m;
    }
    m->load = reinterpret_cast<decltype(m->load)>(dlsym(handle, "argen_spm_load"));
    m->free = reinterpret_cast<decltype(m->free)>(dlsym(handle, "argen_spm_free"));
    m->size = reinterpret_cast<decltype(m->size)>(dlsym(handle, "argen_spm_size"));
    m->encode = reinterpret_cast<decltype(m->encode)>(dlsym(handle, "argen_spm_encode"));
    if (m->load == nullptr || m->free == nullptr || m->size == nullptr || m->encode == nullptr) {
      m->load = nullptr;
      m->error = std::string(ARGEN_SENTENCEPIECE_MODULE_NAME) + " lacks the argen_spm_* functions";
    }
    return m;
  }();
  return *module;
}

constexpr int kErrorSize = 512;

}  // namespace

SentencePieceModel::~SentencePieceModel() { LoadModule().free(handle_); }

std::unique_ptr<SentencePieceModel> SentencePieceModel::Load(const std::string& path, std::string* error) {
  const Module& m = LoadModule();
  if (m.load == nullptr) {
    *error = m.error;
    return nullptr;
  }
  char message[kErrorSize] = {};
  void* handle = m.load(path.c_str(), message, kErrorSize);
  if (handle == nullptr) {
    *error = message;
    return nullptr;
  }
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(handle));
}

bool SentencePieceModel::Encode(const std::string& text, std::vector<int>* ids, std::string* error) const {
  const Module& m = LoadModule();
  char message[kErrorSize] = {};
  ids->resize(text.size() + 8);  // a piece covers at least one byte, mostly
  for (;;) {
    const int n = m.encode(handle_, text.data(), static_cast<int>(text.size()), ids->data(),
                           static_cast<int>(ids->size()), message, kErrorSize);
    if (n < 0) {
      *error = message;
      return false;
    }
    if (n <= static_cast<int>(ids->size())) {
      ids->resize(n);
      return true;
    }
    ids->resize(n);
  }
}

int SentencePieceModel::size() const { return LoadModule().size(handle_); }

}  // namespace argen::llamagen
