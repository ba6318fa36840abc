#include "reward/task_kinds.h"

#include <stdexcept>

#include "common/error.h"
#include "reward/evaluator.h"

namespace kernelrl {

namespace {

class HgemmRules final : public TaskKindRules {
 public:
  bool forbids_delegation() const override { return true; }
  std::string reference(const RewardConfig& cfg, bool gpu) const override {
    return gpu ? cfg.baseline : "torch";  // the host backend has only torch's matmul
  }
  std::vector<std::string> report_names(bool gpu) const override {
    return gpu ? report_baseline_names() : std::vector<std::string>{"torch"};
  }
  std::vector<std::string> raw(const std::string& name, const TaskSpec& t, bool gpu) const override {
    if (!gpu) return {"torch"};
    return raw_baselines_for(name, t.layout);
  }
  BaselineKey key(const TaskSpec& t, const std::string& device, const std::string& driver,
                  const std::string& timing_key) const override {
    return {device, driver, t.m, t.n, t.k, t.layout, timing_key};
  }
};

class GeneralRules final : public TaskKindRules {
 public:
  bool forbids_delegation() const override { return false; }
  std::string reference(const RewardConfig&, bool) const override { return "torch"; }
  std::vector<std::string> report_names(bool) const override { return {"torch"}; }
  std::vector<std::string> raw(const std::string&, const TaskSpec&, bool) const override {
    return {"torch"};
  }
  BaselineKey key(const TaskSpec& t, const std::string& device, const std::string& driver,
                  const std::string& timing_key) const override {
    // A general task's shapes are fixed by its name and suite entry.
    return {device, driver, 0, 0, 0, "general:" + t.name, timing_key};
  }
};

}  // namespace

const TaskKindRules& task_kind_rules(const TaskSpec& task) {
  static const HgemmRules hgemm;
  static const GeneralRules general;
  switch (task.kind) {
    case TaskKind::hgemm:
      return hgemm;
    case TaskKind::general:
      return general;
  }
  throw std::logic_error("task " + task.name + ": a task kind without evaluator rules");
}

}  // namespace kernelrl
