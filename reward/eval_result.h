// What the evaluator says about one candidate: a status with a stable name, the named check that
// failed (if any), times with their spread, deviations and the reward with why it was given.
// JSON conversion is here too (the worker protocol and the results store both use it).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kernelrl {

enum class EvalStatus {
  ok,               // compiled, passed every check, timed
  screen_rejected,  // static screen refused the source (reason names the rule)
  compile_error,    // compiler failed (compile_log holds the trimmed log)
  compile_timeout,  // compiler ran past compile_timeout_s
  load_error,       // dlopen/dlsym failed (no kernelrl_launch with C linkage, ...)
  launch_error,     // kernelrl_launch returned non-zero or a launch was refused (bad config)
  wrong_answer,     // a correctness check failed; `check` names it
  crash,            // the worker died (signal / abort) while running the candidate
  hang,             // a call did not finish within call_timeout_s
  cuda_error,       // sticky CUDA error (illegal address, ...): worker context restarted
  sandbox_violation,  // the OS sandbox stopped a call (new process, socket, write outside the
                      // scratch directory, ...) before it ran; `check` names the system call
  reward_hack,      // the candidate tried to be paid for what its kernels did not earn: a forged
                    // message on the runner's channel, work batched or deferred across a replay's
                    // calls, device state left behind for later timings; `check` names it
  unsupported,      // the task kind is not supported by this build/backend
  internal_error,   // the evaluator itself failed; not the candidate's fault
};
const char* status_name(EvalStatus s);
EvalStatus status_from_name(const std::string& name);  // unknown -> internal_error

// Spread of one contender's times (µs) in one timing mode (reward/worker/timing.h): device (per
// call, from CUDA-graph replays), call (events around each eager call, host issue cost
// included) or server. Device-mode measurements also carry the median call time beside.
struct TimingStats {
  double median_us = 0, mean_us = 0, p10_us = 0, p90_us = 0, cv = 0;  // cv = stddev / mean
  int64_t n = 0;
  std::string timing;          // device | call | server ("" = unknown, an old store row)
  double call_median_us = 0;   // device mode: median of eager calls in the same rounds; else 0
  // Device mode on a GPU (else 0): the median SM clock of the timed replays, and the median at
  // that clock (as run) and rescaled to the rated clock (RewardConfig::clock_basis: median_us is
  // one of the two).
  double clock_mhz = 0, as_run_median_us = 0, rated_median_us = 0;
  bool valid() const { return n > 0 && median_us > 0; }
};
TimingStats timing_stats(std::vector<double> samples_us);

struct EvalResult {
  std::string hash;               // content hash of source + compile flags + arch + toolkit
  std::string task;               // TaskSpec::name
  std::string shape;              // "MxNxK" (HGEMM) or the first input's shape
  EvalStatus status = EvalStatus::internal_error;
  std::string check;              // failed check, e.g. fp16_accumulation, guard_overwritten
  std::string reason;             // one human line: why this status
  double reward = 0;
  std::string reward_reason;      // the formula with its numbers, or why failed_reward
  double speedup = 0;             // t_ref / t_cand (unclipped); 0 when not timed
  std::string reference;          // baseline used for t_ref
  double t_ref_us = 0;            // median of the reference baseline
  TimingStats cand;               // candidate timing
  std::map<std::string, TimingStats> baselines;  // every baseline measured or cached
  double max_abs_dev = 0;         // max |C − C_ref| over normal-input trials (diff_i)
  double dev_bound = 0;           // the bound it had to meet
  std::string compile_log;        // trimmed compiler output (errors and warnings)
  bool compile_cached = false;
  nlohmann::json metrics = nlohmann::json::object();  // timing extras, ncu, sanitizer, backend
  double eval_s = 0;              // wall time spent on this candidate
  bool passed() const { return status == EvalStatus::ok; }
};

nlohmann::json to_json(const TimingStats& t);
TimingStats timing_from_json(const nlohmann::json& j);
nlohmann::json to_json(const EvalResult& r);  // without the source
EvalResult result_from_json(const nlohmann::json& j);

}  // namespace kernelrl
