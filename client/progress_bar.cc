#include "client/progress_bar.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <utility>

namespace argen::client {
namespace {

std::string ClockText(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  }
  return buf;
}

}  // namespace

ProgressBar::ProgressBar(std::ostream& err, bool terminal, int64_t total, std::string rate_unit)
    : err_(err), terminal_(terminal), rate_unit_(std::move(rate_unit)), total_(total) {}

std::string ProgressBar::Render(int64_t done, int64_t total, double elapsed, const std::string& label, int bar_width,
                                const std::string& rate_unit) {
  const double fraction = total > 0 ? std::clamp(static_cast<double>(done) / total, 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(fraction * bar_width);
  std::string bar(static_cast<size_t>(bar_width) + 2, '.');
  bar.front() = '[';
  bar.back() = ']';
  for (int i = 0; i < filled; ++i) bar[static_cast<size_t>(i) + 1] = '#';
  const double rate = elapsed > 0 ? done / elapsed : 0;
  const double eta = rate > 0 ? (total - done) / rate : -1;
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s %3d%% %7.1f %s  %s elapsed  ETA %s", bar.c_str(),
                static_cast<int>(fraction * 100), rate, rate_unit.c_str(), ClockText(elapsed).c_str(),
                done >= total && total > 0 ? "00:00" : ClockText(eta).c_str());
  std::string line = buf;
  if (!label.empty()) line += "  " + label;
  return line;
}

void ProgressBar::SetTotal(int64_t total) {
  std::lock_guard<std::mutex> lock(mu_);
  total_ = total;
}

void ProgressBar::Update(int64_t done, const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = done;
  label_ = label;
  changed_ = true;
  Draw(false);
}

void ProgressBar::Relabel(const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  if (label == label_) return;
  label_ = label;
  changed_ = true;
  if (terminal_ && open_) Draw(true);  // plain logs keep their 10% steps
}

void ProgressBar::Draw(bool force) {
  const Clock::time_point now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (terminal_) {
    if (!force && open_ && now - last_draw_ < std::chrono::milliseconds(100) && done_ < total_) return;
    last_draw_ = now;
    err_ << "\r" << Render(done_, total_, elapsed, label_, 24, rate_unit_) << "\x1b[K" << std::flush;
    open_ = true;
    changed_ = false;
    return;
  }
  const int decile = total_ > 0 ? static_cast<int>(std::min<int64_t>(10, done_ * 10 / total_)) : 0;
  if (!force && decile == last_decile_) return;
  last_decile_ = decile;
  changed_ = false;
  err_ << Render(done_, total_, elapsed, label_, 24, rate_unit_) << "\n" << std::flush;
}

void ProgressBar::Message(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (terminal_ && open_) err_ << "\r\x1b[K";
  err_ << line << "\n";
  if (terminal_ && open_) Draw(true);
}

void ProgressBar::Print(std::ostream& out, const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (terminal_ && open_) err_ << "\r\x1b[K" << std::flush;
  out << line << "\n" << std::flush;
  if (terminal_ && open_) Draw(true);
}

void ProgressBar::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) return;
  if (changed_) Draw(true);  // the last count and label, not the last throttled one
  err_ << "\n" << std::flush;
  open_ = false;
}

}  // namespace argen::client
