#include "trainer/pipeline.h"

#include <algorithm>
#include <optional>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "model/device.h"
#include "reward/reward_config.h"
#include "rollout/seed_grid.h"
#include "trainer/distributed.h"
#include "trainer/grpo_stage.h"
#include "trainer/pretrain_stage.h"
#include "trainer/rl_summary.h"
#include "trainer/train_utils.h"

namespace kernelrl {

StageRunner stage_runner(const std::string& kind) {
  if (kind == "pretrain") return run_pretrain_stage;
  if (kind == "general_rl" || kind == "hgemm_rl") return run_grpo_stage;
  return {};  // a kind whose trainer is not in this build
}

std::vector<const StageConfig*> select_stages(const JobConfig& job,
                                              const std::vector<std::string>& only) {
  for (const auto& want : only) {
    bool known = std::any_of(job.trainer.stages.begin(), job.trainer.stages.end(),
                             [&](const StageConfig& s) { return s.name == want || s.kind == want; });
    if (!known) {
      std::string names;
      for (const auto& s : job.trainer.stages) names += (names.empty() ? "" : ", ") + s.name;
      throw UserError("--stages: no stage named \"" + want + "\" in the config (stages: " +
                      (names.empty() ? "none" : names) + ")");
    }
  }
  std::vector<const StageConfig*> out;
  for (const auto& s : job.trainer.stages) {
    bool picked = only.empty() ? s.enabled
                               : std::find(only.begin(), only.end(), s.name) != only.end() ||
                                     std::find(only.begin(), only.end(), s.kind) != only.end();
    if (picked) out.push_back(&s);
  }
  if (out.empty()) throw UserError("trainer.stages: nothing to run (no enabled stage selected)");
  return out;
}

namespace {

// The RL stages' task lists (data.general_tasks, data.hgemm_grid, data.hgemm_heldout) load and
// leave training tasks: a suite or grid file that does not parse fails here, not after the
// stages before them have trained. The evaluator's backend is known only once an RL stage
// builds it; a suite's parse and its training split do not depend on it (each task carries
// sizes for both), so "host" stands in for "auto".
// rollout.seed_grid (a family-sweep CSV) is read here too, for the same reason, and reward.gpus
// is checked against the host's GPUs.
void check_rl_tasks(const JobConfig& job, const std::vector<const StageConfig*>& stages) {
  bool hgemm = false;
  for (const auto* s : stages) {
    if (s->kind != "pretrain") rl_stage_tasks(job, s->kind, job.reward.backend == "gpu" ? "gpu" : "host");
    hgemm = hgemm || s->kind == "hgemm_rl";
  }
  if (hgemm) job_seed_grid(job);
  // reward.gpus against this host's GPUs and the policy ranks' (the stage repeats it for its rank).
  if (!job.reward.gpus.empty() && std::any_of(stages.begin(), stages.end(), [](const StageConfig* s) {
        return s->kind != "pretrain";
      })) {
    const dist::LaunchEnv env = dist::read_launch_env();
    evaluation_gpus(job.reward, env.local_rank, env.local_world_size, cuda_device_count(),
                    resolve_device(job.run.device).is_cuda());
  }
}

// Rank 0 opens the run directory (the fresh/resume/overwrite rule) and is its only writer (the
// resolved config, kernelrl.log); the other ranks attach to what it opened, or fail with its
// error, and log to kernelrl.rank<r>.log.
RunDir open_run_dir(const JobConfig& job, RunDirMode mode) {
  dist::Group* group = dist::group();
  std::optional<RunDir> opened;
  std::string verdict;
  if (dist::is_main()) {
    try {
      opened = RunDir::open(job.run_dir(), mode);
      verdict = opened->resumed() ? "resumed" : "fresh";
    } catch (const UserError& e) {
      verdict = std::string("error:") + e.what();
      if (group) group->broadcast_bytes(verdict, 0);
      throw;
    }
  }
  if (group) verdict = group->broadcast_bytes(verdict, 0);
  if (verdict.rfind("error:", 0) == 0) throw UserError(verdict.substr(6));
  RunDir run_dir = opened ? *opened : RunDir::attach(job.run_dir(), verdict == "resumed");
  if (dist::is_main()) {
    log::add_file(run_dir.logs_dir() / "kernelrl.log");
    JobConfig resolved = job;
    run_dir.write_config(cfg::to_yaml(resolved));
  } else {
    log::add_file(run_dir.logs_dir() / ("kernelrl.rank" + std::to_string(dist::rank()) + ".log"));
  }
  return run_dir;
}

// What the first picked stage starts from: the newest checkpoint of the stage before it in
// this run directory (a run of later stages alone, --stages), else model.hf_path (a pretrained
// checkpoint: its weights and tokenizer), else nothing (a fresh policy).
fs::path first_checkpoint(const JobConfig& job, const StageConfig* first, const RunDir& run_dir) {
  fs::path checkpoint;
  for (const auto& s : job.trainer.stages) {
    if (&s == first) break;
    if (auto dir = latest_stage_checkpoint(run_dir.checkpoints_dir(), s.name)) checkpoint = *dir;
  }
  if (checkpoint.empty() && !job.model.hf_path.empty()) {
    if (!fs::is_directory(job.model.hf_path))
      throw UserError("model.hf_path: " + job.model.hf_path + " is not a directory");
    checkpoint = job.model.hf_path;
  }
  return checkpoint;
}

// Did the RL stages learn? The run's last lines say (the CPU quickstart's promise).
void log_rl_learning(const std::vector<const StageConfig*>& stages, const RunDir& run_dir) {
  for (const auto* s : stages) {
    if (s->kind == "pretrain") continue;
    std::string text = format_rl_learning(rl_learning(run_dir.metrics_path(), s->name));
    for (size_t a = 0, b; a < text.size(); a = b + 1) {
      b = text.find('\n', a);
      if (b == std::string::npos) b = text.size();
      KRL_LOG(info) << text.substr(a, b - a);
    }
  }
}

}  // namespace

std::filesystem::path run_pipeline(const JobConfig& job, const PipelineOptions& options) {
  auto stages = select_stages(job, options.only_stages);
  // Every cross-field rule of every stage that will run, before the first one starts.
  check_job_config(job, stages, dist::world_size());
  check_rl_tasks(job, stages);
  std::vector<StageRunner> runners;
  for (const auto* s : stages) {
    runners.push_back(stage_runner(s->kind));
    if (!runners.back())
      throw NotAvailableError("stage \"" + s->name + "\" (kind " + s->kind +
                              "): its trainer is not built yet in this version of KernelRL");
  }
  RunDir run_dir = open_run_dir(job, options.mode);
  dist::Group* group = dist::group();
  KRL_LOG(info) << (run_dir.resumed() ? "resuming" : "starting") << " run in "
                << run_dir.root().string() << " (" << stages.size() << " stage(s)"
                << (group ? ", " + std::to_string(group->size()) + " ranks" : std::string()) << ")";
  MetricsWriter metrics(dist::is_main() ? run_dir.metrics_path() : fs::path(),
                        run_dir.resumed() ? INT64_MAX : -1);
  fs::path checkpoint = first_checkpoint(job, stages.front(), run_dir);
  for (size_t i = 0; i < stages.size(); ++i) {
    StageContext ctx{job, *stages[i], run_dir, metrics, checkpoint, run_dir.resumed()};
    KRL_LOG(info) << "stage " << stages[i]->name << " (" << stages[i]->kind << ")";
    checkpoint = runners[i](ctx);
    if (group) group->barrier();  // rank 0 has written the stage's final checkpoint
  }
  if (dist::is_main()) log_rl_learning(stages, run_dir);
  log::close_file();
  return checkpoint;
}

}  // namespace kernelrl
