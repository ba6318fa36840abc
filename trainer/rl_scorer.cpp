#include "trainer/rl_scorer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "trainer/distributed.h"
#include "trainer/rl_dist.h"

namespace kernelrl {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

RlScorer::RlScorer(Evaluator& evaluator, ExemplarStore& exemplars, double failed_reward,
                   bool reuse_evaluations)
    : evaluator_(evaluator),
      exemplars_(exemplars),
      failed_reward_(failed_reward),
      reuse_(reuse_evaluations) {}

RlScorer::Plan RlScorer::plan(const StepBatch& batch) {
  Plan p;
  p.out.resize(batch.rollouts.size());
  const GroupRange mine = my_groups(batch.groups.size());  // all of them in one process
  for (size_t i = 0; i < batch.rollouts.size(); ++i) {
    const ParsedResponse& parsed = batch.rollouts[i].parsed;
    const TaskSpec& task = batch.groups[batch.rollouts[i].group].task;
    p.out[i].reward = failed_reward_;
    if (!parsed.ok) {  // a format failure: named, never compiled
      p.out[i].format_failure = parsed.failure.empty() ? "format_no_code" : parsed.failure;
      p.out[i].format_reason = parsed.reason;
      continue;
    }
    p.out[i].parsed = true;
    if (!mine.contains(batch.rollouts[i].group))
      continue;  // another rank's: its result is gathered
    if (reuse_)
      if (auto hit = evaluator_.cached_result(task, parsed.code)) {
        p.out[i].result = *hit;
        continue;
      }
    p.fresh.push_back({task, parsed.code});
    p.fresh_index.push_back(i);
    p.sources.push_back(parsed.code);
  }
  return p;
}

double RlScorer::compile(const Plan& plan) {
  const auto t0 = Clock::now();
  if (!plan.sources.empty()) evaluator_.precompile(plan.sources);
  return since(t0);
}

RlScorer::Timed RlScorer::time(const Plan& plan) {
  const auto t0 = Clock::now();
  Timed t;
  t.results = evaluator_.evaluate_batch(plan.fresh);
  t.seconds = since(t0);
  return t;
}

void RlScorer::finish(StepBatch& batch, Plan plan, int64_t exemplar_step, bool record) {
  Timed t = time(plan);
  finish_timed(batch, std::move(plan), std::move(t), exemplar_step, record);
}

void RlScorer::finish_timed(StepBatch& batch, Plan plan, Timed timed, int64_t exemplar_step, bool record) {
  std::vector<EvalResult>& results = timed.results;
  batch.times.time += timed.seconds;
  for (const auto& r : results)
    if (r.metrics.contains("runner_start_s")) {
      batch.times.runner_start += r.metrics.value("runner_start_s", 0.0);
      ++batch.times.runners;
      batch.times.spare_runners += r.metrics.value("runner_spare", false) ? 1 : 0;
      batch.times.baseline_disagreed += r.metrics.value("baseline_disagreed", false) ? 1 : 0;
    }
  std::vector<Scored>& out = plan.out;
  for (size_t j = 0; j < results.size(); ++j)
    out[plan.fresh_index[j]].result = std::move(results[j]);
  if (dist::group()) {  // every rank's results: each rank holds the whole step from here on
    const GroupRange mine = my_groups(batch.groups.size());
    std::vector<std::pair<size_t, EvalResult>> own;
    for (size_t i = 0; i < batch.rollouts.size(); ++i)
      if (out[i].parsed && mine.contains(batch.rollouts[i].group))
        own.emplace_back(i, out[i].result);
    const auto gathered = Clock::now();
    for (auto& [i, r] : gather_results(own)) out[i].result = std::move(r);
    batch.times.wait += since(gathered);
  }
  for (size_t i = 0; i < batch.rollouts.size(); ++i) {
    Scored& s = out[i];
    if (!s.parsed) continue;
    const EvalResult& r = s.result;
    s.reward = r.reward;
    s.passed = r.passed();
    s.compiled = r.status != EvalStatus::screen_rejected && r.status != EvalStatus::compile_error &&
                 r.status != EvalStatus::compile_timeout;
    s.speedup = r.speedup;
    if (!s.passed || !record) continue;
    const std::string& task = batch.groups[batch.rollouts[i].group].task.name;
    if (dist::is_main())
      exemplars_.add(task, {r.hash, batch.rollouts[i].parsed.code, r.reward}, exemplar_step);
    if (std::isfinite(s.speedup)) best_speedup_[task] = std::max(best_speedup_[task], s.speedup);
  }
  batch.scored = std::move(out);
}

void RlScorer::score(StepBatch& batch, int64_t exemplar_step, bool record) {
  Plan p = plan(batch);
  batch.times.compile += compile(p);
  finish(batch, std::move(p), exemplar_step, record);
}

double RlScorer::best_speedup_overall() const {
  double best = 0;
  for (const auto& [task, s] : best_speedup_) best = std::max(best, s);
  return best;
}

}  // namespace kernelrl
