// A restricted unpickler for torch.save's data.pkl. It builds an inert graph
// of values and never calls anything: a GLOBAL is only a name, and a call
// (REDUCE, NEWOBJ, ...) of a name it does not interpret yields an opaque
// object that remembers that name. The names it interprets are the ones a
// tensor state dict needs:
//   collections.OrderedDict                      -> a dict
//   torch._utils._rebuild_tensor_v2              -> a tensor (storage, offset, size, stride)
//   torch._utils._rebuild_parameter[_with_state] -> the tensor it wraps
//   torch._tensor._rebuild_from_type_v2          -> the above, for torch.Tensor / nn.Parameter
//   torch.{BFloat16,Half,Float,Double,Long,Int,Short,Char,Byte,Bool}Storage -> storage types
//                                                   of persistent ids ('storage', type, key, location, numel)
//   _codecs.encode (bytes under protocol 2), builtins.set / frozenset
// Names that only serve code execution (os.*, posix.*, subprocess.*,
// builtins.eval, functools.*, ...) are refused where they appear. Any other
// name is recorded in Graph::foreign_globals; whether it is acceptable is the
// caller's decision (a Lightning entry nobody reads may use one).
//
// Opcodes: protocols 0-5 except the text-only forms (INT, LONG, FLOAT,
// STRING, UNICODE, PERSID, GET, PUT), extensions (EXT*) and out-of-band
// buffers (protocol 5 NEXT_BUFFER / READONLY_BUFFER). torch.save writes protocol 2.
// Work and memory are linear in the stream length; nothing is sized from a
// count read off the stream before the bytes behind it are checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::checkpoint::pickle {

// Element types of torch storage classes.
enum class StorageType : uint8_t { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };
size_t StorageElementSize(StorageType type);
std::string StorageTypeName(StorageType type);   // "torch.FloatStorage", ...
const char* StorageTypeDType(StorageType type);  // safetensors spelling: "F32", "I64", "BOOL", ...

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kBytes,
  kTuple,
  kList,
  kDict,
  kSet,
  kGlobal,   // a name (module.qualname), never resolved
  kObject,   // the result of calling or instantiating a name the reader does not interpret
  kStorage,  // a persistent-id storage
  kTensor,
  kOther,  // an integer wider than 64 bits, a buffer: kept only to say what it was
};
const char* KindName(Kind kind);

struct Value {
  Kind kind = Kind::kNone;
  uint32_t ref = 0;  // index into Graph::strings / containers / globals / storages / tensors, by kind
  int64_t i = 0;     // kBool, kInt
  double f = 0;      // kFloat
};

struct Global {
  std::string module, name;
  size_t offset = 0;  // of the opcode that named it, in the stream
  std::string Qualified() const { return module + "." + name; }
};

struct Storage {
  StorageType type = StorageType::kF32;
  std::string key;    // the record is <archive>/data/<key>
  int64_t numel = 0;  // elements of `type`
};

struct Tensor {
  uint32_t storage = 0;
  int64_t offset = 0;  // in elements
  std::vector<int64_t> size, stride;
};

struct Graph {
  std::vector<Value> values;
  std::vector<std::string> strings;               // kString (UTF-8), kBytes
  std::vector<std::vector<uint32_t>> containers;  // items (tuple, list, set); key, value, ... (dict)
  std::vector<Global> globals;
  std::vector<Storage> storages;
  std::vector<Tensor> tensors;
  std::vector<uint32_t> foreign_globals;  // indices into globals: names not interpreted (each once)
  uint32_t root = 0;                      // value left by STOP

  const Value& at(uint32_t v) const { return values[v]; }
  const std::vector<uint32_t>& items(uint32_t v) const { return containers[values[v].ref]; }
  const std::string& str(uint32_t v) const { return strings[values[v].ref]; }
  // "a list", "a dict", "an object of foo.Bar", ... for messages.
  std::string Describe(uint32_t v) const;
};

struct Limits {
  size_t max_values = size_t{1} << 25;  // objects built; a tensor state dict needs ~10 per tensor
};

// `what` names the stream in errors ("<file>: data.pkl"); errors add the opcode offset.
absl::StatusOr<Graph> Unpickle(std::string_view bytes, const std::string& what, const Limits& limits = {});

// Whether `module.name` only serves code execution (refused wherever it appears).
bool IsHostileGlobal(std::string_view module, std::string_view name);

}  // namespace argen::checkpoint::pickle
