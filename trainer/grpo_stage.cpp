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
#include "common/fs.h"
#include "common/hash.h"
#include "common/log.h"
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
#include "rollout/seed_grid.h"
#include "trainer/distributed.h"
#include "trainer/grad_sync.h"
#include "trainer/grpo.h"
#include "trainer/dynamic_sampling.h"
#include "trainer/grpo_step.h"
#include "trainer/multi_turn.h"
#include "trainer/rl_dist.h"
#include "trainer/rl_metrics.h"
#include "trainer/rl_pending.h"
#include "trainer/rl_scorer.h"
#include "trainer/stage_loop.h"
#include "trainer/step_batch.h"
#include "trainer/train_utils.h"

namespace kernelrl {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t mix(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b)); }

}  // namespace

std::vector<std::string> seed_sources(Evaluator& ev, const TaskSpec& task, int64_t n,
                                      const SeedGrid* grid) {
  if (grid && n > 0 && task.kind == TaskKind::hgemm && ev.backend() == "gpu") {
    std::vector<std::string> sources = grid->sources(task, n);
    if (!sources.empty()) {
      KRL_LOG(info) << task.name << ": " << sources.size() << " exemplar seeds, measured best at "
                    << grid->nearest_shape(task);
      return sources;
    }
  }
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

// Seeds the empty exemplar pools of `tasks` that `seeded` does not list yet, and lists them
// there (so a task is considered once per stage: one whose seeds all failed is not seeded again
// every step). `seeded` is the same on every rank (every rank calls with the same tasks in the
// same order), so the ranks agree on whether there is anything to do without a collective.
// A seed whose result the results store holds for this device and these settings (an earlier
// run, another stage, `kernelrl seed`) is taken from the store, not evaluated again. The rest
// compile first in one parallel batch, then each task's are evaluated (loaded from the compile
// cache): on a GPU, CUTLASS and wgmma variants compile for tens of seconds each, and one batch
// per task left most cores idle behind each task's slowest compile. Data parallel: every rank
// lists the same tasks to seed (the pools as the last barrier left them), evaluates its share
// [n·r/W, n·(r+1)/W) of that list on its own evaluator, and the results are gathered to rank 0, the
// pools' one writer, which adds them in the single-process order (task, then seed). The
// caller's barrier follows, so every rank then reads the seeded pools.
SeedStats seed_pools(ExemplarStore& pool, Evaluator& ev, const std::vector<const TaskSpec*>& tasks, int64_t n,
                     const SeedGrid* grid, std::set<std::string>& seeded) {
  SeedStats stats;
  const auto t0 = Clock::now();
  std::vector<const TaskSpec*> fresh;
  for (const TaskSpec* task : tasks)
    if (seeded.insert(task->name).second) fresh.push_back(task);
  if (n <= 0 || fresh.empty()) return stats;  // the same on every rank: no collective skipped
  // Every rank must list the same tasks: rank 0 may still be adding the last scoring's passing
  // candidates to the pools (after that scoring's gather, with no collective since, as between
  // DAPO's resampling rounds), and a task whose pool is empty on one rank and not on another
  // would make the lists, and the collective below, differ.
  if (dist::group()) dist::group()->barrier();
  std::vector<std::pair<const TaskSpec*, std::vector<std::string>>> todo;
  std::vector<size_t> first;  // todo[k]'s first seed in the list of every seed
  size_t seeds = 0;
  for (const TaskSpec* task : fresh) {
    if (pool.size(task->name) > 0) continue;  // stored: a resumed run, a shared store
    std::vector<std::string> sources = seed_sources(ev, *task, n, grid);
    if (sources.empty()) continue;
    first.push_back(seeds);
    seeds += sources.size();
    todo.emplace_back(task, std::move(sources));
  }
  if (todo.empty()) return stats;  // the same on every rank
  stats.tasks = static_cast<int64_t>(todo.size());
  const GroupRange mine = my_groups(todo.size());
  std::vector<std::pair<size_t, EvalResult>> own;
  std::vector<std::pair<size_t, std::vector<size_t>>> to_evaluate;  // (k, seeds of todo[k] not stored)
  std::vector<std::string> all;
  for (size_t k = mine.lo; k < mine.hi; ++k) {
    std::vector<size_t> missing;
    for (size_t i = 0; i < todo[k].second.size(); ++i) {
      if (auto hit = ev.cached_result(*todo[k].first, todo[k].second[i])) {
        own.emplace_back(first[k] + i, std::move(*hit));
        ++stats.stored;
      } else {
        missing.push_back(i);
        all.push_back(todo[k].second[i]);
      }
    }
    if (!missing.empty()) to_evaluate.emplace_back(k, std::move(missing));
  }
  if (to_evaluate.size() > 1) ev.precompile(all);
  for (const auto& [k, missing] : to_evaluate) {
    std::vector<std::string> sources;
    for (size_t i : missing) sources.push_back(todo[k].second[i]);
    auto results = ev.evaluate(*todo[k].first, sources);
    stats.evaluated += static_cast<int64_t>(results.size());
    for (size_t j = 0; j < results.size(); ++j) own.emplace_back(first[k] + missing[j], std::move(results[j]));
  }
  std::vector<std::pair<size_t, EvalResult>> every = gather_results(own);
  if (dist::group()) {  // every rank's counts, for the metrics (the same numbers on every rank)
    int64_t evaluated = 0, stored = 0;
    for (const std::string& b : dist::group()->all_gather_bytes(
             std::to_string(stats.evaluated) + " " + std::to_string(stats.stored))) {
      evaluated += std::stoll(b);
      stored += std::stoll(b.substr(b.find(' ') + 1));
    }
    stats.evaluated = evaluated;
    stats.stored = stored;
  }
  stats.seconds = since(t0);
  if (!dist::is_main()) return stats;
  std::sort(every.begin(), every.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [index, result] : every) {
    if (!result.passed()) continue;
    const size_t k = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), index) - first.begin()) - 1;
    pool.add(todo[k].first->name, {result.hash, todo[k].second[index - first[k]], result.reward}, 0);
  }
  return stats;
}

std::unique_ptr<SeedGrid> job_seed_grid(const JobConfig& job) {
  if (job.rollout.seed_grid.empty()) return nullptr;
  std::set<std::string> heldout;
  for (const auto& t : hgemm_split_part(hgemm_grid(job.data.hgemm_grid), job.data.hgemm_heldout, /*heldout=*/true))
    heldout.insert(hgemm_split_key(t));
  std::unique_ptr<SeedGrid> grid;
  try {
    grid = std::make_unique<SeedGrid>(job.rollout.seed_grid, heldout);
  } catch (const UserError& e) {
    throw ConfigError(std::string("rollout.seed_grid: ") + e.what());
  }
  return grid;
}

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

// One RL stage on the stage loop (trainer/stage_loop.h): the policy (with its bf16 sampling
// copy and the frozen reference), the optimizer, the evaluator and its scorer, the tasks and
// exemplars, and the state a checkpoint carries beside the loop's.
class RlStage final : public StageStep {
 public:
  RlStage(StageContext& ctx, const std::optional<fs::path>& resume);
  StagePolicy& policy() override { return policy_; }
  void start(const TrainState& state) override;
  nlohmann::json checkpoint_extra() override;

  // One step, top to bottom (issue 14):
  //   pick prompts → sample groups → score → [DAPO resampling] → [later turns] → advantages →
  //   update; the loop logs and checkpoints. With rollout.overlap = 1 the step's rows were
  //   sampled during the previous step, and this step samples the next one's while its own
  //   candidates compile (score_overlapped).
  StepLog train_step(int64_t step, GradSync* sync) override {
    step_ = step;
    sync_ = sync;
    in_step_seeding_ = SeedStats{};  // seeding here is a fallback (seed_ahead took every task)
    // The fixed probe before the first update (a resumed stage has it in step 1's row); its
    // time is its own, not the step's.
    const nlohmann::json probe_before = step == 0 && ro_.probe_samples > 0 ? probe() : nlohmann::json();
    const auto step_start = Clock::now();
    const uint64_t seed = step_seed(step);
    const bool sampled_ahead = pending_.has_value();
    StepBatch batch = sampled_ahead ? take_pending() : sample_prompts(seed, /*round=*/0, prompts_per_step());
    const int64_t inherited = sampled_ahead ? batch.generated : 0;  // the step before counted them
    if (ro_.overlap && step + 1 < stage_.steps)
      score_overlapped(batch);
    else
      scorer_->score(batch, step + 1);
    RlStepResult r;
    r.resample_rounds = resample_flat_groups(
        batch, prompts_per_step(), ro_.dynamic_sampling_rounds,
        [&](int64_t round, int64_t count) { return sample_scored(mix(seed, round), round, count); },
        [&](const StepBatch& b) { return smoother_.smooth(tasks_of(b), shaped_rewards(b)); });
    refine_turns(batch, ro_.turns, revision(), sample_turn(seed));
    const auto update_start = Clock::now();
    advantages(batch, r);
    r.lr = scheduled_lr(stage_.optimizer, step, stage_.steps);
    r.update = update(batch, r.advantages, r.lr);
    batch.times.update = since(update_start);
    batch.times.wall = since(step_start);
    batch.times.tokens += batch.generated - inherited;
    r.best_speedup = scorer_->best_speedup_overall();
    StepLog log = rl_step_log(batch, r, ro_);
    // Seeding inside this step (the critical path): 0 unless a task escaped seed_ahead.
    log.metrics["seed_s"] = in_step_seeding_.seconds;
    log.metrics["seed_evals"] = in_step_seeding_.evaluated;
    log.metrics["seed_tasks"] = in_step_seeding_.tasks;
    if (step == start_step_) {  // what seeding ahead took, before this step (not in step_s)
      log.metrics["seed_ahead_s"] = ahead_seeding_.seconds;
      log.metrics["seed_ahead_evals"] = ahead_seeding_.evaluated;
      log.metrics["seed_ahead_stored"] = ahead_seeding_.stored;
      log.metrics["seed_ahead_tasks"] = ahead_seeding_.tasks;
    }
    for (const auto& [k, v] : probe_before.items()) log.metrics["probe_before_" + k] = v;
    if (step + 1 == stage_.steps && ro_.probe_samples > 0) {  // ... and after the last
      const nlohmann::json after = probe();  // (items() of a temporary would dangle)
      for (const auto& [k, v] : after.items()) log.metrics["probe_after_" + k] = v;
    }
    return log;
  }

 private:
  uint64_t step_seed(int64_t step) const {
    return mix(static_cast<uint64_t>(job_.run.seed), mix(std::hash<std::string>{}(stage_.name), step));
  }
  int64_t prompts_per_step() const {
    return std::min<int64_t>(ro_.prompts_per_step, static_cast<int64_t>(tasks_.size()));
  }
  StepBatch take_pending() {  // sampled a step ahead, by the policy before the last update
    StepBatch b = std::move(*pending_);
    pending_.reset();
    return b;
  }

  // The task round 0 of step `step` picks as its j-th prompt: a fresh seeded permutation of the
  // tasks per pass over them (pick_prompts).
  const TaskSpec* round0_task(int64_t step, int64_t j) const {
    const int64_t n = static_cast<int64_t>(tasks_.size());
    const int64_t g = step * prompts_per_step() + j;
    std::vector<int64_t> perm(n);
    for (int64_t i = 0; i < n; ++i) perm[i] = i;
    std::mt19937_64 prng(mix(static_cast<uint64_t>(job_.run.seed), g / n));
    std::shuffle(perm.begin(), perm.end(), prng);
    return &tasks_[perm[g % n]];
  }

  // Seeds, before the stage's first step, the exemplar pools of every task its steps can show:
  // the tasks round 0 picks at steps [from, steps) (a pure function of the seed and the step),
  // or every task when the probe, DAPO resampling rounds (random tasks) or multi-turn revisions
  // can show others. Pools the store holds already (a resumed run, reward.store shared with an
  // earlier run, `kernelrl seed`) cost nothing; seeds the results store holds are reused.
  // In order: the first steps' tasks first (a log line per thousand seeds is enough).
  void seed_ahead(int64_t from) {
    std::vector<const TaskSpec*> tasks;
    std::set<std::string> listed;
    for (int64_t step = from; step < stage_.steps; ++step)
      for (int64_t j = 0; j < prompts_per_step(); ++j)
        if (const TaskSpec* t = round0_task(step, j); listed.insert(t->name).second) tasks.push_back(t);
    if (ro_.probe_samples > 0 || ro_.dynamic_sampling_rounds > 0)
      for (const TaskSpec& t : tasks_)
        if (listed.insert(t.name).second) tasks.push_back(&t);
    ahead_seeding_ = seed_pools(*exemplars_, *evaluator_, tasks, ro_.seed_exemplars, seed_grid_.get(), seeded_);
    if (dist::group()) dist::group()->barrier();  // rank 0's writes before anyone reads a pool
    KRL_LOG(info) << "exemplar pools seeded ahead: " << ahead_seeding_.tasks << " of " << tasks.size()
                  << " tasks needed seeds (" << ahead_seeding_.evaluated << " evaluated, " << ahead_seeding_.stored
                  << " from the results store, " << ahead_seeding_.seconds << " s)";
  }

  // 1. `count` tasks, each with exemplars. Round 0 walks a fresh seeded permutation per pass over
  //    the tasks; the resampling rounds of dynamic sampling draw tasks from the step's seed.
  std::vector<PromptGroup> pick_prompts(uint64_t seed, int64_t round, int64_t count, int64_t step) {
    const int64_t n = static_cast<int64_t>(tasks_.size());
    std::mt19937_64 extra(mix(seed, 0x5eed + round));
    std::vector<const TaskSpec*> picked;
    for (int64_t j = 0; j < count; ++j) picked.push_back(round == 0 ? round0_task(step, j) : &tasks_[extra() % n]);
    return prompt_groups(picked, step, [&](size_t j, const std::vector<Exemplar>& fitting) {
      std::mt19937_64 erng(mix(seed, round * 100003 + static_cast<int64_t>(j)));
      return sample_exemplars(fitting, ro_.n_exemplars, ro_.n_buckets, ro_.exemplar_temperature, erng);
    });
  }
  // One prompt group per task, its exemplars chosen by `choose(j, fitting)` from the entries of
  // its pool (as of `step`) that fit its prompt. The pools were seeded ahead (seed_ahead); a task
  // that escaped it (none should) is seeded here, counted in the step's seed_* metrics and
  // logged. Every rank waits for rank 0's writes before reading the pools.
  template <class Choose>
  std::vector<PromptGroup> prompt_groups(const std::vector<const TaskSpec*>& tasks, int64_t step, Choose choose) {
    const SeedStats late = seed_pools(*exemplars_, *evaluator_, tasks, ro_.seed_exemplars, seed_grid_.get(), seeded_);
    if (late.tasks > 0) {
      KRL_LOG(warn) << "seeded " << late.tasks << " task(s)' exemplar pools inside step " << step_ + 1 << " ("
                    << late.evaluated << " evaluations, " << late.seconds << " s): not seeded ahead";
      in_step_seeding_.tasks += late.tasks;
      in_step_seeding_.evaluated += late.evaluated;
      in_step_seeding_.stored += late.stored;
      in_step_seeding_.seconds += late.seconds;
    }
    if (dist::group()) dist::group()->barrier();
    std::vector<PromptGroup> groups;
    for (size_t j = 0; j < tasks.size(); ++j) {
      const TaskSpec& task = *tasks[j];
      PromptParts parts = prompt_parts();
      if (task_op(task).prompt_names_device) parts.device = ro_.prompt_device;
      parts.exemplars = choose(j, fit_->filter(task, parts, exemplars_->pool(task.name, step)));
      groups.push_back(make_prompt_group(task, parts, tok_, policy_.shape.max_seq_len,
                                         ro_.sampling.max_new_tokens));
    }
    return groups;
  }
  PromptParts prompt_parts() const {
    PromptParts parts;
    parts.response_format = ro_.response_format;
    parts.completion = ro_.completion;
    parts.backend = backend_;
    parts.prompt_format = job_.model.prompt_format;
    return parts;
  }

  // 2. G completions per prompt; with rollout.demonstrations = d, the last d of each group are
  //    replaced by the task's best verified kernel written as a response (off-policy guidance:
  //    their π_old is the policy's own log-prob of those tokens, so the ratio starts at 1).
  void sample_rows(StepBatch& b, uint64_t seed, int64_t step) {
    policy_.model->eval();
    b.rollouts = sample_groups_sharded(sampler_, tok_, b.groups, ro_.group_size, ro_.sampling,
                                       ro_.response_format, seed, &b.generated);
    if (ro_.demonstrations <= 0) return;
    for (size_t gi = 0; gi < b.groups.size(); ++gi) {
      auto best = exemplars_->pool(b.groups[gi].task.name, step, 1);
      if (best.empty()) continue;
      const std::string text = "\n" + best[0].source + kEndMarker;
      std::vector<int64_t> ids = tok_.encode(text);
      const int64_t room = policy_.shape.max_seq_len - static_cast<int64_t>(b.groups[gi].prompt_ids.size());
      if (static_cast<int64_t>(ids.size()) > room) continue;  // does not fit: sampled rows stay
      int64_t replaced = 0;
      for (size_t r = b.rollouts.size(); r-- > 0 && replaced < ro_.demonstrations;) {
        if (b.rollouts[r].group != gi) continue;
        Rollout& d = b.rollouts[r];
        d.completion = ids;
        d.sample_logprobs.clear();
        d.text = text;
        d.finish_reason = "demonstration";
        d.parsed = parse_response(text, ro_.response_format);
        ++replaced;
      }
    }
  }

  // The fixed probe (rollout.probe_samples): every training task's prompt, showing the first
  // n_exemplars of its seed exemplars (its pool as of step 0, which later steps do not change),
  // probe_samples completions each at one sampling seed, scored without joining the pool or the
  // best speedups. Taken before the first update and after the last on the same prompts and
  // seeds, so that the difference is the policy's and not the prompt draw's: with 2 prompts a
  // step the CPU quickstart's per-step correct rate swung 12-88 % with the draw (issue 25).
  nlohmann::json probe() {
    const auto start = Clock::now();
    std::vector<const TaskSpec*> all;
    for (const TaskSpec& task : tasks_) all.push_back(&task);
    StepBatch b;
    b.groups = prompt_groups(all, /*step=*/0, [&](size_t, std::vector<Exemplar> fitting) {
      if (static_cast<int64_t>(fitting.size()) > ro_.n_exemplars) fitting.resize(ro_.n_exemplars);
      return fitting;
    });
    policy_.model->eval();
    const uint64_t seed = mix(static_cast<uint64_t>(job_.run.seed), mix(std::hash<std::string>{}(stage_.name), 0x9b0be));
    b.rollouts = sample_groups_sharded(sampler_, tok_, b.groups, ro_.probe_samples, ro_.sampling,
                                       ro_.response_format, seed, &b.generated);
    scorer_->score(b, step_ + 1, /*record=*/false);
    nlohmann::json out = outcome_metrics(b.scored);
    out["rows"] = b.scored.size();
    out["seconds"] = since(start);
    KRL_LOG(info) << "probe (" << b.scored.size() << " rows, " << tasks_.size() << " tasks x "
                  << ro_.probe_samples << "): correct " << out["correct_rate"].get<double>() << ", compiled "
                  << out["compiled_rate"].get<double>();
    return out;
  }

  // 1 + 2 for `count` prompts of round `round` at this step, timed.
  StepBatch sample_prompts(uint64_t seed, int64_t round, int64_t count) {
    StepBatch b;
    auto clock = Clock::now();
    b.groups = pick_prompts(seed, round, count, step_);
    b.times.prompts = lap(clock);
    sample_rows(b, seed, step_);
    b.times.generate = lap(clock);
    return b;
  }
  // 1 + 2 + 3: the rows a DAPO resampling round adds.
  StepBatch sample_scored(uint64_t seed, int64_t round, int64_t count) {
    StepBatch b = sample_prompts(seed, round, count);
    scorer_->score(b, step_ + 1);
    return b;
  }

  // 3'. rollout.overlap: scoring (trainer/rl_scorer.h) with the next step's prompts picked and
  //     its rows sampled (and their π_old taken under this policy) while this step's candidates
  //     compile; the timing starts once generation is done, so it never shares the GPU with the
  //     policy.
  //     With evaluation GPUs apart from the policy's (reward.gpus), the timing runs beside the
  //     generation too: its workers' GPUs are not the policy's, so the policy's GPU keeps
  //     generating while they time; compile_wait is then what the step still waited for the
  //     compiles and the timing after generating.
  void score_overlapped(StepBatch& batch) {
    RlScorer::Plan plan = scorer_->plan(batch);
    const int64_t next = step_ + 1;
    auto clock = Clock::now();
    StepBatch ahead;  // prompts first: they read the pools (and would seed one that escaped seed_ahead)
    ahead.groups = pick_prompts(step_seed(next), 0, prompts_per_step(), next);
    batch.times.prompts += lap(clock);
    if (!eval_gpus_.empty()) {
      std::future<std::pair<double, RlScorer::Timed>> evaluated = std::async(std::launch::async, [this, &plan] {
        const double compile_s = scorer_->compile(plan);
        return std::make_pair(compile_s, scorer_->time(plan));
      });
      try {
        sample_rows(ahead, step_seed(next), next);
        set_policy_logprobs(ahead);
      } catch (...) {
        evaluated.wait();
        throw;
      }
      batch.times.generate += lap(clock);
      batch.times.tokens += ahead.generated;
      auto [compile_s, timed] = evaluated.get();
      batch.times.compile += compile_s;
      batch.times.compile_wait = lap(clock);
      pending_ = std::move(ahead);
      scorer_->finish_timed(batch, std::move(plan), std::move(timed), step_ + 1);
      return;
    }
    std::future<double> compiled =
        std::async(std::launch::async, [this, &plan] { return scorer_->compile(plan); });
    try {
      sample_rows(ahead, step_seed(next), next);
      set_policy_logprobs(ahead);
    } catch (...) {
      compiled.wait();
      throw;
    }
    batch.times.generate += lap(clock);
    batch.times.tokens += ahead.generated;
    batch.times.compile += compiled.get();
    batch.times.compile_wait = lap(clock);
    pending_ = std::move(ahead);
    scorer_->finish(batch, std::move(plan), step_ + 1);
  }

  // π_old of rows sampled a step ahead: their completion tokens' log-probs under the current
  // policy, through the update's own forward path (so without a policy change the ratio is 1).
  void set_policy_logprobs(StepBatch& b) {
    if (b.rollouts.empty()) return;
    policy_.model->train();  // the mode update() takes π_old in (LoRA dropout included)
    RlBatch batch = make_rl_batch(b.groups, b.rollouts, tok_.pad_id(), ro_.sampling);
    torch::Tensor lp = rl_logprobs(policy_.model, batch, stage_.batch_size);
    for (size_t i = 0; i < b.rollouts.size(); ++i) {
      torch::Tensor row = lp[static_cast<int64_t>(i)].masked_select(
          batch.target_mask[static_cast<int64_t>(i)] > 0).contiguous();
      b.rollouts[i].policy_logprobs.assign(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
    }
  }

  // 3c. Multi-turn refinement (trainer/multi_turn.h): revision prompts, then one completion per
  //     trajectory sampled and scored.
  MakeRevision revision() {
    return [this](const TaskSpec& task, const Rollout& previous, const Scored& verdict) {
      return revision_prompt(task, previous, verdict, prompt_parts(), tok_, policy_.shape.max_seq_len,
                             ro_.sampling.max_new_tokens);
    };
  }
  SampleTurn sample_turn(uint64_t seed) {
    return [this, seed](std::vector<PromptGroup> prompts, int64_t turn) {
      StepBatch b;
      b.groups = std::move(prompts);
      auto clock = Clock::now();
      b.rollouts = sample_groups_sharded(sampler_, tok_, b.groups, 1, ro_.sampling, ro_.response_format,
                                         mix(seed, 0x7000 + turn), &b.generated);
      b.times.generate = lap(clock);
      scorer_->score(b, step_ + 1);
      return b;
    };
  }

  // 4. Rewards (clipped once by the reward formula) + DAPO's overlong punishment of sampled
  //    completions, a passing one kept at or above failed_reward (shaped_reward,
  //    trainer/grpo.h) → winsorized per task against the windows before this step,
  //    r'' = clip(r, μ_w − k·σ̃_w, μ_w + k·σ̃_w), σ̃_w = max(σ_w, σ_min) → returns over turns
  //    R_k = r_k + γ·R_{k+1} → group-normalized advantages A_i = (R_i − mean_g) / (std_g + ε)
  //    (or the configured variant); with overlong_filter, truncated completions leave the loss.
  void advantages(const StepBatch& b, RlStepResult& r) {
    r.smoothed = smoother_.apply_step(tasks_of(b), shaped_rewards(b));
    const std::vector<double> ret = turn_returns(r.smoothed, ro_.turns, ro_.turn_discount);
    r.advantages = group_advantages(torch::tensor(ret, torch::dtype(torch::kFloat64)).to(torch::kFloat32),
                                    ro_.group_size, grpo_.advantage_norm, grpo_.adv_eps);
    if (grpo_.overlong_filter)
      for (size_t i = 0; i < b.rollouts.size(); ++i)
        if (b.rollouts[i].finish_reason == "length") r.advantages.valid[static_cast<int64_t>(i)] = false;
  }

  std::vector<std::string> tasks_of(const StepBatch& b) const {
    std::vector<std::string> tasks;
    for (const Rollout& row : b.rollouts) tasks.push_back(b.groups[row.group].task.name);
    return tasks;
  }
  // Per row: the evaluator's reward with DAPO's overlong shaping (demonstrations unshaped).
  std::vector<double> shaped_rewards(const StepBatch& b) const {
    std::vector<double> shaped;
    for (size_t i = 0; i < b.scored.size(); ++i) {
      const Rollout& row = b.rollouts[i];
      const bool sampled = row.finish_reason != "demonstration";
      shaped.push_back(
          shaped_reward(b.scored[i].reward, b.scored[i].passed,
                        static_cast<int64_t>(row.completion.size()), ro_.sampling.max_new_tokens,
                        sampled ? grpo_.overlong_buffer : 0, job_.reward.failed_reward));
    }
    return shaped;
  }

  // 5. μ clipped updates on prompt + completion rows (trainer/grpo_step.h); π_old from the same
  //    forward path as the update, so the first pass's ratio is exactly 1 — except for rows
  //    sampled a step ahead (rollout.overlap), whose π_old is the sampling policy's, taken when
  //    they were sampled: their ratio is π_θ/π_θ_old of one update, as in asynchronous trainers.
  //    π_θ, π_old and π_ref are all of softmax(logits / T) at the sampling temperature T
  //    (RlBatch::temperature), the policy that sampled the rows (TRL, verl).
  GrpoUpdateStats update(const StepBatch& b, const GroupAdvantages& adv, double lr) {
    LlamaModel& model = policy_.model;
    model->train();
    set_lr(*policy_.optimizer, lr);
    RlBatch batch = make_rl_batch(b.groups, b.rollouts, tok_.pad_id(), ro_.sampling);
    const UpdateShard shard{dist::rank(), dist::world_size()};  // micro-batch k is rank k mod W's
    torch::Tensor logp_old = rl_logprobs(model, batch, stage_.batch_size, shard);
    for (size_t i = 0; i < b.rollouts.size(); ++i) {
      const auto& lp = b.rollouts[i].policy_logprobs;
      if (lp.empty()) continue;
      torch::Tensor row = logp_old[static_cast<int64_t>(i)];
      torch::Tensor at = batch.target_mask[static_cast<int64_t>(i)] > 0;
      if (at.sum().item<int64_t>() != static_cast<int64_t>(lp.size()))
        throw std::logic_error("a row sampled a step ahead lost its log-probs' alignment");
      row.masked_scatter_(at, torch::tensor(lp, torch::kFloat32));
    }
    torch::Tensor logp_ref = reference_ ? rl_logprobs(reference_, batch, stage_.batch_size, shard) : torch::Tensor();
    if (lora_ && grpo_.kl_coef > 0) {  // LoRA: the KL reference is the base, adapters off
      LoraOff base(model);
      logp_ref = rl_logprobs(model, batch, stage_.batch_size, shard);
    }
    GrpoUpdateStats upd = grpo_update(model, *policy_.optimizer, batch, adv.advantages, adv.valid, logp_old,
                                      logp_ref, grpo_, stage_.batch_size, stage_.optimizer.grad_clip,
                                      /*fused_adamw=*/true, sync_, shard);
    if (!upd.passes.empty()) refresh_sampler();
    return upd;
  }

  void refresh_sampler() {  // the bf16 sampling copy follows the policy after every update
    if (sampler_.ptr() == policy_.model.ptr()) return;  // CPU, or LoRA: no copy
    torch::NoGradGuard ng;
    auto src = policy_.model->named_parameters();
    for (auto& p : sampler_->named_parameters()) p.value().copy_(src[p.key()]);
  }

  static double lap(Clock::time_point& t0) {
    const double s = since(t0);
    t0 = Clock::now();
    return s;
  }

  const StageContext& ctx_;
  const StageConfig& stage_;
  const JobConfig& job_;
  const GrpoConfig& grpo_;
  const RolloutConfig& ro_;
  torch::Device device_;
  bool cuda_;
  Checkpoint start_;  // what the stage starts from (its resume checkpoint or ctx.init_checkpoint)
  StagePolicy policy_;
  Tokenizer tok_;
  LlamaModel sampler_{nullptr}, reference_{nullptr};
  bool lora_ = false;  // adapters over a frozen base: one copy samples, trains and is the reference
  RewardSmoother smoother_;
  std::unique_ptr<Evaluator> evaluator_;
  std::vector<int> eval_gpus_;  // reward.gpus: this rank's evaluation GPUs (empty: its own GPU)
  std::string backend_;
  std::vector<TaskSpec> tasks_;
  std::unique_ptr<ExemplarStore> exemplars_;
  std::unique_ptr<SeedGrid> seed_grid_;  // rollout.seed_grid (null: round robin)
  std::unique_ptr<ExemplarFit> fit_;      // which pool entries fit a prompt
  std::unique_ptr<RlScorer> scorer_;
  std::optional<StepBatch> pending_;  // rollout.overlap: the next step's rows, sampled ahead
  int64_t step_ = 0;                  // the step being taken (steps done before it)
  int64_t start_step_ = 0;            // the first step this process takes (a resumed stage's later)
  std::set<std::string> seeded_;      // tasks whose pools were seeded (or found stored): not again
  SeedStats ahead_seeding_;           // seed_ahead's, logged with the first step
  SeedStats in_step_seeding_;         // seeding inside the step being taken (should stay empty)
  GradSync* sync_ = nullptr;          // the loop's, for the step being taken
};

// The checkpoint an RL stage starts from: its own newest when resuming, else the previous
// stage's final one (or model.hf_path).
fs::path start_checkpoint(const StageContext& ctx, const std::optional<fs::path>& resume) {
  if (resume) return *resume;
  if (ctx.init_checkpoint.empty())
    throw UserError("stage \"" + ctx.stage.name + "\" (" + ctx.stage.kind +
                    ") starts from a policy checkpoint: set model.hf_path to a pretrained "
                    "checkpoint, put a pretrain stage before it in trainer.stages, or run that "
                    "stage first in this run directory");
  return ctx.init_checkpoint;
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

// Policy, sampler, reference and optimizer; the loop restores the optimizer and step.
RlStage::RlStage(StageContext& ctx, const std::optional<fs::path>& resume)
    : ctx_(ctx),
      stage_(ctx.stage),
      job_(ctx.job),
      grpo_(ctx.stage.grpo),
      ro_(ctx.job.rollout),
      device_(resolve_device(ctx.job.run.device)),
      cuda_(device_.is_cuda()),
      start_(load_checkpoint(start_checkpoint(ctx, resume), device_, policy_dtype(ctx, device_))),
      tok_(tokenizer_of(start_, &policy_.tokenizer_path)),
      smoother_(ctx.stage.grpo) {
  const fs::path& init = ctx.init_checkpoint;
  LlamaModel& model = policy_.model;
  model = start_.model;
  policy_.shape = model->shape();
  model->set_activation_checkpointing(job_.model.activation_checkpointing);
  if (job_.model.lora.rank > 0 && !model->has_lora())  // the base stays where it was read
    add_lora_adapters(model, job_.model.lora, static_cast<uint64_t>(job_.run.seed), start_.dir.string());
  lora_ = model->has_lora();
  if (grpo_.kl_coef > 0 && !lora_) {
    // The frozen reference is the stage's starting policy (the previous stage's result).
    reference_ = load_checkpoint(init.empty() ? start_.dir : init, device_, torch::kFloat32).model;
    reference_->eval();
    for (auto& p : reference_->parameters()) p.requires_grad_(false);
  }
  // Sampling on CUDA runs a bf16 copy refreshed after every update; on the CPU the policy itself.
  sampler_ = cuda_ && !lora_ ? load_checkpoint(start_.dir, device_, torch::kBFloat16).model : model;
  policy_.optimizer = make_adamw(*model, stage_.optimizer);
}

// Evaluator, tasks, exemplars, and the state of a resumed stage. Data parallel: each rank's
// evaluator worker runs on the rank's GPU; rank 0 creates the store's tables and is the
// exemplar pool's one writer.
void RlStage::start(const TrainState& state) {
  const fs::path store_path =
      job_.reward.store.empty() ? ctx_.run_dir.root() / "results.sqlite" : fs::path(job_.reward.store);
  dist::Group* group = dist::group();
  if (group && !dist::is_main()) group->barrier();
  const int local_rank = group ? group->local_rank() : 0;
  // reward.gpus: this rank's share of the evaluation GPUs (none of them a policy rank's);
  // otherwise the rank's own GPU, as the policy.
  const int local_ranks = group ? dist::read_launch_env().local_world_size : 1;
  eval_gpus_ = evaluation_gpus(job_.reward, local_rank, local_ranks, cuda_device_count(), cuda_);
  if (!eval_gpus_.empty()) {
    std::string list;
    for (int g : eval_gpus_) list += (list.empty() ? "" : ",") + std::to_string(g);
    KRL_LOG(info) << "evaluation apart from the policy: this rank's workers on GPU(s) " << list
                  << " (reward.gpus); timing overlaps generation";
    evaluator_ = std::make_unique<Evaluator>(job_.reward, store_path, eval_gpus_);
  } else {
    evaluator_ = std::make_unique<Evaluator>(job_.reward, store_path,
                                             cuda_device_count() > local_rank ? local_rank : 0);
  }
  backend_ = evaluator_->backend();
  tasks_ = rl_stage_tasks(job_, stage_.kind, backend_);
  exemplars_ = std::make_unique<ExemplarStore>(store_path, stage_.name);
  fit_ = std::make_unique<ExemplarFit>(tok_, policy_.shape.max_seq_len, ro_.sampling.max_new_tokens);
  if (stage_.kind == "hgemm_rl" && backend_ == "gpu" && (seed_grid_ = job_seed_grid(job_))) {
    KRL_LOG(info) << "exemplar seeds: " << seed_grid_->rows() << " shapes of " << ro_.seed_grid
                  << " (held-out shapes excluded)";
  }
  if (dist::is_main()) exemplars_->truncate_after(state.step);
  if (group && dist::is_main()) group->barrier();
  scorer_ = std::make_unique<RlScorer>(*evaluator_, *exemplars_, job_.reward.failed_reward,
                                       ro_.reuse_evaluations);
  if (state.extra.is_object()) {  // resumed (a fresh stage's extra is null)
    smoother_.load_state(state.extra.value("smoother", nlohmann::json::object()));
    const nlohmann::json best = state.extra.value("best_speedup", nlohmann::json::object());
    for (auto& [k, v] : best.items())  // (items() of a temporary would dangle)
      scorer_->best_speedup()[k] = v.is_number() ? v.get<double>() : 0.0;  // JSON writes inf as null
  }
  if (state.extra.contains("pending")) {
    if (!ro_.overlap) {
      KRL_LOG(warn) << "resuming with rollout.overlap: 0 from a checkpoint written with it on: "
                       "the rows sampled ahead are trained on first";
    }
    pending_ = pending_rows_from_json(state.extra.at("pending"), tasks_, job_.model.prompt_format,
                                      ro_.response_format);
  }
  start_step_ = state.step;
  seed_ahead(state.step);
  KRL_LOG(info) << "stage " << stage_.name << ": " << tasks_.size() << " tasks on the " << backend_
                << " backend (" << evaluator_->device_name() << "), policy " << policy_.shape.describe();
  if (backend_ == "host" && stage_.kind == "hgemm_rl") {
    KRL_LOG(warn) << "no GPU: HGEMM candidates are C++ kernels timed on the CPU (host backend); "
                     "CUDA kernels need a GPU";
  }
}

// Beside the loop's state: the reward smoother's windows, the best speedups and the rows
// sampled ahead.
nlohmann::json RlStage::checkpoint_extra() {
  nlohmann::json extra = {{"smoother", smoother_.state()}, {"best_speedup", scorer_->best_speedup()}};
  if (pending_) extra["pending"] = pending_rows_json(*pending_);
  return extra;
}

}  // namespace

std::filesystem::path run_grpo_stage(StageContext& ctx) {
  const std::optional<fs::path> resume = resume_checkpoint(ctx);
  RlStage stage(ctx, resume);
  return run_stage_loop(ctx, stage, resume, {/*tensorboard=*/true});
}

}  // namespace kernelrl
