#include "rpsim/io/progress.hpp"

#include <algorithm>
#include <cmath>

namespace rpsim::io {

ProgressLine::ProgressLine(std::FILE* out, bool terminal, std::string label, std::string unit,
                           double interval_s)
    : out_(out),
      terminal_(terminal),
      label_(std::move(label)),
      unit_(std::move(unit)),
      interval_s_(terminal ? 0.5 : interval_s),
      start_(std::chrono::steady_clock::now()),
      // The first line two seconds in (or at once when interval_s is shorter):
      // soon enough to show the rate, late enough for it to mean something.
      last_print_s_(std::min(2.0, interval_s) - interval_s_) {}

double ProgressLine::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressLine::update(std::int64_t done, std::int64_t total, const std::string& detail) {
  if (!out_) return;
  const double now = elapsed_s();
  if (now - last_print_s_ < interval_s_ && done < total) return;
  last_print_s_ = now;
  const double rate = now > 0 ? double(done) / now : 0;
  const std::string eta = done >= total ? "done"
                          : rate > 0    ? "ETA " + format_duration(double(total - done) / rate)
                                        : "ETA unknown";
  char line[512];
  std::snprintf(line, sizeof line, "%s: %lld/%lld %s (%.0f%%), %s elapsed, %.3g %s/s, %s%s%s", label_.c_str(),
                (long long)done, (long long)total, unit_.c_str(),
                total > 0 ? 100.0 * double(done) / double(total) : 0, format_duration(now).c_str(), rate,
                unit_.c_str(), eta.c_str(), detail.empty() ? "" : "; ", detail.c_str());
  if (terminal_) {
    std::fprintf(out_, "\r%s\033[K", line);
    open_line_ = true;
  } else {
    std::fprintf(out_, "%s\n", line);
  }
  std::fflush(out_);
}

void ProgressLine::finish() {
  if (out_ && open_line_) std::fprintf(out_, "\n");
  open_line_ = false;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[64];
  if (seconds < 10)
    std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  else if (s < 60)
    std::snprintf(buf, sizeof buf, "%ld s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ld min %02ld s", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld h %02ld min", s / 3600, (s % 3600) / 60);
  return buf;
}

}  // namespace rpsim::io
