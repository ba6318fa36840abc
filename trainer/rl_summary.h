// Did an RL stage learn? From a run's metrics.jsonl: the policy's own samples' correct rate and
// reward (demonstrations excluded: sampled_correct_rate, sampled_reward_mean) at the first and
// last step and as means over the first and second half of the steps, and the updates taken.
// With rollout.probe_samples, also the fixed probe's rates before the first update and after
// the last (the same prompts and sampling seed both times), and the verdict is the probe's.
// The pipeline prints it after every RL stage (the CPU quickstart's last lines). Reads only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace kernelrl {

struct RlLearning {
  std::string stage;
  int64_t steps = 0, steps_with_updates = 0, updates = 0;
  double correct_first = 0, correct_last = 0, reward_first = 0, reward_last = 0;
  double correct_early = 0, correct_late = 0, reward_early = 0, reward_late = 0;  // half means
  // The second half's correct rate at least kMinRise (10 points) above the first's and its reward
  // above, with updates. A smaller rise is within what a few samples per step swing: the CPU
  // quickstart's 14 own samples a step went 7 % -> 11 % while its compiled rate fell from 100 %
  // to 7 % (device host, 2026-11-26), which is not learning.
  static constexpr double kMinRise = 0.10;
  // The fixed probe (probe_rows > 0): every training task's prompt with the same exemplar and
  // the same sampling seed before the first update and after the last, so that the prompt draw,
  // which swung the per-step rate 12-88 % on the CPU quickstart, cancels. Its verdict: the
  // correct rate up by kMinRise, with updates. The reward is printed, not judged: on a loaded
  // host a correct kernel's reward moves with the LibTorch reference's time (0.1-1.0 at clip 1).
  // Generation cost and edit mode over the stage: mean tokens per completion (step 1, last
  // step, mean over steps), edit-mode rows whose blocks applied, format failures.
  double tokens_first = 0, tokens_last = 0, tokens_mean = 0;
  int64_t edit_rows = 0, edits_applied = 0, format_failures = 0;
  int64_t probe_rows = 0;
  double probe_compiled_before = 0, probe_compiled_after = 0;
  double probe_correct_before = 0, probe_correct_after = 0;
  double probe_reward_before = 0, probe_reward_after = 0;
  bool improved() const {
    if (probe_rows > 0) return updates > 0 && probe_correct_after >= probe_correct_before + kMinRise - 1e-9;
    return updates > 0 && correct_late >= correct_early + kMinRise && reward_late > reward_early;
  }
};

// The stage's records in `metrics` (a metrics.jsonl); steps = 0 when it has none.
RlLearning rl_learning(const std::filesystem::path& metrics, const std::string& stage);

// Three lines (four with a probe): the numbers, the tokens per completion and format failures
// (edit mode: blocks applied), then whether the policy improved.
std::string format_rl_learning(const RlLearning& l);

}  // namespace kernelrl
