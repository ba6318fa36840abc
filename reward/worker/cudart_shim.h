// The context-free capture runner's CUDA runtime (reward.capture: shim, docs/sandbox.md): a
// shared library with the CUDA runtime's SONAME (libcudart.so.13) that the shim runner links, so
// a candidate's NEEDED libcudart resolves to it. It records what the candidate's host code
// enqueues on the capture stream as a graph_image.h description, the format the context runner
// gets from a real stream capture, and answers device and kernel queries from a table the worker
// sends (its own context's answers) or by asking the worker (occupancy, TMA descriptors). It never
// touches a GPU and does not implement the runtime: what it does not know fails loudly.
// This header is the runner's control API; the exported CUDA runtime entry points are listed in
// cudart_shim.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "reward/worker/graph_image.h"

namespace kernelrl::worker::shim {

// The worker's answers (Candidate, shim mode; build_shim_table in graph_cuda.h):
//   {"device": {"props": HEX (struct cudaDeviceProp), "attrs": {"<cudaDeviceAttr>": v},
//               "driver_version": n, "runtime_version": n, "limits": {"<cudaLimit>": v}},
//    "kernels": {"<mangled name>": {"params": [[offset, size]..], "attrs": [v0..v15]}}}
// attrs: CU_FUNC_ATTRIBUTE_* 0..15 of the worker's freshly loaded module (the defaults).
// Throws std::runtime_error on a malformed table.
void set_table(const nlohmann::json& table);

// What the shim cannot answer from the table is asked of the worker through this (the runner's
// channel): {"query": "occupancy_blocks"|"occupancy_clusters"|"tensor_map", ...} -> answer.
using Query = std::function<nlohmann::json(const nlohmann::json&)>;
void set_query(Query q);

// The stream a call is captured on (what kernelrl_launch gets as its stream).
void* capture_stream();

struct Captured {
  std::string check, reason;  // empty check: `graph` is the call's work
  GraphImage graph;
};
void begin_capture();
// rc: what kernelrl_launch returned. Verdicts in the context runner's order: an invalidated
// capture (not_capturable), a nonzero return, a failed launch, then what a description cannot
// carry (not_replayable, device_state).
Captured end_capture(int rc);

// The CUDA runtime symbols this library exports (the candidate's undefined ones are checked
// against it before the candidate is loaded).
const std::vector<std::string>& exported_symbols();

}  // namespace kernelrl::worker::shim
