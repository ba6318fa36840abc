#include "trainer/stage_loop.h"

#include "common/log.h"
#include "common/progress.h"
#include "common/tensorboard.h"
#include "trainer/distributed.h"
#include "trainer/grad_sync.h"

namespace kernelrl {
namespace fs = std::filesystem;

std::optional<fs::path> resume_checkpoint(const StageContext& ctx) {
  if (!ctx.resume) return std::nullopt;
  return latest_stage_checkpoint(ctx.run_dir.checkpoints_dir(), ctx.stage.name);
}

namespace {

// Data parallel: every rank's policy must be the same (a hash compared across ranks).
void check_parameters(StagePolicy& policy, const std::string& when) {
  if (dist::Group* group = dist::group())
    group->check_same("parameters " + when, dist::tensors_hash(policy.model->parameters()));
}

// The loop's state between steps.
class StageLoop {
 public:
  StageLoop(StageContext& ctx, StageStep& stage, const StageLoopOptions& options)
      : ctx_(ctx),
        config_(ctx.stage),
        stage_(stage),
        tensorboard_(options.tensorboard),
        tb_(options.tensorboard && dist::is_main()
                ? ctx.run_dir.root() / "tensorboard" / config_.name
                : fs::path()) {}

  // Optimizer, step, RNG and the stage's extra state from `dir`; the metrics rows after the
  // resumed step are dropped (the resumed run writes them again).
  void restore(const std::optional<fs::path>& dir) {
    if (dir) {
      state_ = load_train_state(*dir, *stage_.policy().optimizer);
      last_checkpoint_ = *dir;
      KRL_LOG(info) << "resumed stage " << config_.name << " at step " << state_.step << " from "
                    << dir->string();
    }
    const std::string name = config_.name;
    const int64_t resumed_step = state_.step;
    ctx_.metrics.drop_if([&](const nlohmann::json& r) {
      return r.value("stage", "") == name && r.value("step", int64_t{0}) > resumed_step;
    });
  }
  bool done() const { return state_.step >= config_.steps; }

  // The stage's own set-up, then the data-parallel one: equal parameters, the gradient buckets.
  void start() {
    stage_.start(state_);
    dist::Group* group = dist::group();
    if (!group) return;
    StagePolicy& policy = stage_.policy();
    check_parameters(policy, "at the start of stage " + config_.name);
    sync_ = std::make_unique<GradSync>(*group, policy.model->parameters(),
                                       ctx_.job.run.dist.bucket_mb << 20);
    KRL_LOG(info) << "data parallel over " << group->size() << " ranks (" << group->backend()
                  << "): gradients in " << sync_->buckets() << " bucket(s)";
  }

  fs::path run() {
    Progress progress(config_.kind + " " + config_.name, config_.steps);
    while (!done()) {
      StepLog log = stage_.train_step(state_.step, sync_.get());
      ++state_.step;
      write(log, progress);
      if ((config_.checkpoint_every > 0 && state_.step % config_.checkpoint_every == 0) || done())
        checkpoint();
      crash_here_if_asked(config_.name, state_.step);
    }
    progress.finish();
    return last_checkpoint_;
  }

 private:
  void write(StepLog& log, Progress& progress) {
    log.metrics["stage"] = config_.name;
    ctx_.metrics.write(state_.step, log.metrics);
    if (tensorboard_) {
      for (const auto& [k, v] : log.metrics.items())
        if (v.is_number()) tb_.scalar(config_.name + "/" + k, v.get<double>(), state_.step);
      tb_.flush();
    }
    progress.update(state_.step, log.status);
  }

  // Rank 0 writes; every rank's parameters must still be the ones it writes, and none goes on
  // before the checkpoint is complete.
  void checkpoint() {
    state_.extra = stage_.checkpoint_extra();
    StagePolicy& policy = stage_.policy();
    check_parameters(policy, "at step " + std::to_string(state_.step));
    if (dist::is_main())
      last_checkpoint_ = save_stage_checkpoint(
          ctx_.run_dir.checkpoints_dir(), config_.name, policy.model, policy.shape,
          &policy.tokenizer_path, *policy.optimizer, state_, ctx_.job.trainer.keep_checkpoints);
    else
      last_checkpoint_ =
          ctx_.run_dir.checkpoints_dir() / config_.name / ("step_" + std::to_string(state_.step));
    if (dist::Group* group = dist::group()) group->barrier();
  }

  StageContext& ctx_;
  const StageConfig& config_;
  StageStep& stage_;
  TrainState state_;
  fs::path last_checkpoint_;
  std::unique_ptr<GradSync> sync_;
  bool tensorboard_;
  TensorBoardWriter tb_;  // writes nothing off rank 0 or without options.tensorboard
};

}  // namespace

fs::path run_stage_loop(StageContext& ctx, StageStep& stage, const std::optional<fs::path>& resume,
                        const StageLoopOptions& options) {
  StageLoop loop(ctx, stage, options);
  loop.restore(resume);
  if (loop.done()) return *resume;  // resumed after its last step
  loop.start();
  return loop.run();
}

}  // namespace kernelrl
