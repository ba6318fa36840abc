// Task kinds inside the worker, one struct per kind of task (the model is ggml's test_case):
// how a kind draws inputs, where its reference answer comes from (the op's entry in
// data/tasks/task_ops.h holds the one reference of every op, HGEMM included), how it checks a
// candidate's outputs, how it refreshes timing inputs, and which baselines it is timed against.
// HGEMM and general ops are the kinds.
// The check protocol (harness.cpp) and the timing engine (timing.h) are shared by every kind:
// nothing else in the worker branches on a kind's name. Screen rules per kind live on the
// evaluator side (reward/task_kinds.h).
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/tasks/task.h"
#include "reward/reward_config.h"
#include "reward/worker/backend.h"
#include "reward/worker/timing.h"

namespace kernelrl::worker {

class HgemmBaselines;

// A check failed: status wrong_answer (or launch_error, unsupported) with a named check.
struct CheckFailure : std::runtime_error {
  CheckFailure(std::string st, std::string ch, std::string why)
      : std::runtime_error(ch + ": " + why), status(std::move(st)), check(std::move(ch)),
        reason(std::move(why)) {}
  std::string status, check, reason;
};
[[noreturn]] void fail(const std::string& check, const std::string& reason,
                       const std::string& status = "wrong_answer");
std::string fmt(double x);

// The value classes of the check trials. Per seed the harness draws: `first` into fresh buffers
// (binary where the kind has an exact {0,1} check, else normal), then normal into the same
// buffers (a result cached by pointer is stale), then perturbed (5% of the elements redrawn,
// leading row/column kept) into new buffers (a result cached by a fingerprint is stale).
enum class Draw { binary, normal, perturbed };

// One call's tensors: what the candidate reads (in its layout) and writes, and kind-private
// views for the baselines (HGEMM: B in both layouts).
struct Operands {
  std::vector<at::Tensor> inputs, outputs, extra;
};

struct TensorShape {
  std::vector<int64_t> sizes;
  at::ScalarType dtype;
};

// The evaluation's settings: the reward.* section exactly as the evaluator holds it (the
// request carries its YAML, read back into the same struct: no knob is copied by hand), and
// what belongs to one request.
struct Opts : RewardConfig {
  uint64_t seed_base = 1234;                // fresh input values for every evaluation
  std::vector<std::string> raw_baselines;   // raw baseline names to time beside the candidate
  std::map<std::string, int> lt_algo;       // known cuBLASLt autotune picks per layout
};
Opts parse_opts(const nlohmann::json& request);

class TaskKind {
 public:
  virtual ~TaskKind() = default;
  virtual Draw first_draw() const = 0;
  // Inputs of a check trial, on the device, in the candidate's layout. `base`: the previous
  // trial's inputs (for perturbed).
  virtual std::vector<at::Tensor> draw(Draw d, const std::vector<at::Tensor>* base) = 0;
  virtual std::vector<TensorShape> output_shapes() const = 0;
  // kernelrl_args.dims for these inputs.
  virtual std::vector<int64_t> dims(const std::vector<at::Tensor>& inputs) const = 0;
  // The reference answer (data/tasks/task_suite.h), in the precision the check compares in.
  virtual std::vector<at::Tensor> reference(const std::vector<at::Tensor>& inputs) = 0;
  // Checks `outs` against `ref` for a draw; returns the deviation max|out − ref| (diff_i of
  // Eq. 3); throws CheckFailure. `replay`: outputs of a timed graph replay, checked against the
  // bound the trials established (no baseline runs).
  virtual double check(const std::vector<at::Tensor>& outs, const std::vector<at::Tensor>& ref,
                       const std::vector<at::Tensor>& inputs, Draw d, const std::string& trial,
                       bool replay = false) = 0;

  // ---- timing ----
  virtual Operands timing_set() = 0;            // a new input set with fresh values
  virtual void refresh(Operands& set) = 0;      // fresh values in place (same distribution)
  // `n` timing sets at random places (issue 38, docs/sandbox.md "Cold means cold"): no constant
  // stride leads a candidate from one set's buffers to the next. The default makes timing_set()
  // n times with a random spacer after each (kept in the set's `extra`, after the kind's own).
  virtual std::vector<Operands> timing_sets(int64_t n, std::mt19937_64& rng);
  // Fresh values into sets[idx...] (untimed, before a timed unit). The default refreshes each;
  // a kind may do all of them in a few launches.
  virtual void refresh_sets(std::vector<Operands>& sets, const std::vector<size_t>& idx);
  virtual int64_t set_bytes(const std::vector<std::string>& baselines) = 0;
  // The requested raw baselines this kind and backend can time, in order.
  virtual std::vector<std::string> timeable(const std::vector<std::string>& requested) = 0;
  // Before timing: e.g. cuBLASLt autotuning through the same engine and mode. Returns metrics.
  virtual nlohmann::json prepare_timing(const std::vector<std::string>& baselines,
                                        std::vector<Operands>& sets, const TimingPlan& plan,
                                        const TimingHooks& hooks, std::mt19937_64& rng,
                                        const Tick& tick) = 0;
  virtual bool run_baseline(const std::string& name, const Operands& set) = 0;
  // What the kind adds to a passing result: deviation bound, baselines' deviations, algos.
  virtual double dev_bound() const = 0;
  virtual nlohmann::json baseline_extras(const std::string& name) const = 0;
  virtual nlohmann::json metrics() const = 0;
};

// The worker's view of `task`, by its kind (TaskKind); CheckFailure(unsupported) for another.
std::unique_ptr<TaskKind> make_task_kind(const TaskSpec& task, Backend& be, at::Device dev,
                                         HgemmBaselines& baselines, const Opts& opts);

// Output poison (NaN, or INT_MIN for integers) and the mask of elements still poisoned.
void poison(at::Tensor& t);
at::Tensor unwritten_mask(const at::Tensor& t);
std::string position(const at::Tensor& mask2d);

}  // namespace kernelrl::worker
