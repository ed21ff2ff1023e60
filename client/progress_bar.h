// Progress on stderr, counted in a unit (image tokens for generate,
// finished requests for load). On a terminal: one line redrawn in place (bar,
// percent, rate in the unit, elapsed, ETA and a label such as "1/4 images"),
// at most every 100 ms; lines printed meanwhile (Print, Message) go above it,
// and Finish ends it. Otherwise (logs, pipes): a plain line at each 10% step,
// so logs stay readable.
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

  // `rate_unit` names what is counted per second ("tok/s", "req/s").
  ProgressBar(std::ostream& err, bool terminal, int64_t total, std::string rate_unit = "tok/s");
  ~ProgressBar() { Finish(); }

  // Thread-safe. `done` so far (over all images or requests); `label` is appended.
  void Update(int64_t done, const std::string& label);
  // A new label at the same count (e.g. an image arrived after the last token).
  void Relabel(const std::string& label);
  void SetTotal(int64_t total);
  // Prints `line` on its own on stderr (above the bar on a terminal).
  void Message(const std::string& line);
  // Prints `line` on `out` (stdout, which may share the terminal): the bar's
  // line is cleared first and redrawn after, so the two never join.
  void Print(std::ostream& out, const std::string& line);
  // Draws the bar's last state and ends its line; later updates start a new one.
  void Finish();

  // The text of one progress line (no "\r"), for tests.
  static std::string Render(int64_t done, int64_t total, double elapsed_seconds, const std::string& label,
                            int bar_width = 24, const std::string& rate_unit = "tok/s");

 private:
  void Draw(bool force);

  std::ostream& err_;
  const bool terminal_;
  const std::string rate_unit_;
  std::mutex mu_;
  int64_t total_ = 0;
  int64_t done_ = 0;
  std::string label_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
  bool open_ = false;     // a redrawn line is on screen, not yet ended
  bool changed_ = false;  // state not drawn yet (a throttled update)
  int last_decile_ = -1;
};

}  // namespace argen::client
