// The kernel evaluator: the reward of every RL stage and the instrument behind `kernelrl eval`
// and `kernelrl bench`. Pipeline per candidate: static screen (screen.h) -> compile pool with a
// content-hash cache (compile.h) -> isolated worker process per GPU (worker_client.h) that checks
// correctness and times the candidate interleaved with the baselines -> reward (CUDA-L2 Eq. 3,
// reward_formula.h) -> one row in the SQLite results store (result_store.h). Backend gpu (nvcc,
// CUDA stream, events) or host (g++, null stream, steady clock), chosen by RewardConfig.backend.
//
//   Evaluator ev(cfg, "run/results.sqlite");
//   std::vector<EvalResult> rs = ev.evaluate(task, {src1, src2, ...});   // never throws for a
//                                                                        // bad candidate
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/tasks/task.h"
#include "reward/eval_result.h"
#include "reward/result_store.h"
#include "reward/reward_config.h"

namespace kernelrl {

// One candidate of a batch: a source for a task.
struct EvalItem {
  TaskSpec task;
  std::string source;
};

class Evaluator {
 public:
  // GPU workers run on devices first_device, first_device + 1, ... (a data-parallel rank passes
  // its LOCAL_RANK: its candidates are timed on its own GPU).
  Evaluator(const RewardConfig& cfg, const std::filesystem::path& store_path, int first_device = 0);
  // Workers on exactly these GPUs, one each (reward.gpus: evaluation_gpus() in reward_config.h);
  // on the host backend the numbers name the worker processes (`--device N`, their logs).
  Evaluator(const RewardConfig& cfg, const std::filesystem::path& store_path, std::vector<int> devices);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Screens, compiles (in parallel), checks, times and scores every source; results in input
  // order, each also stored. A failing candidate is a result with failed_reward, never a throw.
  std::vector<EvalResult> evaluate(const TaskSpec& task, const std::vector<std::string>& sources);
  EvalResult evaluate_one(const TaskSpec& task, const std::string& source);
  // A whole batch across tasks (an RL step's candidates): every source compiled in parallel
  // first, then each task's candidates checked and timed; results in input order.
  std::vector<EvalResult> evaluate_batch(const std::vector<EvalItem>& items);
  // The stored result of `source` on `task` under the current settings (device, backend and
  // settings_fingerprint()), if any: changing any reward setting misses.
  std::optional<EvalResult> cached_result(const TaskSpec& task, const std::string& source);
  // Hash of the resolved settings that determine a result (every reward.* field that can change
  // a verdict, a time or a reward, the sandbox parts in force, the protocol version: reward_config.h),
  // part of the results store's cache key. Starts the worker if needed.
  std::string settings_fingerprint() const;
  // Compiles `sources` into the compile cache (in parallel) without running them; returns how
  // many compiled. For callers that evaluate many small batches (one per task): a later
  // evaluate() of the same sources only loads them.
  int precompile(const std::vector<std::string>& sources);

  // "gpu" or "host" (resolved from "auto" by asking the worker) and the device name.
  const std::string& backend();
  const std::string& device_name();
  // The worker's OS sandbox: "on (landlock ABI 7, seccomp)", "off (why)", ... (reward.sandbox).
  const std::string& sandbox();
  // The arch candidates are compiled for ("sm_90a" on Hopper, "sm_80", ...; "host").
  const std::string& arch();
  ResultStore& store();
  const RewardConfig& config() const;
  int worker_restarts() const;
  // The device of each worker (started: the workers' own), and how many candidates the workers
  // were sent to check and time so far (each one worker request; stored results and
  // compile failures are not).
  std::vector<int> worker_devices();
  int64_t worker_evaluations() const;
  // Content hash the compile cache (and the store) will use for `source`.
  std::string hash_of(const std::string& source);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Baselines named in RewardConfig, reported per result: every name below.
const std::vector<std::string>& report_baseline_names();
// Raw measured baselines behind a report name for a task layout (e.g. cublas-max -> nn, tn).
std::vector<std::string> raw_baselines_for(const std::string& name, const std::string& layout);

}  // namespace kernelrl
