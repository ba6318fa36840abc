// Kernel directories evaluated over an HGEMM grid: the machinery behind `kernelrl bench` and
// `kernelrl catalog build --kernels`. Which file is a kernel for which task (bench's naming),
// resume from the results store, evaluation through the Evaluator. It writes no report; the
// callers turn the results into CSV rows or catalog entries.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/tasks/task.h"
#include "reward/evaluator.h"

namespace kernelrl {

// A directory's kernel for one task under bench's naming: {M}_{N}_{K}.cu, or on the host backend
// {M}_{N}_{K}.cpp when there is no .cu. Layout and accumulation come from the grid.
std::optional<std::filesystem::path> shape_kernel_file(const std::filesystem::path& dir,
                                                       const TaskSpec& task, bool gpu);
// The directory's other kernels (.cu, or .cpp on the host backend), sorted by name: general
// kernels, each evaluated on every task of the grid.
std::vector<std::filesystem::path> general_kernel_files(const std::filesystem::path& dir, bool gpu);

struct DirEvalItem {
  TaskSpec task;
  std::filesystem::path file;  // empty when the task has no kernel (bench's "missing" row)
  std::string source;
  EvalResult result;
  bool resumed = false;  // taken from the store (same source, task and settings)
};

struct DirEvalOptions {
  bool general = false;  // also run every general kernel on every task (bench: only {M}_{N}_{K})
  bool refresh = false;  // re-run what the store already has
  // Called after each task with (tasks done, tasks in all, a status word).
  std::function<void(size_t, size_t, const std::string&)> progress;
};

// Evaluates `dir`'s kernels on `tasks`: per task its shape kernel (if any) and, with
// options.general, every general kernel. Every source is compiled first (in parallel, once per
// distinct source); a task's kernels are then checked and timed in one Evaluator batch. Results
// in task order, a task's shape kernel before its general kernels; a task without any kernel
// gives one item with an empty `file`. Throws UserError when `dir` is not a directory.
std::vector<DirEvalItem> evaluate_kernel_dir(Evaluator& ev, const std::filesystem::path& dir,
                                             const std::vector<TaskSpec>& tasks,
                                             const DirEvalOptions& options);

}  // namespace kernelrl
