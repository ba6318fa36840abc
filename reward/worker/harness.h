// The evaluation harness inside the worker process: correctness trials (fresh inputs, NaN-poisoned
// outputs, guard bands, unmodified inputs, exact {0,1} sums, baseline-bounded deviation, pointer-
// and value-cache traps, the stream gate) and timing (warm-up, interleaved random-order rounds,
// cold-L2 rotation, offline/server modes, wall-clock cross-check), shared by both backends.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

#include "reward/kernel_abi.h"
#include "reward/worker/backend.h"

namespace kernelrl::worker {

using LaunchFn = int (*)(const kernelrl_args*, void*);
using Tick = std::function<void(const std::string&)>;

class Harness {
 public:
  explicit Harness(Backend& backend);
  ~Harness();
  // Request fields: task (TaskSpec JSON), seeds, slack, mode, l2, warmup, min_rounds,
  // max_rounds, budget_ms, gap_us, call_timeout_s, seed_base, baselines (raw names to time),
  // lt_algo {"nn": i, "tn": j}. Returns {status, check, reason, max_abs_dev, dev_bound,
  // candidate, baselines, metrics}. Throws Fatal when the process must be replaced.
  nlohmann::json evaluate(const nlohmann::json& request, LaunchFn fn, const Tick& tick);
  // Calls the candidate `calls` times on normal inputs, no checks (for ncu / compute-sanitizer).
  void run_once(const nlohmann::json& task, LaunchFn fn, int calls);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelrl::worker
