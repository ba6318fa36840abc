// The worker's side of the candidate runner (runner_main.cpp): a fresh, sandboxed process per
// candidate that alone runs the candidate's host code. The worker stops it (SIGSTOP) whenever it
// is not waiting on it, so that nothing of the candidate runs while the worker checks or times;
// every answer must carry the request's random id, and anything else on the channel is a forged
// message (the candidate wrote to it). On the host backend the runner works on a HostArena: a
// shared-memory region mapped at the same address in both processes, where the worker puts every
// buffer a candidate call may touch and nothing else.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "reward/kernel_abi.h"
#include "reward/subprocess.h"
#include "reward/worker/graph_image.h"

namespace kernelrl::worker {

// Shared memory for the host backend's candidate buffers: one memfd mapped at a fixed address,
// carved by a first-fit allocator. Not thread-safe (the harness allocates from one thread).
class HostArena {
 public:
  explicit HostArena(uint64_t bytes);
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;
  void* allocate(size_t bytes);  // 256-byte aligned; throws std::bad_alloc when full
  void free(void* p);
  bool contains(const void* p) const;
  int fd() const { return fd_; }
  uint64_t address() const { return reinterpret_cast<uint64_t>(base_); }
  uint64_t bytes() const { return bytes_; }

 private:
  int fd_ = -1;
  uint8_t* base_ = nullptr;
  uint64_t bytes_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> free_;  // (offset, size), sorted
  std::vector<std::pair<uint64_t, uint64_t>> used_;  // (offset, size)
};

// While alive, LibTorch's CPU tensors are allocated in `arena` (the harness scopes the buffers a
// host candidate sees with it); restores the previous allocator after.
class ArenaScope {
 public:
  explicit ArenaScope(HostArena* arena);
  ~ArenaScope();
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  void* previous_ = nullptr;
};

struct RunnerOptions {
  std::string backend = "gpu";  // gpu | host
  int device = 0;
  // Non-empty: the runner's CUDA_VISIBLE_DEVICES (the worker's GPU alone), and it runs on its
  // device 0 (Backend::child_visible_devices).
  std::string visible_devices;
  std::string sandbox = "auto";           // reward.sandbox
  // reward.capture: context (kernelrl_candidate_runner, a CUDA context of its own) | shim
  // (kernelrl_shim_runner: no context, cudart_shim.h; the load carries the worker's table and the
  // runner may ask queries while it captures).
  std::string capture = "context";
  std::filesystem::path scratch;          // the runner's one writable directory, fresh per start
  std::filesystem::path log_path;         // the runner's stderr
  bool remove_log = false;                // the runner's own log, removed with it (spares)
  const HostArena* arena = nullptr;       // host backend
};

class Runner {
 public:
  explicit Runner(RunnerOptions o);
  ~Runner();
  // A fresh runner with `so` loaded (the one launch() and await_ready() made ready, or a new
  // one). The candidate's static initializers run here: what they do is a verdict
  // (CheckFailure: load_error, sandbox_violation, crash, hang, reward_hack). One candidate per
  // runner: a runner that held one is never given another.
  // Shim capture: `table` (shim_device_table) goes with the load, and `on_query` answers what the
  // runner asks while it captures (answer_shim_query); both unused by a context runner.
  void start(const std::string& so, double timeout_s, const nlohmann::json& table = nullptr,
             std::function<nlohmann::json(const nlohmann::json&)> on_query = {});
  // A spare (Harness::prepare_spares): launch() starts the process, which creates its CUDA
  // context and installs its sandbox; await_ready() reads its ready line and holds it stopped.
  // Between the two the worker goes on, so several spares start at once.
  void launch();
  void await_ready();
  // Ready, no candidate loaded yet, and still alive (a spare that died while it waited is not
  // ready: its candidate must not be blamed for it).
  bool ready() const;
  // Starts a runner without a candidate to read the sandbox it gets ({summary, parts}), stops it.
  nlohmann::json probe_sandbox();
  // GPU: the work of one call, captured by the runner (CheckFailure: not_capturable, ...).
  GraphImage capture(const kernelrl_args& a, double timeout_s);
  // Host: these calls run in order on the arena's buffers; returns when the runner says done.
  void call(const std::vector<kernelrl_args>& calls, double timeout_s);
  void stop();
  bool running() const { return proc_.running(); }
  const std::string& capture_mode() const { return o_.capture; }

 private:
  void spawn();
  nlohmann::json request(nlohmann::json req, double timeout_s);
  [[noreturn]] void died(const std::string& during);
  void pause();
  void resume();
  RunnerOptions o_;
  ChildProcess proc_;
  std::mt19937_64 ids_{std::random_device{}()};
  bool paused_ = false;
  bool ready_ = false;           // started, reported ready, no candidate loaded yet
  bool used_ = false;            // a candidate was loaded: never another
  bool exited_ = false;          // it ended while being stopped; last_status_ says how
  int last_status_ = 0;
  nlohmann::json ready_sandbox_;  // the sandbox the last start reported
  std::function<nlohmann::json(const nlohmann::json&)> on_query_;
};

// kernelrl_args as the runner reads them.
nlohmann::json args_json(const kernelrl_args& a);

// The runner executable: $KERNELRL_CANDIDATE_RUNNER, else beside this worker's executable
// (capture "shim": $KERNELRL_SHIM_RUNNER, else kernelrl_shim_runner there).
std::string find_runner_binary(const std::string& capture = "context");

}  // namespace kernelrl::worker
