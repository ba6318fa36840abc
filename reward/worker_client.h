// Parent side of the isolated worker (reward/worker/worker_main.cpp): starts it, sends one
// request per candidate, waits with a timeout on each progress message, and turns a crash, an
// abort, a hang or a reported sticky CUDA error into a result, restarting the worker for the
// next candidate. The worker is reused while healthy. Each worker gets a fresh scratch
// directory, the only place its sandboxed candidates may write (removed when it stops).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "reward/subprocess.h"

namespace kernelrl {

struct WorkerInfo {
  std::string backend, device, driver, arch, cc;
  int device_count = 0;
  size_t l2_bytes = 0;
  std::string sandbox = "off";        // e.g. "on (landlock ABI 7, seccomp)", "off (why)"
  std::string sandbox_parts = "off";  // "landlock+seccomp" | "landlock" | "seccomp" | "off"
};

class WorkerClient {
 public:
  // backend: auto | gpu | host; `silence_s`: no message for this long = hang.
  WorkerClient(std::string backend, int device, double silence_s, std::filesystem::path log_dir);
  ~WorkerClient();
  const WorkerInfo& info();  // starts the worker if needed
  // One eval request; a crash or hang becomes {"status": "crash"|"hang", ...}.
  nlohmann::json evaluate(const nlohmann::json& request);
  int restarts() const { return restarts_; }
  // Hold the compile pool (quiet_begin/quiet_end) while the worker times (default on).
  void set_quiet(bool on) { quiet_ = on; }
  // The OS sandbox (auto | on | off) and the scratch directory it lets candidates write to;
  // takes effect at the next start.
  void set_sandbox(std::string mode, std::filesystem::path scratch_dir) {
    sandbox_ = std::move(mode);
    scratch_dir_ = std::move(scratch_dir);
  }
  // reward.capture (context | shim): which runner captures candidates; at the next start.
  void set_capture(std::string mode) { capture_ = std::move(mode); }
  void stop();

 private:
  void start();
  std::string stderr_tail(size_t bytes = 1500) const;
  std::string backend_;
  int device_;
  double silence_s_;
  std::filesystem::path log_dir_, log_path_, scratch_dir_;
  std::string capture_ = "context";
  std::string sandbox_ = "off";
  ChildProcess proc_;
  WorkerInfo info_;
  bool started_ = false;
  int restarts_ = 0;
  bool quiet_ = true;
};

// The worker executable: $KERNELRL_EVAL_WORKER, else beside the running executable (or its
// parent dirs' reward/), else the path it was built at.
std::string find_worker_binary();

}  // namespace kernelrl
