// The data-parallel pieces of an RL step (trainer/grpo_stage.cpp): every rank picks the same
// prompt groups, samples and evaluates its contiguous share of them on its own GPU and
// evaluator worker, and the rows and the evaluator's results are gathered, so every rank holds
// the whole step in the single-process order and computes the same rewards, smoothing and
// advantages. The update's split of the rows is grpo_step.h's UpdateShard. Without a process
// group everything here is the single-process path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/llama.h"
#include "model/tokenizer.h"
#include "reward/eval_result.h"
#include "rollout/group_sampler.h"
#include "rollout/rollout_config.h"

namespace kernelrl {

// The groups [lo, hi) of a step's n that this rank samples and evaluates: [n·r/W, n·(r+1)/W).
struct GroupRange {
  size_t lo = 0, hi = 0;
  bool contains(size_t group) const { return group >= lo && group < hi; }
};
GroupRange my_groups(size_t n_groups);

// sample_groups for every group, each rank sampling only its GroupRange (its rows draw as rows
// lo·G, lo·G + 1, ... of the whole batch, so a row's tokens do not depend on the world size),
// then gathered in group order on every rank; *generated counts every rank's tokens.
std::vector<Rollout> sample_groups_sharded(LlamaModel& model, const Tokenizer& tokenizer,
                                           const std::vector<PromptGroup>& groups,
                                           int64_t group_size, const SamplingConfig& sampling,
                                           const std::string& response_format, uint64_t seed,
                                           int64_t* generated);

// Every rank's (row index, result) pairs, on every rank (CBOR, so an infinite speedup survives).
std::vector<std::pair<size_t, EvalResult>> gather_results(
    const std::vector<std::pair<size_t, EvalResult>>& mine);

}  // namespace kernelrl
