#include "engine/checkpoint/tests/torch_writer.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "engine/checkpoint/zip_archive.h"
#include "nlohmann/json.hpp"

namespace argen::checkpoint::testing {
namespace {

namespace fs = std::filesystem;

void Put16(std::string& s, uint16_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>(v >> 8));
}
void Put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void Put64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t Sat32(uint64_t v, bool zip64) { return zip64 ? 0xffffffffu : static_cast<uint32_t>(v); }

}  // namespace

PickleBuilder& PickleBuilder::Op(char op) {
  out_.push_back(op);
  return *this;
}
PickleBuilder& PickleBuilder::Proto(int version) {
  out_.push_back(static_cast<char>(0x80));
  out_.push_back(static_cast<char>(version));
  return *this;
}
PickleBuilder& PickleBuilder::Global(std::string_view module, std::string_view name) {
  out_ += 'c';
  out_ += module;
  out_ += '\n';
  out_ += name;
  out_ += '\n';
  return *this;
}
PickleBuilder& PickleBuilder::Mark() { return Op('('); }
PickleBuilder& PickleBuilder::Tuple() { return Op('t'); }
PickleBuilder& PickleBuilder::Tuple1() { return Op(static_cast<char>(0x85)); }
PickleBuilder& PickleBuilder::Tuple2() { return Op(static_cast<char>(0x86)); }
PickleBuilder& PickleBuilder::Tuple3() { return Op(static_cast<char>(0x87)); }
PickleBuilder& PickleBuilder::EmptyTuple() { return Op(')'); }
PickleBuilder& PickleBuilder::EmptyList() { return Op(']'); }
PickleBuilder& PickleBuilder::EmptyDict() { return Op('}'); }
PickleBuilder& PickleBuilder::Append() { return Op('a'); }
PickleBuilder& PickleBuilder::Appends() { return Op('e'); }
PickleBuilder& PickleBuilder::SetItem() { return Op('s'); }
PickleBuilder& PickleBuilder::SetItems() { return Op('u'); }
PickleBuilder& PickleBuilder::Unicode(std::string_view s) {
  out_ += 'X';
  Put32(out_, static_cast<uint32_t>(s.size()));
  out_ += s;
  return *this;
}
PickleBuilder& PickleBuilder::Int(int64_t v) {
  if (v >= 0 && v < 256) {
    out_ += 'K';
    out_.push_back(static_cast<char>(v));
  } else if (v >= 0 && v < 65536) {
    out_ += 'M';
    Put16(out_, static_cast<uint16_t>(v));
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out_ += 'J';
    Put32(out_, static_cast<uint32_t>(static_cast<int32_t>(v)));
  } else {
    out_.push_back(static_cast<char>(0x8a));
    out_.push_back(8);
    Put64(out_, static_cast<uint64_t>(v));
  }
  return *this;
}
PickleBuilder& PickleBuilder::Float(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  out_ += 'G';
  for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  return *this;
}
PickleBuilder& PickleBuilder::Bool(bool v) { return Op(static_cast<char>(v ? 0x88 : 0x89)); }
PickleBuilder& PickleBuilder::None() { return Op('N'); }
PickleBuilder& PickleBuilder::Reduce() { return Op('R'); }
PickleBuilder& PickleBuilder::Build() { return Op('b'); }
PickleBuilder& PickleBuilder::PersId() { return Op('Q'); }
PickleBuilder& PickleBuilder::Put(uint32_t memo) {
  out_ += 'r';
  Put32(out_, memo);
  return *this;
}
PickleBuilder& PickleBuilder::Get(uint32_t memo) {
  out_ += 'j';
  Put32(out_, memo);
  return *this;
}
PickleBuilder& PickleBuilder::Pop() { return Op('0'); }
PickleBuilder& PickleBuilder::Stop() { return Op('.'); }
PickleBuilder& PickleBuilder::Raw(std::string_view bytes) {
  out_ += bytes;
  return *this;
}
PickleBuilder& PickleBuilder::Ints(const std::vector<int64_t>& v) {
  Mark();
  for (int64_t x : v) Int(x);
  return Tuple();
}
PickleBuilder& PickleBuilder::Tensor(std::string_view storage_class, std::string_view key, int64_t numel,
                                     int64_t offset, const std::vector<int64_t>& size,
                                     const std::vector<int64_t>& stride) {
  Global("torch._utils", "_rebuild_tensor_v2").Mark();
  Mark().Unicode("storage").Global("torch", storage_class).Unicode(key).Unicode("cpu").Int(numel).Tuple().PersId();
  Int(offset).Ints(size).Ints(stride).Bool(false);
  Global("collections", "OrderedDict").EmptyTuple().Reduce();
  return Tuple().Reduce();
}

std::string ZipBytes(const std::vector<std::pair<std::string, std::string>>& records, const ZipOptions& o) {
  std::string out, central;
  for (const auto& [name, data] : records) {
    const uint64_t offset = out.size();
    const uint32_t crc = o.crc ? Crc32(data.data(), data.size()) : 0;
    std::string extra;
    if (o.zip64) {
      Put16(extra, 0x0001);
      Put16(extra, 16);
      Put64(extra, data.size());
      Put64(extra, data.size());
    }
    if (o.align64) {
      const size_t start = offset + 30 + name.size() + extra.size() + 4;
      const size_t pad = (64 - start % 64) % 64;
      Put16(extra, 0x4246);  // "FB", as torch's writer
      Put16(extra, static_cast<uint16_t>(pad));
      extra.append(pad, 'Z');
    }
    Put32(out, 0x04034b50);
    Put16(out, o.zip64 ? 45 : 20);
    Put16(out, 0);
    Put16(out, 0);  // stored
    Put16(out, 0);
    Put16(out, 0x21);
    Put32(out, crc);
    Put32(out, Sat32(data.size(), o.zip64));
    Put32(out, Sat32(data.size(), o.zip64));
    Put16(out, static_cast<uint16_t>(name.size()));
    Put16(out, static_cast<uint16_t>(extra.size()));
    out += name;
    out += extra;
    out += data;

    std::string cextra;
    if (o.zip64) {
      Put16(cextra, 0x0001);
      Put16(cextra, 24);
      Put64(cextra, data.size());
      Put64(cextra, data.size());
      Put64(cextra, offset);
    }
    Put32(central, 0x02014b50);
    Put16(central, o.zip64 ? 45 : 20);
    Put16(central, o.zip64 ? 45 : 20);
    Put16(central, 0);
    Put16(central, 0);
    Put16(central, 0);
    Put16(central, 0x21);
    Put32(central, crc);
    Put32(central, Sat32(data.size(), o.zip64));
    Put32(central, Sat32(data.size(), o.zip64));
    Put16(central, static_cast<uint16_t>(name.size()));
    Put16(central, static_cast<uint16_t>(cextra.size()));
    Put16(central, 0);
    Put16(central, 0);
    Put16(central, 0);
    Put32(central, 0);
    Put32(central, Sat32(offset, o.zip64));
    central += name;
    central += cextra;
  }
  const uint64_t cd_offset = out.size();
  out += central;
  const uint64_t n = records.size();
  if (o.zip64) {
    const uint64_t record = out.size();
    Put32(out, 0x06064b50);
    Put64(out, 44);
    Put16(out, 45);
    Put16(out, 45);
    Put32(out, 0);
    Put32(out, 0);
    Put64(out, n);
    Put64(out, n);
    Put64(out, central.size());
    Put64(out, cd_offset);
    Put32(out, 0x07064b50);
    Put32(out, 0);
    Put64(out, record);
    Put32(out, 1);
  }
  Put32(out, 0x06054b50);
  Put16(out, 0);
  Put16(out, 0);
  Put16(out, o.zip64 ? 0xffff : static_cast<uint16_t>(n));
  Put16(out, o.zip64 ? 0xffff : static_cast<uint16_t>(n));
  Put32(out, Sat32(central.size(), o.zip64));
  Put32(out, Sat32(cd_offset, o.zip64));
  Put16(out, 0);
  return out;
}

std::string TorchArchive(const std::string& archive, const std::string& data_pkl,
                         const std::vector<std::pair<std::string, std::string>>& storages, const ZipOptions& options) {
  std::vector<std::pair<std::string, std::string>> records = {{archive + "/data.pkl", data_pkl},
                                                              {archive + "/.format_version", "1"},
                                                              {archive + "/.storage_alignment", "64"},
                                                              {archive + "/byteorder", "little"}};
  for (const auto& [key, bytes] : storages) records.emplace_back(archive + "/data/" + key, bytes);
  records.emplace_back(archive + "/version", "3\n");
  records.emplace_back(archive + "/.data/serialization_id", "0123456789012345678901234567890123456789");
  return ZipBytes(records, options);
}

std::string StorageClass(std::string_view dtype) {
  static const std::map<std::string, std::string, std::less<>> kClasses = {
      {"F32", "FloatStorage"}, {"F16", "HalfStorage"}, {"BF16", "BFloat16Storage"}, {"F64", "DoubleStorage"},
      {"I64", "LongStorage"},  {"I32", "IntStorage"},  {"I16", "ShortStorage"},     {"I8", "CharStorage"},
      {"U8", "ByteStorage"},   {"BOOL", "BoolStorage"}};
  const auto it = kClasses.find(dtype);
  return it == kClasses.end() ? std::string("UnknownStorage") : it->second;
}

namespace {
size_t ElementBytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16") return 2;
  return 1;
}
}  // namespace

std::string TorchSaveBytes(const std::vector<RawTensor>& tensors, const std::string& archive, bool lightning,
                           const ZipOptions& options) {
  PickleBuilder p;
  p.Proto(2);
  if (lightning) p.EmptyDict().Mark().Unicode("epoch").Int(1).Unicode("state_dict");
  p.Global("collections", "OrderedDict").EmptyTuple().Reduce().Mark();
  std::vector<std::pair<std::string, std::string>> storages;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const RawTensor& t = tensors[i];
    const std::string key = std::to_string(i);
    const auto numel = static_cast<int64_t>(t.bytes.size() / ElementBytes(t.dtype));
    std::vector<int64_t> stride(t.shape.size());
    int64_t s = 1;
    for (size_t d = t.shape.size(); d-- > 0;) {
      stride[d] = s;
      s *= t.shape[d];
    }
    p.Unicode(t.name).Tensor(StorageClass(t.dtype), key, numel, 0, t.shape, stride);
    storages.emplace_back(key, t.bytes);
  }
  p.SetItems();
  if (lightning) p.Unicode("pytorch-lightning_version").Unicode("2.1.0").SetItems();
  p.Stop();
  return TorchArchive(archive, p.bytes(), storages, options);
}

void WriteTorchCheckpointDir(const std::vector<RawTensor>& tensors, const std::string& source_dir,
                             const std::string& out_dir, int shards) {
  fs::create_directories(out_dir);
  for (const char* f : {"config.json", "tokenizer.json"}) {
    fs::copy_file(fs::path(source_dir) / f, fs::path(out_dir) / f, fs::copy_options::overwrite_existing);
  }
  if (shards <= 1) {
    WriteBytes(out_dir + "/pytorch_model.bin", TorchSaveBytes(tensors, "pytorch_model"));
    return;
  }
  size_t total = 0;
  for (const RawTensor& t : tensors) total += t.bytes.size();
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}};
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  size_t next = 0, written = 0;
  for (int s = 1; s <= shards; ++s) {
    char stem[64];
    std::snprintf(stem, sizeof(stem), "pytorch_model-%05d-of-%05d", s, shards);
    std::vector<RawTensor> part;
    // Contiguous ranges of roughly equal bytes, as save_pretrained's max_shard_size does.
    while (next < tensors.size() &&
           (s == shards || written + tensors[next].bytes.size() <= total * s / shards || part.empty())) {
      written += tensors[next].bytes.size();
      part.push_back(tensors[next++]);
    }
    for (const RawTensor& t : part) weight_map[t.name] = std::string(stem) + ".bin";
    WriteBytes(out_dir + "/" + stem + ".bin", TorchSaveBytes(part, stem));
  }
  index["weight_map"] = weight_map;
  WriteBytes(out_dir + "/pytorch_model.bin.index.json", index.dump(2));
}

}  // namespace argen::checkpoint::testing
