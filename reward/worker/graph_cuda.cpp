#include "reward/worker/graph_cuda.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <unordered_map>

#include "reward/worker/cu_driver.h"
#include "reward/worker/fatbin.h"

namespace kernelrl::worker {

namespace {

std::string cu_name(CUresult r) {
  const char* n = nullptr;
  cu().cuGetErrorName(r, &n);
  return n ? n : "CUDA_ERROR_?";
}

void need(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw NotReplayable("not_replayable", std::string(what) + " failed: " + cu_name(r));
}

const char* node_type_name(CUgraphNodeType t) {
  switch (t) {
    case CU_GRAPH_NODE_TYPE_HOST: return "host callback";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "child graph";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "event wait";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "event record";
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL: return "external semaphore signal";
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: return "external semaphore wait";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "memory allocation";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "memory free";
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: return "batch memory operation";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "conditional";
    default: return "unknown";
  }
}

bool device_memory(CUmemorytype t) { return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED; }

KernelImage describe_kernel(CUgraphNode node) {
  CUDA_KERNEL_NODE_PARAMS p{};
  need(cu().cuGraphKernelNodeGetParams(node, &p), "reading a kernel node");
  KernelImage k;
  CUfunction f = p.func;
  if (!f && p.kern) need(cu().cuKernelGetFunction(&f, p.kern), "resolving a kernel");
  if (!f) throw NotReplayable("not_replayable", "a kernel node without a function");
  const char* name = nullptr;
  need(cu().cuFuncGetName(&name, f), "naming a kernel");
  k.name = name ? name : "";
  k.grid[0] = p.gridDimX, k.grid[1] = p.gridDimY, k.grid[2] = p.gridDimZ;
  k.block[0] = p.blockDimX, k.block[1] = p.blockDimY, k.block[2] = p.blockDimZ;
  k.shared_bytes = p.sharedMemBytes;
  // Parameter layout, then the bytes from kernelParams (one pointer per parameter) or from a
  // packed `extra` buffer.
  size_t total = 0;
  for (size_t i = 0;; ++i) {
    size_t off = 0, size = 0;
    CUresult r = cu().cuFuncGetParamInfo(f, i, &off, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;
    need(r, "reading a kernel's parameter layout");
    k.params.emplace_back(static_cast<uint32_t>(off), static_cast<uint32_t>(size));
    total = std::max(total, off + size);
  }
  k.param_bytes.assign(total, 0);
  if (p.kernelParams) {
    for (size_t i = 0; i < k.params.size(); ++i)
      std::memcpy(k.param_bytes.data() + k.params[i].first, p.kernelParams[i], k.params[i].second);
  } else if (p.extra) {
    const void* buffer = nullptr;
    size_t size = 0;
    for (void** e = p.extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = e[1];
      else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<size_t*>(e[1]);
    }
    if (!buffer || size < total) throw NotReplayable("not_replayable", "a kernel node's packed parameters are incomplete");
    std::memcpy(k.param_bytes.data(), buffer, total);
  } else if (total > 0) {
    throw NotReplayable("not_replayable", "a kernel node without its parameters");
  }
  CUkernelNodeAttrValue v{};
  // Persisting-L2 windows outlive the candidate's own time in the L2 (docs/sandbox.md).
  if (cu().cuGraphKernelNodeGetAttribute(node, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v) == CUDA_SUCCESS &&
      v.accessPolicyWindow.num_bytes > 0)
    throw NotReplayable("device_state", "kernel " + k.name +
                                            " carries an L2 access-policy window (persisting L2 lines "
                                            "survive the cold-L2 flush)");
  v = {};
  if (cu().cuGraphKernelNodeGetAttribute(node, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v) == CUDA_SUCCESS) {
    k.cluster[0] = v.clusterDim.x, k.cluster[1] = v.clusterDim.y, k.cluster[2] = v.clusterDim.z;
  }
  v = {};
  if (cu().cuGraphKernelNodeGetAttribute(node, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, &v) == CUDA_SUCCESS)
    k.cluster_policy = static_cast<int>(v.clusterSchedulingPolicyPreference);
  v = {};
  if (cu().cuGraphKernelNodeGetAttribute(node, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v) == CUDA_SUCCESS) k.cooperative = v.cooperative;
  v = {};
  if (cu().cuGraphKernelNodeGetAttribute(node, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v) == CUDA_SUCCESS) k.priority = v.priority;
  v = {};
  if (cu().cuGraphKernelNodeGetAttribute(node, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, &v) == CUDA_SUCCESS)
    k.mem_sync_domain = static_cast<int>(v.memSyncDomain);
  auto attr = [&](CUfunction_attribute a, int fallback) {
    int x = fallback;
    return cu().cuFuncGetAttribute(&x, a, f) == CUDA_SUCCESS ? x : fallback;
  };
  k.max_dynamic_shared = attr(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0);
  k.carveout = attr(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, -1);
  k.non_portable_cluster = attr(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 0);
  k.cluster_policy_fn = attr(CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, 0);
  return k;
}

}  // namespace

GraphImage describe_graph(CUgraph graph) {
  GraphImage g;
  size_t n = 0;
  need(cu().cuGraphGetNodes(graph, nullptr, &n), "listing graph nodes");
  std::vector<CUgraphNode> nodes(n);
  if (n) need(cu().cuGraphGetNodes(graph, nodes.data(), &n), "listing graph nodes");
  std::unordered_map<CUgraphNode, uint32_t> index;
  for (CUgraphNode node : nodes) {
    CUgraphNodeType t{};
    need(cu().cuGraphNodeGetType(node, &t), "reading a node type");
    NodeImage ni;
    switch (t) {
      case CU_GRAPH_NODE_TYPE_KERNEL:
        ni.type = NodeImage::Type::kernel;
        ni.kernel = describe_kernel(node);
        break;
      case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m{};
        need(cu().cuGraphMemsetNodeGetParams(node, &m), "reading a memset node");
        ni.type = NodeImage::Type::memset;
        ni.memset = {m.dst, m.pitch, m.width, m.height, m.value, m.elementSize};
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D c{};
        need(cu().cuGraphMemcpyNodeGetParams(node, &c), "reading a memcpy node");
        if (!device_memory(c.srcMemoryType) || !device_memory(c.dstMemoryType))
          throw NotReplayable("not_replayable",
                              "a captured copy touches host memory or an array (only device-to-device "
                              "copies can be replayed by the evaluator)");
        ni.type = NodeImage::Type::memcpy;
        ni.memcpy = {c.srcDevice, c.dstDevice, c.srcXInBytes, c.srcY, c.srcZ, c.dstXInBytes, c.dstY,
                     c.dstZ, c.srcPitch, c.srcHeight, c.dstPitch, c.dstHeight, c.WidthInBytes,
                     std::max<size_t>(c.Height, 1), std::max<size_t>(c.Depth, 1)};
        break;
      }
      case CU_GRAPH_NODE_TYPE_EMPTY: ni.type = NodeImage::Type::empty; break;
      default:
        throw NotReplayable("not_replayable", std::string("the captured work holds a ") + node_type_name(t) +
                                                  " node, which the evaluator does not replay");
    }
    index[node] = static_cast<uint32_t>(g.nodes.size());
    g.nodes.push_back(std::move(ni));
  }
  size_t ne = 0;
  need(cu().cuGraphGetEdges(graph, nullptr, nullptr, nullptr, &ne), "listing graph edges");
  std::vector<CUgraphNode> from(ne), to(ne);
  std::vector<CUgraphEdgeData> data(ne);
  if (ne) need(cu().cuGraphGetEdges(graph, from.data(), to.data(), data.data(), &ne), "listing graph edges");
  for (size_t i = 0; i < ne; ++i)
    g.edges.push_back({index.at(from[i]), index.at(to[i]), data[i].type, data[i].from_port, data[i].to_port});
  return g;
}

CandidateModule::CandidateModule(const std::filesystem::path& so) {
  for (const auto& fatbin : read_fatbins(so)) {
    CUmodule m = nullptr;
    CUresult r = cu().cuModuleLoadData(&m, fatbin.data());
    if (r != CUDA_SUCCESS) {
      for (CUmodule x : modules_) cu().cuModuleUnload(x);
      throw std::runtime_error("cannot load the candidate's device code: " + cu_name(r));
    }
    modules_.push_back(m);
  }
}

CandidateModule::~CandidateModule() {
  for (CUmodule m : modules_) cu().cuModuleUnload(m);
}

CUfunction CandidateModule::function(const std::string& name) {
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  CUfunction f = nullptr;
  for (CUmodule m : modules_)
    if (cu().cuModuleGetFunction(&f, m, name.c_str()) == CUDA_SUCCESS) break;
  functions_[name] = f;
  return f;
}

nlohmann::json shim_device_table() {
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess)
    throw std::runtime_error("shim table: cannot read the device's properties");
  static const char* kHexDigits = "0123456789abcdef";
  std::string props;
  for (size_t i = 0; i < sizeof p; ++i) {
    const auto b = reinterpret_cast<const uint8_t*>(&p)[i];
    props += kHexDigits[b >> 4];
    props += kHexDigits[b & 15];
  }
  nlohmann::json attrs = nlohmann::json::object(), limits = nlohmann::json::object();
  for (int a = 1; a < static_cast<int>(cudaDevAttrMax); ++a) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(a), dev) == cudaSuccess) attrs[std::to_string(a)] = v;
  }
  for (cudaLimit l : {cudaLimitStackSize, cudaLimitPrintfFifoSize, cudaLimitMallocHeapSize,
                      cudaLimitDevRuntimeSyncDepth, cudaLimitDevRuntimePendingLaunchCount,
                      cudaLimitMaxL2FetchGranularity, cudaLimitPersistingL2CacheSize}) {
    size_t v = 0;
    if (cudaDeviceGetLimit(&v, l) == cudaSuccess) limits[std::to_string(static_cast<int>(l))] = v;
  }
  cudaGetLastError();  // attributes this device lacks
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  return {{"device",
           {{"props", props}, {"attrs", attrs}, {"limits", limits}, {"driver_version", driver},
            {"runtime_version", runtime}}},
          {"kernels", nlohmann::json::object()}};
}

namespace {

// The candidate's function attributes as the shim recorded them (CU_FUNC_ATTRIBUTE_* 0..15),
// applied to the worker's copy before an occupancy query: build_graph applies the described
// ones again before anything runs.
CUfunction function_with_attrs(const nlohmann::json& q, CandidateModule& module) {
  CUfunction f = module.function(q.at("kernel").get<std::string>());
  if (!f) throw std::runtime_error("no such kernel");
  const auto a = q.at("attrs").get<std::vector<int>>();
  for (CUfunction_attribute settable :
       {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
        CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE})
    if (static_cast<size_t>(settable) < a.size() && a[settable] >= 0) cu().cuFuncSetAttribute(f, settable, a[settable]);
  return f;
}

}  // namespace

nlohmann::json answer_shim_query(const nlohmann::json& q, CandidateModule& module) {
  const std::string what = q.at("query").get<std::string>();
  if (what == "kernel") {
    CUfunction f = module.function(q.at("name").get<std::string>());
    if (!f) return {{"known", false}};
    nlohmann::json params = nlohmann::json::array();
    for (size_t i = 0;; ++i) {
      size_t off = 0, size = 0;
      CUresult r = cu().cuFuncGetParamInfo(f, i, &off, &size);
      if (r == CUDA_ERROR_INVALID_VALUE) break;
      need(r, "reading a kernel's parameter layout");
      params.push_back({off, size});
    }
    std::vector<int> attrs(16, 0);
    for (int a = 0; a < 16; ++a)
      if (cu().cuFuncGetAttribute(&attrs[a], static_cast<CUfunction_attribute>(a), f) != CUDA_SUCCESS) attrs[a] = 0;
    return {{"known", true}, {"params", params}, {"attrs", attrs}};
  }
  if (what == "occupancy_blocks") {
    CUfunction f = function_with_attrs(q, module);
    int n = 0;
    const CUresult r = cu().cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        &n, f, q.at("block").get<int>(), q.at("smem").get<size_t>(), q.at("flags").get<unsigned>());
    return {{"result", static_cast<int>(r)}, {"value", n}};
  }
  if (what == "occupancy_clusters") {
    CUfunction f = function_with_attrs(q, module);
    const auto grid = q.at("grid").get<std::vector<unsigned>>(), block = q.at("block").get<std::vector<unsigned>>(),
               cluster = q.at("cluster").get<std::vector<unsigned>>();
    if (grid.size() != 3 || block.size() != 3 || cluster.size() != 3) throw std::runtime_error("bad dims");
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cluster[0], attr.value.clusterDim.y = cluster[1], attr.value.clusterDim.z = cluster[2];
    CUlaunchConfig cfg{};
    cfg.gridDimX = grid[0], cfg.gridDimY = grid[1], cfg.gridDimZ = grid[2];
    cfg.blockDimX = block[0], cfg.blockDimY = block[1], cfg.blockDimZ = block[2];
    cfg.sharedMemBytes = q.at("smem").get<unsigned>();
    cfg.attrs = &attr, cfg.numAttrs = 1;
    int n = 0;
    const CUresult r = cu().cuOccupancyMaxActiveClusters(&n, f, &cfg);
    return {{"result", static_cast<int>(r)}, {"value", n}};
  }
  if (what == "tensor_map") {
    const auto dims = q.at("dims").get<std::vector<cuuint64_t>>(), strides = q.at("strides").get<std::vector<cuuint64_t>>();
    const auto box = q.at("box").get<std::vector<cuuint32_t>>(), es = q.at("elem_strides").get<std::vector<cuuint32_t>>();
    const size_t rank = dims.size();
    if (rank == 0 || rank > 5 || strides.size() != rank - 1 || box.size() != rank || es.size() != rank)
      throw std::runtime_error("bad tensor map rank");
    CUtensorMap map{};
    const CUresult r = cu().cuTensorMapEncodeTiled(
        &map, static_cast<CUtensorMapDataType>(q.at("type").get<int>()), static_cast<cuuint32_t>(rank),
        reinterpret_cast<void*>(q.at("address").get<uint64_t>()), dims.data(), strides.data(), box.data(), es.data(),
        static_cast<CUtensorMapInterleave>(q.at("interleave").get<int>()),
        static_cast<CUtensorMapSwizzle>(q.at("swizzle").get<int>()),
        static_cast<CUtensorMapL2promotion>(q.at("l2").get<int>()),
        static_cast<CUtensorMapFloatOOBfill>(q.at("fill").get<int>()));
    std::string hexmap;
    static const char* kHexDigits = "0123456789abcdef";
    for (size_t i = 0; i < sizeof map; ++i) {
      const auto b = reinterpret_cast<const uint8_t*>(&map)[i];
      hexmap += kHexDigits[b >> 4];
      hexmap += kHexDigits[b & 15];
    }
    return {{"result", static_cast<int>(r)}, {"map", hexmap}};
  }
  throw std::runtime_error("unknown query " + what);
}

CUgraph build_graph(const GraphImage& image, CandidateModule& module) {
  CUcontext ctx = nullptr;
  need(cu().cuCtxGetCurrent(&ctx), "reading the current context");
  CUgraph graph = nullptr;
  need(cu().cuGraphCreate(&graph, 0), "creating a graph");
  try {
    std::vector<CUgraphNode> nodes;
    for (const auto& n : image.nodes) {
      CUgraphNode node = nullptr;
      switch (n.type) {
        case NodeImage::Type::kernel: {
          const KernelImage& k = n.kernel;
          CUfunction f = module.function(k.name);
          if (!f)
            throw NotReplayable("not_replayable", "kernel " + k.name +
                                                      " is not in the candidate's own device code (a "
                                                      "library's kernel?)");
          // The function attributes its host code set, set here the same way.
          if (k.max_dynamic_shared > 0)
            need(cu().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.max_dynamic_shared),
                 "setting the kernel's dynamic shared memory");
          if (k.carveout >= 0) cu().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, k.carveout);
          if (k.non_portable_cluster)
            need(cu().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                 "allowing a non-portable cluster size");
          if (k.cluster_policy_fn)
            cu().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, k.cluster_policy_fn);
          std::vector<void*> args;
          for (const auto& [off, size] : k.params)
            args.push_back(const_cast<uint8_t*>(k.param_bytes.data()) + off);
          CUDA_KERNEL_NODE_PARAMS p{};
          p.func = f;
          p.gridDimX = k.grid[0], p.gridDimY = k.grid[1], p.gridDimZ = k.grid[2];
          p.blockDimX = k.block[0], p.blockDimY = k.block[1], p.blockDimZ = k.block[2];
          p.sharedMemBytes = k.shared_bytes;
          p.kernelParams = args.empty() ? nullptr : args.data();
          need(cu().cuGraphAddKernelNode(&node, graph, nullptr, 0, &p), "adding a kernel node");
          CUkernelNodeAttrValue v{};
          if (uint64_t{k.cluster[0]} * k.cluster[1] * k.cluster[2] > 1) {
            v.clusterDim.x = k.cluster[0], v.clusterDim.y = k.cluster[1], v.clusterDim.z = k.cluster[2];
            need(cu().cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v), "setting a cluster shape");
          }
          if (k.cluster_policy) {
            v = {};
            v.clusterSchedulingPolicyPreference = static_cast<CUclusterSchedulingPolicy>(k.cluster_policy);
            need(cu().cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, &v),
                 "setting a cluster scheduling policy");
          }
          if (k.cooperative) {
            v = {};
            v.cooperative = k.cooperative;
            need(cu().cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v), "making a launch cooperative");
          }
          if (k.priority) {
            v = {};
            v.priority = k.priority;
            cu().cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v);
          }
          if (k.mem_sync_domain) {
            v = {};
            v.memSyncDomain = static_cast<CUlaunchMemSyncDomain>(k.mem_sync_domain);
            cu().cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, &v);
          }
          break;
        }
        case NodeImage::Type::memset: {
          const MemsetImage& m = n.memset;
          CUDA_MEMSET_NODE_PARAMS p{};
          p.dst = m.dst, p.pitch = m.pitch, p.value = m.value, p.elementSize = m.element_size;
          p.width = m.width, p.height = m.height;
          need(cu().cuGraphAddMemsetNode(&node, graph, nullptr, 0, &p, ctx), "adding a memset node");
          break;
        }
        case NodeImage::Type::memcpy: {
          const MemcpyImage& c = n.memcpy;
          CUDA_MEMCPY3D p{};
          p.srcMemoryType = p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
          p.srcDevice = c.src, p.dstDevice = c.dst;
          p.srcXInBytes = c.src_x, p.srcY = c.src_y, p.srcZ = c.src_z;
          p.dstXInBytes = c.dst_x, p.dstY = c.dst_y, p.dstZ = c.dst_z;
          p.srcPitch = c.src_pitch, p.srcHeight = c.src_height, p.dstPitch = c.dst_pitch, p.dstHeight = c.dst_height;
          p.WidthInBytes = c.width_bytes, p.Height = c.height, p.Depth = c.depth;
          need(cu().cuGraphAddMemcpyNode(&node, graph, nullptr, 0, &p, ctx), "adding a memcpy node");
          break;
        }
        case NodeImage::Type::empty: need(cu().cuGraphAddEmptyNode(&node, graph, nullptr, 0), "adding an empty node"); break;
      }
      nodes.push_back(node);
    }
    for (const auto& e : image.edges) {
      CUgraphEdgeData d{};
      d.type = e.type, d.from_port = e.from_port, d.to_port = e.to_port;
      need(cu().cuGraphAddDependencies(graph, &nodes.at(e.from), &nodes.at(e.to), &d, 1), "adding an edge");
    }
  } catch (...) {
    cu().cuGraphDestroy(graph);
    throw;
  }
  return graph;
}

}  // namespace kernelrl::worker
