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

// Rewards a task's window must hold before the smoother winsorizes against it: a mean and a
// standard deviation of fewer are too noisy to clip by. A smoothing_window of 1..7 would never
// smooth and is refused at load (trainer/job_config.cpp).
inline constexpr int64_t kSmoothingMinRewards = 8;

// GRPO for the RL stages (docs/grpo.md has every formula with its source).
struct GrpoConfig {
  double clip_eps_low = 0.2;        // ε_low: ratio clipped below at 1 − ε_low
  double clip_eps_high = 0.28;      // ε_high: ratio clipped above at 1 + ε_high (clip-higher)
  double kl_coef = 0.0;             // β_KL of the k3 KL to the frozen reference; 0 = off
  int64_t updates_per_batch = 1;    // μ: optimizer passes over each batch of rollouts
  std::string advantage_norm = "group";  // group: /(std_g+ε) | none: Dr.GRPO | batch: /(std_batch+ε)
  std::string loss_agg = "token-mean";   // token-mean | sequence-mean | dr-grpo (Σ m·L / (N·L_max));
                                         // GSPO: always sequence-mean
  std::string ratio_level = "token";     // token: PPO/GRPO ratio per token | sequence: GSPO
  double adv_eps = 1e-4;            // ε in the advantage denominator
  int64_t overlong_buffer = 0;      // DAPO soft overlong punishment: L_cache tokens below
                                    // rollout.sampling.max_new_tokens; 0 = off
  bool overlong_filter = false;     // DAPO overlong filtering: truncated completions (no end
                                    // marker within max_new_tokens) take no part in the loss
  int64_t smoothing_window = 64;    // per-task window of past rewards for winsorizing; 0 = off,
                                    // else ≥ kSmoothingMinRewards
  double smoothing_sigmas = 3.0;    // winsorize to mean ± k·max(std, smoothing_min_std)
  double smoothing_min_std = 0.1;   // σ floor: a window of equal rewards (all failures) still
                                    // lets a first success through, at most k·floor above them

  void visit(cfg::Visitor& v) {
    v.field("clip_eps_low", clip_eps_low, "ε_low of the ratio clip", cfg::in_open_closed(0, 1));
    v.field("clip_eps_high", clip_eps_high, "ε_high of the ratio clip", cfg::in_open_closed(0, 1));
    v.field("kl_coef", kl_coef, "β_KL (k3 estimator); 0 = off", cfg::at_least(0));
    v.field("updates_per_batch", updates_per_batch, "μ passes per batch", cfg::at_least(1));
    v.field("advantage_norm", advantage_norm, "group | none | batch", {"group", "none", "batch"});
    v.field("loss_agg", loss_agg,
            "token-mean | sequence-mean | dr-grpo (token sums over rows × max_new_tokens)",
            {"token-mean", "sequence-mean", "dr-grpo"});
    v.field("ratio_level", ratio_level,
            "token (GRPO) | sequence (GSPO: one length-normalized ratio per sequence; use small "
            "clip_eps, e.g. 3e-4 / 4e-4)",
            {"token", "sequence"});
    v.field("adv_eps", adv_eps, "ε of the advantage denominator", cfg::greater_than(0));
    v.field("overlong_buffer", overlong_buffer,
            "DAPO soft overlong punishment buffer (tokens below max_new_tokens); 0 = off",
            cfg::at_least(0));
    v.field("overlong_filter", overlong_filter, "DAPO: truncated completions take no part in the loss");
    v.field("smoothing_window", smoothing_window, "per-task reward window; 0 = off, else >= 8",
            cfg::at_least(0));
    v.field("smoothing_sigmas", smoothing_sigmas,
            "winsorize at mean ± k·max(std, smoothing_min_std)", cfg::greater_than(0));
    v.field("smoothing_min_std", smoothing_min_std,
            "σ floor of the winsorizing bounds (a window of equal rewards keeps a first success "
            "above them)",
            cfg::greater_than(0));
  }
};

struct StageConfig {
  std::string name = "";            // unique name; its checkpoints go to checkpoints/<name>/
  std::string kind = "pretrain";    // pretrain | general_rl | hgemm_rl
  bool enabled = true;              // false: skip (like leaving it out of --stages)
  int64_t steps = 100;              // optimizer steps in this stage
  int64_t batch_size = 8;           // per micro-batch: sequences (pretrain) or completion rows
                                    // (RL: prompt + one sampled completion each)
  int64_t grad_accum = 1;           // micro-batches per optimizer step (pretrain)
  int64_t seq_len = 256;            // packed sequence length (pretrain)
  int64_t eval_every = 50;          // held-out evaluation period, steps; 0 = off
  int64_t eval_batches = 8;         // held-out micro-batches per evaluation (pretrain)
  std::string loss_on = "all";      // pretrain loss on all tokens or on code tokens only
  double exemplar_context = 0.0;    // pretrain: share of kernel-family triplets whose context
                                    // also shows another variant of the same family, the way
                                    // RL prompts show exemplars
  int64_t checkpoint_every = 50;    // checkpoint period, steps; 0 = only at the end
  OptimizerConfig optimizer;
  GrpoConfig grpo;                  // used by the RL stages

  void visit(cfg::Visitor& v) {
    v.field("name", name, "stage name (unique)");
    v.field("kind", kind, "pretrain | general_rl | hgemm_rl", {"pretrain", "general_rl", "hgemm_rl"});
    v.field("enabled", enabled, "false skips the stage");
    v.field("steps", steps, "optimizer steps", cfg::at_least(1));
    v.field("batch_size", batch_size,
            kind == "pretrain" ? "sequences per micro-batch" : "completion rows per micro-batch",
            cfg::at_least(1));
    // Each kind reads only its own keys; the other kind's keys are refused by name.
    static const char* kPretrainOnly = "a pretrain-only key; this stage is an RL stage";
    static const char* kRlOnly = "an RL-only section; this stage is a pretrain stage";
    if (kind == "pretrain") {
      v.field("grad_accum", grad_accum, "micro-batches per step", cfg::at_least(1));
      v.field("seq_len", seq_len, "packed sequence length", cfg::at_least(8));
      v.field("eval_every", eval_every, "held-out eval period; 0 = off", cfg::at_least(0));
      v.field("eval_batches", eval_batches, "held-out micro-batches per eval", cfg::at_least(1));
      v.field("loss_on", loss_on, "pretrain loss on: all | code", {"all", "code"});
      v.field("exemplar_context", exemplar_context,
              "pretrain: share of family triplets shown a sibling variant as context",
              cfg::in_closed(0, 1));
      v.reject("grpo", kRlOnly);
    } else {
      for (const char* k : {"grad_accum", "seq_len", "eval_every", "eval_batches", "loss_on",
                            "exemplar_context"})
        v.reject(k, kPretrainOnly);
    }
    v.field("checkpoint_every", checkpoint_every, "checkpoint period; 0 = end only",
            cfg::at_least(0));
    v.section("optimizer", optimizer, "AdamW and schedule");
    if (kind != "pretrain") v.section("grpo", grpo, "GRPO (RL stages)");
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
