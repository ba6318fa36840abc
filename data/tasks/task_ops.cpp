// The list of task ops (one line per op file) and the general forms of an entry's prompt
// statement and shape string.
#include "data/tasks/task_ops.h"

#include <cstdio>
#include <sstream>

#include "common/error.h"

namespace kernelrl {
namespace {

std::vector<OpInfo> make_ops() {
  std::vector<OpInfo> ops;
  for (auto* list : {hgemm_ops, elementwise_ops, reduction_ops, softmax_ops, norm_ops,
                     transpose_ops, gather_scatter_ops, matmul_ops})
    for (auto& op : list()) ops.push_back(std::move(op));
  return ops;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string general_prompt(const TaskSpec& task, bool host) {
  std::ostringstream s;
  s << "Write a " << (host ? "C++ (CPU)" : "CUDA") << " kernel for task " << task.name << " ("
    << task.op << "): " << task.description << "\n";
  for (size_t i = 0; i < task.inputs.size(); ++i)
    s << "inputs[" << i << "] " << task.inputs[i].name << ": " << task.inputs[i].dtype << " "
      << shape_str(task.inputs[i].shape) << "\n";
  for (size_t i = 0; i < task.outputs.size(); ++i)
    s << "outputs[" << i << "] " << task.outputs[i].name << ": " << task.outputs[i].dtype << " "
      << shape_str(task.outputs[i].shape) << "\n";
  char tol[96];
  std::snprintf(tol, sizeof tol, "Tolerance: |out - ref| <= %g + %g*|ref|.\n", task.atol,
                task.rtol);
  s << tol;
  return s.str();
}

std::string general_shape(const TaskSpec& t) {
  std::string s;
  if (!t.inputs.empty())
    for (auto d : t.inputs[0].shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

}  // namespace

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> ops = make_ops();
  return ops;
}

const OpInfo* find_op(const std::string& name) {
  for (const auto& op : all_ops())
    if (op.name == name) return &op;
  return nullptr;
}

const OpInfo& hgemm_op() {
  static const OpInfo* op = [] {
    for (const auto& o : all_ops())
      if (o.kind == TaskKind::hgemm) return &o;
    throw std::logic_error("no HGEMM entry in the task ops");
  }();
  return *op;
}

const OpInfo& task_op(const TaskSpec& task) {
  if (task.kind == TaskKind::hgemm) return hgemm_op();
  const OpInfo* op = find_op(task.op);
  if (!op || op->kind != TaskKind::general)
    throw UserError("task " + task.name + ": unknown op \"" + task.op + "\"");
  return *op;
}

std::string op_prompt(const TaskSpec& task, bool host) {
  const OpInfo* op = task.kind == TaskKind::hgemm ? &hgemm_op() : find_op(task.op);
  return op && op->prompt ? op->prompt(task, host) : general_prompt(task, host);
}

std::string op_shape(const TaskSpec& task) {
  const OpInfo* op = task.kind == TaskKind::hgemm ? &hgemm_op() : find_op(task.op);
  return op && op->shape ? op->shape(task) : general_shape(task);
}

}  // namespace kernelrl
