// The rows of one RL step as they move through it (trainer/grpo_stage.cpp): the prompt groups,
// the rows sampled for them, each row's score once evaluated, the tokens generated and the
// wall-clock split. Dynamic sampling (trainer/dynamic_sampling.h) and multi-turn refinement
// (trainer/multi_turn.h) append to it; the rows sampled a step ahead (rollout.overlap) wait in
// one (trainer/rl_pending.h). No policy, no evaluator: data only.
#pragma once

#include <cstdint>
#include <vector>

#include "reward/eval_result.h"
#include "rollout/group_sampler.h"

namespace kernelrl {

// One sampled candidate after evaluation.
struct Scored {
  double reward = 0;  // r from the evaluator (or reward.failed_reward)
  bool parsed = false, compiled = false, passed = false;
  double speedup = 0;
  EvalResult result;  // empty when the response held no code
  // When not parsed: the named format failure (ParsedResponse::failure: format_no_code,
  // edit_no_match, ...) and its reason; scored reward.failed_reward without compiling.
  std::string format_failure, format_reason;
};

// Wall-clock split of a step (seconds), logged with the metrics.
// With rollout.overlap the next step's generation runs beside this step's compiles: generate
// is then that generation, compile the compile pool's own wall time, and compile_wait what the
// step still waited for it after generating; wall is the step's wall-clock time.
struct StepTimes {
  double prompts = 0, generate = 0, compile = 0, compile_wait = 0, time = 0, update = 0, wall = 0;
  double wait = 0;     // data parallel: this rank waiting in the results' gather for the others'
                       // timing (its own timing is `time`)
  // Within `time`: this rank's candidate runners, their starts and loads summed (a fresh
  // process and CUDA context each, unless a spare was ready: reward.spare_runners), and how
  // many evaluations there were and how many took a spare.
  double runner_start = 0;
  int64_t runners = 0, spare_runners = 0;
  // Passing candidates whose reference, timed beside them, disagreed with a clean re-measurement
  // (metrics.baseline_disagreed: scored against the clean time; a busy host does this).
  int64_t baseline_disagreed = 0;
  int64_t tokens = 0;  // tokens generated within this step's wall time (the next step's too)
};

struct StepBatch {
  std::vector<PromptGroup> groups;
  std::vector<Rollout> rollouts;  // Rollout::group indexes `groups`
  std::vector<Scored> scored;     // one per rollout once scored; empty before
  int64_t generated = 0;          // tokens sampled for these rows
  StepTimes times;                // what picking, sampling and scoring them took

  // Appends `more` (rows, scores, tokens and times), its rows' group indices moved past ours.
  void append(StepBatch&& more) {
    for (auto& r : more.rollouts) r.group += groups.size();
    groups.insert(groups.end(), more.groups.begin(), more.groups.end());
    rollouts.insert(rollouts.end(), more.rollouts.begin(), more.rollouts.end());
    scored.insert(scored.end(), more.scored.begin(), more.scored.end());
    generated += more.generated;
    times.prompts += more.times.prompts;
    times.generate += more.times.generate;
    times.compile += more.times.compile;
    times.time += more.times.time;
    times.wait += more.times.wait;
    times.runner_start += more.times.runner_start;
    times.runners += more.times.runners;
    times.spare_runners += more.times.spare_runners;
    times.baseline_disagreed += more.times.baseline_disagreed;
  }
};

}  // namespace kernelrl
