// Multi-turn refinement (rollout.turns = T > 1; CUDA-L1's reflection as a rollout of T turns):
// turn k+1 of each trajectory is sampled from a prompt holding the task, the trajectory's turn-k
// code and the evaluator's verdict (no exemplars), one completion per trajectory, then scored
// like turn 1. The returns over turns are trainer/grpo.h's turn_returns; sampling and scoring
// are the caller's (a callback).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/tokenizer.h"
#include "rollout/prompt.h"
#include "trainer/step_batch.h"

namespace kernelrl {

// What the evaluator said of a candidate, in one or two lines for the policy.
std::string verdict_of(const Scored& s);

// The prompt of a revision: `parts` (format, backend) with the task, the previous code (halved
// until the prompt fits the context, dropped after 5 cuts) and its verdict. With
// parts.completion edit, the previous turn's kernel (or, when its blocks did not apply, the
// kernel it was editing) is the code to edit, never cut: a prompt it does not fit, or a turn
// with neither, asks for a whole kernel.
PromptGroup revision_prompt(const TaskSpec& task, const Rollout& previous, const Scored& verdict,
                            PromptParts parts, const Tokenizer& tokenizer, int64_t max_seq_len,
                            int64_t max_new_tokens);

// Builds one revision prompt from a row of the previous turn and its score.
using MakeRevision = std::function<PromptGroup(const TaskSpec&, const Rollout&, const Scored&)>;
// Scored rows for `prompts` (one completion each) at turn index `turn` (1-based: 1 is turn 2).
using SampleTurn = std::function<StepBatch(std::vector<PromptGroup> prompts, int64_t turn)>;

// Appends turns 2..T to `batch` (turn 1's rows): each turn's rows in the same trajectory order,
// so consecutive runs of G rows are one (prompt, turn) group.
void refine_turns(StepBatch& batch, int64_t turns, const MakeRevision& revision,
                  const SampleTurn& sample_turn);

}  // namespace kernelrl
