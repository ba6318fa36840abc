// The evaluation harness inside the worker process: the check protocol shared by every task kind
// (task_kind.h) and both backends: fresh inputs, NaN-poisoned outputs, guard bands around every
// buffer and the workspace, unmodified inputs, the kind's answer check, pointer- and value-cache
// traps, the stream gate; then timing through the one engine (timing.h) in the requested mode,
// call-boundary verification (GPU device mode), the wall-clock cross-check and a
// stale-after-timing check. The candidate's host code never runs in this process: a fresh
// sandboxed runner per candidate holds it (candidate.h); this process holds the evaluator's
// channel, the inputs, the references and the clocks.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

#include "reward/kernel_abi.h"
#include "reward/worker/backend.h"
#include "reward/worker/runner_client.h"
#include "reward/worker/timing.h"

namespace kernelrl::worker {

using LaunchFn = int (*)(const kernelrl_args*, void*);

class Harness {
 public:
  // `runner`: how candidate runners start (sandbox, scratch directory, log); the host backend's
  // arena is the harness's own.
  Harness(Backend& backend, RunnerOptions runner);
  ~Harness();
  // Request fields: task (TaskSpec JSON), seeds, slack, timing, l2, warmup, min_rounds,
  // max_rounds, graph_calls, verify_rounds, budget_ms, gap_us, clock_basis, call_timeout_s,
  // seed_base,
  // baselines (raw names to time), lt_algo {"nn": i, "tn": j}. Returns {status, check, reason,
  // max_abs_dev, dev_bound, candidate, baselines, metrics}; timings carry call_us beside the
  // mode's median in device mode. `so`: the compiled candidate, loaded only by a fresh runner
  // (runner_client.h); its device code also here, never its host code. Throws Fatal when the
  // process must be replaced.
  nlohmann::json evaluate(const nlohmann::json& request, const std::string& so, const Tick& tick);
  // The request's baselines alone, no candidate (request fields as evaluate's, without so):
  // {status, baselines, metrics}. The measurements the evaluator stores.
  nlohmann::json baselines(const nlohmann::json& request, const Tick& tick);
  // Starts up to `count` spare runners and waits until they are ready: {status, spares (ready
  // now), seconds}. Evaluations take them before starting runners of their own, so a runner's
  // start (its CUDA context: bench/gpu_context_init.sh) can happen while the evaluator compiles
  // instead of before each candidate. Never during an evaluation: nothing starts while a
  // worker times.
  nlohmann::json prepare_spares(int64_t count, const Tick& tick);
  // Starts a runner without a candidate: the sandbox runners get ({summary, parts}).
  nlohmann::json runner_sandbox();
  // Brings up what LibTorch and the driver create lazily (cuBLAS handle and workspace, a captured
  // and replayed graph) before the first evaluation; nothing on the host backend.
  void warm_up();
  // Calls the candidate `calls` times on normal inputs, no checks (for ncu / compute-sanitizer):
  // in this process, unsandboxed; only for candidates that passed an evaluation.
  void run_once(const nlohmann::json& task, LaunchFn fn, int calls);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelrl::worker
