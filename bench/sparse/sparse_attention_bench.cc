// Per-step CPU decode attention cost of every sparse-KV policy against dense,
// on a Janus-Pro-1B shape, in one run (docs/PERFORMANCE.md, "Sparse attention
// (CPU)"). For each configuration the policy state is advanced to the measured
// (late) decode step with synthetic weights, then that step -- PlanStep,
// gathered attention over prompt + attended slots, ObserveStep, for every row,
// layer and kv head -- is timed repeatedly from a saved state, interleaved
// with the dense step so both see the same machine load. Times are this
// thread's CPU time, best of the repetitions. KV buffers have
// the real per-policy size (L_p + n_slots positions), so dense streams its full
// cache.
#include <sys/mman.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/cli.h"
#include "engine/cpu/sparse_attention.h"
#include "engine/sparse/policy_params.h"
#include "kernels/sparse/policy.h"

namespace {

using argen::cpu::DecodeAttention;
using argen::cpu::DecodeAttentionIo;
using argen::cpu::DecodeAttentionScratchFloats;
using argen::cpu::DecodeAttentionShape;
namespace sparse = argen::sparse;

bool g_huge_pages = false;

// This thread's CPU time in seconds: on a shared machine, time spent
// descheduled by other processes is not counted (memory contention still is).
double Now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// A float buffer; with --huge_pages=1 it is 2 MiB aligned and advised as
// transparent huge pages (gathered decode rows then miss the TLB far less).
class Buffer {
 public:
  void Resize(size_t n) {
    const size_t bytes = ((n * sizeof(float) + (2u << 20) - 1) / (2u << 20)) * (2u << 20);
    data_.reset(static_cast<float*>(std::aligned_alloc(2u << 20, bytes)));
    if (g_huge_pages) madvise(data_.get(), bytes, MADV_HUGEPAGE);
    size_ = n;
  }
  float* data() { return data_.get(); }
  size_t size() const { return size_; }
  float* begin() { return data_.get(); }
  float* end() { return data_.get() + size_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t size_ = 0;
};

struct Shape {
  int32_t layers = 24, heads = 16, kv_heads = 16, head_dim = 128, prompt_len = 50, l_dec = 576, rows = 2;
};

struct Result {
  std::string policy;
  double sparsity = 0;
  int32_t n_att = 0, n_slots = 0;
  double step_ms = 0;    // best time of one decode step's attention, all rows and layers
  double policy_ms = 0;  // of which PlanStep + ObserveStep
};

class PolicyBench {
 public:
  PolicyBench(const Shape& s, const sparse::ResolvedPolicy& p, int32_t step)
      : s_(s), p_(p), l_(sparse::LayoutFor(p)), step_(step) {
    const int64_t units = int64_t{s.rows} * s.layers * s.kv_heads;  // (row, layer, kv head)
    ints_.assign(units * l_.ints_per_head, 0);
    floats_.assign(units * std::max(l_.floats_per_head, 1), 0.0f);
    const int64_t kv_per_row_layer = int64_t{s.kv_heads} * (s.prompt_len + l_.n_slots) * s.head_dim;
    k_.Resize(int64_t{s.rows} * s.layers * kv_per_row_layer);
    v_.Resize(k_.size());
    // Cheap uniform fill (xorshift): the values only need to be finite and varied.
    uint64_t x = 0x9E3779B97F4A7C15ull;
    auto next = [&x]() {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return static_cast<float>(static_cast<int64_t>(x >> 40) - (1 << 23)) / (1 << 23);
    };
    for (float& e : k_) e = next();
    for (float& e : v_) e = next();
    q_.resize(int64_t{s.heads} * s.head_dim);
    for (float& e : q_) e = next();
    std::mt19937 rng(7);
    attended_.assign(int64_t{s.kv_heads} * l_.max_attended, 0);
    counts_.assign(s.kv_heads, 0);
    probs_.assign(int64_t{s.kv_heads} * l_.max_attended, 0.0f);
    out_.assign(int64_t{s.heads} * s.head_dim, 0.0f);
    DecodeAttentionShape shape = AttnShape();
    scratch_.assign(DecodeAttentionScratchFloats(shape, l_.max_attended), 0.0f);

    // Advance every state to step_ with synthetic weights (a decaying
    // function of the lag plus noise), exercising selection and eviction.
    for (int64_t u = 0; u < units; ++u) {
      sparse::PolicyState st = State(u);
      sparse::InitState(p_, l_, st);
      std::vector<float> w(l_.max_attended);
      for (int32_t t = 0; t < step_; ++t) {
        int32_t slot;
        const int32_t n = sparse::PlanStep(p_, l_, st, t, &slot, attended_.data());
        if (!sparse::ObserveNeeded(p_, l_, st, t)) continue;
        for (int32_t i = 0; i < n; ++i) {
          const int32_t lag = t - sparse::SlotPosition(l_, st, attended_[i]);
          w[i] = std::exp(-lag / 20.0f) * (0.5f + std::uniform_real_distribution<float>(0, 1)(rng));
        }
        sparse::ObserveStep(p_, l_, st, t, attended_.data(), w.data(), n);
      }
    }
    saved_ints_ = ints_;
    saved_floats_ = floats_;
  }

  // One timed decode step (all rows, layers, kv heads); returns seconds total
  // and adds the policy (plan + observe) part to *policy_s.
  double Step(double* policy_s) {
    ints_ = saved_ints_;  // restore the state of step_ (not timed)
    floats_ = saved_floats_;
    const DecodeAttentionShape shape = AttnShape();
    const int64_t kv_per_row_layer = int64_t{s_.kv_heads} * (s_.prompt_len + l_.n_slots) * s_.head_dim;
    double plan_s = 0;
    const double start = Now();
    for (int32_t r = 0; r < s_.rows; ++r) {
      for (int32_t layer = 0; layer < s_.layers; ++layer) {
        const int64_t unit0 = (int64_t{r} * s_.layers + layer) * s_.kv_heads;
        const double p0 = Now();
        for (int32_t g = 0; g < s_.kv_heads; ++g) {
          int32_t slot;
          counts_[g] =
              sparse::PlanStep(p_, l_, State(unit0 + g), step_, &slot, attended_.data() + int64_t{g} * l_.max_attended);
        }
        const double p1 = Now();
        DecodeAttentionIo io;
        io.q = q_.data();
        io.k = k_.data() + (int64_t{r} * s_.layers + layer) * kv_per_row_layer;
        io.v = v_.data() + (int64_t{r} * s_.layers + layer) * kv_per_row_layer;
        io.attended = attended_.data();
        io.counts = counts_.data();
        io.attended_stride = l_.max_attended;
        io.scale = 1.0f / std::sqrt(static_cast<float>(s_.head_dim));
        io.out = out_.data();
        io.scratch = scratch_.data();
        const bool observe = sparse::ObserveNeeded(p_, l_, State(unit0), step_);
        io.attended_probs = observe ? probs_.data() : nullptr;
        DecodeAttention(shape, io);
        const double p2 = Now();
        if (observe) {
          for (int32_t g = 0; g < s_.kv_heads; ++g) {
            sparse::ObserveStep(p_, l_, State(unit0 + g), step_, attended_.data() + int64_t{g} * l_.max_attended,
                                probs_.data() + int64_t{g} * l_.max_attended, counts_[g]);
          }
        }
        const double p3 = Now();
        plan_s += (p1 - p0) + (p3 - p2);
      }
    }
    const double total = Now() - start;
    *policy_s += plan_s;
    sink_ += out_[0];
    return total;
  }
  float sink() const { return sink_; }

 private:
  DecodeAttentionShape AttnShape() const {
    return DecodeAttentionShape{s_.heads, s_.kv_heads, s_.head_dim, s_.prompt_len, l_.n_slots};
  }
  sparse::PolicyState State(int64_t unit) {
    return sparse::PolicyState{ints_.data() + unit * l_.ints_per_head,
                               floats_.data() + unit * std::max(l_.floats_per_head, 1)};
  }

  Shape s_;
  sparse::ResolvedPolicy p_;
  sparse::PolicyLayout l_;
  int32_t step_;
  std::vector<int32_t> ints_, saved_ints_, attended_, counts_;
  std::vector<float> floats_, saved_floats_, q_, probs_, out_, scratch_;
  Buffer k_, v_;
  float sink_ = 0;
};

sparse::ResolvedPolicy Resolve(const Shape& s, sparse::PolicyKind kind, double sparsity) {
  sparse::PolicyParams params;
  params.kind = kind;
  params.sparsity = sparsity;
  auto p = sparse::ResolvePolicy(params, s.l_dec);
  if (!p.ok()) {
    std::fprintf(stderr, "%s\n", std::string(p.status().message()).c_str());
    std::exit(1);
  }
  return *p;
}

// The minimum over repetitions: the least disturbed run (the machine is shared).
double Best(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// Times `policy` interleaved with `dense` (one dense step, one policy step,
// repeated) so that both see the same machine load; the ratio is of the best times.
Result Measure(const Shape& s, PolicyBench& dense, sparse::PolicyKind kind, double sparsity, int32_t step, int32_t reps,
               double* dense_ms) {
  const sparse::ResolvedPolicy p = Resolve(s, kind, sparsity);
  PolicyBench bench(s, p, step);
  std::vector<double> times, policy_times, dense_times;
  double ignored = 0;
  bench.Step(&ignored);  // warm-up
  for (int32_t i = 0; i < reps; ++i) {
    dense_times.push_back(dense.Step(&ignored));
    double pol = 0;
    times.push_back(bench.Step(&pol));
    policy_times.push_back(pol);
  }
  Result r;
  r.policy = std::string(sparse::PolicyName(kind));
  r.sparsity = sparsity;
  r.n_att = p.n_att;
  r.n_slots = p.n_slots;
  r.step_ms = Best(times) * 1e3;
  r.policy_ms = Best(policy_times) * 1e3;
  *dense_ms = Best(dense_times) * 1e3;
  if (bench.sink() == 12345.0f) std::puts("");  // keep the work observable
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::optional<int> rc = argen::cli::HelpOrVersion(
          argc, argv, "argen_bench_sparse",
          "argen_bench_sparse: CPU decode attention of every sparsity policy against dense.\n"
          "  argen_bench_sparse [--reps=N] [--step=T] [--layers=N] [--prompt_len=N] [--l_dec=N] "
          "[--policies=a,b] [--huge_pages=0|1]")) {
    return *rc;
  }
  Shape s;
  int32_t reps = 15;
  int32_t step = -1;
  std::string only;  // comma-separated policy names; empty: all
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* name) { return std::atoi(a.substr(std::string(name).size()).c_str()); };
    if (a.rfind("--reps=", 0) == 0)
      reps = val("--reps=");
    else if (a.rfind("--step=", 0) == 0)
      step = val("--step=");
    else if (a.rfind("--layers=", 0) == 0)
      s.layers = val("--layers=");
    else if (a.rfind("--prompt_len=", 0) == 0)
      s.prompt_len = val("--prompt_len=");
    else if (a.rfind("--l_dec=", 0) == 0)
      s.l_dec = val("--l_dec=");
    else if (a.rfind("--huge_pages=", 0) == 0)
      g_huge_pages = val("--huge_pages=") != 0;
    else if (a.rfind("--policies=", 0) == 0) {
      only.assign(1, ',');
      only.append(a, 11, std::string::npos);
      only.push_back(',');
    } else {
      std::fprintf(stderr,
                   "usage: %s [--reps=N] [--step=T] [--layers=N] [--prompt_len=N] [--l_dec=N] [--policies=a,b] "
                   "[--huge_pages=0|1]\n",
                   argv[0]);
      return 2;
    }
  }
  if (reps < 1 || s.layers < 1 || s.prompt_len < 0 || s.l_dec < 2) {
    std::fprintf(stderr, "invalid arguments\n");
    return 2;
  }
  if (step < 0 || step >= s.l_dec) step = s.l_dec - 1;  // the last decode step

  std::printf(
      "shape: %d layers, %d heads x %d head_dim (kv heads %d), L_p %d, L_dec %d, %d rows, step t=%d, "
      "best of %d (thread CPU time), 1 thread, huge pages %s\n\n",
      s.layers, s.heads, s.head_dim, s.kv_heads, s.prompt_len, s.l_dec, s.rows, step, reps,
      g_huge_pages ? "on" : "off");
  PolicyBench dense(s, Resolve(s, sparse::PolicyKind::kDense, 0.0), step);
  double ignored = 0;
  dense.Step(&ignored);  // warm-up
  std::printf(
      "| policy | sparsity | N_att | n_slots | step attention (ms) | of which policy (ms) | dense, same reps (ms) | "
      "speedup vs dense |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  auto print = [&](const Result& r, double dense_ms) {
    std::printf("| %s | %.0f%% | %d | %d | %.3f | %.3f | %.3f | %.2fx |\n", r.policy.c_str(), r.sparsity * 100, r.n_att,
                r.n_slots, r.step_ms, r.policy_ms, dense_ms, dense_ms / r.step_ms);
    std::fflush(stdout);
  };
  {
    double dense_ms = 0;
    const Result r = Measure(s, dense, sparse::PolicyKind::kDense, 0.0, step, reps, &dense_ms);
    print(r, dense_ms);
  }
  const sparse::PolicyKind kinds[] = {
      sparse::PolicyKind::kSlidingWindow, sparse::PolicyKind::kStreamingLlm, sparse::PolicyKind::kH2O,
      sparse::PolicyKind::kTova,          sparse::PolicyKind::kAlisa,        sparse::PolicyKind::kDiagonal,
      sparse::PolicyKind::kDiagonalSink4,
  };
  for (double sp : {0.80, 0.90, 0.95, 0.96}) {
    for (sparse::PolicyKind k : kinds) {
      std::string key = ",";
      key += sparse::PolicyName(k);
      key += ",";
      if (!only.empty() && only.find(key) == std::string::npos) continue;
      double dense_ms = 0;
      const Result r = Measure(s, dense, k, sp, step, reps, &dense_ms);
      print(r, dense_ms);
    }
  }
  return 0;
}
