// main() for fuzz targets in builds without libFuzzer (see fuzz_driver.h):
//
//   <target> [--seconds=S] [--runs=N] [--seed=N] [--max_len=B] [--write_crash=DIR] PATH...
//
// Replays every file under each PATH (files or directories, recursively), then
// for S seconds (default 0) or N runs, whichever ends first, calls the target
// on random mutations of those inputs: bit flips, byte edits, inserted
// "interesting" values, erased / duplicated / spliced ranges, and inserted
// tokens taken from the inputs themselves. The mutation sequence is fixed by
// --seed, so `--runs=N --seed=S` reproduces a run exactly. When the target
// crashes, the input is written to DIR/crash-<target>-<n> (default: the
// current directory) from the signal handler, and the process dies as usual.
#include "tests/fuzz/fuzz_driver.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

using Bytes = std::vector<uint8_t>;

// What the crash handler writes out: the input being run.
const uint8_t* g_current = nullptr;
size_t g_current_size = 0;
char g_crash_path[4096] = "";

void WriteCurrentInput() {
  if (g_current == nullptr || g_crash_path[0] == '\0') return;
  const int fd = open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < g_current_size) {
    const ssize_t n = write(fd, g_current + done, g_current_size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  static const char kMsg[] = "fuzz_driver: crashing input written to ";
  (void)!write(2, kMsg, sizeof(kMsg) - 1);
  (void)!write(2, g_crash_path, strlen(g_crash_path));
  (void)!write(2, "\n", 1);
}

void OnFatalSignal(int sig) {
  WriteCurrentInput();
  signal(sig, SIG_DFL);
  raise(sig);
}

void InstallCrashHandlers() {
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) signal(sig, OnFatalSignal);
  std::set_terminate([] {
    WriteCurrentInput();
    std::fputs("fuzz_driver: std::terminate (an exception escaped the target?)\n", stderr);
    signal(SIGABRT, SIG_DFL);
    std::abort();
  });
}

void RunOne(const Bytes& input) {
  g_current = input.data();
  g_current_size = input.size();
  // A copy in a buffer of exactly its size, so ASan sees reads past the end.
  std::unique_ptr<uint8_t[]> exact(new uint8_t[std::max<size_t>(input.size(), 1)]);
  if (!input.empty()) std::memcpy(exact.get(), input.data(), input.size());
  LLVMFuzzerTestOneInput(exact.get(), input.size());
  g_current = nullptr;
}

Bytes ReadAll(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void Collect(const std::filesystem::path& path, std::vector<Bytes>& out) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(path, ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());  // a fixed order, so --seed reproduces
    for (const auto& f : files) out.push_back(ReadAll(f));
  } else if (std::filesystem::is_regular_file(path, ec)) {
    out.push_back(ReadAll(path));
  } else {
    std::fprintf(stderr, "fuzz_driver: %s: no such file or directory\n", path.c_str());
    std::exit(2);
  }
}

class Mutator {
 public:
  Mutator(uint64_t seed, size_t max_len, const std::vector<Bytes>* corpus)
      : rng_(seed), max_len_(max_len), corpus_(corpus) {}

  Bytes Next() {
    Bytes data = corpus_->empty() ? Bytes{} : (*corpus_)[Below(corpus_->size())];
    const int edits = 1 + static_cast<int>(Below(8));
    for (int i = 0; i < edits; ++i) MutateOnce(data);
    if (data.size() > max_len_) data.resize(max_len_);
    return data;
  }

 private:
  size_t Below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  // A range of a random corpus input (for splices and token inserts).
  Bytes Piece(size_t max) {
    if (corpus_->empty()) return {};
    const Bytes& other = (*corpus_)[Below(corpus_->size())];
    if (other.empty()) return {};
    const size_t at = Below(other.size());
    const size_t len = 1 + Below(std::min(max, other.size() - at));
    return Bytes(other.begin() + at, other.begin() + at + len);
  }

  void MutateOnce(Bytes& d) {
    static const uint64_t kInteresting[] = {0,      1,      0x7f,       0x80,       0xff,       0x7fff,
                                            0x8000, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff, 0x7fffffffffffffffULL,
                                            ~0ULL};
    switch (Below(9)) {
      case 0:  // flip a bit
        if (!d.empty()) d[Below(d.size())] ^= static_cast<uint8_t>(1u << Below(8));
        break;
      case 1:  // set a byte
        if (!d.empty()) d[Below(d.size())] = static_cast<uint8_t>(Below(256));
        break;
      case 2: {  // insert a random byte run
        const size_t n = 1 + Below(8);
        Bytes run(n);
        for (auto& b : run) b = static_cast<uint8_t>(Below(256));
        d.insert(d.begin() + static_cast<long>(Below(d.size() + 1)), run.begin(), run.end());
        break;
      }
      case 3: {  // erase a range
        if (d.empty()) break;
        const size_t at = Below(d.size());
        const size_t n = 1 + Below(std::min<size_t>(d.size() - at, 64));
        d.erase(d.begin() + static_cast<long>(at), d.begin() + static_cast<long>(at + n));
        break;
      }
      case 4: {  // overwrite with an interesting little-endian value
        const uint64_t v = kInteresting[Below(std::size(kInteresting))];
        const size_t width = size_t{1} << Below(4);  // 1, 2, 4, 8 bytes
        if (d.size() < width) break;
        const size_t at = Below(d.size() - width + 1);
        for (size_t i = 0; i < width; ++i) d[at + i] = static_cast<uint8_t>(v >> (8 * i));
        break;
      }
      case 5: {  // an ASCII digit run (numbers in text formats)
        static const char* kNumbers[] = {
            "0", "-1", "1e308", "-0", "9999999999999999999", "4294967296", "1.5", "NaN", "null", "\"\"", "[]", "{}"};
        const char* s = kNumbers[Below(std::size(kNumbers))];
        d.insert(d.begin() + static_cast<long>(Below(d.size() + 1)), s, s + std::strlen(s));
        break;
      }
      case 6: {  // duplicate a range in place
        if (d.empty()) break;
        const size_t at = Below(d.size());
        const size_t n = 1 + Below(std::min<size_t>(d.size() - at, 256));
        Bytes copy(d.begin() + static_cast<long>(at), d.begin() + static_cast<long>(at + n));
        d.insert(d.begin() + static_cast<long>(Below(d.size() + 1)), copy.begin(), copy.end());
        break;
      }
      case 7: {  // splice in a piece of another input
        Bytes p = Piece(64);
        d.insert(d.begin() + static_cast<long>(Below(d.size() + 1)), p.begin(), p.end());
        break;
      }
      default: {  // truncate
        if (!d.empty()) d.resize(Below(d.size()));
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  const size_t max_len_;
  const std::vector<Bytes>* corpus_;
};

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0;
  uint64_t runs = UINT64_MAX;
  uint64_t seed = 1;
  size_t max_len = 1 << 16;
  std::string crash_dir = ".";
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (Flag(argv[i], "--seconds", &v))
      seconds = std::atof(v.c_str());
    else if (Flag(argv[i], "--runs", &v))
      runs = std::strtoull(v.c_str(), nullptr, 10);
    else if (Flag(argv[i], "--seed", &v))
      seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (Flag(argv[i], "--max_len", &v))
      max_len = std::strtoull(v.c_str(), nullptr, 10);
    else if (Flag(argv[i], "--write_crash", &v))
      crash_dir = v;
    else if (argv[i][0] == '-') {
      std::fprintf(stderr, "usage: %s [--seconds=S] [--runs=N] [--seed=N] [--max_len=B] [--write_crash=DIR] PATH...\n",
                   argv[0]);
      return 2;
    } else {
      paths.push_back(argv[i]);
    }
  }
  const std::string name = std::filesystem::path(argv[0]).filename().string();
  std::snprintf(g_crash_path, sizeof(g_crash_path), "%s/crash-%s-%d", crash_dir.c_str(), name.c_str(),
                static_cast<int>(getpid()));
  InstallCrashHandlers();
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);

  std::vector<Bytes> corpus;
  for (const std::string& p : paths) Collect(p, corpus);
  for (const Bytes& input : corpus) RunOne(input);
  std::fprintf(stderr, "%s: replayed %zu corpus inputs\n", name.c_str(), corpus.size());

  Mutator mutator(seed, max_len, &corpus);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t done = 0;
  if (seconds > 0) {
    while (done < runs && std::chrono::steady_clock::now() < end) {
      RunOne(mutator.Next());
      ++done;
    }
  } else if (runs != UINT64_MAX) {
    while (done < runs) {
      RunOne(mutator.Next());
      ++done;
    }
  }
  std::fprintf(stderr, "%s: %llu mutated inputs (seed %llu), no crash\n", name.c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(seed));
  return 0;
}
