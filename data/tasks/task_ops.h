// The task ops, one entry per op, listed once (the model is ggml's test-backend-ops.cpp, where a
// test_case carries its variables, inputs, reference and error bound). An entry carries the op's
// name and kind, its size names (the order of kernelrl_args.dims), its input and output tensors
// (shapes over the size names, dtype, how values are drawn), its scalar parameters, a default
// tolerance, the LibTorch reference, the description the prompt shows, the shape string, and its
// families (`category`, the family that writes it, and `grid`, that family's variant grid for
// it). HGEMM is one entry (hgemm_op.cpp) with layout and accumulation as the task's variables.
// The general ops live one file per family (ops_<family>.cpp); task_ops.cpp lists the files.
// A new op is an entry in its family's file; a new family, one file plus one line there.
// What is not here: the suites' loading and the grids of shapes (task_suite.h), the kernels
// (kernels/) and their generators (data/families*.cpp), evaluation (reward/).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "data/tasks/task.h"

namespace kernelrl {

struct OpTensor {
  std::string name;
  std::vector<std::string> shape;  // size names, e.g. {"B", "D"}
  std::string dtype = "f32";
  std::string init = "normal";  // normal | positive | index (then `index_of` gives the bound)
  std::string index_of;         // for init=index: values in [0, size index_of)
  OpTensor(std::string n, std::vector<std::string> s, std::string dt = "f32",
           std::string in = "normal", std::string idx = "")
      : name(std::move(n)),
        shape(std::move(s)),
        dtype(std::move(dt)),
        init(std::move(in)),
        index_of(std::move(idx)) {}
};

// What a reference computation sees: the task, its inputs (the op's order, on one device), its
// scalar params and its sizes by name.
struct OpCall {
  const TaskSpec& task;
  const std::vector<at::Tensor>& in;
  const std::map<std::string, int64_t>& sizes;
  double p(size_t i) const { return i < task.params.size() ? task.params[i] : 0.0; }
};

struct OpInfo {
  OpInfo(std::string name_, std::string category_, std::string formula_,
         std::vector<std::string> sizes_, std::vector<OpTensor> inputs_,
         std::vector<OpTensor> outputs_, std::vector<std::string> params_, double atol_,
         double rtol_, at::Tensor (*reference_)(const OpCall&), std::string grid_ = "")
      : name(std::move(name_)),
        category(std::move(category_)),
        formula(std::move(formula_)),
        sizes(std::move(sizes_)),
        inputs(std::move(inputs_)),
        outputs(std::move(outputs_)),
        params(std::move(params_)),
        atol(atol_),
        rtol(rtol_),
        reference(reference_),
        grid(std::move(grid_)) {}

  std::string name;
  // The family that writes it (general ops: elementwise | reduction | softmax | norm | transpose
  // | gather_scatter | matmul); HGEMM: "" (every family of kind hgemm, data/families.h).
  std::string category;
  std::string formula;             // what it computes, for the prompt
  std::vector<std::string> sizes;  // kernelrl_args.dims in this order
  std::vector<OpTensor> inputs, outputs;
  std::vector<std::string> params;  // scalar names, in TaskSpec.params order
  double atol = 1e-5, rtol = 1e-5;
  // The LibTorch reference: the first output, any dtype (converted to the output's).
  at::Tensor (*reference)(const OpCall&) = nullptr;
  // The family's variant grid for this op (data/families_general.cpp); "" = the family's own.
  std::string grid;
  TaskKind kind = TaskKind::general;
  // The task statement in the prompt (rollout/prompt.cpp adds the contract); nullptr = the
  // general ops' statement (name, description, tensors, tolerance).
  std::string (*prompt)(const TaskSpec&, bool host) = nullptr;
  // The task's shape for logs and tables ("MxNxK"; general: the first input's shape).
  std::string (*shape)(const TaskSpec&) = nullptr;
  // The stored input tensors of a task (the HGEMM entry's follow its m, n, k and layout);
  // nullptr = the task's `inputs`.
  std::vector<TensorSpec> (*input_specs)(const TaskSpec&) = nullptr;
  // Whether the prompt names the target device (the speed of HGEMM variants is device-specific).
  bool prompt_names_device = false;
};

// Every op: HGEMM first, then the general ops of each family file.
const std::vector<OpInfo>& all_ops();
// nullptr when unknown.
const OpInfo* find_op(const std::string& name);
// The HGEMM entry.
const OpInfo& hgemm_op();
// A task's entry: the HGEMM entry for kind hgemm, else its op's (UserError when unknown).
const OpInfo& task_op(const TaskSpec& task);

// The entry's prompt statement and shape string for a task (the general forms when the entry
// has none).
std::string op_prompt(const TaskSpec& task, bool host);
std::string op_shape(const TaskSpec& task);

// The op files' lists (one per file; task_ops.cpp concatenates them).
std::vector<OpInfo> hgemm_ops();
std::vector<OpInfo> elementwise_ops();
std::vector<OpInfo> reduction_ops();
std::vector<OpInfo> softmax_ops();
std::vector<OpInfo> norm_ops();
std::vector<OpInfo> transpose_ops();
std::vector<OpInfo> gather_scatter_ops();
std::vector<OpInfo> matmul_ops();

}  // namespace kernelrl
