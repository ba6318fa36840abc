// DAPO's dynamic sampling (Yu et al. 2025, §3.2; rollout.dynamic_sampling_rounds): a group whose
// rewards are all equal gets A = 0 and no gradient, so while fewer than B groups of a step have
// reward spread, up to R more rounds sample the missing number of prompts; the step then keeps
// B groups, those with spread first. "Spread" is judged on the rewards the advantages will see
// (after overlong shaping and smoothing: a callback), not on the evaluator's raw rewards: a
// group whose raw rewards differ can be flat once smoothed, and the reverse. Sampling and
// scoring are the caller's (callbacks too).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "trainer/step_batch.h"

namespace kernelrl {

// The per-row rewards of `batch` as the advantages see them (the caller's shaping and smoothing).
using AdvantageRewards = std::function<std::vector<double>(const StepBatch& batch)>;

// Whether the rewards of group `gi`'s rows differ (by more than 1e-8); rewards[i] is row i's.
bool group_has_spread(const StepBatch& batch, const std::vector<double>& rewards, size_t gi);

// Keeps `count` groups, those with spread in `rewards` first, in sampling order, with their rows
// and scores (group indices renumbered). Nothing changes when the batch has `count` groups or
// fewer.
void keep_groups_with_spread(StepBatch& batch, const std::vector<double>& rewards, int64_t count);

// Scored rows of `count` more prompts for resampling round `round` (1-based).
using SampleMore = std::function<StepBatch(int64_t round, int64_t count)>;

// While fewer than `target` (B) groups have spread in rewards_of(batch) and fewer than
// `max_rounds` (R) rounds were taken, appends sample_more(round, B − groups with spread); then
// keeps B groups. Returns the rounds taken (the `resample_rounds` metric).
int64_t resample_flat_groups(StepBatch& batch, int64_t target, int64_t max_rounds,
                             const SampleMore& sample_more, const AdvantageRewards& rewards_of);

}  // namespace kernelrl
