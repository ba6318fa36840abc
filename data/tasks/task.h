// A kernel-writing task: what a candidate must compute, on which shapes, checked how.
// Shared vocabulary of the task suites (data/tasks/), the evaluator (reward/), the prompt builder
// (rollout/) and the trainer. Defines no evaluation logic; what an op is (tensors, reference,
// description, families) is its entry in data/tasks/task_ops.h, the suites' loading is
// data/tasks/task_suite.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kernelrl {

// The two kinds of task: HGEMM (one op, with layout and accumulation as variables) and the
// general ops of a suite. The kind picks the worker's and the evaluator's view of a task
// (reward/worker/task_kind.h, reward/task_kinds.h); nothing compares kind names.
enum class TaskKind { hgemm, general };
// The kind's name in JSON and tags ("hgemm" | "general"), and its parse (UserError otherwise).
std::string task_kind_name(TaskKind kind);
TaskKind parse_task_kind(const std::string& name);

// One tensor of a task's inputs or outputs.
struct TensorSpec {
  std::string name;             // "A", "x", ...
  std::vector<int64_t> shape;   // row-major, contiguous
  std::string dtype = "f32";    // f32 | f16 | bf16 | i32 | i64
  std::string init = "normal";  // normal | uniform | binary01 | index (for gather) | positive
};

struct TaskSpec {
  std::string name;                 // unique, e.g. "hgemm_4096x4096x4096_nn" or "softmax_rows"
  TaskKind kind = TaskKind::hgemm;
  std::string description;          // what to compute, for the prompt
  // HGEMM: C[M,N] = A[M,K] · B[K,N]; layout nn (B row-major KxN) or tn (B column-major).
  int64_t m = 0, n = 0, k = 0;
  std::string layout = "nn";        // nn | tn
  std::string acc = "f32";          // f32 | f16 (accumulator precision the task requires)
  // The op's entry (data/tasks/task_ops.h: the HGEMM entry for kind hgemm), its tensors, params.
  std::string op;                   // reference op name, e.g. "softmax", "gelu", "layernorm"
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<double> params;       // op scalars (eps, negative slope, ...), passed as dims
  double atol = 1e-4, rtol = 1e-4;  // general-task tolerance: |out-ref| <= atol + rtol*|ref|
  bool holdout = false;             // held out of training, used for evaluation
};

}  // namespace kernelrl
