// The CUDA driver functions that the worker and the candidate runner call (graph_cuda.h,
// candidate.h), resolved through the CUDA runtime at first use (cudaGetDriverEntryPointByVersion,
// the ABI of the toolkit's cuda.h). Neither binary links libcuda, which exists only where a
// driver is installed: on a CPU host both still start and serve the host backend.
#pragma once

#include <cuda.h>

namespace kernelrl::worker {

#define KRL_CU_FUNCTIONS(X)                                                                  \
  X(cuGetErrorName) X(cuCtxGetCurrent) X(cuModuleLoadData) X(cuModuleUnload)                 \
  X(cuModuleGetFunction) X(cuFuncGetName) X(cuFuncGetParamInfo) X(cuFuncGetAttribute)       \
  X(cuFuncSetAttribute) X(cuKernelGetFunction) X(cuGraphCreate) X(cuGraphDestroy)            \
  X(cuGraphGetNodes) X(cuGraphGetEdges) X(cuGraphNodeGetType) X(cuGraphKernelNodeGetParams)  \
  X(cuGraphKernelNodeGetAttribute) X(cuGraphKernelNodeSetAttribute)                          \
  X(cuGraphMemsetNodeGetParams) X(cuGraphMemcpyNodeGetParams) X(cuGraphAddKernelNode)        \
  X(cuGraphAddMemsetNode) X(cuGraphAddMemcpyNode) X(cuGraphAddEmptyNode)                     \
  X(cuGraphAddDependencies) X(cuGraphAddChildGraphNode) X(cuGraphInstantiateWithFlags)       \
  X(cuGraphExecDestroy) X(cuGraphLaunch) X(cuStreamGetCaptureInfo)                           \
  X(cuStreamUpdateCaptureDependencies) X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)   \
  X(cuOccupancyMaxActiveClusters) X(cuTensorMapEncodeTiled)

// Member names are the functions' names as cuda.h defines them (versioned where it maps a name
// to a newer ABI, e.g. cuGraphKernelNodeGetParams_v2), so `cu().cuGraphGetNodes(...)` reads like
// the driver call it is.
struct CuDriver {
#define KRL_CU_MEMBER(f) decltype(&::f) f = nullptr;
  KRL_CU_FUNCTIONS(KRL_CU_MEMBER)
#undef KRL_CU_MEMBER
};

// Resolved once; throws std::runtime_error naming the first function the driver lacks.
const CuDriver& cu();

}  // namespace kernelrl::worker
