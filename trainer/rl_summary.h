// Did an RL stage learn? From a run's metrics.jsonl: the policy's own samples' correct rate and
// reward (demonstrations excluded: sampled_correct_rate, sampled_reward_mean) at the first and
// last step and as means over the first and second half of the steps, and the updates taken.
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
  bool improved() const {
    return updates > 0 && correct_late >= correct_early + kMinRise && reward_late > reward_early;
  }
};

// The stage's records in `metrics` (a metrics.jsonl); steps = 0 when it has none.
RlLearning rl_learning(const std::filesystem::path& metrics, const std::string& stage);

// Two lines: the numbers, then whether the policy improved.
std::string format_rl_learning(const RlLearning& l);

}  // namespace kernelrl
