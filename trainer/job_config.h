// JobConfig: the root of a KernelRL YAML file. Each section belongs to the component that
// owns it (run here; model/, data/, rollout/, reward/, trainer/ for the rest).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/config.h"
#include "data/data_config.h"
#include "model/model_config.h"
#include "reward/reward_config.h"
#include "rollout/rollout_config.h"
#include "trainer/trainer_config.h"

namespace kernelrl {

struct RunConfig {
  std::string name = "run";         // run name (used in the default dir and logs)
  std::string dir = "";             // run directory; "" = runs/<name>
  int64_t seed = 0;                 // seeds every RNG of the run
  std::string device = "auto";      // auto (cuda when present) | cpu | cuda

  void visit(cfg::Visitor& v) {
    v.field("name", name, "run name");
    v.field("dir", dir, "run directory; empty = runs/<name>");
    v.field("seed", seed, "seed for every RNG", cfg::at_least(0));
    v.field("device", device, "auto | cpu | cuda", {"auto", "cpu", "cuda"});
  }
};

struct JobConfig {
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  RolloutConfig rollout;
  RewardConfig reward;
  TrainerConfig trainer;

  void visit(cfg::Visitor& v) {
    v.section("run", run, "run identity and placement");
    v.section("model", model, "policy architecture");
    v.section("data", data, "corpora, tokenizer, task suites");
    v.section("rollout", rollout, "prompts, exemplars, sampling");
    v.section("reward", reward, "evaluation and reward");
    v.section("trainer", trainer, "stages");
  }

  std::filesystem::path run_dir() const {
    return run.dir.empty() ? std::filesystem::path("runs") / run.name
                          : std::filesystem::path(run.dir);
  }
};

// Loads `path` with includes and overrides; checks cross-field rules (unique stage names).
JobConfig load_job_config(const std::filesystem::path& path,
                          const std::vector<std::string>& overrides);

}  // namespace kernelrl
