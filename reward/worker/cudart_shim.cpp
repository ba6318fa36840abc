// libcudart.so.13 for the context-free capture runner (cudart_shim.h): records, never launches.
//
// What real candidates need (nm -D --undefined-only on .so files built with the pool's flags,
// reward/compile.cpp, sm_90a, CUDA 13.0, 2026-11-29: one to three variants of every CUDA family
// in kernels/ from `kernelrl data synth --emit-dir`, CUTLASS and wgmma included, and
// tests/data/kernels/gpu_{cute_hgemm_tn,pdl_pair,persisting_l2,other_stream,sync_in_launch,
// hgemm_ref}.cu):
//   every candidate: __cudaRegisterFatBinary, __cudaRegisterFatBinaryEnd,
//     __cudaRegisterFunction, __cudaUnregisterFatBinary, __cudaPushCallConfiguration,
//     __cudaPopCallConfiguration, __cudaGetKernel, __cudaLaunchKernel (CUDA 13's <<<>>>),
//     cudaGetLastError;
//   hgemm_small / hgemm_wgmma / hgemm_mma / CUTLASS: cudaLaunchKernelExC, cudaFuncSetAttribute,
//     cudaMemsetAsync, cudaGetDevice, cudaDeviceGetAttribute, cudaGetDriverEntryPointByVersion
//     (cuTensorMapEncodeTiled);
//   CUTLASS / CuTe (__device__ variables): __cudaRegisterVar;
//   fixtures: cudaStreamSynchronize (gpu_sync_in_launch), cudaDeviceSetLimit and
//     cudaGetDeviceProperties (gpu_persisting_l2), and shim_calls.cu's (cudaMalloc, events,
//     cudaLaunchHostFunc, cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, ...).
// Everything else below is what the sandbox and adversarial fixtures call, so that their verdicts
// stay those of a real capture. A symbol not here fails the candidate before it loads
// (`cudart_unsupported`, runner_main.cpp).
//
// Semantics follow a global-mode stream capture on a non-blocking stream, as the context runner
// does (runner_main.cpp): work on the capture stream is recorded as a chain of nodes; a sync, an
// allocation or a wait on an event from outside invalidates the capture (not_capturable); work on
// any other stream runs "elsewhere" (here: nowhere), as eager work in the runner's own context
// did; host callbacks, allocation nodes, external events and host memory are not_replayable; an
// access-policy window or a persisting-L2 set-aside is device_state.
#include "reward/worker/cudart_shim.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#define SHIM_API extern "C" __attribute__((visibility("default")))

namespace kernelrl::worker::shim {
namespace {

constexpr int kFuncAttrs = 16;  // CU_FUNC_ATTRIBUTE_* 0..15

struct Kernel {
  std::string name;
  bool resolved = false;  // looked up in the table or asked of the worker
  bool known = false;     // in the candidate's device code as the worker loaded it
  std::vector<std::pair<uint32_t, uint32_t>> params;
  int attrs[kFuncAttrs] = {};
};

struct Stream {
  int attr_window = 0;  // an access-policy window was set on it
};

struct State {
  std::mutex mu;
  std::map<const void*, std::unique_ptr<Kernel>> by_host;  // host stub -> kernel
  std::map<std::string, nlohmann::json> table_kernels;
  std::vector<uint8_t> props;
  std::map<int, int> dev_attrs;
  std::map<int, size_t> limits, limits_default;
  int driver_version = 0, runtime_version = 0;
  Query query;
  Stream capture;  // the capture stream's identity
  std::set<void*> streams, events, captured_events;
  // The capture in progress.
  bool capturing = false;
  std::string invalid;                 // why the capture is invalidated (not_capturable)
  std::string unreplayable_check, unreplayable;  // first thing a description cannot carry
  std::string sticky_check, sticky;    // outside a capture, reported at the next one
  GraphImage graph;
  cudaError_t last_error = cudaSuccess;
  // <<<>>> configuration stack (__cudaPushCallConfiguration / Pop).
  struct Config {
    dim3 grid, block;
    size_t smem;
    void* stream;
  };
  std::vector<Config> configs;
};

State& st() {
  static State* s = new State;  // never destroyed: the candidate's static destructors may call in
  return *s;
}

cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) st().last_error = e;
  return e;
}

void invalidate(const std::string& why) {
  if (st().invalid.empty()) st().invalid = why;
}

void unreplayable(const std::string& check, const std::string& why) {
  State& s = st();
  if (s.capturing) {
    if (s.unreplayable.empty()) s.unreplayable_check = check, s.unreplayable = why;
  } else if (s.sticky.empty()) {
    s.sticky_check = check, s.sticky = why;
  }
}

bool is_capture(void* stream) { return st().capturing && stream == &st().capture; }
bool is_legacy(void* stream) { return stream == nullptr || stream == cudaStreamLegacy; }

// A call that a global-mode capture forbids (a sync, an allocation): invalidates it.
cudaError_t unsafe(const char* what) {
  if (!st().capturing) return cudaSuccess;
  invalidate(std::string(what) + " while the call was captured (cudaErrorStreamCaptureUnsupported)");
  return set_error(cudaErrorStreamCaptureUnsupported);
}

nlohmann::json ask(const nlohmann::json& q);

// A kernel's parameter layout and attributes: from the table, else asked of the worker (its
// cuFuncGetParamInfo and cuFuncGetAttribute on the candidate's code as it loaded it), once.
void resolve(Kernel& k) {
  if (k.resolved) return;
  k.resolved = true;
  nlohmann::json e;
  auto it = st().table_kernels.find(k.name);
  if (it != st().table_kernels.end()) {
    e = it->second;
  } else {
    try {
      e = ask({{"query", "kernel"}, {"name", k.name}});
    } catch (const std::exception&) {
      return;  // unknown: not_replayable when launched
    }
    if (!e.value("known", false)) return;
  }
  for (const auto& p : e.at("params")) k.params.emplace_back(p.at(0).get<uint32_t>(), p.at(1).get<uint32_t>());
  const auto a = e.at("attrs").get<std::vector<int>>();
  for (int i = 0; i < kFuncAttrs && i < static_cast<int>(a.size()); ++i) k.attrs[i] = a[i];
  k.known = true;
}

Kernel* kernel_of(const void* f) {
  State& s = st();
  Kernel* k = nullptr;
  auto it = s.by_host.find(f);
  if (it != s.by_host.end()) k = it->second.get();
  for (auto& [h, kk] : s.by_host)  // a cudaKernel_t handle (__cudaGetKernel) is the Kernel itself
    if (!k && kk.get() == f) k = kk.get();
  if (k) resolve(*k);
  return k;
}

void add_node(NodeImage n, uint8_t edge_type = 0, uint8_t from_port = 0) {
  GraphImage& g = st().graph;
  if (!g.nodes.empty()) {
    const auto prev = static_cast<uint32_t>(g.nodes.size() - 1);
    g.edges.push_back({prev, prev + 1, edge_type, from_port, 0});
  }
  g.nodes.push_back(std::move(n));
}

struct LaunchAttrs {
  unsigned cluster[3] = {0, 0, 0};
  int cluster_policy = 0, cooperative = 0, priority = 0, mem_sync_domain = 0;
  bool programmatic = false;
};

cudaError_t launch(const void* f, dim3 grid, dim3 block, void** args, size_t smem, void* stream,
                   const LaunchAttrs& la) {
  State& s = st();
  Kernel* k = kernel_of(f);
  if (!k) return set_error(cudaErrorInvalidDeviceFunction);
  if (!block.x || !block.y || !block.z || !grid.x || !grid.y || !grid.z) return set_error(cudaErrorInvalidConfiguration);
  if (k->known) {
    const uint64_t threads = uint64_t{block.x} * block.y * block.z;
    if (threads > static_cast<uint64_t>(k->attrs[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK]) ||
        smem > static_cast<size_t>(k->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES]))
      return set_error(cudaErrorInvalidConfiguration);
  }
  if (!is_capture(stream)) {
    // Not on the capture stream: eager work elsewhere, never part of the call's description. On
    // the legacy stream during a capture of a non-blocking stream that is what CUDA does too.
    return cudaSuccess;
  }
  if (!k->known) {
    unreplayable("not_replayable", "kernel " + k->name + " is not in the candidate's device code as the worker loaded it");
    return cudaSuccess;
  }
  if (s.capture.attr_window)
    unreplayable("device_state", "kernel " + k->name +
                                     " carries an L2 access-policy window (persisting L2 lines survive the cold-L2 flush)");
  NodeImage n;
  n.type = NodeImage::Type::kernel;
  KernelImage& ki = n.kernel;
  ki.name = k->name;
  ki.grid[0] = grid.x, ki.grid[1] = grid.y, ki.grid[2] = grid.z;
  ki.block[0] = block.x, ki.block[1] = block.y, ki.block[2] = block.z;
  ki.shared_bytes = static_cast<unsigned>(smem);
  size_t total = 0;
  for (const auto& [o, sz] : k->params) total = std::max<size_t>(total, size_t{o} + sz);
  ki.params = k->params;
  ki.param_bytes.assign(total, 0);
  if (!k->params.empty() && !args) return set_error(cudaErrorInvalidValue);
  for (size_t i = 0; i < k->params.size(); ++i)
    std::memcpy(ki.param_bytes.data() + k->params[i].first, args[i], k->params[i].second);
  for (int i = 0; i < 3; ++i) ki.cluster[i] = la.cluster[i];
  ki.cluster_policy = la.cluster_policy;
  ki.cooperative = la.cooperative;
  ki.priority = la.priority;
  ki.mem_sync_domain = la.mem_sync_domain;
  ki.max_dynamic_shared = k->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
  ki.carveout = k->attrs[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT];
  ki.non_portable_cluster = k->attrs[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED];
  ki.cluster_policy_fn = k->attrs[CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE];
  // Programmatic stream serialization: the edge from the previous kernel becomes programmatic
  // (as a real capture records it: type programmatic, from the programmatic port).
  const bool prog = la.programmatic && !s.graph.nodes.empty() &&
                    s.graph.nodes.back().type == NodeImage::Type::kernel;
  add_node(std::move(n), prog ? CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC : 0,
           prog ? CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC : 0);
  return cudaSuccess;
}

// Host memory of this process (a copy touching it is not replayable); device addresses are the
// worker's, never mapped here (msync fails on them with ENOMEM). Not mincore: a capture child's
// sandbox denies it (page-cache residency; sandbox.h, confine_capture_child). MS_ASYNC is a no-op.
bool host_memory(const void* p, size_t n) {
  if (!p) return false;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  (void)n;
  return msync(reinterpret_cast<void*>(a), 1, MS_ASYNC) == 0;
}

std::vector<uint8_t> from_hex(const std::string& h) {
  std::vector<uint8_t> b(h.size() / 2);
  auto nib = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(nib(h[2 * i]) << 4 | nib(h[2 * i + 1]));
  return b;
}

nlohmann::json ask(const nlohmann::json& q) {
  if (!st().query) throw std::runtime_error("no worker to ask");
  return st().query(q);
}

nlohmann::json kernel_attrs_json(const Kernel& k) {
  std::vector<int> a(k.attrs, k.attrs + kFuncAttrs);
  return a;
}

CUresult encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* addr, const cuuint64_t* dims,
                      const cuuint64_t* strides, const cuuint32_t* box, const cuuint32_t* elem_strides,
                      CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                      CUtensorMapFloatOOBfill fill) {
  if (!map || rank == 0 || rank > 5) return CUDA_ERROR_INVALID_VALUE;
  nlohmann::json q = {{"query", "tensor_map"},
                      {"type", static_cast<int>(type)},
                      {"address", reinterpret_cast<uint64_t>(addr)},
                      {"dims", std::vector<uint64_t>(dims, dims + rank)},
                      {"strides", std::vector<uint64_t>(strides, strides + (rank - 1))},
                      {"box", std::vector<uint32_t>(box, box + rank)},
                      {"elem_strides", std::vector<uint32_t>(elem_strides, elem_strides + rank)},
                      {"interleave", static_cast<int>(interleave)},
                      {"swizzle", static_cast<int>(swizzle)},
                      {"l2", static_cast<int>(l2)},
                      {"fill", static_cast<int>(fill)}};
  try {
    auto a = ask(q);
    const int rc = a.value("result", 1);
    if (rc != 0) return static_cast<CUresult>(rc);
    auto bytes = from_hex(a.at("map").get<std::string>());
    if (bytes.size() != sizeof(CUtensorMap)) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(map, bytes.data(), bytes.size());
    return CUDA_SUCCESS;
  } catch (const std::exception&) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
}

}  // namespace

void set_table(const nlohmann::json& t) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto& d = t.at("device");
  s.props = from_hex(d.at("props").get<std::string>());
  if (s.props.size() != sizeof(cudaDeviceProp)) throw std::runtime_error("shim table: device properties of the wrong size");
  for (const auto& [k, v] : d.at("attrs").items()) s.dev_attrs[std::stoi(k)] = v.get<int>();
  const nlohmann::json limits = d.value("limits", nlohmann::json::object());
  for (const auto& [k, v] : limits.items())
    s.limits[std::stoi(k)] = s.limits_default[std::stoi(k)] = v.get<size_t>();
  s.driver_version = d.at("driver_version").get<int>();
  s.runtime_version = d.at("runtime_version").get<int>();
  for (const auto& [name, k] : t.at("kernels").items()) s.table_kernels[name] = k;
}

void set_query(Query q) { st().query = std::move(q); }
void* capture_stream() { return &st().capture; }

void begin_capture() {
  State& s = st();
  s.capturing = true;
  s.invalid.clear();
  s.unreplayable.clear();
  s.unreplayable_check.clear();
  s.graph = {};
  s.captured_events.clear();
  s.last_error = cudaSuccess;
}

Captured end_capture(int rc) {
  State& s = st();
  s.capturing = false;
  Captured c;
  const cudaError_t launch_error = s.last_error;
  s.last_error = cudaSuccess;
  if (!s.invalid.empty()) {
    c.check = "not_capturable";
    c.reason = "the call could not be captured into a CUDA graph (" + s.invalid +
               "): candidates must be capturable (no sync, allocation or other stream inside kernelrl_launch)";
  } else if (rc != 0) {
    c.check = "nonzero_return", c.reason = "kernelrl_launch returned " + std::to_string(rc);
  } else if (launch_error != cudaSuccess) {
    c.check = "launch_failed";
    c.reason = std::string("launch failed: ") + cudaGetErrorName(launch_error) + " (" +
               cudaGetErrorString(launch_error) + ")";
  } else if (!s.sticky.empty()) {
    c.check = s.sticky_check, c.reason = s.sticky;
  } else if (!s.unreplayable.empty()) {
    c.check = s.unreplayable_check, c.reason = s.unreplayable;
  } else {
    for (const auto& [limit, v] : s.limits)
      if (limit == cudaLimitPersistingL2CacheSize && v != s.limits_default[limit]) {
        c.check = "device_state";
        c.reason = "the candidate changed the L2 set-aside for persisting accesses (cudaLimitPersistingL2CacheSize) from " +
                   std::to_string(s.limits_default[limit]) + " to " + std::to_string(v) +
                   " bytes: persisting lines survive the cold-L2 flush";
        return c;
      }
    c.graph = std::move(s.graph);
  }
  s.graph = {};
  return c;
}

}  // namespace kernelrl::worker::shim

using namespace kernelrl::worker;
using namespace kernelrl::worker::shim;

// ------------------------------------------------------------------------- registration
SHIM_API void** __cudaRegisterFatBinary(void* fatCubin) {
  static thread_local int handles;  // any distinct non-null handle will do
  (void)fatCubin;
  return reinterpret_cast<void**>(new int(++handles));
}
SHIM_API void __cudaRegisterFatBinaryEnd(void**) {}
SHIM_API void __cudaUnregisterFatBinary(void**) {}
SHIM_API void __cudaRegisterFunction(void**, const char* hostFun, char* deviceFun, const char*, int, uint3*, uint3*,
                                     dim3*, dim3*, int*) {
  State& s = st();
  auto k = std::make_unique<Kernel>();
  k->name = deviceFun ? deviceFun : "";
  s.by_host[hostFun] = std::move(k);
}
SHIM_API void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}
SHIM_API void __cudaRegisterManagedVar(void**, void**, char*, const char*, int, size_t, int, int) {
  unreplayable("not_replayable", "the candidate declares __managed__ memory, which the evaluator does not replay");
}
SHIM_API char __cudaInitModule(void**) { return 1; }
SHIM_API unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem, struct CUstream_st* stream) {
  st().configs.push_back({grid, block, smem, stream});
  return 0;
}
SHIM_API cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* smem, void* stream) {
  State& s = st();
  if (s.configs.empty()) return cudaErrorMissingConfiguration;
  auto c = s.configs.back();
  s.configs.pop_back();
  *grid = c.grid, *block = c.block, *smem = c.smem;
  *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}
SHIM_API cudaError_t __cudaGetKernel(cudaKernel_t* out, const void* hostFun) {
  auto it = st().by_host.find(hostFun);  // no lookup yet: a static initializer of the launch site
  Kernel* k = it == st().by_host.end() ? nullptr : it->second.get();
  if (!k) return cudaErrorInvalidDeviceFunction;
  *out = reinterpret_cast<cudaKernel_t>(k);
  return cudaSuccess;
}

// ------------------------------------------------------------------------- launches
SHIM_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t smem,
                                        cudaStream_t stream) {
  return launch(kernel, grid, block, args, smem, stream, {});
}
SHIM_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t smem,
                                             cudaStream_t stream) {
  return launch(kernel, grid, block, args, smem, stream ? stream : cudaStreamPerThread, {});
}
SHIM_API cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t smem,
                                      cudaStream_t stream) {
  return launch(func, grid, block, args, smem, stream, {});
}
SHIM_API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  if (!config) return set_error(cudaErrorInvalidValue);
  LaunchAttrs la;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const cudaLaunchAttribute& a = config->attrs[i];
    switch (a.id) {
      case cudaLaunchAttributeClusterDimension:
        la.cluster[0] = a.val.clusterDim.x, la.cluster[1] = a.val.clusterDim.y, la.cluster[2] = a.val.clusterDim.z;
        break;
      case cudaLaunchAttributeClusterSchedulingPolicyPreference:
        la.cluster_policy = static_cast<int>(a.val.clusterSchedulingPolicyPreference);
        break;
      case cudaLaunchAttributeCooperative: la.cooperative = a.val.cooperative; break;
      case cudaLaunchAttributePriority: la.priority = a.val.priority; break;
      case cudaLaunchAttributeMemSyncDomain: la.mem_sync_domain = static_cast<int>(a.val.memSyncDomain); break;
      case cudaLaunchAttributeProgrammaticStreamSerialization:
        la.programmatic = a.val.programmaticStreamSerializationAllowed != 0;
        break;
      case cudaLaunchAttributeAccessPolicyWindow:
        if (a.val.accessPolicyWindow.num_bytes > 0 && is_capture(config->stream))
          unreplayable("device_state", "a kernel carries an L2 access-policy window (persisting L2 lines survive the "
                                       "cold-L2 flush)");
        break;
      case cudaLaunchAttributeProgrammaticEvent:
      case cudaLaunchAttributeLaunchCompletionEvent:
        if (is_capture(config->stream))
          unreplayable("not_replayable", "a launch with a programmatic or launch-completion event (the shim "
                                         "capture records programmatic stream serialization only)");
        break;
      default: break;  // not carried by a description either (graph_cuda.cpp describe_kernel)
    }
  }
  return launch(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes, config->stream, la);
}
SHIM_API cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t stream) {
  if (!is_capture(stream)) return cudaSuccess;
  NodeImage n;
  n.type = NodeImage::Type::memset;
  n.memset = {reinterpret_cast<uint64_t>(dst), 0, count, 1, static_cast<unsigned>(value & 0xff), 1};
  add_node(std::move(n));
  return cudaSuccess;
}
SHIM_API cudaError_t cudaMemset2DAsync(void* dst, size_t pitch, int value, size_t width, size_t height,
                                       cudaStream_t stream) {
  if (!is_capture(stream)) return cudaSuccess;
  NodeImage n;
  n.type = NodeImage::Type::memset;
  n.memset = {reinterpret_cast<uint64_t>(dst), pitch, width, height, static_cast<unsigned>(value & 0xff), 1};
  add_node(std::move(n));
  return cudaSuccess;
}
SHIM_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                     cudaStream_t stream) {
  if (!is_capture(stream)) return cudaSuccess;
  if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) {
    unreplayable("not_replayable", "a captured copy touches host memory or an array (only device-to-device copies can "
                                   "be replayed by the evaluator)");
    return cudaSuccess;
  }
  if (host_memory(dst, count) || host_memory(src, count)) {
    unreplayable("not_replayable", "a captured copy touches host memory or an array (only device-to-device copies can "
                                   "be replayed by the evaluator)");
    return cudaSuccess;
  }
  NodeImage n;
  n.type = NodeImage::Type::memcpy;
  MemcpyImage& c = n.memcpy;
  c.src = reinterpret_cast<uint64_t>(src), c.dst = reinterpret_cast<uint64_t>(dst);
  c.width_bytes = count, c.height = 1, c.depth = 1;
  c.src_pitch = c.dst_pitch = count, c.src_height = c.dst_height = 1;  // one row (1D)
  add_node(std::move(n));
  return cudaSuccess;
}
SHIM_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t, void*) {
  if (is_capture(stream))
    unreplayable("not_replayable", "the captured work holds a host callback node, which the evaluator does not replay");
  return cudaSuccess;
}

// ------------------------------------------------------------------------- errors
SHIM_API cudaError_t cudaGetLastError(void) {
  cudaError_t e = st().last_error;
  st().last_error = cudaSuccess;
  return e;
}
SHIM_API cudaError_t cudaPeekAtLastError(void) { return st().last_error; }
SHIM_API const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorMissingConfiguration: return "cudaErrorMissingConfiguration";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorSymbolNotFound: return "cudaErrorSymbolNotFound";
    default: return "cudaErrorUnknown";
  }
}
SHIM_API const char* cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }

// ------------------------------------------------------------------------- device queries
SHIM_API cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
SHIM_API cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : set_error(cudaErrorInvalidDevice); }
SHIM_API cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;  // the runner sees its worker's GPU alone
  return cudaSuccess;
}
SHIM_API cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d != 0 || !p) return set_error(cudaErrorInvalidDevice);
  if (st().props.size() != sizeof(cudaDeviceProp)) return set_error(cudaErrorNotSupported);
  std::memcpy(p, st().props.data(), sizeof(cudaDeviceProp));
  return cudaSuccess;
}
SHIM_API cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int d) {
  if (d != 0) return set_error(cudaErrorInvalidDevice);
  auto it = st().dev_attrs.find(static_cast<int>(a));
  if (it == st().dev_attrs.end()) return set_error(cudaErrorInvalidValue);
  *v = it->second;
  return cudaSuccess;
}
SHIM_API cudaError_t cudaDriverGetVersion(int* v) {
  *v = st().driver_version;
  return cudaSuccess;
}
SHIM_API cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = st().runtime_version;
  return cudaSuccess;
}
SHIM_API cudaError_t cudaDeviceGetLimit(size_t* v, cudaLimit l) {
  auto it = st().limits.find(static_cast<int>(l));
  if (it == st().limits.end()) return set_error(cudaErrorUnsupportedLimit);
  *v = it->second;
  return cudaSuccess;
}
SHIM_API cudaError_t cudaDeviceSetLimit(cudaLimit l, size_t v) {
  if (cudaError_t e = unsafe("cudaDeviceSetLimit"); e != cudaSuccess) return e;
  st().limits[static_cast<int>(l)] = v;  // the persisting set-aside is refused at the next capture
  return cudaSuccess;
}
SHIM_API cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache) { return cudaSuccess; }  // dies with the runner
SHIM_API cudaError_t cudaDeviceSynchronize(void) { return unsafe("cudaDeviceSynchronize"); }

// ------------------------------------------------------------------------- functions
SHIM_API cudaError_t cudaFuncSetAttribute(const void* f, cudaFuncAttribute a, int v) {
  Kernel* k = kernel_of(f);
  if (!k) return set_error(cudaErrorInvalidDeviceFunction);
  if (a < 0 || a >= kFuncAttrs) return set_error(cudaErrorInvalidValue);
  if (a == cudaFuncAttributeMaxDynamicSharedMemorySize && k->known) {
    auto it = st().dev_attrs.find(cudaDevAttrMaxSharedMemoryPerBlockOptin);
    if (v < 0 || (it != st().dev_attrs.end() && v + k->attrs[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES] > it->second))
      return set_error(cudaErrorInvalidValue);
  }
  k->attrs[a] = v;
  return cudaSuccess;
}
SHIM_API cudaError_t cudaFuncSetCacheConfig(const void* f, cudaFuncCache) {
  return kernel_of(f) ? cudaSuccess : set_error(cudaErrorInvalidDeviceFunction);
}
SHIM_API cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* out, const void* f) {
  Kernel* k = kernel_of(f);
  if (!k || !k->known) return set_error(cudaErrorInvalidDeviceFunction);
  *out = {};
  out->maxThreadsPerBlock = k->attrs[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
  out->sharedSizeBytes = static_cast<size_t>(k->attrs[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES]);
  out->constSizeBytes = static_cast<size_t>(k->attrs[CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES]);
  out->localSizeBytes = static_cast<size_t>(k->attrs[CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES]);
  out->numRegs = k->attrs[CU_FUNC_ATTRIBUTE_NUM_REGS];
  out->ptxVersion = k->attrs[CU_FUNC_ATTRIBUTE_PTX_VERSION];
  out->binaryVersion = k->attrs[CU_FUNC_ATTRIBUTE_BINARY_VERSION];
  out->cacheModeCA = k->attrs[CU_FUNC_ATTRIBUTE_CACHE_MODE_CA];
  out->maxDynamicSharedSizeBytes = k->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
  out->preferredShmemCarveout = k->attrs[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT];
  out->clusterDimMustBeSet = k->attrs[CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET];
  out->requiredClusterWidth = k->attrs[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
  out->requiredClusterHeight = k->attrs[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT];
  out->requiredClusterDepth = k->attrs[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH];
  out->clusterSchedulingPolicyPreference = k->attrs[CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE];
  out->nonPortableClusterSizeAllowed = k->attrs[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED];
  return cudaSuccess;
}
// Occupancy depends on the function's attributes as the candidate set them: the worker answers
// with its own copy of the kernel, those attributes applied.
SHIM_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, const void* f, int block,
                                                                            size_t smem, unsigned flags) {
  Kernel* k = kernel_of(f);
  if (!k || !k->known) return set_error(cudaErrorInvalidDeviceFunction);
  try {
    auto a = ask({{"query", "occupancy_blocks"}, {"kernel", k->name}, {"attrs", kernel_attrs_json(*k)},
                  {"block", block}, {"smem", smem}, {"flags", flags}});
    if (a.value("result", 1) != 0) return set_error(cudaErrorInvalidValue);
    *n = a.at("value").get<int>();
    return cudaSuccess;
  } catch (const std::exception&) {
    return set_error(cudaErrorNotSupported);
  }
}
SHIM_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void* f, int block, size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, f, block, smem, 0);
}
SHIM_API cudaError_t cudaOccupancyMaxActiveClusters(int* n, const void* f, const cudaLaunchConfig_t* config) {
  Kernel* k = kernel_of(f);
  if (!k || !k->known || !config) return set_error(cudaErrorInvalidDeviceFunction);
  unsigned cluster[3] = {1, 1, 1};
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == cudaLaunchAttributeClusterDimension)
      cluster[0] = config->attrs[i].val.clusterDim.x, cluster[1] = config->attrs[i].val.clusterDim.y,
      cluster[2] = config->attrs[i].val.clusterDim.z;
  try {
    auto a = ask({{"query", "occupancy_clusters"},
                  {"kernel", k->name},
                  {"attrs", kernel_attrs_json(*k)},
                  {"grid", {config->gridDim.x, config->gridDim.y, config->gridDim.z}},
                  {"block", {config->blockDim.x, config->blockDim.y, config->blockDim.z}},
                  {"smem", config->dynamicSmemBytes},
                  {"cluster", {cluster[0], cluster[1], cluster[2]}}});
    if (a.value("result", 1) != 0) return set_error(cudaErrorInvalidValue);
    *n = a.at("value").get<int>();
    return cudaSuccess;
  } catch (const std::exception&) {
    return set_error(cudaErrorNotSupported);
  }
}
// Driver entry points: cuTensorMapEncodeTiled (TMA descriptors) is encoded by the worker's
// driver, which the context runner's would have done; nothing else is served.
SHIM_API cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int, unsigned long long,
                                                      cudaDriverEntryPointQueryResult* status) {
  if (symbol && std::strcmp(symbol, "cuTensorMapEncodeTiled") == 0) {
    *fn = reinterpret_cast<void*>(&encode_tiled);
    if (status) *status = cudaDriverEntryPointSuccess;
    return cudaSuccess;
  }
  *fn = nullptr;
  if (status) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}
SHIM_API cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status) {
  return cudaGetDriverEntryPointByVersion(symbol, fn, 12000, flags, status);
}

// ------------------------------------------------------------------------- streams and events
SHIM_API cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* out) {
  // The capture stream is non-blocking (as the context runner's), so the legacy stream has no
  // implicit dependency on it: not capturing, no error.
  *out = is_capture(s) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
SHIM_API cudaError_t cudaStreamCreate(cudaStream_t* s) {
  auto* p = new int(0);
  st().streams.insert(p);
  *s = reinterpret_cast<cudaStream_t>(p);
  return cudaSuccess;
}
SHIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { return cudaStreamCreate(s); }
SHIM_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned, int) { return cudaStreamCreate(s); }
SHIM_API cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
SHIM_API cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (is_capture(s) || (st().capturing && is_legacy(s))) return unsafe("cudaStreamSynchronize");
  return cudaSuccess;
}
SHIM_API cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (is_capture(s) || (st().capturing && is_legacy(s))) return unsafe("cudaStreamQuery");
  return cudaSuccess;
}
SHIM_API cudaError_t cudaStreamSetAttribute(cudaStream_t s, cudaLaunchAttributeID id, const cudaLaunchAttributeValue* v) {
  if (static_cast<void*>(s) == capture_stream() && id == cudaLaunchAttributeAccessPolicyWindow && v)
    st().capture.attr_window = v->accessPolicyWindow.num_bytes > 0;
  return cudaSuccess;
}
SHIM_API cudaError_t cudaEventCreate(cudaEvent_t* e) {
  auto* p = new int(0);
  st().events.insert(p);
  *e = reinterpret_cast<cudaEvent_t>(p);
  return cudaSuccess;
}
SHIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
SHIM_API cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
SHIM_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned flags) {
  if (is_capture(s)) {
    if (flags & cudaEventRecordExternal)
      unreplayable("not_replayable", "the captured work holds a event record node, which the evaluator does not replay");
    else
      st().captured_events.insert(e);
  }
  return cudaSuccess;
}
SHIM_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { return cudaEventRecordWithFlags(e, s, 0); }
SHIM_API cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (st().captured_events.count(e)) return unsafe("cudaEventSynchronize on a captured event");
  return cudaSuccess;
}
SHIM_API cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (st().captured_events.count(e)) return unsafe("cudaEventQuery on a captured event");
  return cudaSuccess;
}
SHIM_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0;
  return unsafe("cudaEventElapsedTime");
}
SHIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
  State& g = st();
  if (!g.capturing) return cudaSuccess;
  if (is_capture(s)) {
    if (flags & cudaEventWaitExternal) {
      unreplayable("not_replayable", "the captured work holds a event wait node, which the evaluator does not replay");
      return cudaSuccess;
    }
    if (!g.captured_events.count(e)) {
      invalidate("a wait on an event recorded outside the capture (cudaErrorStreamCaptureIsolation)");
      return set_error(cudaErrorStreamCaptureIsolation);
    }
    return cudaSuccess;  // joins what it already follows
  }
  if (g.captured_events.count(e)) {  // a fork onto another stream: the shim follows one stream
    invalidate("a second stream joined the capture (the shim capture follows the call's stream only)");
    return set_error(cudaErrorStreamCaptureUnsupported);
  }
  return cudaSuccess;
}

// ------------------------------------------------------------------------- memory
SHIM_API cudaError_t cudaMalloc(void** p, size_t) {
  *p = nullptr;
  if (st().capturing) return unsafe("cudaMalloc");
  unreplayable("not_replayable", "the candidate allocated device memory in its host code (cudaMalloc): memory of the "
                                 "runner's is not the worker's; use the call's workspace");
  return set_error(cudaErrorMemoryAllocation);
}
SHIM_API cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;  // cudaFree(nullptr): the classic context initialization
  return unsafe("cudaFree");
}
SHIM_API cudaError_t cudaMallocAsync(void** p, size_t, cudaStream_t s) {
  *p = nullptr;
  if (is_capture(s)) {
    unreplayable("not_replayable", "the captured work holds a memory allocation node, which the evaluator does not replay");
    return cudaSuccess;
  }
  return cudaMalloc(p, 1);
}
SHIM_API cudaError_t cudaFreeAsync(void*, cudaStream_t s) {
  if (is_capture(s))
    unreplayable("not_replayable", "the captured work holds a memory free node, which the evaluator does not replay");
  return cudaSuccess;
}
SHIM_API cudaError_t cudaMallocHost(void** p, size_t) {
  *p = nullptr;
  if (st().capturing) return unsafe("cudaMallocHost");
  return set_error(cudaErrorMemoryAllocation);
}
SHIM_API cudaError_t cudaFreeHost(void*) { return unsafe("cudaFreeHost"); }
SHIM_API cudaError_t cudaMemcpy(void*, const void*, size_t, cudaMemcpyKind) {
  if (st().capturing) return unsafe("cudaMemcpy");
  return set_error(cudaErrorNotSupported);
}
SHIM_API cudaError_t cudaMemset(void*, int, size_t) {
  if (st().capturing) return unsafe("cudaMemset");
  return set_error(cudaErrorNotSupported);
}

namespace kernelrl::worker::shim {
const std::vector<std::string>& exported_symbols() {
  static const std::vector<std::string> names = {
      "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaUnregisterFatBinary",
      "__cudaRegisterFunction", "__cudaRegisterVar", "__cudaRegisterManagedVar", "__cudaInitModule",
      "__cudaPushCallConfiguration", "__cudaPopCallConfiguration", "__cudaGetKernel", "__cudaLaunchKernel",
      "__cudaLaunchKernel_ptsz", "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemsetAsync",
      "cudaMemset2DAsync", "cudaMemcpyAsync", "cudaLaunchHostFunc", "cudaGetLastError", "cudaPeekAtLastError",
      "cudaGetErrorName", "cudaGetErrorString", "cudaGetDevice", "cudaSetDevice", "cudaGetDeviceCount",
      "cudaGetDeviceProperties", "cudaDeviceGetAttribute", "cudaDriverGetVersion", "cudaRuntimeGetVersion",
      "cudaDeviceGetLimit", "cudaDeviceSetLimit", "cudaDeviceSetCacheConfig", "cudaDeviceSynchronize",
      "cudaFuncSetAttribute", "cudaFuncSetCacheConfig", "cudaFuncGetAttributes",
      "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
      "cudaOccupancyMaxActiveClusters", "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion",
      "cudaStreamIsCapturing", "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
      "cudaStreamDestroy", "cudaStreamSynchronize", "cudaStreamQuery", "cudaStreamSetAttribute",
      "cudaEventCreate", "cudaEventCreateWithFlags", "cudaEventDestroy", "cudaEventRecord",
      "cudaEventRecordWithFlags", "cudaEventSynchronize", "cudaEventQuery", "cudaEventElapsedTime",
      "cudaStreamWaitEvent", "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaMallocHost",
      "cudaFreeHost", "cudaMemcpy", "cudaMemset"};
  return names;
}
}  // namespace kernelrl::worker::shim
