// ZipArchive on archives written here (plain, ZIP64, unaligned, no CRC), on
// Python's ZIP64 golden, and on every kind of lying directory.
#include "engine/checkpoint/zip_archive.h"

#include <cstring>
#include <functional>

#include "engine/checkpoint/tests/test_files.h"
#include "engine/checkpoint/tests/torch_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace argen::checkpoint {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ZipBytes;
using testing::ZipOptions;

const std::vector<std::pair<std::string, std::string>> kRecords = {
    {"a/data.pkl", "pickle bytes"}, {"a/data/0", std::string(100, '\x01')}, {"a/empty", ""}, {"a/version", "3\n"}};

absl::StatusOr<ZipArchive> Parse(const std::string& bytes) {
  return ZipArchive::Parse("test.zip", reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

void Set32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void Set16(std::string& s, size_t at, uint16_t v) {
  s[at] = static_cast<char>(v & 0xff);
  s[at + 1] = static_cast<char>(v >> 8);
}
size_t FindSig(const std::string& s, uint32_t sig, size_t from = 0) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((sig >> (8 * i)) & 0xff);
  return s.find(std::string(b, 4), from);
}

class ZipVariants : public ::testing::TestWithParam<ZipOptions> {};

TEST_P(ZipVariants, EntriesAreLocatedInPlace) {
  const std::string bytes = ZipBytes(kRecords, GetParam());
  auto zip = Parse(bytes);
  ASSERT_TRUE(zip.ok()) << zip.status();
  ASSERT_EQ(zip->entries().size(), kRecords.size());
  for (const auto& [name, data] : kRecords) {
    const ZipEntry* e = zip->Find(name);
    ASSERT_NE(e, nullptr) << name;
    auto got = zip->Bytes(*e);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, data) << name;
    EXPECT_TRUE(zip->VerifyCrc(*e).ok()) << name;
    if (GetParam().align64) {
      EXPECT_EQ(e->data_offset % 64, 0u) << name;
    }
    if (!GetParam().crc) {
      EXPECT_EQ(e->crc32, 0u);
    }
  }
  EXPECT_EQ(zip->Find("a/missing"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Writers, ZipVariants,
                         ::testing::Values(ZipOptions{}, ZipOptions{true, true, true}, ZipOptions{false, false, true},
                                           ZipOptions{true, false, false}, ZipOptions{false, true, false}));

TEST(ZipArchive, PythonZip64GoldenHasZip64RecordsAndParses) {
  const std::string path = testing::SourceDir() + "/tests/goldens/torch/zip64.bin";
  const std::string bytes = testing::ReadBytes(path);
  ASSERT_NE(FindSig(bytes, 0x06064b50), std::string::npos) << "the golden must carry a ZIP64 end record";
  ASSERT_NE(FindSig(bytes, 0x07064b50), std::string::npos) << "and a ZIP64 locator";
  // Every central entry saturates its 32-bit fields and carries the ZIP64 extra field.
  size_t at = FindSig(bytes, 0x02014b50);
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(static_cast<unsigned char>(bytes[at + 20]), 0xff);
  auto zip = Parse(bytes);
  ASSERT_TRUE(zip.ok()) << zip.status();
  EXPECT_GE(zip->entries().size(), 10u);
  for (const ZipEntry& e : zip->entries()) EXPECT_TRUE(zip->VerifyCrc(e).ok()) << e.name;
}

TEST(ZipArchive, CorruptByteFailsCrcNamingEntry) {
  std::string bytes = ZipBytes(kRecords);
  auto zip = Parse(bytes);
  ASSERT_TRUE(zip.ok());
  const uint64_t at = zip->Find("a/data/0")->data_offset + 50;
  bytes[at] ^= 0x10;
  zip = Parse(bytes);
  ASSERT_TRUE(zip.ok());
  absl::Status s = zip->VerifyCrc(*zip->Find("a/data/0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(s), AllOf(HasSubstr("test.zip"), HasSubstr("a/data/0"), HasSubstr("CRC")));
  EXPECT_TRUE(zip->VerifyCrc(*zip->Find("a/data.pkl")).ok());
}

TEST(ZipArchive, EveryTruncationIsAnErrorNamingTheFile) {
  for (const ZipOptions& o : {ZipOptions{}, ZipOptions{true, true, true}}) {
    const std::string bytes = ZipBytes(kRecords, o);
    for (size_t n = 0; n < bytes.size(); ++n) {
      auto zip = Parse(bytes.substr(0, n));
      ASSERT_FALSE(zip.ok()) << n;
      EXPECT_THAT(Message(zip.status()), HasSubstr("test.zip")) << n;
    }
  }
}

TEST(ZipArchive, CommentAfterTheEndRecordIsAllowed) {
  std::string bytes = ZipBytes(kRecords);
  Set16(bytes, bytes.size() - 2, 5);
  bytes += "hello";
  EXPECT_TRUE(Parse(bytes).ok());
}

TEST(ZipArchive, LyingDirectoriesAreErrors) {
  const std::string good = ZipBytes(kRecords);
  const size_t eocd = good.size() - 22;
  const size_t central = FindSig(good, 0x02014b50);
  const size_t second_central = FindSig(good, 0x02014b50, central + 4);
  struct Case {
    const char* what;
    std::function<void(std::string&)> patch;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"entry count beyond the directory",
       [&](std::string& b) {
         Set16(b, eocd + 10, 5000);
         Set16(b, eocd + 8, 5000);
       },
       "entries"},
      {"directory offset past the end", [&](std::string& b) { Set32(b, eocd + 16, 0x7fffff00); }, "central directory"},
      {"directory size past the end", [&](std::string& b) { Set32(b, eocd + 12, 0x7fffff00); }, "central directory"},
      {"multi-disk", [&](std::string& b) { Set16(b, eocd + 4, 1); }, "multi-disk"},
      {"local header offset to another entry", [&](std::string& b) { Set32(b, second_central + 42, 0); },
       "different entry"},
      {"local header offset past the data", [&](std::string& b) { Set32(b, central + 42, 0x7ffffff0); },
       "no local header"},
      {"entry size past the data",
       [&](std::string& b) {
         Set32(b, central + 20, 1u << 30);
         Set32(b, central + 24, 1u << 30);
       },
       "run past"},
      {"stored sizes disagree", [&](std::string& b) { Set32(b, central + 20, 3); }, "compressed size"},
      {"encrypted", [&](std::string& b) { Set16(b, central + 8, 1); }, "encrypted"},
      {"saturated size without ZIP64 field", [&](std::string& b) { Set32(b, central + 24, 0xffffffffu); }, "ZIP64"},
      {"end record defers to a missing ZIP64 record", [&](std::string& b) { Set32(b, eocd + 16, 0xffffffffu); },
       "ZIP64"},
      {"bad central signature", [&](std::string& b) { b[central] = 'X'; }, "central directory entry"},
      {"no end record", [&](std::string& b) { b[eocd] = 'X'; }, "end-of-central-directory"},
      {"name overruns the directory", [&](std::string& b) { Set16(b, central + 28, 0xffff); }, "runs past"},
  };
  for (const Case& c : cases) {
    std::string bytes = good;
    c.patch(bytes);
    auto zip = Parse(bytes);
    ASSERT_FALSE(zip.ok()) << c.what;
    EXPECT_THAT(Message(zip.status()), AllOf(HasSubstr("test.zip"), HasSubstr(c.message))) << c.what;
  }
}

TEST(ZipArchive, DuplicateNamesAreRefused) {
  auto zip = Parse(ZipBytes({{"a/x", "1"}, {"a/x", "2"}}));
  ASSERT_FALSE(zip.ok());
  EXPECT_THAT(Message(zip.status()), AllOf(HasSubstr("a/x"), HasSubstr("twice")));
}

TEST(ZipArchive, Zip64LocatorToGarbageIsAnError) {
  std::string bytes = ZipBytes(kRecords, ZipOptions{true, true, true});
  const size_t locator = FindSig(bytes, 0x07064b50);
  ASSERT_NE(locator, std::string::npos);
  Set32(bytes, locator + 8, 3);  // the ZIP64 end record is elsewhere
  auto zip = Parse(bytes);
  ASSERT_FALSE(zip.ok());
  EXPECT_THAT(Message(zip.status()), HasSubstr("ZIP64 end-of-central-directory record"));
}

TEST(ZipArchive, CompressedEntryIsLocatedButNotRead) {
  std::string bytes = ZipBytes(kRecords);
  const size_t central = FindSig(bytes, 0x02014b50);
  Set16(bytes, central + 10, 8);  // deflate
  auto zip = Parse(bytes);
  ASSERT_TRUE(zip.ok()) << zip.status();
  auto got = zip->Bytes(*zip->Find("a/data.pkl"));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(Message(got.status()), AllOf(HasSubstr("a/data.pkl"), HasSubstr("compressed")));
}

TEST(Crc32, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32("123456789", 9), 0xcbf43926u);
  EXPECT_EQ(Crc32("", 0), 0u);
}

}  // namespace
}  // namespace argen::checkpoint
