// A candidate call's captured GPU work as data (reward integrity, docs/sandbox.md): the runner
// process, which holds the candidate's host code, captures one kernelrl_launch into a CUDA graph
// and describes it here (kernel nodes by name with their launch shape, attributes and parameter
// bytes; memset and device-to-device memcpy nodes; empty nodes; edges). The worker, which never
// runs candidate host code, rebuilds that graph from the candidate's own device code (its .so's
// fatbin, candidate_module.h) and is the only one that runs, checks and times it. Anything a
// description cannot carry faithfully (host callbacks, allocations, events, child or conditional
// graphs, host or array memory) is refused as not replayable; an L2 access-policy window is
// refused as device state. Pointers are the worker's own: the runner captures with the worker's
// buffer addresses and never dereferences them.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace kernelrl::worker {

// The runner met work it cannot describe (or the worker a description it cannot rebuild).
struct NotReplayable : std::runtime_error {
  NotReplayable(std::string check, const std::string& what)
      : std::runtime_error(what), check(std::move(check)) {}
  std::string check;  // not_replayable | device_state
};

struct KernelImage {
  std::string name;                  // mangled device function name
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;         // dynamic shared memory per block
  std::vector<uint8_t> param_bytes;  // the packed parameter buffer
  std::vector<std::pair<uint32_t, uint32_t>> params;  // (offset, size) of each parameter
  // Launch attributes that change how the kernel runs, all else refused or ignored (see .cpp).
  unsigned cluster[3] = {0, 0, 0};   // 0: none
  int cluster_policy = 0, cooperative = 0, priority = 0, mem_sync_domain = 0;
  // Function attributes the candidate's host code set (cudaFuncSetAttribute), as queried.
  int max_dynamic_shared = 0, carveout = -1, non_portable_cluster = 0, cluster_policy_fn = 0;
};

struct MemsetImage {
  uint64_t dst = 0, pitch = 0, width = 0, height = 1;
  unsigned value = 0, element_size = 1;
};

struct MemcpyImage {  // device-to-device only, as CUDA_MEMCPY3D's device fields
  uint64_t src = 0, dst = 0, src_x = 0, src_y = 0, src_z = 0, dst_x = 0, dst_y = 0, dst_z = 0;
  uint64_t src_pitch = 0, src_height = 0, dst_pitch = 0, dst_height = 0;
  uint64_t width_bytes = 0, height = 1, depth = 1;
};

struct NodeImage {
  enum class Type { kernel, memset, memcpy, empty } type = Type::empty;
  KernelImage kernel;
  MemsetImage memset;
  MemcpyImage memcpy;
};

struct EdgeImage {
  uint32_t from = 0, to = 0;
  uint8_t type = 0, from_port = 0, to_port = 0;  // CUgraphEdgeData (programmatic edges)
};

// An 8-byte word of a kernel node's parameters (at `offset`), or a memcpy node's source
// (offset -1): a value that may be an address.
struct ParamWord {
  uint64_t word = 0;
  size_t node = 0;
  int64_t offset = -1;
};

struct GraphImage {
  std::vector<NodeImage> nodes;
  std::vector<EdgeImage> edges;
  // Device address ranges the work writes through memset/memcpy nodes ([begin, end)), and the
  // 8-byte words of kernel parameters: what the worker checks against the call's buffers.
  std::vector<std::pair<uint64_t, uint64_t>> written_ranges() const;
  std::vector<ParamWord> parameter_words() const;
};

nlohmann::json to_json(const GraphImage& g);
// Throws std::runtime_error on a malformed description (the runner is not trusted to send a
// well-formed one).
GraphImage graph_image_from_json(const nlohmann::json& j);

}  // namespace kernelrl::worker
