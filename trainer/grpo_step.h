// The policy update of one GRPO step, the RL counterpart of lm_train_step (pretrain_stage.h):
// prompt + completion rows in one padded batch, per-token log-probs without gradients (π_old,
// π_ref), then μ optimizer passes of the clipped surrogate of trainer/grpo.h over micro-batches
// of rows. Each pass syncs with the host once (the finite checks and every logged number in one
// copy), then clips and steps with the fused AdamW that pretraining uses.
// Sampling, evaluation, rewards and advantages are the stage's (trainer/grpo_stage.cpp).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "model/llama.h"
#include "rollout/group_sampler.h"
#include "trainer/trainer_config.h"

namespace kernelrl {

// Padded rows of prompt + completion, on the CPU, with how they were sampled.
struct RlBatch {
  torch::Tensor tokens;       // [N, T] int64, pad_id after each row's end
  torch::Tensor attention;    // [N, T] bool
  torch::Tensor target_mask;  // [N, T-1] float: 1 where tokens[:, t+1] is a completion token
                              // (log-prob index t scores token t+1)
  double temperature = 1.0;   // the sampling temperature T: every log-prob of these rows (π_θ,
                              // π_old, π_ref) is of softmax(logits / T), the policy that sampled
  int64_t max_new_tokens = 0;  // L_max, the completion budget (Dr.GRPO's constant normalizer)
};
// `sampling` is the configuration the rows were sampled with (rollout.sampling).
RlBatch make_rl_batch(const std::vector<PromptGroup>& groups, const std::vector<Rollout>& rollouts,
                      int64_t pad_id, const SamplingConfig& sampling);

class GradSync;

// Data-parallel split of the update: micro-batch k (rows [k·micro, (k+1)·micro)) is rank
// k mod W's. The micro-batches and their weights are the single-process ones, so the summed
// gradients are the single-process gradient (up to float summation order).
struct UpdateShard {
  int rank = 0;
  int world = 1;
  bool mine(int64_t micro_batch) const { return micro_batch % world == rank; }
};

// Per-token log-probs [N, T-1] of every row under `model` at the batch's temperature, in
// micro-batches of `micro` rows, without gradients, on the CPU; with a shard, the other ranks'
// micro-batches are left 0.
torch::Tensor rl_logprobs(LlamaModel& model, const RlBatch& batch, int64_t micro,
                          UpdateShard shard = {});

// One optimizer pass's numbers (batch aggregates, as the loss aggregation weighs them).
struct GrpoPassStats {
  double loss = 0;
  double clip_fraction = 0;  // share of valid tokens where the ratio clip is active
  double kl = 0;             // mean k3 KL to the reference over valid tokens
  double entropy = 0;        // mean policy entropy over valid tokens
  double ratio_mean = 0;     // mean π/π_old over valid tokens: exactly 1 on an on-policy pass 0
  double grad_norm = 0;      // before clipping
};
struct GrpoUpdateStats {
  std::vector<GrpoPassStats> passes;  // one per optimizer step taken (empty: no valid tokens)
  double tokens = 0;                  // valid completion tokens in the batch
};

// μ = grpo.updates_per_batch passes over `batch`. advantages [N] (rows of zero-spread groups
// carry 0 and are masked out by `valid`), logp_old [N, T-1] (the sampling policy's log-probs),
// logp_ref [N, T-1] or undefined (no KL). Throws before the optimizer step when the loss or the
// gradient norm is not finite. Data-parallel (`sync` given): this rank runs its shard's
// micro-batches, the gradients (bucketed, overlapped with the last backward) and the logged
// sums are all-reduced, and every rank clips and steps on the same numbers.
GrpoUpdateStats grpo_update(LlamaModel& model, torch::optim::AdamW& optimizer, const RlBatch& batch,
                            const torch::Tensor& advantages, const torch::Tensor& valid,
                            const torch::Tensor& logp_old, const torch::Tensor& logp_ref,
                            const GrpoConfig& grpo, int64_t micro, double grad_clip,
                            bool fused_adamw = true, GradSync* sync = nullptr, UpdateShard shard = {});

}  // namespace kernelrl
