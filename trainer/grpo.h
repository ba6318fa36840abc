// GRPO math: group-normalized advantages, the token-level clipped surrogate with ε_low/ε_high,
// the k3 KL estimator to a frozen reference, loss aggregation, and CUDA-L1-style reward
// smoothing (winsorize against a running per-task window). Pure functions on
// tensors and numbers; the training loop that calls them is trainer/grpo_stage.cpp.
// Every formula is also in docs/grpo.md with the paper equation it follows.
#pragma once

#include <torch/types.h>

#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainer/trainer_config.h"

namespace kernelrl {

struct GroupAdvantages {
  torch::Tensor advantages;   // [B*G] float, 0 for samples of zero-spread groups
  torch::Tensor valid;        // [B*G] bool, false for samples of zero-spread groups
  int64_t zero_spread_groups = 0;
};

// rewards: [B*G], consecutive runs of `group_size` samples form one group (one prompt).
//   group:  A_i = (r_i − mean_g) / (std_g + ε)          (GRPO, Shao et al. 2024, Eq. 4 of CUDA-L1)
//   none:   A_i =  r_i − mean_g                          (Dr.GRPO: no std scaling)
//   batch:  A_i = (r_i − mean_g) / (std_batch + ε)       (std over the whole batch)
// std is the unbiased sample std (as TRL computes it). A group whose rewards are all equal
// (std_g < 1e-8) carries no signal: its samples get A = 0, valid = false, and are counted.
GroupAdvantages group_advantages(const torch::Tensor& rewards, int64_t group_size,
                                 const std::string& norm, double eps);

struct SurrogateTerms {
  torch::Tensor loss;           // scalar, to minimise
  torch::Tensor clip_fraction;  // scalar: share of valid tokens where the clip is active
  torch::Tensor kl;             // scalar: mean k3 KL over valid tokens (0 when no reference)
  torch::Tensor ratio_mean;     // scalar: mean ratio over valid tokens
};

// Token-level clipped surrogate (PPO, with DAPO's decoupled ε_low / ε_high):
//   ρ_t   = exp(logp_t − logp_old_t)
//   L_t   = −min(ρ_t·A, clip(ρ_t, 1 − ε_low, 1 + ε_high)·A) + β_KL·k3_t
//   k3_t  = exp(logp_ref_t − logp_t) − (logp_ref_t − logp_t) − 1      (Schulman's k3, ≥ 0)
// Aggregation: token-mean = Σ_{i,t} m·L / Σ_{i,t} m ;  sequence-mean = mean_i (Σ_t m·L / Σ_t m) ;
//   dr-grpo = Σ_{i,t} m·L / (N · L_max)   (Dr.GRPO, Liu et al. 2025: a constant normalizer, N the
//   rows passed in (masked ones included), L_max = `max_completion_tokens`; TRL's
//   loss_type="dr_grpo", verl's "seq-mean-token-sum-norm").
// ratio_level "sequence" (GSPO, Zheng et al. 2025): one ratio per sequence,
//   s_i = exp( Σ_t m·(logp_t − logp_old_t) / Σ_t m ),   L_i = −min(s_i·A_i, clip(s_i, 1 − ε_low, 1
//   + ε_high)·A_i)
//   (+ β_KL · the row's mean k3), aggregated sequence-mean; clip_fraction then counts the tokens
//   of sequences whose clip is active.
// logp, logp_old, logp_ref, mask: [N, T] (mask 1 on completion tokens); advantages: [N].
// logp_ref may be undefined (no KL). Rows with valid == false are excluded via the mask.
// max_completion_tokens (L_max) is read by dr-grpo only, which refuses 0.
SurrogateTerms clipped_surrogate(const torch::Tensor& logp, const torch::Tensor& logp_old,
                                 const torch::Tensor& logp_ref, const torch::Tensor& advantages,
                                 const torch::Tensor& mask, const GrpoConfig& config,
                                 int64_t max_completion_tokens = 0);

// Multi-turn returns (rollout.turns = T): rewards hold T blocks of n rows, block k = turn k+1,
// row j of every block the same trajectory. R_k = r_k + γ·R_{k+1}, R_T = r_T.
std::vector<double> turn_returns(const std::vector<double>& rewards, int64_t turns, double gamma);

// DAPO's soft overlong punishment (Yu et al. 2025, Eq. 13), added to the reward of a sampled
// completion of `length` tokens with budget L_max and buffer L_cache (0 = off):
//   0                                   |y| ≤ L_max − L_cache
//   ((L_max − L_cache) − |y|) / L_cache  L_max − L_cache < |y| ≤ L_max
//   −1                                  |y| > L_max
double overlong_penalty(int64_t length, int64_t max_len, int64_t buffer);

// The reward a sampled row enters smoothing with: r + R_len(|y|), and for a passing candidate
// at least failed_reward, so that the penalty never puts a passing kernel below a failing one
// (a failing row's r is failed_reward and its shaped reward at most that):
//   passed:  max(r + R_len(|y|), failed_reward)        failed:  r + R_len(|y|)
double shaped_reward(double reward, bool passed, int64_t length, int64_t max_len, int64_t buffer,
                     double failed_reward);

// Reward smoothing against reward hacking (CUDA-L1 §3.2, Eq. 6). The rewards arrive clipped once,
// by the reward formula (reward/reward_formula.h: r ∈ [failed_reward, speedup_clip]); here they
// are winsorized against a running per-task window:
//   r'' = clip(r, μ_w − k·σ̃_w, μ_w + k·σ̃_w),   σ̃_w = max(σ_w, σ_min)
// with μ_w, σ_w the mean and sample std of the task's last W rewards (winsorizing starts once the
// window holds kSmoothingMinRewards), k = smoothing_sigmas, σ_min = smoothing_min_std. CUDA-L1
// normalizes, r̂ = clip((r − μ)/σ, −k, k); with σ = 0 (a window of identical failure rewards)
// that divides by zero, and without the floor the clip bound collapses to μ: a first success
// in a group of failures [1.3, −1 ×7] came out as [−1 ×8], a group without spread that left the
// update. The floor keeps it k·σ_min above the failures. A step's rewards are all smoothed
// against the windows as they stood before the step, then appended: no sample of a group is
// winsorized against its own group mates.
class RewardSmoother {
 public:
  explicit RewardSmoother(const GrpoConfig& config) : config_(config) {}
  // tasks[i] is the task of rewards[i]; returns the smoothed rewards in the same order and
  // appends the raw rewards to the windows.
  std::vector<double> apply_step(const std::vector<std::string>& tasks,
                                 const std::vector<double>& rewards);
  // The same smoothed rewards without touching the windows (dynamic sampling decides on them
  // before the step's rewards are appended).
  std::vector<double> smooth(const std::vector<std::string>& tasks,
                             const std::vector<double>& rewards) const;
  nlohmann::json state() const;             // for checkpoints
  void load_state(const nlohmann::json& j);

 private:
  GrpoConfig config_;
  std::map<std::string, std::deque<double>> windows_;
};

}  // namespace kernelrl
