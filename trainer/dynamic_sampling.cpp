#include "trainer/dynamic_sampling.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kernelrl {

bool group_has_spread(const StepBatch& batch, const std::vector<double>& rewards, size_t gi) {
  if (rewards.size() != batch.rollouts.size())
    throw std::logic_error("dynamic sampling: one reward per row expected");
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < batch.rollouts.size(); ++i)
    if (batch.rollouts[i].group == gi) lo = std::min(lo, rewards[i]), hi = std::max(hi, rewards[i]);
  return hi - lo > 1e-8;
}

void keep_groups_with_spread(StepBatch& batch, const std::vector<double>& rewards, int64_t count) {
  if (static_cast<int64_t>(batch.groups.size()) <= count) return;
  std::vector<size_t> keep;  // spread first, in sampling order
  for (int pass = 0; pass < 2; ++pass)
    for (size_t gi = 0; gi < batch.groups.size() && static_cast<int64_t>(keep.size()) < count; ++gi)
      if (group_has_spread(batch, rewards, gi) == (pass == 0)) keep.push_back(gi);
  std::sort(keep.begin(), keep.end());
  std::vector<PromptGroup> groups;
  std::vector<Rollout> rollouts;
  std::vector<Scored> scored;
  for (size_t k = 0; k < keep.size(); ++k) {
    groups.push_back(batch.groups[keep[k]]);
    for (size_t i = 0; i < batch.rollouts.size(); ++i)
      if (batch.rollouts[i].group == keep[k]) {
        rollouts.push_back(batch.rollouts[i]);
        rollouts.back().group = k;
        scored.push_back(batch.scored[i]);
      }
  }
  batch.groups = std::move(groups);
  batch.rollouts = std::move(rollouts);
  batch.scored = std::move(scored);
}

int64_t resample_flat_groups(StepBatch& batch, int64_t target, int64_t max_rounds,
                             const SampleMore& sample_more, const AdvantageRewards& rewards_of) {
  auto with_spread = [&] {
    const std::vector<double> rewards = rewards_of(batch);
    int64_t k = 0;
    for (size_t gi = 0; gi < batch.groups.size(); ++gi) k += group_has_spread(batch, rewards, gi);
    return k;
  };
  int64_t round = 0;
  for (int64_t have = with_spread(); round < max_rounds && have < target; have = with_spread()) {
    ++round;
    batch.append(sample_more(round, target - have));
  }
  keep_groups_with_spread(batch, rewards_of(batch), target);
  return round;
}

}  // namespace kernelrl
