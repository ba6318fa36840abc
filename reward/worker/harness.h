// The evaluation harness inside the worker process: the check protocol shared by every task kind
// (task_kind.h) and both backends: fresh inputs, NaN-poisoned outputs, guard bands around every
// buffer and the workspace, unmodified inputs, the kind's answer check, pointer- and value-cache
// traps, the stream gate; then timing through the one engine (timing.h) in the requested mode,
// the wall-clock cross-check and a stale-after-timing check.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

#include "reward/kernel_abi.h"
#include "reward/worker/backend.h"
#include "reward/worker/timing.h"

namespace kernelrl::worker {

using LaunchFn = int (*)(const kernelrl_args*, void*);

class Harness {
 public:
  explicit Harness(Backend& backend);
  ~Harness();
  // Request fields: task (TaskSpec JSON), seeds, slack, timing, l2, warmup, min_rounds,
  // max_rounds, graph_calls, verify_rounds, budget_ms, gap_us, clock_basis, call_timeout_s,
  // seed_base,
  // baselines (raw names to time), lt_algo {"nn": i, "tn": j}. Returns {status, check, reason,
  // max_abs_dev, dev_bound, candidate, baselines, metrics}; timings carry call_us beside the
  // mode's median in device mode. Throws Fatal when the process must be replaced.
  nlohmann::json evaluate(const nlohmann::json& request, LaunchFn fn, const Tick& tick);
  // Brings up what LibTorch and the driver create lazily (cuBLAS handle and workspace, a captured
  // and replayed graph) before the sandbox closes the process; nothing on the host backend.
  void warm_up();
  // Calls the candidate `calls` times on normal inputs, no checks (for ncu / compute-sanitizer).
  void run_once(const nlohmann::json& task, LaunchFn fn, int calls);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelrl::worker
