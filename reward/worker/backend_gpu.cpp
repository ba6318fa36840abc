// GPU backend: a non-blocking stream for the candidate, CUDA events for timing, the legacy-stream
// gate (gate.cu) and the mapping of CUDA errors to named, sticky-or-not failures.
#ifdef KERNELRL_HAVE_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <unistd.h>

#include "common/cuda_check.h"
#include "reward/worker/backend.h"
#include "reward/worker/timing.h"

namespace kernelrl::worker {

cudaError_t launch_gate(const int* open_device_ptr, long long max_cycles, cudaStream_t stream);
cudaError_t launch_flush(void* buffer, size_t bytes, unsigned value, bool evict_last_pass, int sms,
                         cudaStream_t stream);
cudaError_t launch_probe(float* data, cudaStream_t stream);
cudaError_t launch_clock_stamp(unsigned long long* slots, unsigned n_slots, int blocks, cudaStream_t stream);

namespace {

std::string check_name(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress: return "illegal_address";
    case cudaErrorMisalignedAddress: return "misaligned_address";
    case cudaErrorAssert: return "device_assert";
    case cudaErrorIllegalInstruction: return "illegal_instruction";
    case cudaErrorLaunchFailure: return "launch_failure";
    case cudaErrorLaunchTimeout: return "kernel_timeout";
    case cudaErrorHardwareStackError: return "stack_error";
    default: {
      std::string n = cudaGetErrorName(e);  // cudaErrorFooBar -> foo_bar
      if (n.rfind("cudaError", 0) == 0) n = n.substr(9);
      std::string out;
      for (char c : n) {
        if (std::isupper(static_cast<unsigned char>(c)) && !out.empty()) out += '_';
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      return out;
    }
  }
}

[[noreturn]] void fatal(cudaError_t e, const char* when) {
  throw Fatal("cuda_error", check_name(e),
              std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ") " + when);
}

class GpuBackend final : public Backend {
 public:
  explicit GpuBackend(int device) : device_(device) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&open_), sizeof(int), cudaHostAllocMapped));
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&open_dev_), open_, 0));
    *open_ = 1;
    int khz = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
    // The L2 flush buffer, allocated up front (before any sandbox or capture).
    int l2 = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    flush_bytes_ = 2 * static_cast<size_t>(std::max(l2, 1 << 20));
    CUDA_CHECK(cudaMalloc(&flush_, flush_bytes_));
    clock_hz_ = static_cast<double>(khz) * 1000.0;
    if (cudaDeviceGetLimit(&persisting_default_, cudaLimitPersistingL2CacheSize) != cudaSuccess)
      persisting_default_ = 0;
    cudaGetLastError();
    // Clock stamps: kStampSlots stamps of (ns, cycles) per SM id, in mapped host memory.
    CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
    const size_t stamp_bytes = kStampSlots * kMaxSmId * 2 * sizeof(unsigned long long);
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&stamps_), stamp_bytes, cudaHostAllocMapped));
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&stamps_dev_), stamps_, 0));
    std::fill(stamps_, stamps_ + kStampSlots * kMaxSmId * 2, 0ull);
    // Diagnostic (docs/benchmarks.md, measurement trust): KERNELRL_DIAG_RESERVE_MB holds that
    // much device memory, written once, for the worker's life.
    if (const char* mb = std::getenv("KERNELRL_DIAG_RESERVE_MB"); mb && std::atol(mb) > 0) {
      const size_t bytes = static_cast<size_t>(std::atol(mb)) << 20;
      CUDA_CHECK(cudaMalloc(&reserve_, bytes));
      CUDA_CHECK(cudaMemset(reserve_, 0, bytes));
      CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  ~GpuBackend() override {
    *open_ = 1;
    graphs_.clear();
    if (probe_exec_) cudaGraphExecDestroy(probe_exec_);
    if (flush_) cudaFree(flush_);
    if (reserve_) cudaFree(reserve_);
    for (auto e : events_) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
    cudaFreeHost(open_);
    if (stamps_) cudaFreeHost(stamps_);
  }
  bool gpu() const override { return true; }
  int device_index() const override { return device_; }
  std::string child_visible_devices() const override {
    const char* inherited = std::getenv("CUDA_VISIBLE_DEVICES");
    if (inherited && std::strstr(inherited, "MIG")) return "";  // a MIG instance: keep the view
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, device_) != cudaSuccess) return "";
    const auto* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
    char id[64];
    std::snprintf(id, sizeof id, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                  u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                  u[14], u[15]);
    return id;
  }
  void* stream() override { return stream_; }

  void sync_device() override {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) fatal(e, "while synchronizing the device");
  }
  void wait_stream(double timeout_s) override {
    auto t0 = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) fatal(e, "on the candidate's stream");
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (waited > timeout_s)
        throw Fatal("hang", "kernel_timeout",
                    "the stream did not drain within " + std::to_string(timeout_s) + " s");
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  void check_launch() override {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return;
    // Sticky errors survive cudaGetLastError; a second call tells them apart.
    cudaError_t again = cudaGetLastError();
    if (again != cudaSuccess) fatal(e, "after the candidate's launch");
    throw LaunchFailure(std::string("launch failed: ") + cudaGetErrorName(e) + " (" +
                        cudaGetErrorString(e) + ")");
  }
  void gate_close(double max_s) override {
    close_flag();
    cudaError_t e = launch_gate(open_dev_, static_cast<long long>(clock_hz_ * max_s), cudaStreamLegacy);
    if (e != cudaSuccess) {
      gate_open();
      fatal(e, "launching the stream gate");
    }
  }
  void hold_stream(double max_s) override {
    close_flag();
    cudaError_t e = launch_gate(open_dev_, static_cast<long long>(clock_hz_ * max_s), stream_);
    if (e != cudaSuccess) {
      gate_open();
      fatal(e, "launching the stream hold");
    }
  }
  void gate_open() override {
    *open_ = 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  void copy_on_stream(void* dst, const void* src, size_t bytes) override {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_);
    if (e != cudaSuccess) fatal(e, "copying outputs");
  }
  void ensure_marks(size_t n) override {
    while (events_.size() < n) {
      cudaEvent_t ev;
      CUDA_CHECK(cudaEventCreate(&ev));
      events_.push_back(ev);
    }
  }
  void mark(size_t i) override {
    cudaError_t e = cudaEventRecord(events_[i], stream_);
    if (e != cudaSuccess) fatal(e, "recording an event");
  }
  double elapsed_us(size_t a, size_t b) override {
    float ms = 0;
    cudaError_t e = cudaEventElapsedTime(&ms, events_[a], events_[b]);
    if (e != cudaSuccess) fatal(e, "reading events");
    return ms * 1000.0;
  }
  // at::cuda::CUDAGraph rather than a bare stream capture: it gives LibTorch's allocator a
  // private pool for the capture, so baselines that allocate (torch ops) stay memory-safe.
  size_t capture(const std::function<void()>& issue) override {
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(stream_, device_));
    auto g = std::make_unique<at::cuda::CUDAGraph>(/*keep_graph=*/true);
    try {
      g->capture_begin({0, 0}, cudaStreamCaptureModeGlobal);
    } catch (const std::exception& e) {
      throw CaptureFailure(std::string("cannot begin a capture: ") + first_line(e.what()));
    }
    // Whatever the issued calls throw, the capture is ended before anything else touches the
    // stream (a stream left capturing fails every later call).
    std::string err;
    try {
      issue();
    } catch (const std::exception& e) {
      err = std::string("the call failed while captured: ") + e.what();
    } catch (...) {
      err = "the call failed while captured";
    }
    try {
      g->capture_end();
    } catch (const std::exception& e) {
      if (err.empty()) err = e.what();
    }
    cudaGetLastError();  // an invalidated capture leaves a non-sticky error behind
    if (!err.empty()) {
      // LibTorch's allocator and generator bookkeeping may not have been unwound: this process
      // finishes the evaluation, then is replaced.
      tainted_ = true;
      throw CaptureFailure(first_line(err));
    }
    census_.push_back(census(g->raw_cuda_graph()));
    try {
      g->instantiate();
    } catch (const std::exception& e) {
      tainted_ = true;
      throw CaptureFailure("cannot instantiate the captured graph: " + first_line(e.what()));
    }
    graphs_.push_back(std::move(g));
    return graphs_.size() - 1;
  }
  std::string graph_census(size_t graph) override { return census_.at(graph); }
  // The instantiated graph launched directly: at::cuda::CUDAGraph::replay() would first enqueue
  // its RNG-state fill kernels, inside the timed window (seen as +0.3 us per call at 20 calls).
  // Nothing captured here draws random numbers.
  void replay(size_t graph) override {
    cudaError_t e = cudaGraphLaunch(graphs_.at(graph)->raw_cuda_graph_exec(), stream_);
    if (e != cudaSuccess) fatal(e, "launching a captured graph");
  }
  void clear_graphs() override {
    wait_stream(60);
    graphs_.clear();
    census_.clear();
  }
  void clock_stamp(size_t i) override {
    if (i >= kStampSlots) throw std::out_of_range("clock stamp slot " + std::to_string(i));
    // The previous use of this slot has been read (the caller waited on the stream since).
    std::fill(stamps_ + i * kMaxSmId * 2, stamps_ + (i + 1) * kMaxSmId * 2, 0ull);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    cudaError_t e = launch_clock_stamp(stamps_dev_ + i * kMaxSmId * 2, kMaxSmId, 2 * sms_, stream_);
    if (e != cudaSuccess) fatal(e, "launching a clock stamp");
  }
  double clock_mhz(size_t a, size_t b) override {
    const unsigned long long* sa = stamps_ + a * kMaxSmId * 2;
    const unsigned long long* sb = stamps_ + b * kMaxSmId * 2;
    std::vector<double> mhz;
    for (unsigned sm = 0; sm < kMaxSmId; ++sm) {
      const unsigned long long ns0 = sa[2 * sm], c0 = sa[2 * sm + 1], ns1 = sb[2 * sm], c1 = sb[2 * sm + 1];
      if (ns0 == 0 || ns1 <= ns0 || c1 <= c0) continue;
      mhz.push_back(static_cast<double>(c1 - c0) * 1000.0 / static_cast<double>(ns1 - ns0));
    }
    if (mhz.empty()) return 0;
    std::nth_element(mhz.begin(), mhz.begin() + mhz.size() / 2, mhz.end());
    return mhz[mhz.size() / 2];
  }
  double max_clock_mhz() const override { return clock_hz_ / 1e6; }
  size_t reset_device_state() override {
    // Devices without a persisting L2 (before Ampere) refuse these calls: nothing to reset. The
    // driver's default set-aside need not be 0 (9,830,400 bytes on the H100s seen on
    // 2026-11-26): what counts is a change from this context's default.
    size_t persisting = persisting_default_;
    if (cudaDeviceGetLimit(&persisting, cudaLimitPersistingL2CacheSize) != cudaSuccess) persisting = persisting_default_;
    if (persisting != persisting_default_) cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, persisting_default_);
    cudaCtxResetPersistingL2Cache();
    cudaGetLastError();
    return persisting > persisting_default_ ? persisting - persisting_default_ : 0;
  }
  // The flush (gate.cu, launch_flush): an evict_last write pass over twice the L2, then a pass
  // that demotes each line to normal and writes it again; lines a candidate kept with an L2
  // evict_last policy do not survive it (docs/sandbox.md, "Cold means cold"). The old single
  // memset, which they survive, stays reachable for the fixtures' comparison:
  // KERNELRL_L2_FLUSH=memset (also: reset = cudaCtxResetPersistingL2Cache + memset; normal = the
  // second pass alone).
  void flush_l2() override {
    static const std::string mode = [] {
      const char* e = std::getenv("KERNELRL_L2_FLUSH");
      return std::string(e && *e ? e : "evict_last");
    }();
    cudaError_t e = cudaSuccess;
    flush_value_ += 2;
    if (mode == "memset" || mode == "reset") {
      if (mode == "reset") {
        cudaCtxResetPersistingL2Cache();
        cudaGetLastError();
      }
      e = cudaMemsetAsync(flush_, static_cast<int>(flush_value_ & 0xff), flush_bytes_, stream_);
    } else {
      e = launch_flush(flush_, flush_bytes_, flush_value_, mode != "normal", sms_, stream_);
    }
    if (e != cudaSuccess) fatal(e, "flushing the L2");
  }
  double probe_us() override {
    if (!probe_exec_) {
      cudaGraph_t g;
      CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < 20; ++i) launch_probe(static_cast<float*>(flush_) + (i % 4) * 4096, stream_);
      CUDA_CHECK(cudaStreamEndCapture(stream_, &g));
      CUDA_CHECK(cudaGraphInstantiate(&probe_exec_, g, 0));
      cudaGraphDestroy(g);
      CUDA_CHECK(cudaGraphLaunch(probe_exec_, stream_));
    }
    ensure_marks(2);
    std::vector<double> t;
    for (int r = 0; r < 7; ++r) {
      flush_l2();
      hold_stream(5);
      mark(0);
      CUDA_CHECK(cudaGraphLaunch(probe_exec_, stream_));
      mark(1);
      gate_open();
      wait_stream(5);
      t.push_back(elapsed_us(0, 1) / 20);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
  Info info() override {
    Info i;
    cudaDeviceProp p{};
    CUDA_CHECK(cudaGetDeviceProperties(&p, device_));
    i.backend = "gpu";
    i.device = p.name;
    int drv = 0, rt = 0;
    CUDA_CHECK(cudaDriverGetVersion(&drv));
    CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    i.driver = "cuda-driver-" + std::to_string(drv) + "/runtime-" + std::to_string(rt);
    i.cc_major = p.major;
    i.cc_minor = p.minor;
    // Hopper gets sm_90a (wgmma/TMA); others their plain arch.
    i.arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor) + (p.major == 9 ? "a" : "");
    CUDA_CHECK(cudaGetDeviceCount(&i.device_count));
    i.l2_bytes = static_cast<size_t>(p.l2CacheSize);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    i.free_bytes = free_b;
    return i;
  }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  int* open_ = nullptr;
  int* open_dev_ = nullptr;
  double clock_hz_ = 1e9;
  static constexpr size_t kStampSlots = 2;
  static constexpr unsigned kMaxSmId = 1024;  // %smid bound (%nsmid can exceed the SM count)
  int sms_ = 1;
  unsigned long long* stamps_ = nullptr;
  unsigned long long* stamps_dev_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> graphs_;
  std::vector<std::string> census_;
  void close_flag() {
    *open_ = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  cudaGraphExec_t probe_exec_ = nullptr;
  int dot_count_ = 0;

  // Node types of a captured graph, counted. Diagnostic: with KERNELRL_TIMING_DIAG containing
  // "dot", every graph is also written as verbose Graphviz to $KERNELRL_DIAG_DIR (the sandbox must
  // be off for that write).
  std::string census(cudaGraph_t graph) {
    size_t n = 0;
    if (cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess) return "?";
    std::vector<cudaGraphNode_t> nodes(n);
    if (n && cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) return "?";
    std::map<std::string, int> by_type;
    for (auto node : nodes) {
      cudaGraphNodeType t{};
      cudaGraphNodeGetType(node, &t);
      by_type[node_type_name(t)]++;
    }
    std::string out;
    for (const auto& [name, count] : by_type) out += (out.empty() ? "" : ", ") + name + " " + std::to_string(count);
    const char* dir = std::getenv("KERNELRL_DIAG_DIR");
    if (dir && timing_diag("dot")) {
      std::string path = std::string(dir) + "/graph-" + std::to_string(getpid()) + "-" + std::to_string(dot_count_++) + ".dot";
      cudaGraphDebugDotPrint(graph, path.c_str(), cudaGraphDebugDotFlagsVerbose);
    }
    return out;
  }
  static const char* node_type_name(cudaGraphNodeType t) {
    switch (t) {
      case cudaGraphNodeTypeKernel: return "kernel";
      case cudaGraphNodeTypeMemcpy: return "memcpy";
      case cudaGraphNodeTypeMemset: return "memset";
      case cudaGraphNodeTypeHost: return "host";
      case cudaGraphNodeTypeGraph: return "child_graph";
      case cudaGraphNodeTypeEmpty: return "empty";
      case cudaGraphNodeTypeWaitEvent: return "wait_event";
      case cudaGraphNodeTypeEventRecord: return "event_record";
      case cudaGraphNodeTypeMemAlloc: return "mem_alloc";
      case cudaGraphNodeTypeMemFree: return "mem_free";
      default: return "other";
    }
  }
 public:
  bool tainted() const override { return tainted_; }

 private:
  bool tainted_ = false;
  void* flush_ = nullptr;
  void* reserve_ = nullptr;
  size_t flush_bytes_ = 0;
  size_t persisting_default_ = 0;  // this context's L2 set-aside for persisting accesses at start
  unsigned flush_value_ = 0;

  static std::string first_line(const std::string& s) {
    auto nl = s.find('\n');
    return nl == std::string::npos ? s : s.substr(0, nl);
  }
};

}  // namespace

std::unique_ptr<Backend> make_gpu_backend(int device) {
  return std::make_unique<GpuBackend>(device);
}

int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

}  // namespace kernelrl::worker
#endif  // KERNELRL_HAVE_CUDA
