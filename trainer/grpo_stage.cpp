#include "trainer/grpo_stage.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include "common/error.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/tensorboard.h"
#include "data/families.h"
#include "data/tasks/hgemm_split.h"
#include "data/tasks/task_ops.h"
#include "data/tasks/task_suite.h"
#include "model/chat_format.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "reward/evaluator.h"
#include "rollout/exemplar_store.h"
#include "rollout/group_sampler.h"
#include "trainer/distributed.h"
#include "trainer/grad_sync.h"
#include "trainer/grpo.h"
#include "trainer/grpo_step.h"
#include "trainer/rl_dist.h"
#include "trainer/train_utils.h"

namespace kernelrl {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t mix(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b)); }

// One sampled candidate after evaluation.
struct Scored {
  double reward = 0;         // r from the evaluator (or failed_reward)
  bool parsed = false, compiled = false, passed = false;
  double speedup = 0;
  EvalResult result;         // empty when the response held no code
};

}  // namespace

std::vector<std::string> seed_sources(Evaluator& ev, const TaskSpec& task, int64_t n) {
  auto variants = variants_for_task(task, ev.backend() == "gpu" ? "cuda" : "host", ev.arch());
  std::map<std::string, std::vector<KernelVariant>> by_family;  // shuffled in name order
  for (auto& v : variants) by_family[v.family].push_back(std::move(v));
  std::vector<std::vector<KernelVariant>> pools;
  for (auto& [family, members] : by_family) pools.push_back(std::move(members));
  std::vector<std::string> sources;
  if (n <= 0 || pools.empty()) return sources;
  for (auto& v : round_robin_variants(std::move(pools), n, fnv1a(task.name), /*wrap=*/false))
    sources.push_back(std::move(v.source));
  return sources;
}

namespace {

// Seeds the empty exemplar pools of `tasks` with their evaluated seed variants. All of them
// compile first in one parallel batch, then each task's are evaluated (loaded from the compile
// cache): on a GPU, CUTLASS and wgmma variants compile for tens of seconds each, and one batch
// per task left most cores idle behind each task's slowest compile.
void seed_pools(ExemplarStore& pool, Evaluator& ev, const std::vector<const TaskSpec*>& tasks, int64_t n) {
  if (n <= 0) return;
  std::vector<std::pair<const TaskSpec*, std::vector<std::string>>> todo;
  std::set<std::string> seen;
  std::vector<std::string> all;
  for (const TaskSpec* task : tasks) {
    if (pool.size(task->name) > 0 || !seen.insert(task->name).second) continue;
    std::vector<std::string> sources = seed_sources(ev, *task, n);
    if (sources.empty()) continue;
    all.insert(all.end(), sources.begin(), sources.end());
    todo.emplace_back(task, std::move(sources));
  }
  if (todo.size() > 1) ev.precompile(all);
  for (const auto& [task, sources] : todo) {
    auto results = ev.evaluate(*task, sources);
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].passed()) pool.add(task->name, {results[i].hash, sources[i], results[i].reward}, 0);
  }
}

// Wall-clock split of one step (seconds), logged with the metrics.
// With rollout.overlap the next step's generation runs beside this step's compiles: generate
// is then that generation, compile the compile pool's own wall time, and compile_wait what the
// step still waited for it after generating; wall is the step's wall-clock time.
struct StepTimes {
  double prompts = 0, generate = 0, compile = 0, compile_wait = 0, time = 0, update = 0, wall = 0;
  int64_t tokens = 0;  // tokens generated within this step's wall time (the next step's too)
};

// Rows sampled a step ahead (rollout.overlap): the next step's prompts and completions, with
// π_old of every row under the policy that sampled them. Carried in checkpoints, so a resumed
// run trains on the same rows.
struct Pending {
  std::vector<PromptGroup> groups;
  std::vector<Rollout> rollouts;
  int64_t generated = 0;
};

}  // namespace

std::vector<TaskSpec> rl_stage_tasks(const JobConfig& job, const std::string& kind,
                                     const std::string& backend) {
  std::vector<TaskSpec> tasks;
  if (kind == "general_rl") {
    tasks = select_split(load_task_suite(job.data.general_tasks, backend), /*holdout=*/false);
  } else {
    // The training split of the grid (data.hgemm_heldout: held-out shapes are the lift's).
    tasks = hgemm_split_part(hgemm_grid(job.data.hgemm_grid), job.data.hgemm_heldout,
                             /*heldout=*/false);
  }
  if (tasks.empty())
    throw ConfigError(std::string(kind == "general_rl" ? "data.general_tasks" : "data.hgemm_grid") +
                      ": no training tasks");
  return tasks;
}

namespace {

// One RL stage between steps: the policy (with its bf16 sampling copy and the frozen reference),
// the optimizer, the evaluator, the tasks and exemplars, and the state a checkpoint carries.
class RlStage {
 public:
  explicit RlStage(StageContext& ctx);
  bool done() const { return state_.step >= stage_.steps; }
  const fs::path& last_checkpoint() const { return last_checkpoint_; }
  void finish() {
    progress_.update(state_.step);
    progress_.finish();
  }

  // One step, top to bottom (issue 14):
  //   pick prompts → sample groups → score → advantages → update → metrics / checkpoint.
  //   With rollout.overlap = 1 the step's rows were sampled during the previous step, and this
  //   step samples the next one's while its own candidates compile (score_overlapped).
  void step() {
    StepTimes t;
    const auto step_start = Clock::now();
    const uint64_t seed = step_seed(state_.step);
    auto clock = Clock::now();
    std::vector<PromptGroup> groups;
    std::vector<Rollout> rollouts;
    int64_t generated = 0, inherited = 0;
    if (pending_) {  // sampled a step ahead, by the policy before the last update
      groups = std::move(pending_->groups);
      rollouts = std::move(pending_->rollouts);
      generated = inherited = pending_->generated;
      pending_.reset();
    } else {
      groups = pick_prompts(seed, 0, prompts_per_step(), state_.step);
      t.prompts = lap(clock);
      rollouts = sample(groups, seed, &generated, state_.step);
      t.generate = lap(clock);
    }
    std::vector<Scored> scored = ro_.overlap && state_.step + 1 < stage_.steps
                                     ? score_overlapped(groups, rollouts, &t)
                                     : score(groups, rollouts, &t);
    const int64_t rounds = resample_flat_groups(seed, &groups, &rollouts, &scored, &t, &generated);
    refine(seed, &groups, &rollouts, &scored, &t, &generated);
    clock = Clock::now();
    std::vector<double> smoothed;
    GroupAdvantages adv = advantages(groups, rollouts, scored, &smoothed);
    const double lr = scheduled_lr(stage_.optimizer, state_.step, stage_.steps);
    GrpoUpdateStats upd = update(groups, rollouts, adv, lr);
    t.update = lap(clock);
    t.wall = since(step_start);
    t.tokens += generated - inherited;
    ++state_.step;
    log(rollouts, scored, smoothed, adv, upd, lr, t, rounds);
    checkpoint_if_due();
  }

 private:
  static double lap(Clock::time_point& t0) {
    const double s = since(t0);
    t0 = Clock::now();
    return s;
  }
  uint64_t step_seed(int64_t step) const {
    return mix(static_cast<uint64_t>(job_.run.seed), mix(std::hash<std::string>{}(stage_.name), step));
  }

  // 1. `count` tasks, each with exemplars. Round 0 walks a fresh seeded permutation per pass over
  //    the tasks; the resampling rounds of dynamic sampling draw tasks from the step's seed.
  std::vector<PromptGroup> pick_prompts(uint64_t seed, int64_t round, int64_t count, int64_t step) {
    const int64_t B = prompts_per_step();
    const int64_t n = static_cast<int64_t>(tasks_.size());
    std::mt19937_64 extra(mix(seed, 0x5eed + round));
    std::vector<const TaskSpec*> picked;
    for (int64_t j = 0; j < count; ++j) {
      const int64_t g = step * B + j;
      std::vector<int64_t> perm(n);
      for (int64_t i = 0; i < n; ++i) perm[i] = i;
      std::mt19937_64 prng(mix(static_cast<uint64_t>(job_.run.seed), g / n));
      std::shuffle(perm.begin(), perm.end(), prng);
      picked.push_back(round == 0 ? &tasks_[perm[g % n]] : &tasks_[extra() % n]);
    }
    if (dist::is_main()) seed_pools(*exemplars_, *evaluator_, picked, ro_.seed_exemplars);
    if (dist::group()) dist::group()->barrier();  // the pool's one writer is rank 0
    std::vector<PromptGroup> groups;
    for (int64_t j = 0; j < count; ++j) {
      const TaskSpec& task = *picked[j];
      std::mt19937_64 erng(mix(seed, round * 100003 + j));
      PromptParts parts;
      parts.response_format = ro_.response_format;
      parts.backend = backend_;
      if (task_op(task).prompt_names_device) parts.device = ro_.prompt_device;
      parts.prompt_format = job_.model.prompt_format;
      parts.exemplars = sample_exemplars(exemplars_->pool(task.name, step), ro_.n_exemplars,
                                         ro_.n_buckets, ro_.exemplar_temperature, erng);
      groups.push_back(make_prompt_group(task, parts, tok_, shape_.max_seq_len,
                                         ro_.sampling.max_new_tokens));
    }
    return groups;
  }

  // 2. G completions per prompt; with rollout.demonstrations = d, the last d of each group are
  //    replaced by the task's best verified kernel written as a response (off-policy guidance:
  //    their π_old is the policy's own log-prob of those tokens, so the ratio starts at 1).
  std::vector<Rollout> sample(const std::vector<PromptGroup>& groups, uint64_t seed,
                              int64_t* generated, int64_t step) {
    model_->eval();
    std::vector<Rollout> rollouts = sample_groups_sharded(sampler_, tok_, groups, ro_.group_size, ro_.sampling,
                                                          ro_.response_format, seed, generated);
    if (ro_.demonstrations <= 0) return rollouts;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      auto best = exemplars_->pool(groups[gi].task.name, step, 1);
      if (best.empty()) continue;
      const std::string text = "\n" + best[0].source + kEndMarker;
      std::vector<int64_t> ids = tok_.encode(text);
      const int64_t room = shape_.max_seq_len - static_cast<int64_t>(groups[gi].prompt_ids.size());
      if (static_cast<int64_t>(ids.size()) > room) continue;  // does not fit: sampled rows stay
      int64_t replaced = 0;
      for (size_t r = rollouts.size(); r-- > 0 && replaced < ro_.demonstrations;) {
        if (rollouts[r].group != gi) continue;
        Rollout& d = rollouts[r];
        d.completion = ids;
        d.sample_logprobs.clear();
        d.text = text;
        d.finish_reason = "demonstration";
        d.parsed = parse_response(text, ro_.response_format);
        ++replaced;
      }
    }
    return rollouts;
  }

  // 3. Every candidate of the step in one batch across tasks: all compiles in parallel, then
  //    the timing (stored results of identical sources are reused when rollout.reuse_evaluations).
  std::vector<Scored> score(const std::vector<PromptGroup>& groups, std::vector<Rollout>& rollouts,
                            StepTimes* t) {
    ScoreBatch b = to_evaluate(groups, rollouts);
    auto clock = Clock::now();
    if (!b.sources.empty()) evaluator_->precompile(b.sources);
    t->compile = lap(clock);
    return finish_scores(groups, rollouts, std::move(b), t);
  }

  // 3'. rollout.overlap: the same, with the next step's prompts picked and its rows sampled (and
  //     their π_old taken under this policy) while this step's candidates compile; the timing
  //     starts once generation is done, so it never shares the GPU with the policy.
  std::vector<Scored> score_overlapped(const std::vector<PromptGroup>& groups,
                                       std::vector<Rollout>& rollouts, StepTimes* t) {
    ScoreBatch b = to_evaluate(groups, rollouts);
    const int64_t next = state_.step + 1;
    auto clock = Clock::now();
    Pending ahead;  // prompts first: seeding a new task's exemplar pool evaluates family variants
    ahead.groups = pick_prompts(step_seed(next), 0, prompts_per_step(), next);
    t->prompts += lap(clock);
    std::future<double> compiled = std::async(std::launch::async, [this, &b] {
      auto c0 = Clock::now();
      if (!b.sources.empty()) evaluator_->precompile(b.sources);
      return since(c0);
    });
    try {
      ahead.rollouts = sample(ahead.groups, step_seed(next), &ahead.generated, next);
      set_policy_logprobs(ahead.groups, &ahead.rollouts);
    } catch (...) {
      compiled.wait();
      throw;
    }
    t->generate += lap(clock);
    t->tokens += ahead.generated;
    t->compile = compiled.get();
    t->compile_wait = lap(clock);
    pending_ = std::move(ahead);
    return finish_scores(groups, rollouts, std::move(b), t);
  }

  // The step's rows split into those with nothing to evaluate (no code: failed_reward; a stored
  // result of the same source) and the sources the evaluator still has to compile and time.
  struct ScoreBatch {
    std::vector<Scored> out;
    std::vector<EvalItem> fresh;
    std::vector<size_t> fresh_index;
    std::vector<std::string> sources;
  };
  ScoreBatch to_evaluate(const std::vector<PromptGroup>& groups, const std::vector<Rollout>& rollouts) {
    ScoreBatch b;
    b.out.resize(rollouts.size());
    const GroupRange mine = my_groups(groups.size());  // all of them in one process
    for (size_t i = 0; i < rollouts.size(); ++i) {
      const ParsedResponse& p = rollouts[i].parsed;
      const TaskSpec& task = groups[rollouts[i].group].task;
      b.out[i].reward = job_.reward.failed_reward;
      if (!p.ok) continue;
      b.out[i].parsed = true;
      if (!mine.contains(rollouts[i].group)) continue;  // another rank's: its result is gathered
      if (ro_.reuse_evaluations)
        if (auto hit = evaluator_->cached_result(task, p.code)) {
          b.out[i].result = *hit;
          continue;
        }
      b.fresh.push_back({task, p.code});
      b.fresh_index.push_back(i);
      b.sources.push_back(p.code);
    }
    return b;
  }

  // Times the compiled batch, then rewards, exemplars and best speedups.
  std::vector<Scored> finish_scores(const std::vector<PromptGroup>& groups,
                                    const std::vector<Rollout>& rollouts, ScoreBatch b, StepTimes* t) {
    auto clock = Clock::now();
    auto results = evaluator_->evaluate_batch(b.fresh);
    t->time = lap(clock);
    std::vector<Scored>& out = b.out;
    for (size_t j = 0; j < results.size(); ++j) out[b.fresh_index[j]].result = std::move(results[j]);
    if (dist::group()) {  // every rank's results: each rank holds the whole step from here on
      const GroupRange mine = my_groups(groups.size());
      std::vector<std::pair<size_t, EvalResult>> own;
      for (size_t i = 0; i < rollouts.size(); ++i)
        if (out[i].parsed && mine.contains(rollouts[i].group)) own.emplace_back(i, out[i].result);
      for (auto& [i, r] : gather_results(own)) out[i].result = std::move(r);
    }
    for (size_t i = 0; i < rollouts.size(); ++i) {
      Scored& s = out[i];
      if (!s.parsed) continue;
      const EvalResult& r = s.result;
      s.reward = r.reward;
      s.passed = r.passed();
      s.compiled = r.status != EvalStatus::screen_rejected &&
                   r.status != EvalStatus::compile_error && r.status != EvalStatus::compile_timeout;
      s.speedup = r.speedup;
      if (!s.passed) continue;
      const std::string& task = groups[rollouts[i].group].task.name;
      if (dist::is_main()) exemplars_->add(task, {r.hash, rollouts[i].parsed.code, r.reward}, state_.step + 1);
      if (std::isfinite(s.speedup)) best_speedup_[task] = std::max(best_speedup_[task], s.speedup);
    }
    return std::move(out);
  }

  // π_old of rows sampled a step ahead: their completion tokens' log-probs under the current
  // policy, through the update's own forward path (so without a policy change the ratio is 1).
  void set_policy_logprobs(const std::vector<PromptGroup>& groups, std::vector<Rollout>* rollouts) {
    if (rollouts->empty()) return;
    model_->train();  // the mode update() takes π_old in (LoRA dropout included)
    RlBatch batch = make_rl_batch(groups, *rollouts, tok_.pad_id());
    torch::Tensor lp = rl_logprobs(model_, batch, stage_.batch_size);
    for (size_t i = 0; i < rollouts->size(); ++i) {
      torch::Tensor row = lp[static_cast<int64_t>(i)].masked_select(
          batch.target_mask[static_cast<int64_t>(i)] > 0).contiguous();
      (*rollouts)[i].policy_logprobs.assign(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
    }
  }

  // 3b. DAPO dynamic sampling (rollout.dynamic_sampling_rounds = R): while fewer than B groups
  //     have reward spread, up to R more rounds sample the missing number of prompts; then the
  //     step keeps B groups, those with spread first (a zero-spread group carries no gradient).
  //     Returns the extra rounds taken.
  int64_t resample_flat_groups(uint64_t seed, std::vector<PromptGroup>* groups,
                               std::vector<Rollout>* rollouts, std::vector<Scored>* scored,
                               StepTimes* t, int64_t* generated) {
    const int64_t B = prompts_per_step();
    auto spread = [&](size_t gi) {
      double lo = INFINITY, hi = -INFINITY;
      for (size_t i = 0; i < rollouts->size(); ++i)
        if ((*rollouts)[i].group == gi) lo = std::min(lo, (*scored)[i].reward), hi = std::max(hi, (*scored)[i].reward);
      return hi - lo > 1e-8;
    };
    auto with_spread = [&] {
      int64_t k = 0;
      for (size_t gi = 0; gi < groups->size(); ++gi) k += spread(gi);
      return k;
    };
    int64_t round = 0;
    for (int64_t have = with_spread(); round < ro_.dynamic_sampling_rounds && have < B; have = with_spread()) {
      ++round;
      auto clock = Clock::now();
      std::vector<PromptGroup> more = pick_prompts(mix(seed, round), round, B - have, state_.step);
      t->prompts += lap(clock);
      int64_t gen = 0;
      std::vector<Rollout> more_rollouts = sample(more, mix(seed, round), &gen, state_.step);
      *generated += gen;
      t->generate += lap(clock);
      append_scored(more, more_rollouts, groups, rollouts, scored, t);
    }
    if (static_cast<int64_t>(groups->size()) == B) return round;
    // Keep B groups: spread first, in sampling order; renumber their rollouts.
    std::vector<size_t> keep;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t gi = 0; gi < groups->size() && static_cast<int64_t>(keep.size()) < B; ++gi)
        if (spread(gi) == (pass == 0)) keep.push_back(gi);
    std::sort(keep.begin(), keep.end());
    std::vector<PromptGroup> g2;
    std::vector<Rollout> r2;
    std::vector<Scored> s2;
    for (size_t k = 0; k < keep.size(); ++k) {
      g2.push_back((*groups)[keep[k]]);
      for (size_t i = 0; i < rollouts->size(); ++i)
        if ((*rollouts)[i].group == keep[k]) {
          r2.push_back((*rollouts)[i]);
          r2.back().group = k;
          s2.push_back((*scored)[i]);
        }
    }
    *groups = std::move(g2);
    *rollouts = std::move(r2);
    *scored = std::move(s2);
    return round;
  }

  // 3c. Multi-turn refinement (rollout.turns = T > 1): turn k+1 of each trajectory is sampled
  //     from a prompt holding the task, the trajectory's turn-k code and the evaluator's verdict
  //     (no exemplars), one completion per trajectory, then scored like turn 1. Rows are
  //     appended turn by turn in the same trajectory order, so consecutive runs of G rows are
  //     one (prompt, turn) group.
  void refine(uint64_t seed, std::vector<PromptGroup>* groups, std::vector<Rollout>* rollouts,
              std::vector<Scored>* scored, StepTimes* t, int64_t* generated) {
    const size_t R = rollouts->size();  // rows of turn 1
    for (int64_t turn = 1; turn < ro_.turns; ++turn) {
      auto clock = Clock::now();
      std::vector<PromptGroup> tg;
      for (size_t j = 0; j < R; ++j) {
        const size_t prev = static_cast<size_t>(turn - 1) * R + j;
        const Rollout& r = (*rollouts)[prev];
        tg.push_back(revision_prompt((*groups)[r.group].task, r, (*scored)[prev]));
      }
      t->prompts += lap(clock);
      int64_t gen = 0;
      std::vector<Rollout> tr = sample_groups_sharded(sampler_, tok_, tg, 1, ro_.sampling, ro_.response_format,
                                                      mix(seed, 0x7000 + turn), &gen);
      *generated += gen;
      t->generate += lap(clock);
      append_scored(tg, tr, groups, rollouts, scored, t);
    }
  }

  // Scores rows sampled after the step's first batch and appends prompts, rows and scores to
  // the step's (the rows' group indices moved past the step's groups).
  void append_scored(const std::vector<PromptGroup>& more_groups, std::vector<Rollout>& more,
                     std::vector<PromptGroup>* groups, std::vector<Rollout>* rollouts,
                     std::vector<Scored>* scored, StepTimes* t) {
    StepTimes st;
    std::vector<Scored> s = score(more_groups, more, &st);
    t->compile += st.compile;
    t->time += st.time;
    for (auto& r : more) r.group += groups->size();
    groups->insert(groups->end(), more_groups.begin(), more_groups.end());
    rollouts->insert(rollouts->end(), more.begin(), more.end());
    scored->insert(scored->end(), s.begin(), s.end());
  }

  // The prompt of a revision: the task, the previous code (cut until it fits the context) and
  // the verdict.
  PromptGroup revision_prompt(const TaskSpec& task, const Rollout& previous, const Scored& verdict) {
    PromptParts parts;
    parts.response_format = ro_.response_format;
    parts.backend = backend_;
    parts.prompt_format = job_.model.prompt_format;
    parts.previous_code = previous.parsed.ok ? previous.parsed.code : previous.text;
    parts.previous_verdict = verdict_of(verdict);
    for (int cut = 0;; ++cut) {
      try {
        return make_prompt_group(task, parts, tok_, shape_.max_seq_len, ro_.sampling.max_new_tokens);
      } catch (const UserError&) {
        if (parts.previous_code.empty() || cut >= 6) throw;
        parts.previous_code = parts.previous_code.substr(0, parts.previous_code.size() / 2) +
                              "\n... (cut to fit the context)";
        if (cut == 5) parts.previous_code.clear();
      }
    }
  }

  // What the evaluator said, in one or two lines for the policy.
  static std::string verdict_of(const Scored& s) {
    if (!s.parsed) return "no code was found in your response (format failure)";
    const EvalResult& r = s.result;
    char buf[256];
    if (s.passed) {
      std::snprintf(buf, sizeof buf, "correct; %.2f us on the device against %.2f us for %s (speedup %.3f)",
                    r.cand.median_us, r.t_ref_us, r.reference.c_str(), r.speedup);
      return buf;
    }
    std::string why = std::string(status_name(r.status)) + (r.check.empty() ? "" : "/" + r.check) + ": " +
                      (r.status == EvalStatus::compile_error && !r.compile_log.empty() ? r.compile_log : r.reason);
    if (why.size() > 600) why = why.substr(0, 600) + " ...";
    return why;
  }

  // 4. Rewards (clipped once by the reward formula) + DAPO's overlong punishment of sampled
  //    completions → winsorized per task against the windows before this step →
  //    group-normalized advantages; with overlong_filter, truncated completions leave the loss.
  GroupAdvantages advantages(const std::vector<PromptGroup>& groups,
                             const std::vector<Rollout>& rollouts, const std::vector<Scored>& scored,
                             std::vector<double>* smoothed) {
    std::vector<std::string> task_of;
    std::vector<double> raw;
    for (size_t i = 0; i < scored.size(); ++i) {
      task_of.push_back(groups[rollouts[i].group].task.name);
      const bool sampled = rollouts[i].finish_reason != "demonstration";
      raw.push_back(scored[i].reward +
                    (sampled ? overlong_penalty(static_cast<int64_t>(rollouts[i].completion.size()),
                                                ro_.sampling.max_new_tokens, grpo_.overlong_buffer)
                             : 0.0));
    }
    *smoothed = smoother_.apply_step(task_of, raw);
    const std::vector<double> ret = turn_returns(*smoothed, ro_.turns, ro_.turn_discount);
    GroupAdvantages adv = group_advantages(torch::tensor(ret, torch::dtype(torch::kFloat64)).to(torch::kFloat32),
                                           ro_.group_size, grpo_.advantage_norm, grpo_.adv_eps);
    if (grpo_.overlong_filter)
      for (size_t i = 0; i < rollouts.size(); ++i)
        if (rollouts[i].finish_reason == "length") adv.valid[static_cast<int64_t>(i)] = false;
    return adv;
  }

  // 5. μ clipped updates on prompt + completion rows (trainer/grpo_step.h); π_old from the same
  //    forward path as the update, so the first pass's ratio is exactly 1 — except for rows
  //    sampled a step ahead (rollout.overlap), whose π_old is the sampling policy's, taken when
  //    they were sampled: their ratio is π_θ/π_θ_old of one update, as in asynchronous trainers.
  GrpoUpdateStats update(const std::vector<PromptGroup>& groups, const std::vector<Rollout>& rollouts,
                         const GroupAdvantages& adv, double lr) {
    model_->train();
    set_lr(*optimizer_, lr);
    RlBatch batch = make_rl_batch(groups, rollouts, tok_.pad_id());
    const UpdateShard shard{dist::rank(), dist::world_size()};  // micro-batch k is rank k mod W's
    torch::Tensor logp_old = rl_logprobs(model_, batch, stage_.batch_size, shard);
    for (size_t i = 0; i < rollouts.size(); ++i) {
      const auto& lp = rollouts[i].policy_logprobs;
      if (lp.empty()) continue;
      torch::Tensor row = logp_old[static_cast<int64_t>(i)];
      torch::Tensor at = batch.target_mask[static_cast<int64_t>(i)] > 0;
      if (at.sum().item<int64_t>() != static_cast<int64_t>(lp.size()))
        throw std::logic_error("a row sampled a step ahead lost its log-probs' alignment");
      row.masked_scatter_(at, torch::tensor(lp, torch::kFloat32));
    }
    torch::Tensor logp_ref = reference_ ? rl_logprobs(reference_, batch, stage_.batch_size, shard) : torch::Tensor();
    if (lora_ && grpo_.kl_coef > 0) {  // LoRA: the KL reference is the base, adapters off
      LoraOff base(model_);
      logp_ref = rl_logprobs(model_, batch, stage_.batch_size, shard);
    }
    GrpoUpdateStats upd = grpo_update(model_, *optimizer_, batch, adv.advantages, adv.valid, logp_old,
                                      logp_ref, grpo_, stage_.batch_size, stage_.optimizer.grad_clip,
                                      /*fused_adamw=*/true, grad_sync_.get(), shard);
    if (!upd.passes.empty()) refresh_sampler();
    return upd;
  }

  // 6. Metrics (JSONL + TensorBoard) and the progress line. loss, clip_fraction, kl, entropy,
  //    ratio_mean and grad_norm are pass 0's (on-policy); *_last the last pass's when μ > 1.
  void log(const std::vector<Rollout>& rollouts, const std::vector<Scored>& scored,
           const std::vector<double>& smoothed, const GroupAdvantages& adv,
           const GrpoUpdateStats& upd, double lr, const StepTimes& t,
           int64_t resample_rounds) {
    auto rate = [&](auto pred) {
      double n = 0;
      for (const auto& s : scored) n += pred(s);
      return n / static_cast<double>(scored.size());
    };
    double mean = 0, mean_s = 0, max = -INFINITY, completion_len = 0, demos = 0;
    for (size_t i = 0; i < scored.size(); ++i) {
      mean += scored[i].reward / scored.size();
      mean_s += smoothed[i] / scored.size();
      max = std::max(max, scored[i].reward);
    }
    double var = 0;
    for (const auto& s : scored) var += (s.reward - mean) * (s.reward - mean);
    for (const auto& r : rollouts) {
      completion_len += static_cast<double>(r.completion.size()) / rollouts.size();
      demos += r.finish_reason == "demonstration";
    }
    // The policy's own rows (demonstrations are the best verified kernel and always pass):
    // what a reader asks of learning is whether these rise.
    double sampled = 0, sampled_ok = 0, sampled_compiled = 0, sampled_reward = 0;
    for (size_t i = 0; i < scored.size(); ++i) {
      if (rollouts[i].finish_reason == "demonstration") continue;
      ++sampled;
      sampled_ok += scored[i].passed;
      sampled_compiled += scored[i].compiled;
      sampled_reward += scored[i].reward;
    }
    auto per_sampled = [&](double x) { return sampled > 0 ? x / sampled : 0.0; };
    double best_overall = 0;
    for (const auto& [task, s] : best_speedup_) best_overall = std::max(best_overall, s);
    const GrpoPassStats first = upd.passes.empty() ? GrpoPassStats{} : upd.passes.front();
    const GrpoPassStats last = upd.passes.empty() ? GrpoPassStats{} : upd.passes.back();
    const double step_s = t.wall;
    nlohmann::json rec = {
        {"stage", stage_.name},
        {"reward_mean", mean},
        {"reward_std", scored.size() > 1 ? std::sqrt(var / (scored.size() - 1)) : 0.0},
        {"reward_max", max},
        {"reward_smoothed_mean", mean_s},
        {"format_ok_rate", rate([](const Scored& s) { return s.parsed; })},
        {"compiled_rate", rate([](const Scored& s) { return s.compiled; })},
        {"correct_rate", rate([](const Scored& s) { return s.passed; })},
        {"faster_rate", rate([](const Scored& s) { return s.passed && s.speedup > 1.0; })},
        {"sampled_compiled_rate", per_sampled(sampled_compiled)},
        {"sampled_correct_rate", per_sampled(sampled_ok)},
        {"sampled_reward_mean", per_sampled(sampled_reward)},
        {"best_speedup", best_overall},
        {"zero_spread_frac", static_cast<double>(adv.zero_spread_groups) /
                                 static_cast<double>(scored.size() / ro_.group_size)},
        {"loss", first.loss},
        {"kl", first.kl},
        {"clip_fraction", first.clip_fraction},
        {"entropy", first.entropy},
        {"ratio_mean", first.ratio_mean},
        {"grad_norm", first.grad_norm},
        {"loss_last", last.loss},
        {"grad_norm_last", last.grad_norm},
        {"updates", static_cast<int64_t>(upd.passes.size())},
        {"update_tokens", upd.tokens},
        {"demonstrations", demos},
        {"resample_rounds", resample_rounds},
        {"lr", lr},
        {"completion_len", completion_len},
        {"prompts_s", t.prompts},
        {"generate_s", t.generate},
        {"compile_s", t.compile},
        {"compile_wait_s", t.compile_wait},
        {"time_s", t.time},
        {"evaluate_s", t.compile + t.time},
        {"overlap", ro_.overlap},
        {"update_s", t.update},
        {"step_s", step_s},
        {"tokens_per_s", t.generate > 0 ? static_cast<double>(t.tokens) / t.generate : 0.0},
        {"candidates", static_cast<int64_t>(scored.size())},
        {"advantages", advantages_of(adv)}};
    if (ro_.turns > 1) {  // per turn: correct rate and mean reward
      const size_t n = scored.size() / static_cast<size_t>(ro_.turns);
      for (int64_t k = 0; k < ro_.turns; ++k) {
        double ok = 0, r = 0;
        for (size_t j = k * n; j < (k + 1) * n; ++j) ok += scored[j].passed, r += scored[j].reward;
        rec["turn" + std::to_string(k + 1) + "_correct_rate"] = ok / n;
        rec["turn" + std::to_string(k + 1) + "_reward_mean"] = r / n;
      }
    }
    ctx_.metrics.write(state_.step, rec);
    for (const auto& [k, v] : rec.items())
      if (v.is_number()) tb_.scalar(stage_.name + "/" + k, v.get<double>(), state_.step);
    tb_.flush();
    char status[160];
    if (demos > 0)
      std::snprintf(status, sizeof status, "reward %.3f correct %.0f%% (sampled %.0f%%) best %.2fx",
                    mean, 100 * rec["correct_rate"].get<double>(), 100 * per_sampled(sampled_ok),
                    best_overall);
    else
      std::snprintf(status, sizeof status, "reward %.3f correct %.0f%% best %.2fx", mean,
                    100 * rec["correct_rate"].get<double>(), best_overall);
    progress_.update(state_.step, status);
  }

  void checkpoint_if_due() {
    if ((stage_.checkpoint_every > 0 && state_.step % stage_.checkpoint_every == 0) ||
        state_.step == stage_.steps) {
      state_.extra = {{"smoother", smoother_.state()}, {"best_speedup", best_speedup_}};
      if (pending_) state_.extra["pending"] = pending_json(*pending_);
      check_parameters("at step " + std::to_string(state_.step));
      if (dist::is_main())  // the run directory's one writer; the others wait for it below
        last_checkpoint_ = save_stage_checkpoint(ctx_.run_dir.checkpoints_dir(), stage_.name, model_,
                                                 shape_, tokenizer_path_, *optimizer_, state_,
                                                 job_.trainer.keep_checkpoints);
      else
        last_checkpoint_ = ctx_.run_dir.checkpoints_dir() / stage_.name / ("step_" + std::to_string(state_.step));
      if (dist::group()) dist::group()->barrier();
    }
    crash_here_if_asked(stage_.name, state_.step);
  }

  // Pending rows in a checkpoint: tasks by name, prompt and completion ids, texts and π_old.
  static nlohmann::json pending_json(const Pending& p) {
    nlohmann::json j = {{"generated", p.generated}, {"groups", nlohmann::json::array()},
                        {"rollouts", nlohmann::json::array()}};
    for (const auto& g : p.groups)
      j["groups"].push_back({{"task", g.task.name}, {"prompt", g.prompt}, {"prompt_ids", g.prompt_ids},
                             {"exemplars_used", g.exemplars_used}});
    for (const auto& r : p.rollouts)
      j["rollouts"].push_back({{"group", r.group}, {"completion", r.completion}, {"text", r.text},
                               {"finish_reason", r.finish_reason},
                               {"policy_logprobs", r.policy_logprobs}});
    return j;
  }
  Pending pending_from(const nlohmann::json& j) const {
    Pending p;
    p.generated = j.at("generated").get<int64_t>();
    for (const auto& g : j.at("groups")) {
      const std::string name = g.at("task").get<std::string>();
      auto it = std::find_if(tasks_.begin(), tasks_.end(), [&](const TaskSpec& t) { return t.name == name; });
      if (it == tasks_.end())
        throw UserError("checkpoint: rows sampled ahead are for task '" + name +
                        "', which this stage no longer has");
      p.groups.push_back(
          {*it, g.at("prompt").get<std::string>(), g.at("prompt_ids").get<std::vector<int64_t>>(),
           g.at("exemplars_used").get<int64_t>(), turn_end(job_.model.prompt_format)});
    }
    for (const auto& r : j.at("rollouts")) {
      Rollout x;
      x.group = r.at("group").get<size_t>();
      x.completion = r.at("completion").get<std::vector<int64_t>>();
      x.text = r.at("text").get<std::string>();
      x.finish_reason = r.at("finish_reason").get<std::string>();
      x.policy_logprobs = r.at("policy_logprobs").get<std::vector<float>>();
      x.parsed = parse_response(x.text, ro_.response_format);
      p.rollouts.push_back(std::move(x));
    }
    return p;
  }

  int64_t prompts_per_step() const {
    return std::min<int64_t>(ro_.prompts_per_step, static_cast<int64_t>(tasks_.size()));
  }
  // Per row, for the metrics (and the data-parallel test: the same on any number of ranks).
  static std::vector<double> advantages_of(const GroupAdvantages& adv) {
    const torch::Tensor a = adv.advantages.to(torch::kCPU, torch::kFloat64).contiguous();
    return std::vector<double>(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
  }
  // Data parallel: every rank's policy must be the same (a hash compared across ranks).
  void check_parameters(const std::string& when) {
    if (dist::group()) dist::group()->check_same("parameters " + when, dist::tensors_hash(model_->parameters()));
  }
  void refresh_sampler() {  // the bf16 sampling copy follows the policy after every update
    if (sampler_.ptr() == model_.ptr()) return;  // CPU, or LoRA: no copy
    torch::NoGradGuard ng;
    auto src = model_->named_parameters();
    for (auto& p : sampler_->named_parameters()) p.value().copy_(src[p.key()]);
  }

  StageContext& ctx_;
  const StageConfig& stage_;
  const JobConfig& job_;
  const GrpoConfig& grpo_;
  const RolloutConfig& ro_;
  torch::Device device_;
  bool cuda_;
  fs::path resume_dir_;  // empty: a fresh start from ctx.init_checkpoint
  Checkpoint start_;     // what the stage starts from (resume_dir_ or the init checkpoint)
  fs::path tokenizer_path_;
  Tokenizer tok_;
  LlamaModel model_{nullptr}, sampler_{nullptr}, reference_{nullptr};
  bool lora_ = false;  // adapters over a frozen base: one copy samples, trains and is the reference
  ModelShape shape_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  TrainState state_;
  RewardSmoother smoother_;
  std::map<std::string, double> best_speedup_;
  fs::path last_checkpoint_;
  std::unique_ptr<Evaluator> evaluator_;
  std::string backend_;
  std::vector<TaskSpec> tasks_;
  std::unique_ptr<ExemplarStore> exemplars_;
  std::unique_ptr<GradSync> grad_sync_;  // data parallel: the update's gradient all-reduce
  std::optional<Pending> pending_;  // rollout.overlap: the next step's rows, sampled ahead
  TensorBoardWriter tb_;
  Progress progress_;
};

fs::path resume_dir_of(StageContext& ctx) {
  auto d = ctx.resume ? latest_stage_checkpoint(ctx.run_dir.checkpoints_dir(), ctx.stage.name)
                      : std::nullopt;
  if (ctx.init_checkpoint.empty() && !d)
    throw UserError("stage \"" + ctx.stage.name + "\" (" + ctx.stage.kind +
                    ") starts from a policy checkpoint: set model.hf_path to a pretrained "
                    "checkpoint, put a pretrain stage before it in trainer.stages, or run that "
                    "stage first in this run directory");
  return d ? *d : fs::path();
}

// The policy's dtype as loaded: fp32 master weights, except a LoRA base on CUDA, frozen in
// bf16 (its fp32 adapters are the only master weights; model/checkpoint.h).
torch::Dtype policy_dtype(const StageContext& ctx, const torch::Device& device) {
  return ctx.job.model.lora.rank > 0 && device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
}

Tokenizer tokenizer_of(const Checkpoint& c, fs::path* path) {
  if (!c.tokenizer_path) throw UserError("checkpoint '" + c.dir.string() + "' carries no tokenizer.model");
  *path = *c.tokenizer_path;
  return Tokenizer::load(*path);
}

RlStage::RlStage(StageContext& ctx)
    : ctx_(ctx),
      stage_(ctx.stage),
      job_(ctx.job),
      grpo_(ctx.stage.grpo),
      ro_(ctx.job.rollout),
      device_(resolve_device(ctx.job.run.device)),
      cuda_(device_.is_cuda()),
      resume_dir_(resume_dir_of(ctx)),
      start_(load_checkpoint(resume_dir_.empty() ? ctx.init_checkpoint : resume_dir_, device_,
                             policy_dtype(ctx, device_))),
      tok_(tokenizer_of(start_, &tokenizer_path_)),
      smoother_(ctx.stage.grpo),
      tb_(dist::is_main() ? ctx.run_dir.root() / "tensorboard" / ctx.stage.name : fs::path()),
      progress_(ctx.stage.kind + " " + ctx.stage.name, ctx.stage.steps) {
  // Policy, sampler, reference.
  const fs::path& init = ctx.init_checkpoint;
  model_ = start_.model;
  shape_ = model_->shape();
  model_->set_activation_checkpointing(job_.model.activation_checkpointing);
  if (job_.model.lora.rank > 0 && !model_->has_lora())  // the base stays where it was read
    add_lora_adapters(model_, job_.model.lora, static_cast<uint64_t>(job_.run.seed),
                      start_.dir.string());
  lora_ = model_->has_lora();
  if (grpo_.kl_coef > 0 && !lora_) {
    // The frozen reference is the stage's starting policy (the previous stage's result).
    reference_ = load_checkpoint(init.empty() ? start_.dir : init, device_, torch::kFloat32).model;
    reference_->eval();
    for (auto& p : reference_->parameters()) p.requires_grad_(false);
  }
  // Sampling on CUDA runs a bf16 copy refreshed after every update; on the CPU the policy itself.
  sampler_ = cuda_ && !lora_ ? load_checkpoint(start_.dir, device_, torch::kBFloat16).model : model_;
  optimizer_ = make_adamw(*model_, stage_.optimizer);
  if (!resume_dir_.empty()) {
    state_ = load_train_state(resume_dir_, *optimizer_);
    smoother_.load_state(state_.extra.value("smoother", nlohmann::json::object()));
    const nlohmann::json best = state_.extra.value("best_speedup", nlohmann::json::object());
    for (auto& [k, v] : best.items())  // (items() of a temporary would dangle)
      best_speedup_[k] = v.is_number() ? v.get<double>() : 0.0;  // JSON writes inf as null
    last_checkpoint_ = resume_dir_;
    KRL_LOG(info) << "resumed stage " << stage_.name << " at step " << state_.step;
  }
  const int64_t resumed_step = state_.step;
  const std::string stage_name = stage_.name;
  ctx.metrics.drop_if([&](const nlohmann::json& r) {
    return r.value("stage", "") == stage_name && r.value("step", int64_t{0}) > resumed_step;
  });
  if (done()) return;  // resumed after its last step: nothing to evaluate

  // Evaluator, tasks, exemplars. Data parallel: each rank's evaluator worker runs on the rank's
  // GPU; rank 0 creates the store's tables and is the exemplar pool's one writer.
  const fs::path store_path =
      job_.reward.store.empty() ? ctx.run_dir.root() / "results.sqlite" : fs::path(job_.reward.store);
  dist::Group* group = dist::group();
  if (group && !dist::is_main()) group->barrier();
  const int local_rank = group ? group->local_rank() : 0;
  evaluator_ = std::make_unique<Evaluator>(job_.reward, store_path,
                                           cuda_device_count() > local_rank ? local_rank : 0);
  backend_ = evaluator_->backend();
  tasks_ = rl_stage_tasks(job_, stage_.kind, backend_);
  exemplars_ = std::make_unique<ExemplarStore>(store_path, stage_.name);
  if (dist::is_main()) exemplars_->truncate_after(state_.step);
  if (group && dist::is_main()) group->barrier();
  if (group) {
    check_parameters("at the start of stage " + stage_.name);
    grad_sync_ = std::make_unique<GradSync>(*group, model_->parameters(), job_.run.dist.bucket_mb << 20);
  }
  if (state_.extra.contains("pending")) {
    if (!ro_.overlap) {
      KRL_LOG(warn) << "resuming with rollout.overlap: 0 from a checkpoint written with it on: "
                       "the rows sampled ahead are trained on first";
    }
    pending_ = pending_from(state_.extra.at("pending"));
  }
  KRL_LOG(info) << "stage " << stage_.name << ": " << tasks_.size() << " tasks on the " << backend_
                << " backend (" << evaluator_->device_name() << "), policy " << shape_.describe();
  if (backend_ == "host" && stage_.kind == "hgemm_rl") {
    KRL_LOG(warn) << "no GPU: HGEMM candidates are C++ kernels timed on the CPU (host backend); "
                     "CUDA kernels need a GPU";
  }
  if (job_.model.prompt_format != "raw" && ro_.response_format != "code")
    throw ConfigError("rollout.response_format: a chat model.prompt_format (" +
                      job_.model.prompt_format + ") asks for a fenced code block: use code");
  if (ro_.demonstrations > 0 && ro_.response_format != "code")
    throw ConfigError("rollout.demonstrations: needs rollout.response_format: code");
  if (ro_.turns > 1 && (ro_.demonstrations > 0 || ro_.dynamic_sampling_rounds > 0))
    throw ConfigError("rollout.turns: multi-turn refinement does not combine with "
                      "rollout.demonstrations or rollout.dynamic_sampling_rounds");
}

}  // namespace

std::filesystem::path run_grpo_stage(StageContext& ctx) {
  RlStage rl(ctx);
  while (!rl.done()) rl.step();
  rl.finish();
  return rl.last_checkpoint();
}

}  // namespace kernelrl
