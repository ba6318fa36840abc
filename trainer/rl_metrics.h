// The metrics of one RL step (metrics.jsonl, TensorBoard) and its progress line. loss,
// clip_fraction, kl, entropy, ratio_mean and grad_norm are pass 0's (on-policy); *_last the last
// pass's when μ > 1. The sampled_* rates count the policy's own rows only (demonstrations are
// the best verified kernel and always pass): whether these rise is what learning means here.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "rollout/rollout_config.h"
#include "trainer/grpo.h"
#include "trainer/grpo_step.h"
#include "trainer/stage_loop.h"
#include "trainer/step_batch.h"

namespace kernelrl {

// What an RL step computed from its rows, beside them.
struct RlStepResult {
  std::vector<double> smoothed;  // per row: the reward after smoothing (and overlong shaping)
  GroupAdvantages advantages;
  GrpoUpdateStats update;
  double lr = 0;
  int64_t resample_rounds = 0;  // DAPO dynamic sampling's extra rounds
  double best_speedup = 0;      // the best passing speedup over every task so far
};

// Over rows (demonstrations included): reward_mean and the format_ok, compiled, correct and
// faster rates. A step's row carries them, and so does the fixed probe (rollout.probe_samples).
nlohmann::json outcome_metrics(const std::vector<Scored>& scored);

// The step's metrics row (every field metrics.jsonl has carried) and its status text. Beside
// them: tokens_per_completion (mean over the policy's own rows), edit_rows / edits_applied /
// edits_unchanged (rollout.completion: edit), format_failures and
// format_failure_<name> per named failure (format_no_code, edit_empty, edit_malformed,
// edit_no_match, edit_ambiguous).
StepLog rl_step_log(const StepBatch& step, const RlStepResult& result,
                    const RolloutConfig& rollout);

}  // namespace kernelrl
