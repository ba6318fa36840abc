// DAPO's dynamic sampling (Yu et al. 2025, §3.2; rollout.dynamic_sampling_rounds): a group whose
// rewards are all equal gets A = 0 and no gradient, so while fewer than B groups of a step have
// reward spread, up to R more rounds sample the missing number of prompts; the step then keeps
// B groups, those with spread first. Sampling and scoring are the caller's (a callback).
#pragma once

#include <cstdint>
#include <functional>

#include "trainer/step_batch.h"

namespace kernelrl {

// Whether the scored rewards of group `gi` differ (by more than 1e-8).
bool group_has_spread(const StepBatch& batch, size_t gi);

// Keeps `count` groups, those with spread first, in sampling order, with their rows and scores
// (group indices renumbered). Nothing changes when the batch has `count` groups or fewer.
void keep_groups_with_spread(StepBatch& batch, int64_t count);

// Scored rows of `count` more prompts for resampling round `round` (1-based).
using SampleMore = std::function<StepBatch(int64_t round, int64_t count)>;

// While fewer than `target` (B) groups have spread and fewer than `max_rounds` (R) rounds were
// taken, appends sample_more(round, B − groups with spread); then keeps B groups. Returns the
// rounds taken (the `resample_rounds` metric).
int64_t resample_flat_groups(StepBatch& batch, int64_t target, int64_t max_rounds,
                             const SampleMore& sample_more);

}  // namespace kernelrl
