// A bounded, seeded mutation loop over the PyTorch reader (torch_fuzz.h),
// run by ctest in every build; under ARGEN_SANITIZE=ON it runs with ASan and
// UBSan. Seeds: the torch.save goldens and their data.pkl streams. Every
// allocation is watched: none may exceed kAllocationLimit, so a length or
// count read from the input can never size an allocation. Run longer with
// ARGEN_FUZZ_SECONDS=60 (default 3); libFuzzer: tests/fuzz/fuzz_torch_checkpoint.cc.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "engine/checkpoint/tests/test_files.h"
#include "engine/checkpoint/tests/torch_fuzz.h"
#include "engine/checkpoint/tests/torch_writer.h"
#include "engine/checkpoint/torch_file.h"
#include "engine/checkpoint/zip_archive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// --- allocation watch -----------------------------------------------------------
namespace {
std::atomic<size_t> g_largest{0};
void Note(size_t n) {
  size_t seen = g_largest.load(std::memory_order_relaxed);
  while (n > seen && !g_largest.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
  }
}
}  // namespace

// The replacements pair malloc with free; GCC cannot see that through operator new.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t n) {
  Note(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  Note(n);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace argen::checkpoint {
namespace {

using ::testing::HasSubstr;

// Inputs are at most ~64 KB and the built archives' storages at most 1 MiB;
// materialising converts at most 4 bytes per stored byte.
constexpr size_t kAllocationLimit = 16u << 20;

std::string Goldens() { return testing::SourceDir() + "/tests/goldens/torch"; }

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(Goldens())) {
    if (!entry.is_regular_file() || entry.path().extension() == ".json") continue;
    const std::string bytes = testing::ReadBytes(entry.path().string());
    seeds.push_back(bytes);
    auto zip = ZipArchive::Parse("seed", reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    if (!zip.ok()) continue;
    for (const ZipEntry& e : zip->entries()) {
      if (e.name.size() > 8 && e.name.compare(e.name.size() - 8, 8, "data.pkl") == 0) {
        seeds.emplace_back(*zip->Bytes(e));
      }
    }
  }
  return seeds;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::string Mutate(std::string s, const std::vector<std::string>& seeds) {
    const int rounds = 1 + static_cast<int>(Below(8));
    for (int r = 0; r < rounds; ++r) {
      switch (Below(s.empty() ? 2 : 9)) {
        case 0:
          s.insert(Below(s.size() + 1), RandomBytes(1 + Below(16)));
          break;
        case 1: {  // splice from another seed
          const std::string& other = seeds[Below(seeds.size())];
          if (other.empty()) break;
          const size_t at = Below(other.size()), n = 1 + Below(std::min<size_t>(64, other.size() - at));
          s.insert(Below(s.size() + 1), other.substr(at, n));
          break;
        }
        case 2:
          s[Below(s.size())] ^= static_cast<char>(1u << Below(8));
          break;
        case 3:
          s[Below(s.size())] = static_cast<char>(kInteresting8[Below(std::size(kInteresting8))]);
          break;
        case 4: {  // an interesting little-endian integer of 2, 4 or 8 bytes
          const size_t width = size_t{2} << Below(3);
          if (s.size() < width) break;
          const uint64_t v = kInteresting64[Below(std::size(kInteresting64))];
          const size_t at = Below(s.size() - width + 1);
          for (size_t i = 0; i < width; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
          break;
        }
        case 5:
          s.erase(Below(s.size()), 1 + Below(std::min<size_t>(s.size(), 32)));
          break;
        case 6:
          s.resize(Below(s.size()));
          break;
        case 7: {  // duplicate a range
          const size_t at = Below(s.size()), n = 1 + Below(std::min<size_t>(64, s.size() - at));
          s.insert(Below(s.size() + 1), s.substr(at, n));
          break;
        }
        case 8: {  // a pickle opcode with a random operand
          std::string op(1, static_cast<char>(kOpcodes[Below(std::size(kOpcodes))]));
          op += RandomBytes(Below(9));
          s.insert(Below(s.size() + 1), op);
          break;
        }
      }
    }
    if (s.size() > (64u << 10)) s.resize(64u << 10);
    return s;
  }

 private:
  static constexpr unsigned char kInteresting8[] = {0, 1, 0x7f, 0x80, 0xff, '\n', '.', '(', 'X', 'Q'};
  static constexpr uint64_t kInteresting64[] = {
      0,  1,   0xff, 0xffff, 0x7fffffff, 0xffffffff, 0x100000000ull, 0x7fffffffffffffffull, 0xffffffffffffffffull,
      64, 4096};
  static constexpr unsigned char kOpcodes[] = {
      '(',  ')',  ']',  '}',  't',  'l',  'd',  'a',  'e',  's',  'u',  'R',  'b',  'Q',  'h',  'j',  'q',
      'r',  'K',  'M',  'J',  'X',  'N',  0x88, 0x89, 0x8a, 0x8b, 0x85, 0x86, 0x87, 0x80, 0x93, 0x94, 0x95,
      0x8c, 0x8f, 0x90, 0x91, 0x81, 0x92, 'c',  '0',  '1',  '2',  '.',  'o',  'i',  'G',  'B',  'C'};
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  std::string RandomBytes(size_t n) {
    std::string out(n, '\0');
    for (char& c : out) c = static_cast<char>(rng_());
    return out;
  }
  std::mt19937_64 rng_;
};

double Seconds() {
  const char* s = std::getenv("ARGEN_FUZZ_SECONDS");
  return s != nullptr ? std::atof(s) : 3.0;
}

TEST(TorchFuzz, SeededMutationsNeverCrashHangOrOverAllocate) {
  const std::vector<std::string> seeds = Seeds();
  ASSERT_GE(seeds.size(), 15u);
  for (const std::string& s : seeds) {
    g_largest = 0;
    testing::FuzzTorchCheckpoint(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  Mutator mutator(20251201);
  const auto start = std::chrono::steady_clock::now();
  const double budget = Seconds();
  size_t runs = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < budget && runs < 2000000) {
    const std::string input = mutator.Mutate(seeds[runs % seeds.size()], seeds);
    g_largest = 0;
    testing::FuzzTorchCheckpoint(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ASSERT_LE(g_largest.load(), kAllocationLimit) << "run " << runs << ": an allocation sized by the input";
    ++runs;
  }
  std::printf("torch fuzz: %zu mutated inputs in %.1f s\n", runs, budget);
  EXPECT_GT(runs, 100u);
}

TEST(TorchFuzz, EveryGlobalReplacedByAHostileOneIsRefusedByName) {
  // Each golden's data.pkl with every GLOBAL renamed to a code-execution primitive, one at a time.
  const std::vector<std::string> hostile = {"os\nsystem",     "posix\nsystem",     "builtins\neval",
                                            "builtins\nexec", "subprocess\nPopen", "functools\nreduce",
                                            "nt\nsystem",     "builtins\ngetattr", "runpy\n_run_code"};
  int cases = 0;
  for (const char* name : {"state/pytorch_model.bin", "lightning.ckpt", "lightning_v1.ckpt"}) {
    const std::string bytes = testing::ReadBytes(Goldens() + "/" + name);
    auto zip = ZipArchive::Parse("g", reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    ASSERT_TRUE(zip.ok());
    std::string pkl;
    std::vector<std::pair<std::string, std::string>> storages;
    for (const ZipEntry& e : zip->entries()) {
      const std::string rest = e.name.substr(e.name.find('/') + 1);
      if (rest == "data.pkl") pkl = std::string(*zip->Bytes(e));
      if (rest.rfind("data/", 0) == 0) storages.emplace_back(rest.substr(5), std::string(*zip->Bytes(e)));
    }
    ASSERT_FALSE(pkl.empty());
    for (size_t at = pkl.find('c'); at != std::string::npos; at = pkl.find('c', at + 1)) {
      // A GLOBAL opcode: 'c', module, '\n', name, '\n' with printable text.
      const size_t nl1 = pkl.find('\n', at), nl2 = nl1 == std::string::npos ? nl1 : pkl.find('\n', nl1 + 1);
      if (nl2 == std::string::npos || nl2 - at > 80 ||
          (pkl.compare(at + 1, 5, "torch") != 0 && pkl.compare(at + 1, 11, "collections") != 0)) {
        continue;
      }
      for (const std::string& h : hostile) {
        std::string mutated = pkl;
        mutated.replace(at + 1, nl2 - at - 1, h);
        auto file = TorchFile::FromBytes("h.bin", testing::TorchArchive("h", mutated, storages));
        ASSERT_FALSE(file.ok()) << name << " at " << at << " " << h;
        std::string dotted = h;
        dotted[dotted.find('\n')] = '.';
        EXPECT_THAT(std::string(file.status().message()), HasSubstr("'" + dotted + "' is refused"));
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 100);
}

}  // namespace
}  // namespace argen::checkpoint
