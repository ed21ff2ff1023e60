// The unpickler is a stack machine over an arena of values (Graph). MARK
// frames are positions in the one stack, as Python's metastack. Every opcode
// pushes at most one new value, so the arena, the containers and the memo are
// bounded by the stream length (and Limits::max_values).
#include "engine/checkpoint/pickle.h"

#include <cstring>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace argen::checkpoint::pickle {
namespace {

constexpr size_t kMaxGlobalLine = 1024;  // a module or qualified name
constexpr size_t kMaxTensorDims = 64;
constexpr size_t kMaxStorageKey = 256;

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Names interpreted or tolerated without a call.
enum class Known : uint8_t {
  kForeign,
  kOrderedDict,
  kRebuildTensorV2,
  kRebuildParameter,
  kRebuildFromTypeV2,
  kCodecsEncode,
  kSet,
  kFrozenset,
  kStorageClass,  // torch.*Storage: only meaningful inside a persistent id
  kTensorClass,   // torch.Tensor, torch.nn.parameter.Parameter: only as _rebuild_from_type_v2's type
};

struct StorageClass {
  std::string_view name;
  StorageType type;
};
constexpr StorageClass kStorageClasses[] = {
    {"DoubleStorage", StorageType::kF64},    {"FloatStorage", StorageType::kF32}, {"HalfStorage", StorageType::kF16},
    {"BFloat16Storage", StorageType::kBF16}, {"LongStorage", StorageType::kI64},  {"IntStorage", StorageType::kI32},
    {"ShortStorage", StorageType::kI16},     {"CharStorage", StorageType::kI8},   {"ByteStorage", StorageType::kU8},
    {"BoolStorage", StorageType::kBool},
};

Known Classify(std::string_view module, std::string_view name, StorageType* storage) {
  if (module == "collections" && name == "OrderedDict") return Known::kOrderedDict;
  if (module == "torch._utils") {
    if (name == "_rebuild_tensor_v2") return Known::kRebuildTensorV2;
    if (name == "_rebuild_parameter" || name == "_rebuild_parameter_with_state") return Known::kRebuildParameter;
  }
  if (module == "torch._tensor" && name == "_rebuild_from_type_v2") return Known::kRebuildFromTypeV2;
  if (module == "_codecs" && name == "encode") return Known::kCodecsEncode;
  if (module == "builtins" || module == "__builtin__") {
    if (name == "set") return Known::kSet;
    if (name == "frozenset") return Known::kFrozenset;
  }
  if ((module == "torch" && name == "Tensor") || (module == "torch.nn.parameter" && name == "Parameter")) {
    return Known::kTensorClass;
  }
  if (module == "torch") {
    for (const StorageClass& c : kStorageClasses) {
      if (name == c.name) {
        *storage = c.type;
        return Known::kStorageClass;
      }
    }
  }
  return Known::kForeign;
}

bool StartsWithModule(std::string_view module, std::string_view prefix) {
  return module == prefix ||
         (module.size() > prefix.size() && module.substr(0, prefix.size()) == prefix && module[prefix.size()] == '.');
}

// Printable ASCII, at most 200 characters, for names and keys quoted in messages.
std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\'') {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    }
  }
  if (s.size() > 200) out += "...";
  return out;
}

class Unpickler {
 public:
  Unpickler(std::string_view bytes, const std::string& what, const Limits& limits)
      : in_(bytes), what_(what), limits_(limits) {}

  absl::StatusOr<Graph> Run() {
    while (true) {
      if (pos_ >= in_.size()) return Error("the stream ends without STOP (truncated)");
      op_offset_ = pos_;
      op_ = static_cast<unsigned char>(in_[pos_++]);
      auto done = Step();
      if (!done.ok()) return done.status();
      if (*done) return std::move(g_);
    }
  }

 private:
  // --- errors ---------------------------------------------------------------
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": offset ", op_offset_, " (opcode 0x", absl::Hex(op_, absl::kZeroPad2), "): ", what));
  }

  // --- input ----------------------------------------------------------------
  bool Has(uint64_t n) const { return n <= in_.size() - pos_; }

  absl::StatusOr<uint64_t> ReadUint(int bytes) {
    if (!Has(bytes)) return Error("the stream ends inside an operand (truncated)");
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in_[pos_ + i]);
    pos_ += bytes;
    return v;
  }

  absl::StatusOr<std::string_view> ReadBytes(uint64_t n) {
    if (!Has(n)) {
      return Error(
          absl::StrCat("a length of ", n, " runs past the end of the stream (", in_.size() - pos_, " bytes left)"));
    }
    std::string_view out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  absl::StatusOr<std::string_view> ReadLine() {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos || end - pos_ > kMaxGlobalLine) {
      return Error("a GLOBAL name is unterminated or longer than 1024 bytes");
    }
    std::string_view line = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return line;
  }

  // --- values and the stack ---------------------------------------------------
  absl::StatusOr<uint32_t> New(Kind kind, uint32_t ref = 0, int64_t i = 0, double f = 0) {
    if (g_.values.size() >= limits_.max_values) {
      return Error(absl::StrCat("the stream builds more than ", limits_.max_values, " objects"));
    }
    g_.values.push_back(Value{kind, ref, i, f});
    return static_cast<uint32_t>(g_.values.size() - 1);
  }

  absl::StatusOr<uint32_t> NewString(Kind kind, std::string_view s) {
    g_.strings.emplace_back(s);
    return New(kind, static_cast<uint32_t>(g_.strings.size() - 1));
  }

  absl::StatusOr<uint32_t> NewContainer(Kind kind, std::vector<uint32_t> items) {
    g_.containers.push_back(std::move(items));
    return New(kind, static_cast<uint32_t>(g_.containers.size() - 1));
  }

  size_t FrameBase() const { return marks_.empty() ? 0 : marks_.back(); }

  absl::Status Push(absl::StatusOr<uint32_t> v) {
    if (!v.ok()) return v.status();
    stack_.push_back(*v);
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> Pop() {
    if (stack_.size() <= FrameBase()) return Error("the stack is empty");
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }

  absl::StatusOr<uint32_t> Top() const {
    if (stack_.size() <= FrameBase()) return Error("the stack is empty");
    return stack_.back();
  }

  // Items above the innermost MARK; removes them and the mark.
  absl::StatusOr<std::vector<uint32_t>> PopMark() {
    if (marks_.empty()) return Error("no MARK to pop to");
    const size_t base = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(base), stack_.end());
    stack_.resize(base);
    return items;
  }

  // The container an APPEND / SETITEM / ADDITEMS modifies, or nullptr for an
  // opaque object (its append / __setitem__ would have run code: the items are dropped).
  absl::StatusOr<std::vector<uint32_t>*> Target(Kind want) {
    auto target = Top();
    if (!target.ok()) return target.status();
    const Value& v = g_.values[*target];
    if (v.kind == Kind::kObject) return nullptr;
    if (v.kind != want) {
      return Error(absl::StrCat("adds items to ", g_.Describe(*target), ", expected a ", KindName(want)));
    }
    return &g_.containers[v.ref];
  }

  absl::Status AddTo(Kind want, const std::vector<uint32_t>& items) {
    if (want == Kind::kDict && items.size() % 2 != 0) return Error("SETITEMS with an odd number of items");
    auto target = Target(want);
    if (!target.ok()) return target.status();
    if (*target != nullptr) (*target)->insert((*target)->end(), items.begin(), items.end());
    return absl::OkStatus();
  }

  // --- names and calls --------------------------------------------------------
  absl::StatusOr<uint32_t> NewGlobal(std::string_view module, std::string_view name) {
    if (IsHostileGlobal(module, name)) {
      return Error(absl::StrCat("global '", Printable(module), ".", Printable(name),
                                "' is refused: it can only serve to run code, and this reader executes nothing "
                                "from a checkpoint (only tensor state dicts are read)"));
    }
    StorageType storage = StorageType::kF32;
    const Known known = Classify(module, name, &storage);
    g_.globals.push_back(Global{std::string(module), std::string(name), op_offset_});
    known_.push_back(known);
    storage_of_.push_back(storage);
    const auto index = static_cast<uint32_t>(g_.globals.size() - 1);
    if (known == Known::kForeign) {
      const std::string qualified = g_.globals.back().Qualified();
      if (foreign_seen_.insert(qualified).second) g_.foreign_globals.push_back(index);
    }
    return New(Kind::kGlobal, index);
  }

  absl::StatusOr<uint32_t> Opaque(uint32_t global) { return New(Kind::kObject, global); }

  const std::vector<uint32_t>* TupleItems(uint32_t v) const {
    const Value& x = g_.values[v];
    return x.kind == Kind::kTuple || x.kind == Kind::kList ? &g_.containers[x.ref] : nullptr;
  }

  absl::StatusOr<int64_t> IntArg(uint32_t v, const char* what) const {
    const Value& x = g_.values[v];
    if (x.kind != Kind::kInt || x.i < 0) {
      return Error(absl::StrCat("_rebuild_tensor_v2: ", what, " is ", g_.Describe(v), ", expected an int >= 0"));
    }
    return x.i;
  }

  absl::StatusOr<std::vector<int64_t>> IntsArg(uint32_t v, const char* what) const {
    const std::vector<uint32_t>* items = TupleItems(v);
    if (items == nullptr) {
      return Error(absl::StrCat("_rebuild_tensor_v2: ", what, " is ", g_.Describe(v), ", expected a tuple"));
    }
    if (items->size() > kMaxTensorDims) {
      return Error(absl::StrCat("_rebuild_tensor_v2: ", what, " has ", items->size(), " dimensions (at most ",
                                kMaxTensorDims, ")"));
    }
    std::vector<int64_t> out;
    for (uint32_t item : *items) {
      auto n = IntArg(item, what);
      if (!n.ok()) return n.status();
      out.push_back(*n);
    }
    return out;
  }

  // torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]).
  absl::StatusOr<uint32_t> RebuildTensor(uint32_t args) {
    const std::vector<uint32_t>* a = TupleItems(args);
    if (a == nullptr || (a->size() != 6 && a->size() != 7)) {
      return Error("_rebuild_tensor_v2 takes 6 or 7 arguments");
    }
    const Value& storage = g_.values[(*a)[0]];
    if (storage.kind != Kind::kStorage) {
      return Error(absl::StrCat("_rebuild_tensor_v2: storage is ", g_.Describe((*a)[0]), ", expected a storage"));
    }
    Tensor t;
    t.storage = storage.ref;
    auto offset = IntArg((*a)[1], "storage_offset");
    if (!offset.ok()) return offset.status();
    t.offset = *offset;
    auto size = IntsArg((*a)[2], "size");
    if (!size.ok()) return size.status();
    auto stride = IntsArg((*a)[3], "stride");
    if (!stride.ok()) return stride.status();
    if (size->size() != stride->size()) {
      return Error(
          absl::StrCat("_rebuild_tensor_v2: size has ", size->size(), " dimensions but stride ", stride->size()));
    }
    t.size = *std::move(size);
    t.stride = *std::move(stride);
    for (size_t k = 5; k < a->size(); ++k) {
      // backward_hooks (an OrderedDict) and the optional metadata dict: a state dict's are empty.
      const Value& d = g_.values[(*a)[k]];
      if (d.kind != Kind::kDict || !g_.containers[d.ref].empty()) {
        return Error(absl::StrCat("_rebuild_tensor_v2: ", k == 5 ? "backward_hooks" : "metadata", " is ",
                                  g_.Describe((*a)[k]), ", expected an empty dict"));
      }
    }
    g_.tensors.push_back(std::move(t));
    return New(Kind::kTensor, static_cast<uint32_t>(g_.tensors.size() - 1));
  }

  // `callable(*args)`, interpreted for the known names; anything else an inert object.
  absl::StatusOr<uint32_t> Call(uint32_t callable, uint32_t args, int depth = 0) {
    const Value& c = g_.values[callable];
    if (c.kind == Kind::kObject) return Opaque(c.ref);
    if (c.kind != Kind::kGlobal) return Error(absl::StrCat("calls ", g_.Describe(callable)));
    const std::vector<uint32_t>* a = TupleItems(args);
    if (a == nullptr) return Error(absl::StrCat("call arguments are ", g_.Describe(args), ", expected a tuple"));
    const std::string qualified = g_.globals[c.ref].Qualified();
    switch (known_[c.ref]) {
      case Known::kForeign:
        return Opaque(c.ref);
      case Known::kOrderedDict:
        if (!a->empty()) return Error("collections.OrderedDict is called with arguments");
        return NewContainer(Kind::kDict, {});
      case Known::kSet:
      case Known::kFrozenset: {
        if (a->empty()) return NewContainer(Kind::kSet, {});
        const std::vector<uint32_t>* items = a->size() == 1 ? TupleItems((*a)[0]) : nullptr;
        if (items == nullptr) return Error(absl::StrCat(qualified, " takes one list"));
        return NewContainer(Kind::kSet, *items);
      }
      case Known::kCodecsEncode: {
        // Protocol 2 pickles bytes as _codecs.encode(latin-1 text, 'latin1').
        if (a->size() != 2 || g_.values[(*a)[0]].kind != Kind::kString || g_.values[(*a)[1]].kind != Kind::kString ||
            (g_.str((*a)[1]) != "latin1" && g_.str((*a)[1]) != "latin-1")) {
          return Error("_codecs.encode is interpreted only as encode(text, 'latin1')");
        }
        auto bytes = Latin1(g_.str((*a)[0]));
        if (!bytes.ok()) return bytes.status();
        return NewString(Kind::kBytes, *bytes);
      }
      case Known::kRebuildTensorV2:
        return RebuildTensor(args);
      case Known::kRebuildParameter:
        if (a->size() < 3 || g_.values[(*a)[0]].kind != Kind::kTensor) {
          return Error(absl::StrCat(qualified, " takes a tensor, requires_grad and backward_hooks"));
        }
        return (*a)[0];
      case Known::kRebuildFromTypeV2: {
        // (func, type, args, state): a tensor with Python state; the state is dropped.
        if (a->size() != 4 || depth > 0) return Error("_rebuild_from_type_v2 takes (func, type, args, state)");
        const Value& type = g_.values[(*a)[1]];
        if (type.kind != Kind::kGlobal) return Error("_rebuild_from_type_v2: type is not a name");
        if (known_[type.ref] != Known::kTensorClass) return Opaque(type.ref);
        return Call((*a)[0], (*a)[2], depth + 1);
      }
      case Known::kStorageClass:
      case Known::kTensorClass:
        return Error(absl::StrCat(qualified, " is called directly (legacy storage pickling is not supported)"));
    }
    return Error("unreachable");
  }

  absl::StatusOr<std::string> Latin1(const std::string& utf8) const {
    std::string out;
    for (size_t i = 0; i < utf8.size(); ++i) {
      const auto c = static_cast<unsigned char>(utf8[i]);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
      } else if ((c == 0xc2 || c == 0xc3) && i + 1 < utf8.size()) {
        out.push_back(static_cast<char>(((c & 0x03) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3f)));
      } else {
        return Error("_codecs.encode: text is not latin-1");
      }
    }
    return out;
  }

  // ('storage', torch.XStorage, key, location, numel)
  absl::StatusOr<uint32_t> PersistentLoad(uint32_t pid) {
    const std::vector<uint32_t>* a = TupleItems(pid);
    const char* expected = "a persistent id must be ('storage', storage class, key, location, numel)";
    if (a == nullptr || a->size() != 5) return Error(expected);
    const Value& tag = g_.values[(*a)[0]];
    const Value& cls = g_.values[(*a)[1]];
    const Value& key = g_.values[(*a)[2]];
    const Value& location = g_.values[(*a)[3]];
    const Value& numel = g_.values[(*a)[4]];
    if (tag.kind != Kind::kString || g_.strings[tag.ref] != "storage" || cls.kind != Kind::kGlobal ||
        key.kind != Kind::kString || location.kind != Kind::kString || numel.kind != Kind::kInt) {
      return Error(expected);
    }
    if (known_[cls.ref] != Known::kStorageClass) {
      return Error(absl::StrCat("storage class '", Printable(g_.globals[cls.ref].Qualified()),
                                "' is not supported (supported: torch.{BFloat16,Half,Float,Double,Long,Int,Short,"
                                "Char,Byte,Bool}Storage)"));
    }
    const std::string& k = g_.strings[key.ref];
    if (k.empty() || k.size() > kMaxStorageKey || k.find('/') != std::string::npos ||
        k.find('\0') != std::string::npos) {
      return Error(absl::StrCat("storage key '", Printable(k), "' is not a record name"));
    }
    if (numel.i < 0) return Error(absl::StrCat("storage '", Printable(k), "' has ", numel.i, " elements"));
    const StorageType type = storage_of_[cls.ref];
    const auto it = storage_by_key_.find(Sv(k));
    if (it != storage_by_key_.end()) {
      const Storage& s = g_.storages[it->second];
      if (s.type != type || s.numel != numel.i) {
        return Error(absl::StrCat("storage '", Printable(k), "' is declared twice with different types or sizes"));
      }
      return New(Kind::kStorage, it->second);
    }
    g_.storages.push_back(Storage{type, k, numel.i});
    const auto index = static_cast<uint32_t>(g_.storages.size() - 1);
    storage_by_key_.emplace(k, index);
    return New(Kind::kStorage, index);
  }

  absl::StatusOr<uint32_t> NewInt(std::string_view le_bytes) {
    if (le_bytes.size() > 8) return NewString(Kind::kOther, "an integer wider than 64 bits");
    uint64_t u = 0;
    for (size_t i = le_bytes.size(); i-- > 0;) u = (u << 8) | static_cast<unsigned char>(le_bytes[i]);
    if (!le_bytes.empty() && le_bytes.size() < 8 && (static_cast<unsigned char>(le_bytes.back()) & 0x80)) {
      u |= ~uint64_t{0} << (8 * le_bytes.size());  // sign-extend
    }
    int64_t v;
    std::memcpy(&v, &u, 8);
    return New(Kind::kInt, 0, v);
  }

  absl::Status Memoize(uint64_t key) {
    auto top = Top();
    if (!top.ok()) return top.status();
    memo_[key] = *top;
    return absl::OkStatus();
  }

  absl::Status Recall(uint64_t key) {
    const auto it = memo_.find(key);
    if (it == memo_.end()) return Error(absl::StrCat("memo entry ", key, " was never stored"));
    stack_.push_back(it->second);
    return absl::OkStatus();
  }

  absl::Status PushString(Kind kind, int length_bytes) {
    auto n = ReadUint(length_bytes);
    if (!n.ok()) return n.status();
    auto s = ReadBytes(*n);
    if (!s.ok()) return s.status();
    return Push(NewString(kind, *s));
  }

  absl::Status PushTupleOfTop(size_t n) {
    if (stack_.size() < FrameBase() + n) return Error("too few items on the stack for a tuple");
    std::vector<uint32_t> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return Push(NewContainer(Kind::kTuple, std::move(items)));
  }

  // Returns true at STOP.
  absl::StatusOr<bool> Step() {
    switch (op_) {
      case 0x80: {  // PROTO
        auto v = ReadUint(1);
        if (!v.ok()) return v.status();
        if (*v > 5) return Error(absl::StrCat("pickle protocol ", *v, " is newer than 5"));
        return false;
      }
      case 0x95: {  // FRAME: a length hint only
        auto v = ReadUint(8);
        if (!v.ok()) return v.status();
        return false;
      }
      case '.': {  // STOP
        auto v = Pop();
        if (!v.ok()) return v.status();
        g_.root = *v;
        return true;
      }
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return false;
      case '0':  // POP: the top item, or the mark when the frame is empty (as Python does)
        if (stack_.size() > FrameBase()) {
          stack_.pop_back();
        } else if (!marks_.empty()) {
          marks_.pop_back();
        } else {
          return Error("POP on an empty stack");
        }
        return false;
      case '1': {  // POP_MARK
        auto items = PopMark();
        if (!items.ok()) return items.status();
        return false;
      }
      case '2': {  // DUP
        auto top = Top();
        if (!top.ok()) return top.status();
        stack_.push_back(*top);
        return false;
      }
      case 'N':
        return Wrap(Push(New(Kind::kNone)));
      case 0x88:
        return Wrap(Push(New(Kind::kBool, 0, 1)));
      case 0x89:
        return Wrap(Push(New(Kind::kBool, 0, 0)));
      case 'J': {  // BININT
        auto v = ReadUint(4);
        if (!v.ok()) return v.status();
        return Wrap(Push(New(Kind::kInt, 0, static_cast<int32_t>(static_cast<uint32_t>(*v)))));
      }
      case 'K':
      case 'M': {  // BININT1, BININT2
        auto v = ReadUint(op_ == 'K' ? 1 : 2);
        if (!v.ok()) return v.status();
        return Wrap(Push(New(Kind::kInt, 0, static_cast<int64_t>(*v))));
      }
      case 0x8a:
      case 0x8b: {  // LONG1, LONG4
        auto n = ReadUint(op_ == 0x8a ? 1 : 4);
        if (!n.ok()) return n.status();
        if (op_ == 0x8b && *n > 0x7fffffffu) return Error("LONG4 with a negative length");
        auto bytes = ReadBytes(*n);
        if (!bytes.ok()) return bytes.status();
        return Wrap(Push(NewInt(*bytes)));
      }
      case 'G': {  // BINFLOAT, big-endian
        auto bytes = ReadBytes(8);
        if (!bytes.ok()) return bytes.status();
        uint64_t u = 0;
        for (char ch : *bytes) u = (u << 8) | static_cast<unsigned char>(ch);
        double d;
        std::memcpy(&d, &u, 8);
        return Wrap(Push(New(Kind::kFloat, 0, 0, d)));
      }
      case 'T': {  // BINSTRING: signed 4-byte length
        auto n = ReadUint(4);
        if (!n.ok()) return n.status();
        if (*n > 0x7fffffffu) return Error("BINSTRING with a negative length");
        auto s = ReadBytes(*n);
        if (!s.ok()) return s.status();
        return Wrap(Push(NewString(Kind::kString, *s)));
      }
      case 'U':
        return Wrap(PushString(Kind::kString, 1));  // SHORT_BINSTRING
      case 'X':
        return Wrap(PushString(Kind::kString, 4));  // BINUNICODE
      case 0x8c:
        return Wrap(PushString(Kind::kString, 1));  // SHORT_BINUNICODE
      case 0x8d:
        return Wrap(PushString(Kind::kString, 8));  // BINUNICODE8
      case 'B':
        return Wrap(PushString(Kind::kBytes, 4));  // BINBYTES
      case 'C':
        return Wrap(PushString(Kind::kBytes, 1));  // SHORT_BINBYTES
      case 0x8e:
        return Wrap(PushString(Kind::kBytes, 8));  // BINBYTES8
      case 0x96:
        return Wrap(PushString(Kind::kBytes, 8));  // BYTEARRAY8
      case ')':
        return Wrap(Push(NewContainer(Kind::kTuple, {})));
      case ']':
        return Wrap(Push(NewContainer(Kind::kList, {})));
      case '}':
        return Wrap(Push(NewContainer(Kind::kDict, {})));
      case 0x8f:
        return Wrap(Push(NewContainer(Kind::kSet, {})));
      case 0x85:
        return Wrap(PushTupleOfTop(1));
      case 0x86:
        return Wrap(PushTupleOfTop(2));
      case 0x87:
        return Wrap(PushTupleOfTop(3));
      case 't':
      case 'l':
      case 'd':
      case 0x91: {  // TUPLE, LIST, DICT, FROZENSET: from the mark
        auto items = PopMark();
        if (!items.ok()) return items.status();
        if (op_ == 'd' && items->size() % 2 != 0) return Error("DICT with an odd number of items");
        const Kind kind = op_ == 't' ? Kind::kTuple : op_ == 'l' ? Kind::kList : op_ == 'd' ? Kind::kDict : Kind::kSet;
        return Wrap(Push(NewContainer(kind, *std::move(items))));
      }
      case 'a': {  // APPEND
        auto item = Pop();
        if (!item.ok()) return item.status();
        return Wrap(AddTo(Kind::kList, {*item}));
      }
      case 's': {  // SETITEM
        auto value = Pop();
        if (!value.ok()) return value.status();
        auto key = Pop();
        if (!key.ok()) return key.status();
        return Wrap(AddTo(Kind::kDict, {*key, *value}));
      }
      case 'e':
      case 'u':
      case 0x90: {  // APPENDS, SETITEMS, ADDITEMS
        auto items = PopMark();
        if (!items.ok()) return items.status();
        return Wrap(AddTo(op_ == 'e' ? Kind::kList : op_ == 'u' ? Kind::kDict : Kind::kSet, *items));
      }
      case 'c': {  // GLOBAL module\nname\n
        auto module = ReadLine();
        if (!module.ok()) return module.status();
        auto name = ReadLine();
        if (!name.ok()) return name.status();
        return Wrap(Push(NewGlobal(*module, *name)));
      }
      case 0x93: {  // STACK_GLOBAL
        auto name = Pop();
        if (!name.ok()) return name.status();
        auto module = Pop();
        if (!module.ok()) return module.status();
        if (g_.values[*name].kind != Kind::kString || g_.values[*module].kind != Kind::kString) {
          return Error("STACK_GLOBAL needs two strings");
        }
        const std::string m = g_.str(*module), n = g_.str(*name);
        if (m.size() > kMaxGlobalLine || n.size() > kMaxGlobalLine) return Error("a global name is too long");
        return Wrap(Push(NewGlobal(m, n)));
      }
      case 'i': {  // INST module\nname\n, arguments from the mark
        auto module = ReadLine();
        if (!module.ok()) return module.status();
        auto name = ReadLine();
        if (!name.ok()) return name.status();
        auto items = PopMark();
        if (!items.ok()) return items.status();
        auto cls = NewGlobal(*module, *name);
        if (!cls.ok()) return cls.status();
        auto args = NewContainer(Kind::kTuple, *std::move(items));
        if (!args.ok()) return args.status();
        return Wrap(Push(Instantiate(*cls, *args)));
      }
      case 'o': {  // OBJ: class and arguments from the mark
        auto items = PopMark();
        if (!items.ok()) return items.status();
        if (items->empty()) return Error("OBJ without a class");
        const uint32_t cls = items->front();
        auto args = NewContainer(Kind::kTuple, std::vector<uint32_t>(items->begin() + 1, items->end()));
        if (!args.ok()) return args.status();
        return Wrap(Push(Instantiate(cls, *args)));
      }
      case 'R': {  // REDUCE
        auto args = Pop();
        if (!args.ok()) return args.status();
        auto callable = Pop();
        if (!callable.ok()) return callable.status();
        return Wrap(Push(Call(*callable, *args)));
      }
      case 0x81:
      case 0x92: {  // NEWOBJ, NEWOBJ_EX (kwargs dropped)
        if (op_ == 0x92) {
          auto kwargs = Pop();
          if (!kwargs.ok()) return kwargs.status();
        }
        auto args = Pop();
        if (!args.ok()) return args.status();
        auto cls = Pop();
        if (!cls.ok()) return cls.status();
        return Wrap(Push(Instantiate(*cls, *args)));
      }
      case 'b': {  // BUILD: the state would go to __setstate__ / __dict__; nothing to keep
        auto state = Pop();
        if (!state.ok()) return state.status();
        auto target = Top();
        if (!target.ok()) return target.status();
        return false;
      }
      case 'Q': {  // BINPERSID
        auto pid = Pop();
        if (!pid.ok()) return pid.status();
        return Wrap(Push(PersistentLoad(*pid)));
      }
      case 'h': {
        auto k = ReadUint(1);
        if (!k.ok()) return k.status();
        return Wrap(Recall(*k));
      }
      case 'j': {
        auto k = ReadUint(4);
        if (!k.ok()) return k.status();
        return Wrap(Recall(*k));
      }
      case 'q': {
        auto k = ReadUint(1);
        if (!k.ok()) return k.status();
        return Wrap(Memoize(*k));
      }
      case 'r': {
        auto k = ReadUint(4);
        if (!k.ok()) return k.status();
        return Wrap(Memoize(*k));
      }
      case 0x94:
        return Wrap(Memoize(memo_.size()));  // MEMOIZE
      case 0x82:
      case 0x83:
      case 0x84:
        return Error("extension-registry opcodes (EXT1/2/4) are not supported");
      case 0x97:
      case 0x98:
        return Error("out-of-band buffers (protocol 5) are not supported");
      case 'I':
      case 'L':
      case 'F':
      case 'S':
      case 'V':
      case 'g':
      case 'p':
      case 'P':
        return Error("text opcodes of protocol 0 are not supported (torch.save writes protocol 2)");
      default:
        return Error("unknown opcode");
    }
  }

  // NEWOBJ / OBJ / INST: cls.__new__(cls, *args). Only the container types are interpreted.
  absl::StatusOr<uint32_t> Instantiate(uint32_t cls, uint32_t args) {
    const Value& c = g_.values[cls];
    if (c.kind == Kind::kGlobal) {
      const Known k = known_[c.ref];
      if (k == Known::kOrderedDict || k == Known::kSet || k == Known::kFrozenset) return Call(cls, args);
      if (k == Known::kForeign) return Opaque(c.ref);
      return Error(absl::StrCat("instantiates '", g_.globals[c.ref].Qualified(), "'"));
    }
    if (c.kind == Kind::kObject) return Opaque(c.ref);
    return Error(absl::StrCat("instantiates ", g_.Describe(cls)));
  }

  static absl::StatusOr<bool> Wrap(absl::Status s) {
    if (!s.ok()) return s;
    return false;
  }

  std::string_view in_;
  const std::string& what_;
  const Limits& limits_;
  size_t pos_ = 0;
  size_t op_offset_ = 0;
  unsigned char op_ = 0;
  Graph g_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  absl::flat_hash_map<uint64_t, uint32_t> memo_;
  std::vector<Known> known_;             // per global
  std::vector<StorageType> storage_of_;  // per global (kStorageClass)
  absl::flat_hash_set<std::string> foreign_seen_;
  absl::flat_hash_map<std::string, uint32_t> storage_by_key_;
};

}  // namespace

size_t StorageElementSize(StorageType type) {
  switch (type) {
    case StorageType::kF64:
    case StorageType::kI64:
      return 8;
    case StorageType::kF32:
    case StorageType::kI32:
      return 4;
    case StorageType::kF16:
    case StorageType::kBF16:
    case StorageType::kI16:
      return 2;
    case StorageType::kI8:
    case StorageType::kU8:
    case StorageType::kBool:
      return 1;
  }
  return 1;
}

std::string StorageTypeName(StorageType type) {
  for (const StorageClass& c : kStorageClasses) {
    if (c.type == type) return absl::StrCat("torch.", Sv(c.name));
  }
  return "?";
}

const char* StorageTypeDType(StorageType type) {
  switch (type) {
    case StorageType::kF64:
      return "F64";
    case StorageType::kF32:
      return "F32";
    case StorageType::kF16:
      return "F16";
    case StorageType::kBF16:
      return "BF16";
    case StorageType::kI64:
      return "I64";
    case StorageType::kI32:
      return "I32";
    case StorageType::kI16:
      return "I16";
    case StorageType::kI8:
      return "I8";
    case StorageType::kU8:
      return "U8";
    case StorageType::kBool:
      return "BOOL";
  }
  return "?";
}

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kBytes:
      return "bytes";
    case Kind::kTuple:
      return "tuple";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kSet:
      return "set";
    case Kind::kGlobal:
      return "name";
    case Kind::kObject:
      return "object";
    case Kind::kStorage:
      return "storage";
    case Kind::kTensor:
      return "tensor";
    case Kind::kOther:
      return "other";
  }
  return "?";
}

std::string Graph::Describe(uint32_t v) const {
  const Value& x = values[v];
  switch (x.kind) {
    case Kind::kNone:
      return "None";
    case Kind::kObject:
      return absl::StrCat("an object of '", Printable(globals[x.ref].Qualified()), "'");
    case Kind::kGlobal:
      return absl::StrCat("the name '", Printable(globals[x.ref].Qualified()), "'");
    case Kind::kOther:
      return strings[x.ref];
    case Kind::kInt:
      return "an int";
    case Kind::kBytes:
      return "bytes";
    default:
      return absl::StrCat("a ", KindName(x.kind));
  }
}

bool IsHostileGlobal(std::string_view module, std::string_view name) {
  // Code execution, processes, files, networking, imports and introspection:
  // never part of a tensor checkpoint; pickle exploits are built from these.
  static constexpr std::string_view kModules[] = {"os",
                                                  "posix",
                                                  "nt",
                                                  "subprocess",
                                                  "_posixsubprocess",
                                                  "sys",
                                                  "shutil",
                                                  "socket",
                                                  "importlib",
                                                  "runpy",
                                                  "pickle",
                                                  "_pickle",
                                                  "cPickle",
                                                  "marshal",
                                                  "ctypes",
                                                  "code",
                                                  "codeop",
                                                  "pty",
                                                  "commands",
                                                  "webbrowser",
                                                  "functools",
                                                  "operator",
                                                  "_operator",
                                                  "signal",
                                                  "multiprocessing",
                                                  "pdb",
                                                  "bdb",
                                                  "timeit",
                                                  "__main__",
                                                  "asyncio",
                                                  "inspect",
                                                  "tempfile",
                                                  "glob",
                                                  "io",
                                                  "_io",
                                                  "urllib",
                                                  "http",
                                                  "ftplib",
                                                  "smtplib",
                                                  "telnetlib",
                                                  "platform",
                                                  "threading",
                                                  "_thread",
                                                  "pydoc",
                                                  "zipimport",
                                                  "imp",
                                                  "site",
                                                  "sysconfig",
                                                  "distutils",
                                                  "setuptools",
                                                  "pip",
                                                  "dill",
                                                  "cloudpickle",
                                                  "torch.hub",
                                                  "torch.jit",
                                                  "torch._C",
                                                  "torch.ops",
                                                  "torch.serialization",
                                                  "torch.package",
                                                  "torch.utils.cpp_extension",
                                                  "numpy.f2py",
                                                  "numpy.distutils",
                                                  "numpy.ctypeslib",
                                                  "numpy.testing",
                                                  "numpy.lib.npyio"};
  for (std::string_view m : kModules) {
    if (StartsWithModule(module, m)) return true;
  }
  if (module == "types") return name != "SimpleNamespace";  // FunctionType, CodeType, ... build code
  if (module == "builtins" || module == "__builtin__") {
    static constexpr std::string_view kNames[] = {
        "eval",      "exec",       "execfile",   "compile",        "open",   "file", "getattr",
        "setattr",   "delattr",    "__import__", "globals",        "locals", "vars", "input",
        "raw_input", "apply",      "breakpoint", "exit",           "quit",   "help", "reload",
        "type",      "memoryview", "__loader__", "__build_class__"};
    for (std::string_view n : kNames) {
      if (name == n) return true;
    }
  }
  if (module == "torch" && (name == "load" || name == "save")) return true;
  if (module == "torch.storage" && name == "_load_from_bytes") return true;
  if (StartsWithModule(module, "numpy") && (name == "load" || name == "loadtxt" || name == "fromfile")) return true;
  return false;
}

absl::StatusOr<Graph> Unpickle(std::string_view bytes, const std::string& what, const Limits& limits) {
  return Unpickler(bytes, what, limits).Run();
}

}  // namespace argen::checkpoint::pickle
