// The CUDA driver side of graph_image.h. The runner describes a captured graph
// (describe_graph); the worker loads the candidate's device code from its .so without running
// any of its host code (CandidateModule) and rebuilds the graph from a description
// (build_graph). Built with CUDA only.
#pragma once

#include <cuda.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "reward/worker/graph_image.h"

namespace kernelrl::worker {

// Runner side: what `graph` holds; throws NotReplayable for work a description cannot carry.
GraphImage describe_graph(CUgraph graph);

// Worker side: every fatbin of the candidate's .so loaded into the current context.
class CandidateModule {
 public:
  explicit CandidateModule(const std::filesystem::path& so);  // throws std::runtime_error
  ~CandidateModule();
  CandidateModule(const CandidateModule&) = delete;
  CandidateModule& operator=(const CandidateModule&) = delete;
  // The kernel `name` of the candidate's own code, or nullptr.
  CUfunction function(const std::string& name);

 private:
  std::vector<CUmodule> modules_;
  std::map<std::string, CUfunction> functions_;
};

// Worker side of the shim capture (reward.capture: shim, cudart_shim.h). The device table the
// shim answers device queries from (this context's properties, attributes, limits, versions).
nlohmann::json shim_device_table();
// The answer to a query the shim runner asks while it captures (cudart_shim.h): "kernel" (a
// kernel's parameter layout and attributes, {"known":false} for a name not in the candidate's
// code), "occupancy_blocks", "occupancy_clusters" (on the worker's copy of the kernel, with the
// function attributes the candidate set) and "tensor_map" (cuTensorMapEncodeTiled: host-side
// encoding, no memory touched). Throws std::runtime_error on a malformed query.
nlohmann::json answer_shim_query(const nlohmann::json& q, CandidateModule& module);

// Worker side: a graph (owned by the caller, cuGraphDestroy) that runs what `image` describes
// with the candidate's own kernels. Throws NotReplayable for a kernel that is not in the
// candidate's code or attributes that cannot be applied.
CUgraph build_graph(const GraphImage& image, CandidateModule& module);

}  // namespace kernelrl::worker
