// TrainerConfig: the stages of a job and how each trains, mirrored 1:1 by `trainer:`.
// A job runs its stages in order (pretrain -> general_rl -> hgemm_rl in the full pipeline);
// each stage starts from the previous stage's final checkpoint.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace kernelrl {

struct OptimizerConfig {
  double lr = 3e-4;             // peak learning rate
  double weight_decay = 0.1;    // AdamW decoupled weight decay
  double beta1 = 0.9;           // AdamW β1
  double beta2 = 0.95;          // AdamW β2
  double eps = 1e-8;            // AdamW ε
  double grad_clip = 1.0;       // global grad-norm clip; 0 = off
  int64_t warmup_steps = 10;    // linear warmup
  double min_lr_ratio = 0.1;    // cosine floor as a fraction of lr

  void visit(cfg::Visitor& v) {
    v.field("lr", lr, "peak learning rate", cfg::greater_than(0));
    v.field("weight_decay", weight_decay, "AdamW weight decay", cfg::at_least(0));
    v.field("beta1", beta1, "AdamW beta1", cfg::in_closed_open(0, 1));
    v.field("beta2", beta2, "AdamW beta2", cfg::in_closed_open(0, 1));
    v.field("eps", eps, "AdamW epsilon", cfg::greater_than(0));
    v.field("grad_clip", grad_clip, "global grad-norm clip; 0 = off", cfg::at_least(0));
    v.field("warmup_steps", warmup_steps, "linear warmup steps", cfg::at_least(0));
    v.field("min_lr_ratio", min_lr_ratio, "cosine floor / lr", cfg::in_closed(0, 1));
  }
};

struct StageConfig {
  std::string name = "";            // unique name; its checkpoints go to checkpoints/<name>/
  std::string kind = "pretrain";    // pretrain | general_rl | hgemm_rl
  bool enabled = true;              // false: skip (like leaving it out of --stages)
  int64_t steps = 100;              // optimizer steps in this stage
  int64_t batch_size = 8;           // sequences (pretrain) or prompts (RL) per micro-batch
  int64_t grad_accum = 1;           // micro-batches per optimizer step
  int64_t seq_len = 256;            // packed sequence length (pretrain)
  int64_t eval_every = 50;          // held-out evaluation period, steps; 0 = off
  int64_t checkpoint_every = 50;    // checkpoint period, steps; 0 = only at the end
  OptimizerConfig optimizer;

  void visit(cfg::Visitor& v) {
    v.field("name", name, "stage name (unique)");
    v.field("kind", kind, "pretrain | general_rl | hgemm_rl", {"pretrain", "general_rl", "hgemm_rl"});
    v.field("enabled", enabled, "false skips the stage");
    v.field("steps", steps, "optimizer steps", cfg::at_least(1));
    v.field("batch_size", batch_size, "micro-batch size", cfg::at_least(1));
    v.field("grad_accum", grad_accum, "micro-batches per step", cfg::at_least(1));
    v.field("seq_len", seq_len, "packed sequence length", cfg::at_least(8));
    v.field("eval_every", eval_every, "held-out eval period; 0 = off", cfg::at_least(0));
    v.field("checkpoint_every", checkpoint_every, "checkpoint period; 0 = end only",
            cfg::at_least(0));
    v.section("optimizer", optimizer, "AdamW and schedule");
  }
};

struct TrainerConfig {
  std::vector<StageConfig> stages;  // run in order
  int64_t keep_checkpoints = 2;     // newest checkpoints kept per stage

  void visit(cfg::Visitor& v) {
    v.list("stages", stages, "stages, run in order");
    v.field("keep_checkpoints", keep_checkpoints, "checkpoints kept per stage", cfg::at_least(1));
  }
};

}  // namespace kernelrl
