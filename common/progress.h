// Progress reporting for long loops: a redrawn bar when stderr is a terminal, plain periodic
// log lines (every `interval_s`) otherwise, so CI logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kernelrl {

class Progress {
 public:
  Progress(std::string label, int64_t total, double interval_s = 10.0);
  ~Progress();
  // Sets the count done so far and an optional status text (for example "loss 2.31").
  void update(int64_t done, const std::string& status = "");
  void finish(const std::string& status = "");

 private:
  void draw(bool final);
  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  double interval_s_;
  bool tty_;
  bool finished_ = false;
  std::string status_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace kernelrl
