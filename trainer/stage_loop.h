// The loop every training stage runs on (torchtitan's Trainer): resume, one train_step per
// optimizer step, metrics, checkpoints. It finds the checkpoint a resumed stage continues from,
// restores the optimizer, the step and the RNG, drops the metrics rows the resumed run writes
// again, then steps until the stage is done: each step's row goes to metrics.jsonl (and
// TensorBoard) with the progress line, and a checkpoint is written every checkpoint_every steps
// and at the last (rank 0 writes, after every rank's parameters are checked equal; the newest
// trainer.keep_checkpoints are kept). It does not know what a step does: the pretrain stage
// (trainer/pretrain_stage.cpp) and the RL stage (trainer/grpo_stage.cpp) implement StageStep.
#pragma once

#include <torch/optim/adamw.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "model/llama.h"
#include "trainer/stage_context.h"
#include "trainer/train_utils.h"

namespace kernelrl {

class GradSync;

// What a stage trains and its checkpoint carries: the policy, its shape, the tokenizer file
// and the optimizer.
struct StagePolicy {
  LlamaModel model{nullptr};
  ModelShape shape;
  std::filesystem::path tokenizer_path;
  std::unique_ptr<torch::optim::AdamW> optimizer;
};

// What one step reports: its metrics.jsonl row (the loop adds "stage", "step" and "time") and
// the progress line's status text.
struct StepLog {
  nlohmann::json metrics = nlohmann::json::object();
  std::string status;
};

// A stage as the loop sees it. Its constructor builds the policy and optimizer (from the resume
// checkpoint when there is one); the loop restores the rest.
class StageStep {
 public:
  virtual ~StageStep() = default;
  virtual StagePolicy& policy() = 0;
  // Called once the optimizer, step and RNG are restored, when steps remain: the set-up a
  // finished stage can skip. `state.extra` is what checkpoint_extra wrote (null when fresh).
  virtual void start(const TrainState& state) { (void)state; }
  // Optimizer step number `step` (0-based: the steps done before it). `sync` all-reduces the
  // gradients of a data-parallel job; null in one process.
  virtual StepLog train_step(int64_t step, GradSync* sync) = 0;
  // The stage's own part of trainer_state.json ("extra"), asked for before each checkpoint.
  virtual nlohmann::json checkpoint_extra() { return nullptr; }
};

// The checkpoint a stage continues from: its newest one when ctx.resume says so, else none.
std::optional<std::filesystem::path> resume_checkpoint(const StageContext& ctx);

struct StageLoopOptions {
  bool tensorboard = false;  // every numeric metric also to <run>/tensorboard/<stage>/
};

// Runs `stage` (built over `resume`, resume_checkpoint's answer) to its last step; returns its
// final checkpoint directory.
std::filesystem::path run_stage_loop(StageContext& ctx, StageStep& stage,
                                     const std::optional<std::filesystem::path>& resume,
                                     const StageLoopOptions& options = {});

}  // namespace kernelrl
