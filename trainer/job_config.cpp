#include "trainer/job_config.h"

#include <set>

#include "common/error.h"

namespace kernelrl {
namespace {

// `trainer.stages[i]` of a stage, for error messages.
std::string stage_key(const JobConfig& job, const StageConfig& s) {
  for (size_t i = 0; i < job.trainer.stages.size(); ++i)
    if (&job.trainer.stages[i] == &s) return "trainer.stages[" + std::to_string(i) + "]";
  return "trainer.stages." + s.name;  // a stage that is not in the job's list (a test's)
}

void check_pretrain_stage(const JobConfig& job, const StageConfig& s, int64_t world_size) {
  if (job.data.corpus.empty())
    throw ConfigError("data.corpus: stage \"" + s.name +
                      "\" (pretrain) needs at least one triplet JSONL file");
  // Data parallel: each rank computes batch_size / W rows of every micro-batch.
  if (s.batch_size % world_size != 0)
    throw ConfigError(stage_key(job, s) + ".batch_size: " + std::to_string(s.batch_size) +
                      " sequences per micro-batch do not split over " + std::to_string(world_size) +
                      " ranks; use a multiple of " + std::to_string(world_size));
}

void check_rl_stage(const JobConfig& job, const StageConfig& s) {
  const RolloutConfig& ro = job.rollout;
  const std::string who = " (stage \"" + s.name + "\", " + s.kind + ")";
  if (job.model.prompt_format != "raw" && ro.response_format != "code")
    throw ConfigError("rollout.response_format: a chat model.prompt_format (" +
                      job.model.prompt_format + ") asks for a fenced code block: use code" + who);
  if (ro.demonstrations > 0 && ro.response_format != "code")
    throw ConfigError("rollout.demonstrations: needs rollout.response_format: code" + who);
  if (ro.demonstrations > 0 && ro.completion != "full")
    throw ConfigError("rollout.demonstrations: a demonstration is a whole kernel; it needs "
                      "rollout.completion: full" + who);
  if (ro.turns > 1 && (ro.demonstrations > 0 || ro.dynamic_sampling_rounds > 0))
    throw ConfigError(
        "rollout.turns: multi-turn refinement does not combine with "
        "rollout.demonstrations or rollout.dynamic_sampling_rounds" +
        who);
  // A group of one has no spread: every advantage is 0 and no step would ever update.
  if (ro.group_size < 2)
    throw ConfigError("rollout.group_size: " + std::to_string(ro.group_size) +
                      " completion per prompt gives every advantage 0 (GRPO normalizes within "
                      "the group); use 2 or more" +
                      who);
  const GrpoConfig& g = s.grpo;
  const std::string grpo_key = stage_key(job, s) + ".grpo.";
  if (g.smoothing_window > 0 && g.smoothing_window < kSmoothingMinRewards)
    throw ConfigError(grpo_key + "smoothing_window: " + std::to_string(g.smoothing_window) +
                      " never smooths (winsorizing starts at " +
                      std::to_string(kSmoothingMinRewards) +
                      " rewards); use 0 (off) or >= " + std::to_string(kSmoothingMinRewards) + who);
  if (g.loss_agg == "dr-grpo" && g.ratio_level == "sequence")
    throw ConfigError(grpo_key +
                      "loss_agg: dr-grpo does not combine with ratio_level: sequence "
                      "(GSPO aggregates sequence-mean); use token-mean or ratio_level: token" +
                      who);
  // The evaluator refuses these too when it is built, which is after the stages before this one.
  check_reward_config(job.reward, who);
}

}  // namespace

void check_job_config(const JobConfig& job, const std::vector<const StageConfig*>& stages,
                      int64_t world_size) {
  for (const StageConfig* s : stages) {
    if (s->kind == "pretrain")
      check_pretrain_stage(job, *s, world_size);
    else
      check_rl_stage(job, *s);
  }
}

JobConfig load_job_config(const std::filesystem::path& path,
                          const std::vector<std::string>& overrides) {
  JobConfig job;
  cfg::load(path, overrides, job);
  std::set<std::string> names;
  std::vector<const StageConfig*> enabled;
  for (size_t i = 0; i < job.trainer.stages.size(); ++i) {
    auto& s = job.trainer.stages[i];
    const std::string key = "trainer.stages[" + std::to_string(i) + "].name";
    if (s.name.empty()) s.name = s.kind;
    if (!names.insert(s.name).second)
      throw ConfigError(key + ": stage name \"" + s.name +
                        "\" is used twice; names must be unique");
    if (s.enabled) enabled.push_back(&s);
  }
  check_job_config(job, enabled);
  return job;
}

}  // namespace kernelrl
