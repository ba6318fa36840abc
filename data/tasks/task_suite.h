// Task suites: loads configs/tasks/*.yaml (general kernels) into TaskSpecs, builds the HGEMM
// shape grids, and holds the LibTorch side of general tasks the evaluator calls: seeded inputs
// and reference outputs. Does not evaluate candidates (reward/).
//
// How a general task reaches a kernel (the evaluator's harness builds kernelrl_args this way):
//   inputs[i]  = the op's inputs in task_ops.h order, contiguous row-major, on the backend's device
//   outputs[0] = the op's output
//   dims       = the first input's shape, then TaskSpec.params, each a double bit-cast to int64:
//                first the op's scalar params (eps, slope, ...), then the sizes the first input's
//                shape lacks (N of matmul, V of scatter_add_rows, ...), as doubles.
// The task description states all of it with the values, so a kernel may also bake them in.
// Host backend: load the suite with backend "host" to get the smaller `host_sizes` shapes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/tasks/task.h"

namespace kernelrl {

// Reads a suite YAML (`tasks:` list). backend: "gpu" (sizes) or "host" (host_sizes). Throws
// ConfigError "<file>: tasks[i].key: ..." for unknown keys, unknown ops, missing or extra sizes
// and params, duplicate names.
std::vector<TaskSpec> load_task_suite(const std::filesystem::path& file,
                                      const std::string& backend = "gpu");

// The held-out (or training) part of a suite.
std::vector<TaskSpec> select_split(const std::vector<TaskSpec>& tasks, bool holdout);

// HGEMM shapes as tasks (layout nn, fp32 accumulation unless a file line says otherwise):
// "full" (M, N, K each in {64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384}: 1,000),
// "small" ({256, 4096, 16384}^3: 27), "llm" (projection shapes of Llama-2-7B, Llama-3-8B,
// Llama-3-70B and Qwen2.5-7B layers at 128 and 4096 tokens: 30), or a file whose lines are
// `MxNxK [nn|tn] [f32|f16]` (`#` comments). Throws UserError naming the file and line.
std::vector<TaskSpec> hgemm_grid(const std::string& name_or_file);
TaskSpec hgemm_task(int64_t m, int64_t n, int64_t k, const std::string& layout = "nn",
                    const std::string& acc = "f32");

// Seeded inputs of a task (general or HGEMM), created on the CPU and moved to `device`, so a
// seed gives the same values on every device. HGEMM: A [M,K], B [K,N] (nn) or [N,K] (tn), fp16.
std::vector<at::Tensor> make_inputs(const TaskSpec& task, uint64_t seed, c10::Device device);

// The LibTorch reference computation of the task's op on `inputs` (same device), outputs in
// the task's order and dtypes. HGEMM: fp32 matmul rounded to fp16.
std::vector<at::Tensor> reference_outputs(const TaskSpec& task,
                                          const std::vector<at::Tensor>& inputs);

// The HGEMM reference answer in fp32 (fp32 products and sums, never TF32), A [M,K] and B in the
// task's stored layout: the one HGEMM reference (reference_outputs rounds it to fp16).
at::Tensor hgemm_reference_fp32(const TaskSpec& task, const at::Tensor& a, const at::Tensor& b);

// Fresh values, in place and on the tensors' device, from the same distributions as
// make_inputs (timing input sets: values change between timed calls).
void refresh_inputs(const TaskSpec& task, std::vector<at::Tensor>& inputs);

// kernelrl_args.dims for a general task and its inputs' shapes (as the harness builds them).
std::vector<int64_t> general_task_dims(const TaskSpec& task);

}  // namespace kernelrl
