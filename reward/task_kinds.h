// Evaluator-side rules of each task kind (the worker side is reward/worker/task_kind.h): whether
// the screen's delegation rule applies, which baseline is the reward's reference, which raw
// measured baselines a report name stands for, and the key its baselines are stored under.
// Nothing else in the evaluator branches on a kind's name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/tasks/task.h"
#include "reward/result_store.h"
#include "reward/reward_config.h"

namespace kernelrl {

class TaskKindRules {
 public:
  virtual ~TaskKindRules() = default;
  // The screen forbids cuBLAS/cuBLASLt/cuDNN/LibTorch calls (they are this kind's baselines).
  virtual bool forbids_delegation() const = 0;
  // The reward's reference baseline (a report name) on this backend.
  virtual std::string reference(const RewardConfig& cfg, bool gpu) const = 0;
  // Report names this kind can show, and the raw baselines behind one of them.
  virtual std::vector<std::string> report_names(bool gpu) const = 0;
  virtual std::vector<std::string> raw(const std::string& report_name, const TaskSpec& task,
                                       bool gpu) const = 0;
  // Where this task's baselines are stored (device, driver, shape, timing settings).
  virtual BaselineKey key(const TaskSpec& task, const std::string& device, const std::string& driver,
                          const std::string& timing_key) const = 0;
};

// The rules of `task.kind`.
const TaskKindRules& task_kind_rules(const TaskSpec& task);

}  // namespace kernelrl
