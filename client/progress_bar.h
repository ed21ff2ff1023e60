// Progress of image tokens on stderr. On a terminal: one line redrawn in
// place (bar, percent, tokens/s, elapsed, ETA and a label such as "1/4
// images"), at most every 100 ms. Otherwise (logs, pipes): a plain line at
// each 10% step, so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <mutex>
#include <string>

namespace argen::client {

class ProgressBar {
 public:
  using Clock = std::chrono::steady_clock;

  ProgressBar(std::ostream& err, bool terminal, int64_t total_tokens);
  ~ProgressBar() { Finish(); }

  // Thread-safe. `done_tokens` over all images so far; `label` is appended.
  void Update(int64_t done_tokens, const std::string& label);
  void SetTotal(int64_t total_tokens);
  // Prints `line` on its own (above the bar on a terminal).
  void Message(const std::string& line);
  // Ends a redrawn line; later updates start a new one.
  void Finish();

  // The text of one progress line (no "\r"), for tests.
  static std::string Render(int64_t done, int64_t total, double elapsed_seconds, const std::string& label,
                            int bar_width = 24);

 private:
  void Draw(bool force);

  std::ostream& err_;
  const bool terminal_;
  std::mutex mu_;
  int64_t total_ = 0;
  int64_t done_ = 0;
  std::string label_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
  bool open_ = false;
  int last_decile_ = -1;
};

}  // namespace argen::client
