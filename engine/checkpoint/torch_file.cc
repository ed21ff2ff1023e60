#include "engine/checkpoint/torch_file.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/checkpoint/dtype.h"

namespace argen::checkpoint {
namespace {

using pickle::Graph;
using pickle::Kind;
using pickle::StorageType;

constexpr uint64_t kMaxPickleBytes = 256ull << 20;  // data.pkl of a 7B state dict is ~100 KB

// The pickled magic number that opens a legacy (pre-1.6) torch.save file: LONG1 0x1950a86a20f9469cfc6c.
constexpr unsigned char kLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                          0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

std::string Join(const std::vector<int64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ", "), "]"); }

// Printable ASCII of a name from the file, for messages.
std::string Quote(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    }
  }
  return s.size() > 200 ? out + "..." : out;
}

std::optional<DType> DirectDType(StorageType t) {
  switch (t) {
    case StorageType::kF32:
      return DType::kF32;
    case StorageType::kF16:
      return DType::kF16;
    case StorageType::kBF16:
      return DType::kBF16;
    default:
      return std::nullopt;
  }
}

// Foreign names reachable from value v (an entry that is skipped), for the note on what was skipped.
std::vector<std::string> ForeignNamesUnder(const Graph& g, uint32_t v) {
  std::vector<std::string> names;
  absl::flat_hash_set<uint32_t> seen;
  absl::flat_hash_set<std::string> seen_names;
  std::vector<uint32_t> todo = {v};
  while (!todo.empty() && names.size() < 8) {
    const uint32_t x = todo.back();
    todo.pop_back();
    if (!seen.insert(x).second) continue;
    const pickle::Value& val = g.values[x];
    if (val.kind == Kind::kObject || val.kind == Kind::kGlobal) {
      std::string q = g.globals[val.ref].Qualified();
      // The entry's own class is already in its description.
      if (x != v && seen_names.insert(q).second) names.push_back(absl::StrCat("'", Quote(q), "'"));
    } else if (val.kind == Kind::kTuple || val.kind == Kind::kList || val.kind == Kind::kDict ||
               val.kind == Kind::kSet) {
      const std::vector<uint32_t>& items = g.containers[val.ref];
      for (size_t i = items.size(); i-- > 0;) todo.push_back(items[i]);  // visited in item order
    }
  }
  return names;
}

template <typename T>
T Load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// One element of a non-direct dtype as f32; integers must be exact in f32.
bool ElementToF32(StorageType t, const unsigned char* p, float* out) {
  double v = 0;
  switch (t) {
    case StorageType::kF64:
      *out = static_cast<float>(Load<double>(p));
      return true;
    case StorageType::kI64:
      v = static_cast<double>(Load<int64_t>(p));
      break;
    case StorageType::kI32:
      v = Load<int32_t>(p);
      break;
    case StorageType::kI16:
      v = Load<int16_t>(p);
      break;
    case StorageType::kI8:
      v = Load<int8_t>(p);
      break;
    case StorageType::kU8:
      v = *p;
      break;
    case StorageType::kBool:
      v = *p != 0;
      break;
    default:
      return false;
  }
  *out = static_cast<float>(v);
  return std::fabs(v) <= 16777216.0;  // 2^24
}

}  // namespace

int64_t TorchTensor::numel() const {
  for (int64_t d : shape) {
    if (d == 0) return 0;  // before multiplying: the other dimensions may be huge
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // checked at open not to overflow
  return n;
}

bool LooksLikeZip(const unsigned char* data, size_t size) {
  return size >= 4 && data[0] == 'P' && data[1] == 'K' &&
         ((data[2] == 3 && data[3] == 4) || (data[2] == 5 && data[3] == 6));
}

absl::StatusOr<std::unique_ptr<TorchFile>> TorchFile::Open(const std::string& path) {
  auto mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<TorchFile> f(new TorchFile());
  f->path_ = path;
  f->data_ = (*mapped)->data();
  f->size_ = (*mapped)->size();
  f->mapped_ = std::move(*mapped);
  if (absl::Status s = f->Init(); !s.ok()) return s;
  return f;
}

absl::StatusOr<std::unique_ptr<TorchFile>> TorchFile::FromBytes(const std::string& path, std::string bytes) {
  std::unique_ptr<TorchFile> f(new TorchFile());
  f->path_ = path;
  f->owned_ = std::move(bytes);
  f->data_ = reinterpret_cast<const unsigned char*>(f->owned_.data());
  f->size_ = f->owned_.size();
  if (absl::Status s = f->Init(); !s.ok()) return s;
  return f;
}

absl::Status TorchFile::CheckArchive(const unsigned char* data, size_t size) {
  if (LooksLikeZip(data, size)) return absl::OkStatus();
  const std::string convert =
      "; load it with PyTorch and re-save it with torch.save (zip format, the default since PyTorch 1.6)";
  if (size >= sizeof(kLegacyMagic) && std::memcmp(data, kLegacyMagic, sizeof(kLegacyMagic)) == 0) {
    return absl::UnimplementedError(
        absl::StrCat(path_,
                     ": legacy torch.save format (PyTorch < 1.6 or _use_new_zipfile_serialization=False), "
                     "which is not read",
                     convert));
  }
  if (size >= 262 && std::memcmp(data + 257, "ustar", 5) == 0) {
    return absl::UnimplementedError(absl::StrCat(path_, ": legacy tar torch.save format, which is not read", convert));
  }
  if (size >= 1 && data[0] == 0x80) {
    return absl::UnimplementedError(absl::StrCat(path_, ": a bare pickle, not a torch.save zip archive", convert));
  }
  return absl::InvalidArgumentError(absl::StrCat(path_, ": not a PyTorch checkpoint (no zip signature)"));
}

absl::Status TorchFile::Init() {
  if (absl::Status s = CheckArchive(data_, size_); !s.ok()) return s;
  auto zip = ZipArchive::Parse(path_, data_, size_);
  if (!zip.ok()) return zip.status();
  zip_ = *std::move(zip);

  // TorchScript archives (torch.jit.save) have a data.pkl too, next to constants.pkl and code/.
  for (const ZipEntry& e : zip_.entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/constants.pkl") == 0) {
      return absl::UnimplementedError(
          absl::StrCat(path_, ": a TorchScript archive (torch.jit.save), not a torch.save state dict"));
    }
  }
  // torch.save names records <archive>/...: the archive name is the file's stem (or "archive").
  const ZipEntry* pkl = nullptr;
  for (const ZipEntry& e : zip_.entries()) {
    const size_t slash = e.name.find('/');
    if (slash == std::string::npos || e.name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
    if (pkl != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": two data.pkl records ('", Quote(pkl->name), "', '", Quote(e.name), "')"));
    }
    pkl = &e;
  }
  if (pkl == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": a zip archive without <archive>/data.pkl: not a torch.save file"));
  }
  const std::string root = pkl->name.substr(0, pkl->name.size() - std::string_view("data.pkl").size());

  if (const ZipEntry* order = zip_.Find(root + "byteorder")) {
    auto bytes = zip_.Bytes(*order);
    if (!bytes.ok()) return bytes.status();
    if (absl::Status s = zip_.VerifyCrc(*order); !s.ok()) return s;
    if (*bytes != "little") {
      return absl::UnimplementedError(
          absl::StrCat(path_, ": byteorder is '", Quote(*bytes), "'; only little-endian checkpoints are read"));
    }
  }
  if (pkl->size > kMaxPickleBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": data.pkl is ", pkl->size, " bytes (at most ",
                                                   kMaxPickleBytes, " are read): not a tensor state dict"));
  }
  auto pkl_bytes = zip_.Bytes(*pkl);
  if (!pkl_bytes.ok()) return pkl_bytes.status();
  if (absl::Status s = zip_.VerifyCrc(*pkl); !s.ok()) return s;
  auto graph = pickle::Unpickle(*pkl_bytes, absl::StrCat(path_, ": ", pkl->name));
  if (!graph.ok()) return graph.status();
  if (absl::Status s = ReadStateDict(*graph, root); !s.ok()) return s;

  infos_.resize(tensors_.size());
  lazy_.resize(tensors_.size());
  crc_once_ = std::make_unique<std::once_flag[]>(storages_.size());
  crc_status_.resize(storages_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TorchTensor& t = tensors_[i];
    TensorInfo& info = infos_[i];
    info.name = t.name;
    info.shape = t.shape;
    info.file = path_;
    const std::optional<DType> direct = DirectDType(t.type);
    info.dtype = direct.value_or(DType::kF32);
    info.nbytes = static_cast<size_t>(t.numel()) * DTypeSize(info.dtype);
  }
  return absl::OkStatus();
}

absl::Status TorchFile::ReadStateDict(const Graph& g, const std::string& root) {
  const pickle::Value& top = g.at(g.root);
  if (top.kind != Kind::kDict) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": holds ", g.Describe(g.root), ", not a state dict (a dict of tensors)"));
  }
  // A wrapper dict (Lightning's "state_dict", "model" as LlamaGen and DDP save, DeepSpeed's "module") holds the
  // state dict next to other entries.
  uint32_t state = g.root;
  const std::vector<uint32_t>& items = g.items(g.root);
  for (const char* key : {"state_dict", "model", "module"}) {
    for (size_t k = 0; k + 1 < items.size(); k += 2) {
      if (g.at(items[k]).kind == Kind::kString && g.str(items[k]) == key && g.at(items[k + 1]).kind == Kind::kDict) {
        state = items[k + 1];
        state_dict_key_ = key;
        break;
      }
    }
    if (state != g.root) break;
  }
  if (state == g.root) {
    // A bare state dict: every name must be one the reader interprets.
    if (!g.foreign_globals.empty()) {
      const pickle::Global& first = g.globals[g.foreign_globals.front()];
      std::vector<std::string> names;
      for (uint32_t i : g.foreign_globals) names.push_back(Quote(g.globals[i].Qualified()));
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": data.pkl offset ", first.offset, " names global '", Quote(first.Qualified()),
                       "', which a tensor state dict does not use; refused (names used: ", absl::StrJoin(names, ", "),
                       "; read: collections.OrderedDict, torch._utils._rebuild_tensor_v2, torch.*Storage, ...)"));
    }
  } else {
    for (size_t k = 0; k + 1 < items.size(); k += 2) {
      if (items[k + 1] == state) continue;
      std::string key = g.at(items[k]).kind == Kind::kString ? Quote(g.str(items[k])) : g.Describe(items[k]);
      std::string note = absl::StrCat(key, ": ", g.Describe(items[k + 1]));
      std::vector<std::string> foreign = ForeignNamesUnder(g, items[k + 1]);
      if (!foreign.empty()) absl::StrAppend(&note, " (uses ", absl::StrJoin(foreign, ", "), ")");
      skipped_.push_back(std::move(note));
    }
  }

  const std::vector<uint32_t>& entries = g.items(state);
  absl::flat_hash_set<std::string> names;
  for (size_t k = 0; k + 1 < entries.size(); k += 2) {
    const uint32_t key = entries[k], value = entries[k + 1];
    if (g.at(key).kind != Kind::kString) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": state dict key ", k / 2, " is ", g.Describe(key), ", not a tensor name"));
    }
    const std::string& name = g.str(key);
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor '", Quote(name), "' appears twice"));
    }
    const Kind kind = g.at(value).kind;
    if (kind == Kind::kTensor) {
      if (absl::Status s = AddTensor(g, root, name, value); !s.ok()) return s;
    } else if (kind == Kind::kNone || kind == Kind::kBool || kind == Kind::kInt || kind == Kind::kFloat ||
               kind == Kind::kString || kind == Kind::kBytes) {
      skipped_.push_back(absl::StrCat(Quote(name), ": ", g.Describe(value)));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": state dict entry '", Quote(name), "' is ", g.Describe(value), ", not a tensor"));
    }
  }
  return absl::OkStatus();
}

absl::Status TorchFile::AddTensor(const Graph& g, const std::string& root, const std::string& name, uint32_t value) {
  const pickle::Tensor& pt = g.tensors[g.at(value).ref];
  const pickle::Storage& ps = g.storages[pt.storage];
  const std::string where = absl::StrCat(path_, ": tensor '", Quote(name), "'");
  TorchTensor t;
  t.name = name;
  t.type = ps.type;
  t.shape = pt.size;
  t.stride = pt.stride;
  t.offset = pt.offset;

  // Storage records: one per key, shared by the tensors that view it.
  const std::string record = root + "data/" + ps.key;
  const auto known = storage_index_.find(ps.key);
  size_t index = known == storage_index_.end() ? storages_.size() : known->second;
  const size_t elem = pickle::StorageElementSize(ps.type);
  if (index == storages_.size()) {
    const ZipEntry* entry = zip_.Find(record);
    if (entry == nullptr)
      return absl::DataLossError(absl::StrCat(where, ": its storage record '", Quote(record), "' is missing"));
    if (entry->method != 0) {
      return absl::UnimplementedError(absl::StrCat(where, ": storage record '", Quote(record),
                                                   "' is compressed; torch.save stores records uncompressed"));
    }
    if (static_cast<uint64_t>(ps.numel) > entry->size / elem || entry->size != static_cast<uint64_t>(ps.numel) * elem) {
      return absl::DataLossError(absl::StrCat(where, ": storage record '", Quote(record), "' holds ", entry->size,
                                              " bytes, but the storage declares ", ps.numel, " x ",
                                              pickle::StorageTypeDType(ps.type), " (", elem, " bytes each)"));
    }
    storages_.push_back(StorageRecord{entry, ps.type, ps.key});
    storage_index_.emplace(ps.key, index);
  }
  t.storage = index;

  // Extent: every element the view addresses lies inside the storage.
  constexpr unsigned __int128 kMaxNumel = static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max());
  unsigned __int128 numel = 1, last = static_cast<unsigned __int128>(t.offset);
  for (size_t d = 0; d < t.shape.size(); ++d) {
    numel *= static_cast<uint64_t>(t.shape[d]);
    if (numel > kMaxNumel)
      return absl::InvalidArgumentError(absl::StrCat(where, ": shape ", Join(t.shape), " is absurd"));
  }
  const auto storage_numel = static_cast<unsigned __int128>(ps.numel);
  if (numel > 0) {
    // Each term is below 2^126 and the sum stops growing once past the storage: no overflow.
    for (size_t d = 0; d < t.shape.size() && last < storage_numel; ++d) {
      last += static_cast<unsigned __int128>(t.shape[d] - 1) * static_cast<uint64_t>(t.stride[d]);
    }
  }
  if ((numel > 0 && last >= storage_numel) || (numel == 0 && last > storage_numel)) {
    return absl::OutOfRangeError(absl::StrCat(where, ": shape ", Join(t.shape), " with stride ", Join(t.stride),
                                              " at storage offset ", t.offset, " runs past its storage of ", ps.numel,
                                              " elements"));
  }
  int64_t expected = 1;  // row-major stride; the product of trailing sizes stays below numel
  for (size_t d = t.shape.size(); numel > 0 && d-- > 0;) {
    if (t.shape[d] != 1 && t.stride[d] != expected) t.contiguous = false;
    expected *= t.shape[d];
  }
  if (!t.contiguous && numel > storage_numel) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": a view that repeats elements (shape ", Join(t.shape),
                                                   ", stride ", Join(t.stride), ") is not read"));
  }
  tensors_.push_back(std::move(t));
  return absl::OkStatus();
}

std::string_view TorchFile::StorageBytes(size_t storage) const {
  const ZipEntry& e = *storages_[storage].entry;
  return std::string_view(reinterpret_cast<const char*>(data_ + e.data_offset), e.size);
}

absl::Status TorchFile::VerifyStorage(size_t storage) const {
  std::call_once(crc_once_[storage], [&] { crc_status_[storage] = zip_.VerifyCrc(*storages_[storage].entry); });
  return crc_status_[storage];
}

absl::StatusOr<std::string_view> TorchFile::RawBytes(size_t i, std::string* scratch) const {
  const TorchTensor& t = tensors_[i];
  if (absl::Status s = VerifyStorage(t.storage); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (holding tensor '", Quote(t.name), "')"));
  }
  const std::string_view storage = StorageBytes(t.storage);
  const size_t elem = pickle::StorageElementSize(t.type);
  const auto n = static_cast<size_t>(t.numel());
  if (t.contiguous) return storage.substr(static_cast<size_t>(t.offset) * elem, n * elem);
  // Row-major walk over the view (bounds were checked at open).
  scratch->resize(n * elem);
  const size_t dims = t.shape.size();
  std::vector<int64_t> index(dims, 0);
  int64_t at = t.offset;
  for (size_t k = 0; k < n; ++k) {
    std::memcpy(scratch->data() + k * elem, storage.data() + static_cast<size_t>(at) * elem, elem);
    for (size_t d = dims; d-- > 0;) {
      if (++index[d] < t.shape[d]) {
        at += t.stride[d];
        break;
      }
      at -= (t.shape[d] - 1) * t.stride[d];
      index[d] = 0;
    }
  }
  return std::string_view(*scratch);
}

absl::StatusOr<const TensorInfo*> TorchFile::Tensor(size_t i) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lazy_[i].ready) return &infos_[i];
  }
  const TorchTensor& t = tensors_[i];
  std::string scratch;
  auto raw = RawBytes(i, &scratch);
  if (!raw.ok()) return raw.status();
  std::lock_guard<std::mutex> lock(mu_);
  Lazy& lazy = lazy_[i];
  TensorInfo& info = infos_[i];
  if (lazy.ready) return &info;
  if (DirectDType(t.type).has_value()) {
    if (!t.contiguous) {
      lazy.buffer = std::move(scratch);
      raw = std::string_view(lazy.buffer);
    }
    info.data = raw->data();
  } else {
    const size_t elem = pickle::StorageElementSize(t.type);
    const auto n = static_cast<size_t>(t.numel());
    lazy.buffer.resize(n * sizeof(float));
    auto* out = reinterpret_cast<float*>(lazy.buffer.data());
    const auto* in = reinterpret_cast<const unsigned char*>(raw->data());
    for (size_t k = 0; k < n; ++k) {
      if (!ElementToF32(t.type, in + k * elem, &out[k])) {
        lazy.buffer.clear();
        return absl::OutOfRangeError(absl::StrCat(path_, ": tensor '", Quote(t.name), "' (",
                                                  pickle::StorageTypeDType(t.type), ") holds element ", k,
                                                  " that F32 cannot represent exactly"));
      }
    }
    info.data = lazy.buffer.data();
  }
  lazy.ready = true;
  return &info;
}

}  // namespace argen::checkpoint
