// Progress of long work (training steps, a sweep's runs, a study's runs):
// one line soon after the work starts and then at least every `interval`
// seconds, each with how much is done, the rate and an estimate of the time
// left; on a terminal one line rewritten in place twice a second.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace rpsim::io {

class ProgressLine {
 public:
  // `label` starts each line ("train mlp-fp32"), `unit` names what is
  // counted ("steps", "runs").
  ProgressLine(std::FILE* out, bool terminal, std::string label, std::string unit, double interval_s = 10);
  // `done` of `total` units; prints when a line is due, and at the end.
  void update(std::int64_t done, std::int64_t total, const std::string& detail = "");
  // Ends an in-place line on a terminal.
  void finish();
  double elapsed_s() const;

 private:
  std::FILE* out_;
  bool terminal_;
  std::string label_, unit_;
  double interval_s_;
  std::chrono::steady_clock::time_point start_;
  double last_print_s_;
  bool open_line_ = false;
};

// "45 s", "3 min 20 s", "2 h 05 min".
std::string format_duration(double seconds);

}  // namespace rpsim::io
