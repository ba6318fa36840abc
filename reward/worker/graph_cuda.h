// The CUDA driver side of graph_image.h. The runner describes a captured graph
// (describe_graph); the worker loads the candidate's device code from its .so without running
// any of its host code (CandidateModule) and rebuilds the graph from a description
// (build_graph). Built with CUDA only.
#pragma once

#include <cuda.h>

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

// Worker side: a graph (owned by the caller, cuGraphDestroy) that runs what `image` describes
// with the candidate's own kernels. Throws NotReplayable for a kernel that is not in the
// candidate's code or attributes that cannot be applied.
CUgraph build_graph(const GraphImage& image, CandidateModule& module);

}  // namespace kernelrl::worker
