// The worker's device backend: the only part of the evaluation pipeline that differs between
// the GPU (a non-blocking CUDA stream, CUDA events, a gate on the legacy stream that holds back
// work launched off the stream) and the host (null stream, steady clock, nothing to wait for).
// Correctness checks, timing rounds and statistics (harness.h) are shared.
#pragma once

#include <chrono>
#include <functional>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kernelrl::worker {

// The candidate broke the process's device state (sticky CUDA error) or did not finish: the
// worker reports it and exits so that the next candidate gets a fresh process and context.
struct Fatal : std::runtime_error {
  Fatal(std::string status, std::string check, const std::string& what)
      : std::runtime_error(what), status(std::move(status)), check(std::move(check)) {}
  std::string status;  // "hang" | "cuda_error"
  std::string check;   // e.g. "illegal_address", "kernel_timeout"
};

// A recoverable launch failure (invalid configuration, too many resources, ...).
struct LaunchFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The calls could not be recorded into a graph (a host sync, an allocation, work on another
// stream, ... while capturing): the candidate is not capturable.
struct CaptureFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool gpu() const = 0;
  virtual int device_index() const { return 0; }
  virtual void* stream() = 0;  // what the candidate receives
  // Everything issued so far (any stream) has finished; throws Fatal on a sticky error.
  virtual void sync_device() = 0;
  // The stream has drained within `timeout_s`; throws Fatal on timeout or a sticky error.
  virtual void wait_stream(double timeout_s) = 0;
  // After calling a candidate: a pending launch error becomes LaunchFailure (or Fatal if sticky).
  virtual void check_launch() = 0;
  // Holds back work on the legacy/per-thread default streams until open (GPU only), at most
  // `max_s` seconds (a candidate whose launch blocks on the gate then finishes, late).
  virtual void gate_close(double max_s) {}
  virtual void gate_open() {}
  // Device timing: holds the candidate's own stream (a spinning kernel on it) until gate_open(),
  // so that what is issued after it (marks, a graph replay) is queued before the device reaches
  // the first mark and the host's cost of issuing it stays out of the measured interval.
  virtual void hold_stream(double max_s) {}
  // Device-to-device copy on the candidate's stream (host: memcpy).
  virtual void copy_on_stream(void* dst, const void* src, size_t bytes) = 0;
  // Timing marks on the stream; elapsed_us(a, b) after wait_stream.
  virtual void ensure_marks(size_t n) = 0;
  virtual void mark(size_t i) = 0;
  virtual double elapsed_us(size_t a, size_t b) = 0;

  // Device timing. capture() records what `issue` launches on the stream into a graph (GPU: a
  // CUDA graph in global capture mode, so any unsafe call anywhere invalidates it; host: the
  // callable itself) and returns its id; replay(id) launches it on the stream. Throws
  // CaptureFailure when the work cannot be captured.
  virtual size_t capture(const std::function<void()>& issue) = 0;
  virtual void replay(size_t graph) = 0;
  virtual void clear_graphs() = 0;
  // What a captured graph holds, by node type ("kernel 20", "kernel 40, memset 20"): how many
  // kernels a contender's call launches. "" where the backend has no graphs to inspect.
  virtual std::string graph_census(size_t graph) { return ""; }
  // A failed capture may leave library state behind: the worker exits after its answer.
  virtual bool tainted() const { return false; }
  // SM clock around a timed unit (GPU): clock_stamp(i) issues, on the stream, a stamp of every
  // SM's cycle counter and the global timer into slot i; after wait_stream, clock_mhz(a, b) is the
  // median over SMs of cycles / ns between stamps a and b, in MHz (0 where unknown: the host, or
  // no SM stamped twice). max_clock_mhz() is the device's rated maximum SM clock.
  virtual void clock_stamp(size_t i) {}
  virtual double clock_mhz(size_t a, size_t b) { return 0; }
  virtual double max_clock_mhz() const { return 0; }
  // Device-global state a candidate could leave for later timings (GPU: an L2 set-aside for
  // persisting accesses, cudaLimitPersistingL2CacheSize, and its persisting lines): reset to this
  // context's default; returns the bytes found above that default (0: nothing was left).
  virtual size_t reset_device_state() { return 0; }
  // Untimed, on the stream: evicts the L2 (writes a buffer twice its size).
  virtual void flush_l2() = 0;
  // Diagnostic: the device time per launch of a small built-in kernel, 20 launches in a graph,
  // cold L2, median of 7 replays (0 where unsupported).
  virtual double probe_us() { return 0; }

  // CUDA_VISIBLE_DEVICES for a child process that should see this backend's GPU alone, as its
  // device 0 (its UUID, "GPU-..."); empty where children keep this process's view (the host
  // backend, MIG). A process's CUDA start-up grows with the GPUs it sees, and the candidate
  // runner starts once per candidate (bench/gpu_context_init.sh).
  virtual std::string child_visible_devices() const { return ""; }

  // Describes the device for the ready message.
  struct Info {
    std::string backend, device, driver, arch;
    int cc_major = 0, cc_minor = 0, device_count = 0;
    size_t l2_bytes = 0, free_bytes = 0;
  };
  virtual Info info() = 0;
};

// GPU backend on `device` (throws std::runtime_error when there is none); built with CUDA only.
std::unique_ptr<Backend> make_gpu_backend(int device);
std::unique_ptr<Backend> make_host_backend();
// CUDA devices visible to this process (0 without CUDA).
int gpu_count();

}  // namespace kernelrl::worker
