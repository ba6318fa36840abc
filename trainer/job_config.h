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

// Multi-process runs (torchrun or `kernelrl train --nproc N`): trainer/distributed.h.
struct DistConfig {
  std::string backend = "auto";  // auto (nccl on CUDA, gloo on CPU) | gloo | nccl
  double timeout_s = 600;        // a collective or the rendezvous taking longer fails the job
  double heartbeat_s = 30;       // a rank silent this long is taken for dead and ends the job
  int64_t bucket_mb = 25;        // gradient all-reduce bucket size, MiB

  void visit(cfg::Visitor& v) {
    v.field("backend", backend, "auto | gloo | nccl", {"auto", "gloo", "nccl"});
    v.field("timeout_s", timeout_s, "collective and rendezvous timeout, s", cfg::greater_than(0));
    v.field("heartbeat_s", heartbeat_s, "a rank silent this long ends the job, s",
            cfg::greater_than(1));
    v.field("bucket_mb", bucket_mb, "gradient all-reduce bucket size, MiB", cfg::at_least(1));
  }
};

struct RunConfig {
  std::string name = "run";         // run name (used in the default dir and logs)
  std::string dir = "";             // run directory; "" = runs/<name>
  int64_t seed = 0;                 // seeds every RNG of the run
  std::string device = "auto";      // auto (cuda when present) | cpu | cuda
  DistConfig dist;                  // multi-process settings (ignored by a single process)

  void visit(cfg::Visitor& v) {
    v.field("name", name, "run name");
    v.field("dir", dir, "run directory; empty = runs/<name>");
    v.field("seed", seed, "seed for every RNG", cfg::at_least(0));
    v.field("device", device, "auto | cpu | cuda", {"auto", "cpu", "cuda"});
    v.section("dist", dist, "multi-process runs (torchrun, --nproc)");
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

// Loads `path` with includes and overrides; names unnamed stages after their kind, refuses a
// name used twice, and runs check_job_config over the enabled stages: a job that loads has no
// bad combination left for a later stage to find after an earlier one has trained.
JobConfig load_job_config(const std::filesystem::path& path,
                          const std::vector<std::string>& overrides);

// The cross-field rules of a job, for the stages that will run (each field's own range is
// checked as it loads): what a stage of each kind needs from the other sections, e.g. an RL
// stage's rollout.* combination or a pretrain stage's data.corpus and its batch split over
// `world_size` ranks. Throws ConfigError, one line naming the key. run_pipeline runs it again
// over the stages --stages picked, before the run directory is opened.
void check_job_config(const JobConfig& job, const std::vector<const StageConfig*>& stages,
                      int64_t world_size = 1);

}  // namespace kernelrl
