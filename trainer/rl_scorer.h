// Scoring an RL step's rows: every candidate of the step in one evaluator batch across tasks,
// all compiles in parallel first, then the timing; a stored result of an identical source is
// reused (rollout.reuse_evaluations); a response without code gets reward.failed_reward. Data
// parallel: each rank evaluates the rows of its groups (trainer/rl_dist.h) and the results are
// gathered, so every rank holds the whole step. Passing candidates join the exemplar pool
// (rank 0 writes it) and the per-task best speedups. Split in plan / compile / finish so the
// RL stage can sample the next step while the compiles run (rollout.overlap).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "reward/evaluator.h"
#include "rollout/exemplar_store.h"
#include "trainer/step_batch.h"

namespace kernelrl {

class RlScorer {
 public:
  RlScorer(Evaluator& evaluator, ExemplarStore& exemplars, double failed_reward,
           bool reuse_evaluations);

  // A batch's rows split into those with nothing to evaluate (no code; a stored result) and the
  // sources the evaluator still has to compile and time.
  struct Plan {
    std::vector<Scored> out;
    std::vector<EvalItem> fresh;
    std::vector<size_t> fresh_index;
    std::vector<std::string> sources;
  };
  Plan plan(const StepBatch& batch);
  // Compiles the plan's sources in parallel; returns the seconds it took.
  double compile(const Plan& plan);
  // The evaluator's results for the plan's sources and the seconds they took: no collective and
  // no batch, so with evaluation GPUs apart (reward.gpus) it runs beside the next generation.
  struct Timed {
    std::vector<EvalResult> results;
    double seconds = 0;
  };
  Timed time(const Plan& plan);
  // Times the compiled sources (batch.times.time), gathers every rank's results and sets
  // batch.scored; passing candidates join the pool tagged `exemplar_step` and the best
  // speedups, unless `record` is false (the fixed probe: it measures, it does not feed the step).
  void finish(StepBatch& batch, Plan plan, int64_t exemplar_step, bool record = true);
  // finish() with the results time() returned.
  void finish_timed(StepBatch& batch, Plan plan, Timed timed, int64_t exemplar_step, bool record = true);
  // plan, compile (batch.times.compile) and finish.
  void score(StepBatch& batch, int64_t exemplar_step, bool record = true);

  // Best passing speedup per task so far (checkpointed by the stage).
  std::map<std::string, double>& best_speedup() { return best_speedup_; }
  double best_speedup_overall() const;

 private:
  Evaluator& evaluator_;
  ExemplarStore& exemplars_;
  double failed_reward_;
  bool reuse_;
  std::map<std::string, double> best_speedup_;
};

}  // namespace kernelrl
