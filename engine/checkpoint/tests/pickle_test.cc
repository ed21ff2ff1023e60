// The restricted unpickler opcode by opcode, the names it interprets, and
// streams that try to make it call, allocate or recurse.
#include "engine/checkpoint/pickle.h"

#include <cmath>
#include <functional>
#include <string>

#include "engine/checkpoint/tests/torch_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace argen::checkpoint::pickle {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::PickleBuilder;

absl::StatusOr<Graph> Parse(const std::string& bytes, const Limits& limits = {}) {
  return Unpickle(bytes, "t.bin: data.pkl", limits);
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

TEST(Unpickle, ScalarsOfEveryEncoding) {
  PickleBuilder p;
  p.Proto().Mark().Int(7).Int(300).Int(-5).Int(70000).Int(int64_t{1} << 40).Int(-(int64_t{1} << 40));
  p.Float(-2.5).Bool(true).Bool(false).None().Unicode("héllo");
  p.Raw(Bytes({0x8a, 0x02, 0xff, 0x7f}));                       // LONG1 0x7fff
  p.Raw(Bytes({0x8a, 0x01, 0xff}));                             // LONG1 -1
  p.Raw(Bytes({0x8a, 0x00}));                                   // LONG1 0
  p.Raw(Bytes({'C', 2, 'a', 'b'}));                             // SHORT_BINBYTES
  p.Raw(Bytes({0x8c, 1, 'z'}));                                 // SHORT_BINUNICODE
  p.Raw(Bytes({'U', 1, 'q'}));                                  // SHORT_BINSTRING
  p.Raw(Bytes({0x8b, 9, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));  // LONG4 wider than 64 bits
  p.Tuple().Stop();
  auto g = Parse(p.bytes());
  ASSERT_TRUE(g.ok()) << g.status();
  const auto& items = g->items(g->root);
  ASSERT_EQ(items.size(), 18u);
  const std::vector<int64_t> ints = {7, 300, -5, 70000, int64_t{1} << 40, -(int64_t{1} << 40)};
  for (size_t i = 0; i < ints.size(); ++i) {
    EXPECT_EQ(g->at(items[i]).kind, Kind::kInt);
    EXPECT_EQ(g->at(items[i]).i, ints[i]) << i;
  }
  EXPECT_EQ(g->at(items[6]).f, -2.5);
  EXPECT_EQ(g->at(items[7]).i, 1);
  EXPECT_EQ(g->at(items[8]).i, 0);
  EXPECT_EQ(g->at(items[9]).kind, Kind::kNone);
  EXPECT_EQ(g->str(items[10]), "héllo");
  EXPECT_EQ(g->at(items[11]).i, 0x7fff);
  EXPECT_EQ(g->at(items[12]).i, -1);
  EXPECT_EQ(g->at(items[13]).i, 0);
  EXPECT_EQ(g->at(items[14]).kind, Kind::kBytes);
  EXPECT_EQ(g->str(items[14]), "ab");
  EXPECT_EQ(g->str(items[15]), "z");
  EXPECT_EQ(g->str(items[16]), "q");
  EXPECT_EQ(g->at(items[17]).kind, Kind::kOther);
  EXPECT_THAT(g->Describe(items[17]), HasSubstr("wider than 64 bits"));
}

TEST(Unpickle, ContainersMemoAndMarks) {
  PickleBuilder p;
  p.Proto().EmptyDict().Put(0);
  p.Mark().Unicode("list").EmptyList().Int(1).Append().Mark().Int(2).Int(3).Appends();
  p.Unicode("again").Get(0).SetItems();  // the dict contains itself: a cycle is just an index
  p.Mark().Int(9).Raw("0");              // POP the 9
  p.Raw("0");                            // POP on an empty frame pops the mark (as Python)
  p.Unicode("t").Int(1).Int(2).Tuple2().SetItem();
  p.Raw("2").Raw("0");  // DUP, POP
  p.Stop();
  auto g = Parse(p.bytes());
  ASSERT_TRUE(g.ok()) << g.status();
  const auto& d = g->items(g->root);
  ASSERT_EQ(d.size(), 6u);
  EXPECT_EQ(g->str(d[0]), "list");
  const auto& list = g->items(d[1]);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(g->at(list[2]).i, 3);
  EXPECT_EQ(d[3], g->root);
  EXPECT_EQ(g->at(d[5]).kind, Kind::kTuple);
}

TEST(Unpickle, Protocol4Opcodes) {
  // FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL, NEWOBJ, EMPTY_SET / ADDITEMS, FROZENSET.
  std::string fixed = Bytes({0x80, 4, 0x95, 0, 0, 0, 0, 0, 0, 0, 0});
  fixed += Bytes({0x8c, 11}) + "collections" + Bytes({0x94, 0x8c, 11}) + "OrderedDict" + Bytes({0x94, 0x93, 0x94});
  fixed += Bytes({')', 0x81, 0x94, '('});
  fixed += Bytes({0x8c, 1}) + "s" + Bytes({0x8f, '(', 'K', 1, 'K', 2, 0x90});
  fixed += Bytes({0x8c, 1}) + "f" + Bytes({'(', 'K', 3, 0x91});
  fixed += Bytes({0x8c, 1}) + "g" + Bytes({'h', 3});
  fixed += Bytes({'u', '.'});
  auto g = Parse(fixed);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->at(g->root).kind, Kind::kDict);
  const auto& d = g->items(g->root);
  ASSERT_EQ(d.size(), 6u);
  EXPECT_EQ(g->at(d[1]).kind, Kind::kSet);
  EXPECT_EQ(g->items(d[1]).size(), 2u);
  EXPECT_EQ(g->at(d[3]).kind, Kind::kSet);
  EXPECT_EQ(d[5], g->root);  // memo 3 was the OrderedDict (0, 1: strings, 2: the global)
  EXPECT_TRUE(g->foreign_globals.empty());
}

TEST(Unpickle, BytesUnderProtocol2AreCodecsEncode) {
  PickleBuilder p;
  p.Proto().Global("_codecs", "encode").Unicode("\x01\xc3\xbf").Unicode("latin1").Tuple2().Reduce().Stop();
  auto g = Parse(p.bytes());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->at(g->root).kind, Kind::kBytes);
  EXPECT_EQ(g->str(g->root), std::string("\x01\xff"));
}

TEST(Unpickle, TensorsAndStorages) {
  PickleBuilder q;
  q.Proto().Mark();
  q.Tensor("BFloat16Storage", "0", 12, 2, {2, 3}, {3, 1});
  q.Tensor("BFloat16Storage", "0", 12, 0, {3, 2}, {1, 3});
  q.Global("torch._utils", "_rebuild_parameter");
  q.Tensor("LongStorage", "1", 1, 0, {}, {}).Bool(true);
  q.Global("collections", "OrderedDict").EmptyTuple().Reduce().Tuple3().Reduce();
  q.Global("torch._tensor", "_rebuild_from_type_v2").Mark().Global("torch._utils", "_rebuild_tensor_v2");
  q.Global("torch", "Tensor");
  q.Mark().Mark().Unicode("storage").Global("torch", "FloatStorage").Unicode("2").Unicode("cuda:0").Int(4).Tuple();
  q.PersId().Int(0).Mark().Int(4).Tuple().Mark().Int(1).Tuple().Bool(false);
  q.Global("collections", "OrderedDict").EmptyTuple().Reduce().Tuple();
  q.EmptyDict().Tuple().Reduce();
  q.Tuple().Stop();
  auto g = Parse(q.bytes());
  ASSERT_TRUE(g.ok()) << g.status();
  const auto& items = g->items(g->root);
  ASSERT_EQ(items.size(), 4u);
  for (uint32_t v : items) ASSERT_EQ(g->at(v).kind, Kind::kTensor) << g->Describe(v);
  ASSERT_EQ(g->storages.size(), 3u);
  const Tensor& a = g->tensors[g->at(items[0]).ref];
  const Tensor& b = g->tensors[g->at(items[1]).ref];
  EXPECT_EQ(a.storage, b.storage);
  EXPECT_EQ(a.offset, 2);
  EXPECT_EQ(a.size, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b.stride, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(g->storages[a.storage].type, StorageType::kBF16);
  EXPECT_EQ(g->storages[a.storage].numel, 12);
  const Tensor& c = g->tensors[g->at(items[2]).ref];
  EXPECT_TRUE(c.size.empty());
  EXPECT_EQ(g->storages[c.storage].type, StorageType::kI64);
  EXPECT_EQ(g->storages[g->tensors[g->at(items[3]).ref].storage].key, "2");
  EXPECT_TRUE(g->foreign_globals.empty());
}

TEST(Unpickle, UnknownNamesAreInertAndRecorded) {
  PickleBuilder p;
  p.Proto().Mark();
  p.Global("numpy.core.multiarray", "scalar").Global("numpy", "dtype").Unicode("f8").Tuple1().Reduce();
  p.Unicode("abc").Tuple2().Reduce();
  p.Global("argparse", "Namespace").EmptyTuple().Raw(Bytes({0x81})).EmptyDict().Build();  // NEWOBJ + BUILD
  p.Global("numpy", "dtype");                                                             // seen twice: recorded once
  p.Tuple().Stop();
  auto g = Parse(p.bytes());
  ASSERT_TRUE(g.ok()) << g.status();
  const auto& items = g->items(g->root);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(g->Describe(items[0]), "an object of 'numpy.core.multiarray.scalar'");
  EXPECT_EQ(g->Describe(items[1]), "an object of 'argparse.Namespace'");
  EXPECT_EQ(g->Describe(items[2]), "the name 'numpy.dtype'");
  std::vector<std::string> names;
  for (uint32_t i : g->foreign_globals) names.push_back(g->globals[i].Qualified());
  EXPECT_THAT(names, ::testing::ElementsAre("numpy.core.multiarray.scalar", "numpy.dtype", "argparse.Namespace"));
}

TEST(Unpickle, HostileNamesAreRefusedWhereTheyAppear) {
  const std::vector<std::pair<std::string, std::string>> hostile = {{"os", "system"},
                                                                    {"posix", "system"},
                                                                    {"nt", "system"},
                                                                    {"builtins", "eval"},
                                                                    {"builtins", "exec"},
                                                                    {"__builtin__", "eval"},
                                                                    {"builtins", "getattr"},
                                                                    {"builtins", "__import__"},
                                                                    {"builtins", "open"},
                                                                    {"builtins", "compile"},
                                                                    {"subprocess", "Popen"},
                                                                    {"subprocess", "check_output"},
                                                                    {"functools", "reduce"},
                                                                    {"functools", "partial"},
                                                                    {"operator", "attrgetter"},
                                                                    {"importlib", "import_module"},
                                                                    {"runpy", "_run_code"},
                                                                    {"pickle", "loads"},
                                                                    {"_pickle", "loads"},
                                                                    {"marshal", "loads"},
                                                                    {"shutil", "rmtree"},
                                                                    {"socket", "socket"},
                                                                    {"webbrowser", "open"},
                                                                    {"types", "FunctionType"},
                                                                    {"types", "CodeType"},
                                                                    {"sys", "modules"},
                                                                    {"ctypes", "CDLL"},
                                                                    {"torch", "load"},
                                                                    {"torch.storage", "_load_from_bytes"},
                                                                    {"torch.hub", "load"},
                                                                    {"torch.jit", "load"},
                                                                    {"numpy", "load"},
                                                                    {"os.path", "join"},
                                                                    {"code", "InteractiveInterpreter"},
                                                                    {"pty", "spawn"}};
  for (const auto& [module, name] : hostile) {
    EXPECT_TRUE(IsHostileGlobal(module, name)) << module << "." << name;
    for (bool stack_global : {false, true}) {
      PickleBuilder p;
      p.Proto(stack_global ? 4 : 2).EmptyDict().Mark().Unicode("harmless").Int(1);
      if (stack_global) {
        p.Unicode(module).Unicode(name).Raw(Bytes({0x93}));
      } else {
        p.Global(module, name);
      }
      p.Unicode("touch /tmp/argen-pwned").Tuple1().Reduce().SetItems().Stop();
      auto g = Parse(p.bytes());
      ASSERT_FALSE(g.ok()) << module << "." << name;
      EXPECT_THAT(Message(g.status()), AllOf(HasSubstr("t.bin: data.pkl"), HasSubstr("'" + module + "." + name + "'"),
                                             HasSubstr("refused")));
    }
  }
  for (const auto& [module, name] :
       std::vector<std::pair<std::string, std::string>>{{"collections", "OrderedDict"},
                                                        {"numpy", "dtype"},
                                                        {"argparse", "Namespace"},
                                                        {"osx", "system"},
                                                        {"builtins", "set"},
                                                        {"types", "SimpleNamespace"},
                                                        {"pytorch_lightning.callbacks", "ModelCheckpoint"},
                                                        {"torch._utils", "_rebuild_tensor_v2"},
                                                        {"ossify", "x"}}) {
    EXPECT_FALSE(IsHostileGlobal(module, name)) << module << "." << name;
  }
}

// PROTO 2, a persistent id tuple, BINPERSID, STOP.
std::string Pid(const std::string& tag, const std::string& cls, const std::string& key, int64_t numel) {
  return PickleBuilder()
      .Proto()
      .Mark()
      .Unicode(tag)
      .Global("torch", cls)
      .Unicode(key)
      .Unicode("cpu")
      .Int(numel)
      .Tuple()
      .PersId()
      .Stop()
      .bytes();
}

TEST(Unpickle, MalformedStreamsAreErrorsWithTheOffset) {
  struct Case {
    const char* what;
    std::string bytes;
    const char* message;
  };
  const std::string proto = Bytes({0x80, 2});
  const std::vector<Case> cases = {
      {"empty", "", "without STOP"},
      {"no STOP", proto + "K\x01", "without STOP"},
      {"protocol 6", Bytes({0x80, 6}) + "N.", "protocol 6"},
      {"text INT", proto + "I1\n.", "text opcodes"},
      {"text GET", proto + "g0\n.", "text opcodes"},
      {"unknown opcode", proto + "\xff.", "unknown opcode"},
      {"huge BINUNICODE", proto + Bytes({'X', 0xf0, 0xff, 0xff, 0xff}) + "abc.", "runs past the end"},
      {"huge BINBYTES8", proto + Bytes({0x8e, 0, 0, 0, 0, 0, 0, 0, 0x40}) + ".", "runs past the end"},
      {"huge LONG4", proto + Bytes({0x8b, 0xff, 0xff, 0xff, 0x7f}) + ".", "runs past the end"},
      {"negative LONG4", proto + Bytes({0x8b, 0xff, 0xff, 0xff, 0xff}) + ".", "negative"},
      {"operand cut", proto + "J\x01\x02", "truncated"},
      {"pop empty", proto + "0.", "empty"},
      {"stop on empty", proto + ".", "empty"},
      {"memo never stored", proto + "h\x05.", "memo entry 5"},
      {"long memo never stored", proto + Bytes({'j', 0xff, 0xff, 0xff, 0xff}) + ".", "memo entry 4294967295"},
      {"put on empty", proto + "q\x01.", "empty"},
      {"tuple without mark", proto + "t.", "MARK"},
      {"setitems odd", proto + "}(K\x01u.", "odd"},
      {"append to int",
       proto + "K\x01K\x02"
               "a.",
       "expected a list"},
      {"setitem to list", proto + "]K\x01K\x02s.", "expected a dict"},
      {"reduce an int", proto + "K\x01)R.", "calls an int"},
      {"reduce args not tuple", proto + "ccollections\nOrderedDict\nK\x01R.", "expected a tuple"},
      {"ordered dict with args", proto + "ccollections\nOrderedDict\n(K\x01tR.", "with arguments"},
      {"unterminated global", proto + "cos", "unterminated"},
      {"global line too long", proto + "c" + std::string(2000, 'a') + "\nb\n.", "unterminated"},
      {"extension opcode", proto + Bytes({0x82, 1}) + ".", "EXT"},
      {"out-of-band buffer", Bytes({0x80, 5, 0x97}) + ".", "out-of-band"},
      {"persistent id not a tuple", proto + "K\x01Q.", "persistent id"},
      {"persistent id of another kind", Pid("module", "FloatStorage", "0", 1), "persistent id"},
      {"storage class not supported", Pid("storage", "ComplexFloatStorage", "0", 1), "ComplexFloatStorage"},
      {"storage key with a slash", Pid("storage", "FloatStorage", "../0", 1), "not a record name"},
      {"storage key empty", Pid("storage", "FloatStorage", "", 1), "not a record name"},
      {"storage declared twice differently",
       Pid("storage", "FloatStorage", "0", 1).substr(0, Pid("storage", "FloatStorage", "0", 1).size() - 1) +
           Pid("storage", "HalfStorage", "0", 1).substr(2),
       "declared twice"},
      {"storage class called", proto + "ctorch\nFloatStorage\n)R.", "called directly"},
      {"rebuild with 3 args", proto + "ctorch._utils\n_rebuild_tensor_v2\n(K\x01K\x02K\x03tR.", "6 or 7 arguments"},
      {"codecs other encoding",
       PickleBuilder()
           .Proto()
           .Global("_codecs", "encode")
           .Unicode("a")
           .Unicode("utf-8")
           .Tuple2()
           .Reduce()
           .Stop()
           .bytes(),
       "latin1"},
  };
  for (const Case& c : cases) {
    auto g = Parse(c.bytes);
    ASSERT_FALSE(g.ok()) << c.what;
    EXPECT_THAT(Message(g.status()), AllOf(HasSubstr("t.bin: data.pkl: offset"), HasSubstr(c.message))) << c.what;
  }
}

TEST(Unpickle, BadTensorArgumentsNameTheArgument) {
  using Part = std::function<void(PickleBuilder&)>;
  const Part storage = [](PickleBuilder& p) {
    p.Mark().Unicode("storage").Global("torch", "FloatStorage").Unicode("0").Unicode("cpu").Int(4).Tuple().PersId();
  };
  const Part offset = [](PickleBuilder& p) { p.Int(0); };
  const Part size = [](PickleBuilder& p) { p.Mark().Int(4).Tuple(); };
  const Part stride = [](PickleBuilder& p) { p.Mark().Int(1).Tuple(); };
  const Part hooks = [](PickleBuilder& p) { p.Global("collections", "OrderedDict").EmptyTuple().Reduce(); };
  auto tensor = [](const Part& a, const Part& b, const Part& c, const Part& d, const Part& e) {
    PickleBuilder p;
    p.Proto().Global("torch._utils", "_rebuild_tensor_v2").Mark();
    a(p);
    b(p);
    c(p);
    d(p);
    p.Bool(false);
    e(p);
    return p.Tuple().Reduce().Stop().bytes();
  };
  ASSERT_TRUE(Parse(tensor(storage, offset, size, stride, hooks)).ok());
  struct Case {
    std::string bytes;
    const char* message;
  };
  const std::vector<Case> cases = {
      {tensor([](PickleBuilder& p) { p.Int(1); }, offset, size, stride, hooks), "storage is an int"},
      {tensor(
           storage, [](PickleBuilder& p) { p.Int(-1); }, size, stride, hooks),
       "storage_offset"},
      {tensor(
           storage, offset, [](PickleBuilder& p) { p.Int(4); }, stride, hooks),
       "size is an int"},
      {tensor(
           storage, offset, size, [](PickleBuilder& p) { p.Mark().Int(1).Int(1).Tuple(); }, hooks),
       "dimensions but stride"},
      {tensor(
           storage, offset, [](PickleBuilder& p) { p.Mark().Int(-4).Tuple(); }, stride, hooks),
       "size is an int, expected an int >= 0"},
      {tensor(storage, offset, size, stride, [](PickleBuilder& p) { p.EmptyDict().Int(1).Int(2).SetItem(); }),
       "backward_hooks"},
      {tensor(
           storage, offset,
           [](PickleBuilder& p) {
             p.Mark();
             for (int i = 0; i < 65; ++i) p.Int(1);
             p.Tuple();
           },
           [](PickleBuilder& p) { p.EmptyTuple(); }, hooks),
       "65 dimensions"},
  };
  for (const Case& c : cases) {
    auto g = Parse(c.bytes);
    ASSERT_FALSE(g.ok()) << c.message;
    EXPECT_THAT(Message(g.status()), HasSubstr(c.message));
  }
}

TEST(Unpickle, DeepNestingNeitherRecursesNorCrashes) {
  // A million nested lists: built by a loop, never walked recursively.
  const int depth = 1000000;
  std::string s = Bytes({0x80, 2});
  s.append(depth, ']');
  s.append(depth - 1, 'a');
  s += '.';
  auto g = Parse(s);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->at(g->root).kind, Kind::kList);
  // And a million MARKs then one TUPLE: the marks are a plain vector.
  std::string m = Bytes({0x80, 2});
  m.append(depth, '(');
  m += ")t.";
  EXPECT_TRUE(Parse(m).ok());
}

TEST(Unpickle, ObjectCountIsLimited) {
  std::string s = Bytes({0x80, 2, '('});
  for (int i = 0; i < 1000; ++i) s += 'N';
  s += "t.";
  Limits limits;
  limits.max_values = 500;
  auto g = Parse(s, limits);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(Message(g.status()), HasSubstr("more than 500 objects"));
  EXPECT_TRUE(Parse(s).ok());
}

TEST(Unpickle, MemoAbuseCostsOnlyReferences) {
  // One list referenced a hundred thousand times: references, not copies.
  std::string s = Bytes({0x80, 2, ']', 'q', 0, '('});
  s.append(1000, 'N');
  s += 'e';
  s += "(";
  for (int i = 0; i < 100000; ++i) s += Bytes({'h', 0});
  s += "t.";
  auto g = Parse(s);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_LT(g->values.size(), 2000u);
}

}  // namespace
}  // namespace argen::checkpoint::pickle
