// The PyTorch reader against files torch.save wrote (tests/goldens/torch/,
// tools/goldens/make_torch_goldens.py): every tensor's bytes equal PyTorch's;
// then every way a file can be broken or hostile.
#include "engine/checkpoint/torch_file.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_join.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/dtype.h"
#include "engine/checkpoint/tests/test_files.h"
#include "engine/checkpoint/tests/torch_writer.h"
#include "engine/checkpoint/weights_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::checkpoint {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::PickleBuilder;
using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteBytes;

std::string Goldens() { return testing::SourceDir() + "/tests/goldens/torch"; }

const json& Golden() {
  static const json golden = json::parse(ReadBytes(Goldens() + "/golden.json"));
  return golden;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

std::string Hex(const void* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[p[i] >> 4]);
    out.push_back(kDigits[p[i] & 15]);
  }
  return out;
}

// Every golden tensor through the Checkpoint API: in-place F32/F16/BF16 bytes equal PyTorch's,
// F64 and integers come as PyTorch's f32 values.
void ExpectGoldenTensors(const Checkpoint& ckpt) {
  int checked = 0;
  for (const auto& [name, g] : Golden()["tensors"].items()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(ckpt.Has(name));
    auto info = ckpt.Find(name);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ((*info)->shape, g["shape"].get<std::vector<int64_t>>());
    const std::string dtype = g["dtype"];
    if (dtype == "F32" || dtype == "F16" || dtype == "BF16") {
      EXPECT_EQ(DTypeName((*info)->dtype), dtype);
      EXPECT_EQ(Hex((*info)->data, (*info)->nbytes), g["hex"].get<std::string>());
    } else {
      EXPECT_EQ((*info)->dtype, DType::kF32);
      const std::vector<float> want = g["f32"].get<std::vector<float>>();
      ASSERT_EQ((*info)->nbytes, want.size() * 4);
      for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(static_cast<const float*>((*info)->data)[i], want[i]);
    }
    auto values = ckpt.LoadF32(name, (*info)->shape);
    ASSERT_TRUE(values.ok()) << values.status();
    ++checked;
  }
  EXPECT_EQ(checked, 16);
}

TEST(TorchGoldens, SingleFileDirectoryLoadsAsPublished) {
  auto ckpt = Checkpoint::Open(Goldens() + "/state");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ExpectGoldenTensors(**ckpt);
  EXPECT_EQ((*(*ckpt)->Find("gen_embed.weight"))->file, Goldens() + "/state/pytorch_model.bin");
}

TEST(TorchGoldens, ShardedDirectoryWithIndexLoadsAsPublished) {
  const std::string dir = Goldens() + "/sharded";
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ExpectGoldenTensors(**ckpt);
  const json index = json::parse(ReadBytes(dir + "/pytorch_model.bin.index.json"));
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    EXPECT_EQ((*(*ckpt)->Find(tensor))->file, dir + "/" + shard.get<std::string>()) << tensor;
  }
}

class TorchGoldenFile : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchGoldenFile, EveryTensorEqualsPyTorchs) {
  auto ckpt = OpenCheckpointFile(Goldens() + "/" + GetParam());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ExpectGoldenTensors(**ckpt);
}

TEST_P(TorchGoldenFile, RawTensorsAreRowMajorInTheStoredDType) {
  auto file = OpenWeightsFile(Goldens() + "/" + GetParam());
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->size(), Golden()["tensors"].size());
  for (size_t i = 0; i < (*file)->size(); ++i) {
    const json& g = Golden()["tensors"][(*file)->name(i)];
    std::string scratch;
    auto raw = (*file)->RawTensor(i, &scratch);
    ASSERT_TRUE(raw.ok()) << raw.status();
    EXPECT_EQ(raw->dtype, g["dtype"].get<std::string>()) << (*file)->name(i);
    EXPECT_EQ(raw->shape, g["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(Hex(raw->bytes.data(), raw->bytes.size()), g["hex"].get<std::string>()) << (*file)->name(i);
  }
}

INSTANTIATE_TEST_SUITE_P(Files, TorchGoldenFile,
                         ::testing::Values("state/pytorch_model.bin", "zip64.bin", "protocol4.bin", "nocrc.bin",
                                           "lightning.ckpt", "lightning_v1.ckpt"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

TEST(TorchGoldens, ViewsKeepTheirLayout) {
  auto file = TorchFile::Open(Goldens() + "/state/pytorch_model.bin");
  ASSERT_TRUE(file.ok()) << file.status();
  auto by_name = [&](const std::string& n) -> const TorchTensor& {
    for (const TorchTensor& t : (*file)->tensors()) {
      if (t.name == n) return t;
    }
    ADD_FAILURE() << n;
    return (*file)->tensors().front();
  };
  const TorchTensor& transposed = by_name("language_model.model.layers.0.self_attn.o_proj.weight");
  EXPECT_FALSE(transposed.contiguous);
  EXPECT_EQ(transposed.stride, (std::vector<int64_t>{1, 8}));
  const TorchTensor& slice = by_name("gen_embed.weight");
  EXPECT_TRUE(slice.contiguous);
  EXPECT_EQ(slice.offset, 8);
  EXPECT_EQ(by_name("gen_head.vision_head.weight").storage, by_name("gen_head.vision_head.weight_tied_view").storage);
  EXPECT_TRUE(by_name("gen_vision_model.decoder.scale").shape.empty());
  EXPECT_EQ(by_name("gen_vision_model.decoder.empty").numel(), 0);
  EXPECT_TRUE((*file)->skipped().empty());
  EXPECT_EQ((*file)->state_dict_key(), "");
}

TEST(TorchGoldens, LightningEntriesNextToTheStateDictAreSkippedAndListed) {
  for (const std::string name : {"lightning.ckpt", "lightning_v1.ckpt"}) {
    auto file = TorchFile::Open(Goldens() + "/" + name);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ((*file)->state_dict_key(), "state_dict");
    std::vector<std::string> keys;
    for (const std::string& s : (*file)->skipped()) keys.push_back(s.substr(0, s.find(':')));
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys, Golden()["files"][name]["skipped"].get<std::vector<std::string>>()) << name;
  }
  auto old = TorchFile::Open(Goldens() + "/lightning_v1.ckpt");
  ASSERT_TRUE(old.ok());
  const std::string all = absl::StrJoin((*old)->skipped(), "\n");
  EXPECT_THAT(all,
              AllOf(HasSubstr("callbacks: a dict (uses 'pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint'"),
                    HasSubstr("scalar"), HasSubstr("hyper_parameters: an object of 'argparse.Namespace'")));
}

// DeepSpeed saves the state dict under "module" (LlamaGen's sample scripts take
// "model", "module" or "state_dict"); the entries beside it are skipped and listed.
TEST(TorchWrappers, DeepSpeedModuleEntryHoldsTheStateDict) {
  PickleBuilder p;
  p.Proto().EmptyDict().Mark().Unicode("global_steps").Int(3).Unicode("module").EmptyDict().Mark().Unicode("w");
  p.Tensor("FloatStorage", "0", 2, 0, {2}, {1}).SetItems().SetItems().Stop();
  const float values[2] = {1.5f, -2.0f};
  const std::string bytes = testing::TorchArchive(
      "ds", p.bytes(), {{"0", std::string(reinterpret_cast<const char*>(values), sizeof(values))}});
  auto file = TorchFile::FromBytes("mp_rank_00_model_states.pt", bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->state_dict_key(), "module");
  ASSERT_EQ((*file)->tensors().size(), 1u);
  EXPECT_EQ((*file)->tensors()[0].name, "w");
  EXPECT_THAT((*file)->skipped(), ::testing::ElementsAre(HasSubstr("global_steps")));
}

TEST(TorchGoldens, ConcurrentFirstReadsAgree) {
  // Backends may load from several threads: the first read of each tensor
  // (CRC check, strided copy, F64 conversion) happens once and everyone sees it.
  auto ckpt = Checkpoint::Open(Goldens() + "/state");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  std::vector<std::string> names;
  for (const auto& [name, g] : Golden()["tensors"].items()) names.push_back(name);
  std::vector<std::vector<const TensorInfo*>> seen(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < names.size(); ++k) {
        auto info = (*ckpt)->Find(names[(k + t) % names.size()]);
        seen[t].push_back(info.ok() ? *info : nullptr);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < seen.size(); ++t) {
    for (size_t k = 0; k < names.size(); ++k) {
      EXPECT_EQ(seen[t][k], seen[0][(k + t) % names.size()]) << names[(k + t) % names.size()];
      EXPECT_NE(seen[t][k], nullptr);
    }
  }
  ExpectGoldenTensors(**ckpt);
}

TEST(TorchGoldens, LegacyFormatIsRefusedWithAMessage) {
  const std::string path = Goldens() + "/legacy.bin";
  auto file = OpenWeightsFile(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(file.status()), AllOf(HasSubstr(path), HasSubstr("legacy torch.save format"),
                                            HasSubstr("_use_new_zipfile_serialization"), HasSubstr("re-save")));
}

TEST(TorchGoldens, WriterOutputReadsBackToTheSameTensors) {
  // The test-side writer (used to build whole checkpoints below and in other tests) against the reader.
  auto golden = OpenWeightsFile(Goldens() + "/state/pytorch_model.bin");
  ASSERT_TRUE(golden.ok());
  std::vector<testing::RawTensor> tensors;
  for (size_t i = 0; i < (*golden)->size(); ++i) {
    std::string scratch;
    auto raw = (*golden)->RawTensor(i, &scratch);
    ASSERT_TRUE(raw.ok());
    tensors.push_back({(*golden)->name(i), raw->dtype, raw->shape, std::string(raw->bytes)});
  }
  for (const testing::ZipOptions& o :
       {testing::ZipOptions{}, testing::ZipOptions{true, true, true}, testing::ZipOptions{false, false, false}}) {
    for (bool lightning : {false, true}) {
      ScratchDir dir;
      WriteBytes(dir.File("w.bin"), testing::TorchSaveBytes(tensors, "w", lightning, o));
      auto ckpt = OpenCheckpointFile(dir.File("w.bin"));
      ASSERT_TRUE(ckpt.ok()) << ckpt.status();
      ExpectGoldenTensors(**ckpt);
    }
  }
}

// --- broken files -------------------------------------------------------------

class BrokenFiles : public ::testing::Test {
 protected:
  std::string Write(const std::string& bytes, const std::string& name = "bad.bin") {
    const std::string path = dir_.File(name);
    WriteBytes(path, bytes);
    return path;
  }
  // A file with one data.pkl and the given storages.
  std::string Archive(const std::string& pkl, const std::vector<std::pair<std::string, std::string>>& storages = {}) {
    return Write(testing::TorchArchive("bad", pkl, storages));
  }
  absl::Status OpenStatus(const std::string& path) { return OpenCheckpointFile(path).status(); }
  // The error reading tensor `name` (opening must succeed).
  absl::Status FindStatus(const std::string& path, const std::string& name) {
    auto ckpt = OpenCheckpointFile(path);
    if (!ckpt.ok()) return ckpt.status();
    return (*ckpt)->Find(name).status();
  }
  ScratchDir dir_;
};

// {name: tensor} with one F32 storage of `storage_bytes` bytes declared as `numel` elements.
std::string OneTensor(int64_t numel, int64_t offset, const std::vector<int64_t>& size,
                      const std::vector<int64_t>& stride, const std::string& cls = "FloatStorage") {
  PickleBuilder p;
  p.Proto().Global("collections", "OrderedDict").EmptyTuple().Reduce().Mark().Unicode("w");
  p.Tensor(cls, "0", numel, offset, size, stride).SetItems().Stop();
  return p.bytes();
}

TEST_F(BrokenFiles, EveryTruncationIsAnErrorNamingTheFile) {
  const std::string bytes = ReadBytes(Goldens() + "/state/pytorch_model.bin");
  const std::string path = dir_.File("cut.bin");
  for (size_t n = 0; n < bytes.size(); ++n) {
    WriteBytes(path, bytes.substr(0, n));
    absl::Status s = OpenStatus(path);
    ASSERT_FALSE(s.ok()) << n;
    ASSERT_THAT(Message(s), HasSubstr(path)) << n;
  }
}

TEST_F(BrokenFiles, CorruptDataPklFailsItsCrc) {
  std::string bytes = ReadBytes(Goldens() + "/state/pytorch_model.bin");
  auto zip = ZipArchive::Parse("x", reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  ASSERT_TRUE(zip.ok());
  bytes[zip->Find("pytorch_model/data.pkl")->data_offset + 40] ^= 0x20;
  const std::string path = Write(bytes);
  absl::Status s = OpenStatus(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(s), AllOf(HasSubstr(path), HasSubstr("data.pkl"), HasSubstr("CRC-32")));
}

TEST_F(BrokenFiles, CorruptStorageFailsWhenItsTensorIsReadAndOnlyThen) {
  std::string bytes = ReadBytes(Goldens() + "/state/pytorch_model.bin");
  auto file = TorchFile::FromBytes("x", bytes);
  ASSERT_TRUE(file.ok());
  // Flip a byte of the storage behind q_proj.
  const TorchTensor* q = nullptr;
  for (const TorchTensor& t : (*file)->tensors()) {
    if (t.name == "language_model.model.layers.0.self_attn.q_proj.weight") q = &t;
  }
  ASSERT_NE(q, nullptr);
  auto zip = ZipArchive::Parse("x", reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  bytes[zip->Find("pytorch_model/data/2")->data_offset + 3] ^= 0x01;  // storage keys follow the save order
  const std::string path = Write(bytes);
  auto ckpt = OpenCheckpointFile(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();  // lazily verified: opening reads no storage
  EXPECT_TRUE((*ckpt)->Find("language_model.model.embed_tokens.weight").ok());
  absl::Status s = (*ckpt)->Find(q->name).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(s), AllOf(HasSubstr(path), HasSubstr("data/2"), HasSubstr("CRC-32"), HasSubstr(q->name)));
}

TEST_F(BrokenFiles, NotAZipIsRefused) {
  EXPECT_THAT(Message(OpenStatus(Write("hello world, not a checkpoint"))), HasSubstr("not a PyTorch checkpoint"));
  EXPECT_THAT(Message(OpenStatus(Write(PickleBuilder().Proto().EmptyDict().Stop().bytes()))),
              HasSubstr("a bare pickle"));
  std::string tar(1024, '\0');
  tar.replace(257, 5, "ustar");
  EXPECT_THAT(Message(OpenStatus(Write(tar))), HasSubstr("legacy tar"));
  EXPECT_THAT(Message(OpenStatus(Write(testing::ZipBytes({{"m/constants.pkl", "x"}, {"m/code/m.py", "x"}})))),
              HasSubstr("TorchScript"));
  EXPECT_THAT(Message(OpenStatus(Write(testing::ZipBytes({{"m/readme", "x"}})))),
              HasSubstr("without <archive>/data.pkl"));
}

TEST_F(BrokenFiles, BigEndianIsRefused) {
  std::string bytes = testing::ZipBytes(
      {{"a/data.pkl", OneTensor(1, 0, {1}, {1})}, {"a/byteorder", "big"}, {"a/data/0", std::string(4, '\0')}});
  EXPECT_THAT(Message(OpenStatus(Write(bytes))), HasSubstr("byteorder is 'big'"));
}

TEST_F(BrokenFiles, StorageShorterThanDeclaredNamesTensorAndRecord) {
  const std::string path = Archive(OneTensor(100, 0, {100}, {1}), {{"0", std::string(8, '\0')}});
  absl::Status s = OpenStatus(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(s), AllOf(HasSubstr(path), HasSubstr("tensor 'w'"), HasSubstr("bad/data/0"),
                                HasSubstr("holds 8 bytes"), HasSubstr("100 x F32")));
}

TEST_F(BrokenFiles, ViewsOutsideTheirStorageNameTheTensor) {
  struct Case {
    const char* what;
    int64_t offset;
    std::vector<int64_t> size, stride;
  };
  const std::vector<Case> cases = {
      {"longer than the storage", 0, {5}, {1}},
      {"offset past the end", 3, {2}, {1}},
      {"stride outside", 0, {2, 2}, {1, 4}},
      {"empty view starting past the end", 5, {0}, {1}},
      {"huge stride", 0, {2}, {int64_t{1} << 62}},
      {"huge everything", int64_t{1} << 62, {int64_t{1} << 31, int64_t{1} << 31}, {int64_t{1} << 62, int64_t{1} << 62}},
  };
  for (const Case& c : cases) {
    const std::string path = Archive(OneTensor(4, c.offset, c.size, c.stride), {{"0", std::string(16, '\0')}});
    absl::Status s = OpenStatus(path);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << c.what;
    EXPECT_THAT(Message(s), AllOf(HasSubstr("tensor 'w'"), HasSubstr("runs past its storage of 4 elements"))) << c.what;
  }
}

TEST_F(BrokenFiles, AbsurdShapesAndRepeatingViewsAreRefusedWithoutAllocating) {
  const int64_t big = int64_t{1} << 40;
  absl::Status s = OpenStatus(Archive(OneTensor(4, 0, {big, big}, {0, 0}), {{"0", std::string(16, '\0')}}));
  EXPECT_THAT(Message(s), AllOf(HasSubstr("tensor 'w'"), HasSubstr("absurd")));
  // 2^40 elements of stride 0 stay inside a 4-element storage; copying them out would need 4 TiB.
  s = OpenStatus(Archive(OneTensor(4, 0, {big}, {0}), {{"0", std::string(16, '\0')}}));
  EXPECT_THAT(Message(s), AllOf(HasSubstr("tensor 'w'"), HasSubstr("repeats elements")));
  // An empty tensor with huge other dimensions is just empty (no overflow on the way).
  auto empty = OpenCheckpointFile(
      Archive(OneTensor(4, 0, {0, int64_t{1} << 62, int64_t{1} << 62}, {1, 1, 1}), {{"0", std::string(16, '\0')}}));
  ASSERT_TRUE(empty.ok()) << empty.status();
  auto info = (*empty)->Find("w");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ((*info)->nbytes, 0u);
}

TEST_F(BrokenFiles, MissingOrCompressedStorageRecordNamesIt) {
  absl::Status s = OpenStatus(Archive(OneTensor(4, 0, {4}, {1}), {{"1", std::string(16, '\0')}}));
  EXPECT_THAT(Message(s), AllOf(HasSubstr("tensor 'w'"), HasSubstr("bad/data/0"), HasSubstr("missing")));
}

TEST_F(BrokenFiles, NonContiguousAndConvertedTensorsAreMaterialisedOnFirstRead) {
  // 2 x 3 transposed view of a 3 x 2 F16 storage; an I64 tensor whose value f32 cannot hold exactly.
  std::string f16;
  for (uint16_t v : {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600}) {  // 1 2 3 4 5 6
    f16.push_back(static_cast<char>(v & 0xff));
    f16.push_back(static_cast<char>(v >> 8));
  }
  PickleBuilder p;
  p.Proto().Global("collections", "OrderedDict").EmptyTuple().Reduce().Mark();
  p.Unicode("t").Tensor("HalfStorage", "0", 6, 0, {2, 3}, {1, 2});
  p.Unicode("big").Tensor("LongStorage", "1", 1, 0, {}, {});
  p.Unicode("small").Tensor("LongStorage", "2", 1, 0, {1}, {1});
  p.SetItems().Stop();
  std::string big(8, '\0'), small(8, '\0');
  big[5] = 1;     // 2^40
  small[0] = -3;  // -3 as int64 little-endian
  for (int i = 1; i < 8; ++i) small[i] = static_cast<char>(0xff);
  auto ckpt = OpenCheckpointFile(Archive(p.bytes(), {{"0", f16}, {"1", big}, {"2", small}}));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto t = (*ckpt)->LoadF32("t", {2, 3});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, (std::vector<float>{1, 3, 5, 2, 4, 6}));
  auto found = (*ckpt)->Find("t");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->dtype, DType::kF16);
  EXPECT_EQ((*ckpt)->Find("t").value(), *found);  // made once
  auto s = (*ckpt)->LoadF32("small", {1});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0], -3.0f);
  absl::Status b = (*ckpt)->Find("big").status();
  EXPECT_EQ(b.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(Message(b), AllOf(HasSubstr("tensor 'big'"), HasSubstr("I64"), HasSubstr("cannot represent")));
}

TEST_F(BrokenFiles, StateDictShapeErrorsNameTheEntry) {
  struct Case {
    const char* what;
    std::string pkl;
    const char* message;
  };
  auto entry = [](const std::function<void(PickleBuilder&)>& value) {
    PickleBuilder p;
    p.Proto().EmptyDict().Mark().Unicode("w");
    value(p);
    return p.SetItems().Stop().bytes();
  };
  const std::vector<Case> cases = {
      {"top is a list", PickleBuilder().Proto().EmptyList().Stop().bytes(), "holds a list, not a state dict"},
      {"top is an object", PickleBuilder().Proto().Global("foo", "Model").EmptyTuple().Reduce().Stop().bytes(),
       "holds an object of 'foo.Model'"},
      {"value is a list", entry([](PickleBuilder& p) { p.EmptyList(); }), "entry 'w' is a list, not a tensor"},
      {"value is a dict", entry([](PickleBuilder& p) { p.EmptyDict(); }), "entry 'w' is a dict"},
      {"non-string key", PickleBuilder().Proto().EmptyDict().Int(3).Int(4).SetItem().Stop().bytes(), "key 0 is an int"},
      {"duplicate key",
       PickleBuilder().Proto().EmptyDict().Mark().Unicode("a").Int(1).Unicode("a").Int(2).SetItems().Stop().bytes(),
       "'a' appears twice"},
  };
  for (const Case& c : cases) {
    absl::Status s = OpenStatus(Archive(c.pkl));
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_THAT(Message(s), HasSubstr(c.message)) << c.what;
  }
  // Plain values among the tensors are skipped, not errors.
  auto ok = TorchFile::Open(Archive(entry([](PickleBuilder& p) { p.Int(3); })));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE((*ok)->tensors().empty());
  EXPECT_THAT((*ok)->skipped(), ::testing::ElementsAre("w: an int"));
}

// --- names: what a bare state dict may use, what a skipped Lightning entry may use --

std::string WithValue(bool lightning, const std::function<void(PickleBuilder&)>& value) {
  PickleBuilder p;
  p.Proto().EmptyDict().Mark();
  if (lightning) {
    p.Unicode("state_dict").Global("collections", "OrderedDict").EmptyTuple().Reduce();
    p.Mark().Unicode("w").Tensor("FloatStorage", "0", 1, 0, {1}, {1}).SetItems();
    p.Unicode("callbacks");
  } else {
    p.Unicode("w").Tensor("FloatStorage", "0", 1, 0, {1}, {1}).Unicode("meta");
  }
  value(p);
  return p.SetItems().Stop().bytes();
}

TEST_F(BrokenFiles, HostileGlobalsAreRefusedInStateDictsAndSkippedEntriesAlike) {
  const std::string marker = dir_.File("pwned");
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{{"os", "system"},
                                                                                     {"posix", "system"},
                                                                                     {"builtins", "eval"},
                                                                                     {"subprocess", "Popen"},
                                                                                     {"functools", "reduce"},
                                                                                     {"builtins", "getattr"}}) {
    for (bool lightning : {false, true}) {
      const std::string path = Archive(
          WithValue(lightning,
                    [&](PickleBuilder& p) { p.Global(module, name).Unicode("touch " + marker).Tuple1().Reduce(); }),
          {{"0", std::string(4, '\0')}});
      absl::Status s = OpenStatus(path);
      ASSERT_FALSE(s.ok()) << module << "." << name;
      EXPECT_THAT(Message(s), AllOf(HasSubstr(path), HasSubstr(module + "." + name), HasSubstr("refused")));
    }
  }
  EXPECT_FALSE(std::filesystem::exists(marker)) << "nothing from a checkpoint may run";
}

TEST_F(BrokenFiles, UnknownGlobalInABareStateDictIsRefusedByName) {
  const std::string path =
      Archive(WithValue(false, [](PickleBuilder& p) { p.Global("mylib.config", "Settings").EmptyTuple().Reduce(); }),
              {{"0", std::string(4, '\0')}});
  absl::Status s = OpenStatus(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr(path), HasSubstr("'mylib.config.Settings'"), HasSubstr("refused")));
  // Even when nothing refers to it (pushed and popped).
  PickleBuilder p;
  p.Proto().Global("mylib", "Unused").Pop().EmptyDict().Stop();
  EXPECT_THAT(Message(OpenStatus(Archive(p.bytes()))), HasSubstr("'mylib.Unused'"));
}

TEST_F(BrokenFiles, UnknownGlobalInASkippedLightningEntryIsListedNotRefused) {
  auto file = TorchFile::Open(
      Archive(WithValue(true, [](PickleBuilder& p) { p.Global("mylib.config", "Settings").EmptyTuple().Reduce(); }),
              {{"0", std::string(4, '\0')}}));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 1u);
  EXPECT_THAT((*file)->skipped(), ::testing::ElementsAre("callbacks: an object of 'mylib.config.Settings'"));
}

TEST_F(BrokenFiles, UnknownGlobalInsideTheLightningStateDictIsRefused) {
  PickleBuilder p;
  p.Proto().EmptyDict().Mark().Unicode("state_dict").EmptyDict().Mark();
  p.Unicode("w").Global("mylib", "LazyTensor").EmptyTuple().Reduce().SetItems().SetItems().Stop();
  absl::Status s = OpenStatus(Archive(p.bytes()));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr("entry 'w'"), HasSubstr("'mylib.LazyTensor'"), HasSubstr("not a tensor")));
}

// --- directories --------------------------------------------------------------

TEST(TorchDirectories, SafetensorsIsPreferredWhenBothAreThere) {
  ScratchDir dir;
  testing::CopyDir(Goldens() + "/state", dir.path());
  testing::CopyDir(testing::TinyCheckpoint("tiny-mha"), dir.path());
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*(*ckpt)->Find("gen_embed.weight"))->file, dir.File("model.safetensors"));
  EXPECT_FALSE((*ckpt)->Has("gen_vision_model.decoder.empty"));
}

TEST(TorchDirectories, MissingShardNamesIndexAndShard) {
  ScratchDir dir;
  testing::CopyDir(Goldens() + "/sharded", dir.path());
  std::filesystem::remove(dir.File("pytorch_model-00002-of-00002.bin"));
  absl::Status s = Checkpoint::Open(dir.path()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(s),
              AllOf(HasSubstr("pytorch_model.bin.index.json"), HasSubstr("pytorch_model-00002-of-00002.bin")));
}

TEST(TorchDirectories, LegacyShardNamesTheShard) {
  ScratchDir dir;
  testing::CopyDir(Goldens() + "/sharded", dir.path());
  std::filesystem::copy_file(Goldens() + "/legacy.bin", dir.File("pytorch_model-00001-of-00002.bin"),
                             std::filesystem::copy_options::overwrite_existing);
  absl::Status s = Checkpoint::Open(dir.path()).status();
  EXPECT_THAT(Message(s), AllOf(HasSubstr("pytorch_model-00001-of-00002.bin"), HasSubstr("legacy")));
}

TEST(TorchDirectories, NoWeightsListsEveryLayout) {
  ScratchDir dir;
  absl::Status s = Checkpoint::Open(dir.path()).status();
  EXPECT_THAT(Message(s), AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("pytorch_model.bin"),
                                HasSubstr("pytorch_model.bin.index.json"), Not(HasSubstr("converted"))));
}

}  // namespace
}  // namespace argen::checkpoint
