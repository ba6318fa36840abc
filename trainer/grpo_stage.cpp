#include "trainer/grpo_stage.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>

#include "common/error.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/tensorboard.h"
#include "data/families.h"
#include "data/task_suite.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "reward/evaluator.h"
#include "rollout/exemplar_store.h"
#include "rollout/group_sampler.h"
#include "trainer/grpo.h"
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
  std::string status;
};

// Evaluates one group's candidates, reusing stored results of identical sources.
std::vector<Scored> evaluate_group(Evaluator& ev, const TaskSpec& task,
                                   const std::vector<Rollout*>& rollouts, bool reuse,
                                   double failed_reward, std::vector<EvalResult>* results_out) {
  std::vector<Scored> out(rollouts.size());
  std::vector<std::string> fresh_sources;
  std::vector<size_t> fresh_index;
  results_out->assign(rollouts.size(), EvalResult{});
  for (size_t i = 0; i < rollouts.size(); ++i) {
    const ParsedResponse& p = rollouts[i]->parsed;
    if (!p.ok) {
      out[i].reward = failed_reward;
      out[i].status = "format";
      continue;
    }
    out[i].parsed = true;
    if (reuse) {
      if (auto hit = ev.cached_result(task, p.code)) {
        (*results_out)[i] = *hit;
        continue;
      }
    }
    fresh_sources.push_back(p.code);
    fresh_index.push_back(i);
  }
  if (!fresh_sources.empty()) {
    auto results = ev.evaluate(task, fresh_sources);
    for (size_t j = 0; j < results.size(); ++j) (*results_out)[fresh_index[j]] = results[j];
  }
  for (size_t i = 0; i < rollouts.size(); ++i) {
    if (!out[i].parsed) continue;
    const EvalResult& r = (*results_out)[i];
    out[i].reward = r.reward;
    out[i].status = status_name(r.status);
    out[i].passed = r.passed();
    out[i].compiled = r.status != EvalStatus::screen_rejected &&
                      r.status != EvalStatus::compile_error &&
                      r.status != EvalStatus::compile_timeout;
    out[i].speedup = r.speedup;
  }
  return out;
}

// Seeds an empty exemplar pool with evaluated kernel-family variants (step 0): n of them taken
// round-robin over the families that offer the task, each family's variants in an order seeded
// by the task name, so the first prompts show the range of families, not one family's first few.
void seed_pool(ExemplarStore& pool, Evaluator& ev, const TaskSpec& task, int64_t n) {
  if (n <= 0 || pool.size(task.name) > 0) return;
  auto variants = variants_for_task(task, ev.backend() == "gpu" ? "cuda" : "host", ev.arch());
  if (variants.empty()) return;
  std::map<std::string, std::vector<KernelVariant>> by_family;  // shuffled in name order
  for (auto& v : variants) by_family[v.family].push_back(std::move(v));
  std::vector<std::vector<KernelVariant>> pools;
  for (auto& [family, members] : by_family) pools.push_back(std::move(members));
  std::vector<std::string> sources;
  for (auto& v : round_robin_variants(std::move(pools), n, fnv1a(task.name), /*wrap=*/false))
    sources.push_back(std::move(v.source));
  auto results = ev.evaluate(task, sources);
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].passed()) pool.add(task.name, {results[i].hash, sources[i], results[i].reward}, 0);
}

// Padded training batch of prompt + completion rows.
struct Batch {
  torch::Tensor tokens;      // [N, T] int64
  torch::Tensor attention;   // [N, T] bool
  torch::Tensor target_mask; // [N, T-1] float: 1 where tokens[:, t+1] is a completion token
};

Batch make_batch(const std::vector<PromptGroup>& groups, const std::vector<Rollout>& rollouts,
                 int64_t pad_id) {
  int64_t T = 0;
  for (const auto& r : rollouts)
    T = std::max<int64_t>(T, groups[r.group].prompt_ids.size() + r.completion.size());
  const int64_t N = static_cast<int64_t>(rollouts.size());
  Batch b;
  b.tokens = torch::full({N, T}, pad_id, torch::kInt64);
  b.attention = torch::zeros({N, T}, torch::kBool);
  b.target_mask = torch::zeros({N, std::max<int64_t>(T - 1, 1)}, torch::kFloat32);
  auto tok = b.tokens.accessor<int64_t, 2>();
  auto att = b.attention.accessor<bool, 2>();
  auto msk = b.target_mask.accessor<float, 2>();
  for (int64_t i = 0; i < N; ++i) {
    const auto& p = groups[rollouts[i].group].prompt_ids;
    const auto& c = rollouts[i].completion;
    int64_t t = 0;
    for (int64_t id : p) tok[i][t] = id, att[i][t] = true, ++t;
    for (int64_t id : c) {
      tok[i][t] = id;
      att[i][t] = true;
      msk[i][t - 1] = 1.f;  // logprob index t-1 scores token t
      ++t;
    }
  }
  return b;
}

// Per-token log-probs of every row, in micro-batches, without gradients.
torch::Tensor logprobs_no_grad(LlamaModel& model, const Batch& b, int64_t micro, torch::Device dev,
                               bool cuda) {
  torch::NoGradGuard ng;
  AutocastGuard ac(cuda);
  std::vector<torch::Tensor> parts;
  for (int64_t s = 0; s < b.tokens.size(0); s += micro) {
    auto e = std::min<int64_t>(b.tokens.size(0), s + micro);
    parts.push_back(token_logprobs(model, b.tokens.slice(0, s, e).to(dev),
                                   b.attention.slice(0, s, e).to(dev))
                        .to(torch::kCPU));
  }
  return torch::cat(parts);
}

}  // namespace

std::vector<TaskSpec> rl_stage_tasks(const JobConfig& job, const std::string& kind,
                                     const std::string& backend) {
  std::vector<TaskSpec> tasks;
  if (kind == "general_rl") {
    tasks = select_split(load_task_suite(job.data.general_tasks, backend), /*holdout=*/false);
  } else {
    for (auto& t : hgemm_grid(job.data.hgemm_grid))
      if (!t.holdout) tasks.push_back(t);
  }
  if (tasks.empty())
    throw ConfigError(std::string(kind == "general_rl" ? "data.general_tasks" : "data.hgemm_grid") +
                      ": no training tasks");
  return tasks;
}

std::filesystem::path run_grpo_stage(StageContext& ctx) {
  const StageConfig& stage = ctx.stage;
  const JobConfig& job = ctx.job;
  const GrpoConfig& grpo = stage.grpo;
  const RolloutConfig& ro = job.rollout;
  const torch::Device device = resolve_device(job.run.device);
  const bool cuda = device.is_cuda();

  // ---- policy, reference, sampler ----------------------------------------------------------
  fs::path init = ctx.init_checkpoint;
  auto resume_dir = ctx.resume ? latest_stage_checkpoint(ctx.run_dir.checkpoints_dir(), stage.name)
                               : std::nullopt;
  if (init.empty() && !resume_dir)
    throw UserError("stage \"" + stage.name + "\" (" + stage.kind +
                    ") starts from a policy checkpoint: put a pretrain stage before it in "
                    "trainer.stages, or run that stage first in this run directory");
  Checkpoint start = load_checkpoint(resume_dir ? *resume_dir : init, device, torch::kFloat32);
  LlamaModel model = start.model;
  const ModelShape shape = model->shape();
  if (!start.tokenizer_path)
    throw UserError("checkpoint '" + start.dir.string() + "' carries no tokenizer.model");
  const fs::path tokenizer_path = *start.tokenizer_path;
  Tokenizer tok = Tokenizer::load(tokenizer_path);
  LlamaModel reference{nullptr};
  if (grpo.kl_coef > 0) {
    // The frozen reference is the stage's starting policy (the previous stage's result).
    reference = load_checkpoint(init.empty() ? start.dir : init, device, torch::kFloat32).model;
    reference->eval();
    for (auto& p : reference->parameters()) p.requires_grad_(false);
  }
  // Sampling on CUDA runs a bf16 copy refreshed after every step; on the CPU the policy itself.
  LlamaModel sampler = cuda ? load_checkpoint(start.dir, device, torch::kBFloat16).model : model;
  auto refresh_sampler = [&] {
    if (!cuda) return;
    torch::NoGradGuard ng;
    auto src = model->named_parameters();
    for (auto& p : sampler->named_parameters()) p.value().copy_(src[p.key()]);
  };

  auto optimizer = make_adamw(*model, stage.optimizer);
  TrainState state;
  RewardSmoother smoother(grpo);
  std::map<std::string, double> best_speedup;
  if (resume_dir) {
    state = load_train_state(*resume_dir, *optimizer);
    smoother.load_state(state.extra.value("smoother", nlohmann::json::object()));
    for (auto& [k, v] : state.extra.value("best_speedup", nlohmann::json::object()).items())
      best_speedup[k] = v.get<double>();
    KRL_LOG(info) << "resumed stage " << stage.name << " at step " << state.step;
    if (state.step >= stage.steps) return *resume_dir;
  }
  const int64_t resumed_step = state.step;
  const std::string stage_name = stage.name;
  ctx.metrics.drop_if([&](const nlohmann::json& r) {
    return r.value("stage", "") == stage_name && r.value("step", int64_t{0}) > resumed_step;
  });

  // ---- evaluator, tasks, exemplars ------------------------------------------------------------
  const fs::path store_path =
      job.reward.store.empty() ? ctx.run_dir.root() / "results.sqlite" : fs::path(job.reward.store);
  Evaluator evaluator(job.reward, store_path);
  const std::string backend = evaluator.backend();
  std::vector<TaskSpec> tasks = rl_stage_tasks(job, stage.kind, backend);
  ExemplarStore exemplars(store_path, stage.name);
  exemplars.truncate_after(state.step);
  KRL_LOG(info) << "stage " << stage.name << ": " << tasks.size() << " tasks on the " << backend
                << " backend (" << evaluator.device_name() << "), policy " << shape.describe();
  if (backend == "host" && stage.kind == "hgemm_rl") {
    KRL_LOG(warn) << "no GPU: HGEMM candidates are C++ kernels timed on the CPU (host backend); "
                     "CUDA kernels need a GPU";
  }
  TensorBoardWriter tb(ctx.run_dir.root() / "tensorboard" / stage.name);

  const int64_t B = std::min<int64_t>(ro.prompts_per_step, static_cast<int64_t>(tasks.size()));
  const int64_t G = ro.group_size;
  const int64_t micro = stage.batch_size;
  fs::path last_checkpoint = resume_dir ? *resume_dir : fs::path();
  Progress progress(stage.kind + " " + stage.name, stage.steps);

  while (state.step < stage.steps) {
    const auto t_step = Clock::now();
    const uint64_t step_seed = mix(static_cast<uint64_t>(job.run.seed), mix(std::hash<std::string>{}(stage.name), state.step));

    // 1. Prompts: B tasks (a fresh seeded permutation per pass over the tasks), with exemplars.
    std::vector<PromptGroup> groups;
    for (int64_t j = 0; j < B; ++j) {
      const int64_t g = state.step * B + j;
      const int64_t n = static_cast<int64_t>(tasks.size());
      std::vector<int64_t> perm(n);
      for (int64_t i = 0; i < n; ++i) perm[i] = i;
      std::mt19937_64 prng(mix(static_cast<uint64_t>(job.run.seed), g / n));
      std::shuffle(perm.begin(), perm.end(), prng);
      const TaskSpec& task = tasks[perm[g % n]];
      seed_pool(exemplars, evaluator, task, ro.seed_exemplars);
      std::mt19937_64 erng(mix(step_seed, j));
      PromptParts parts;
      parts.response_format = ro.response_format;
      parts.backend = backend;
      parts.exemplars = sample_exemplars(exemplars.pool(task.name, state.step), ro.n_exemplars,
                                         ro.n_buckets, ro.exemplar_temperature, erng);
      groups.push_back(make_prompt_group(task, parts, tok, shape.max_seq_len,
                                         ro.sampling.max_new_tokens));
    }

    // 2. Sample G completions per prompt.
    const auto t_gen = Clock::now();
    int64_t generated = 0;
    model->eval();
    std::vector<Rollout> rollouts = sample_groups(sampler, tok, groups, G, ro.sampling,
                                                  ro.response_format, step_seed, &generated);
    const double generate_s = since(t_gen);

    // 3. Evaluate every group (compiles run in parallel inside the evaluator).
    const auto t_eval = Clock::now();
    std::vector<Scored> scored;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      std::vector<Rollout*> mine;
      for (auto& r : rollouts)
        if (r.group == gi) mine.push_back(&r);
      std::vector<EvalResult> results;
      auto s = evaluate_group(evaluator, groups[gi].task, mine, ro.reuse_evaluations,
                              job.reward.failed_reward, &results);
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i].passed) {
          exemplars.add(groups[gi].task.name,
                        {results[i].hash, mine[i]->parsed.code, results[i].reward}, state.step + 1);
          double& best = best_speedup[groups[gi].task.name];
          best = std::max(best, s[i].speedup);
        }
      }
      scored.insert(scored.end(), s.begin(), s.end());
    }
    const double evaluate_s = since(t_eval);

    // 4. Rewards -> smoothed -> group-normalized advantages.
    std::vector<float> raw, smoothed;
    for (size_t i = 0; i < scored.size(); ++i) {
      raw.push_back(static_cast<float>(scored[i].reward));
      smoothed.push_back(static_cast<float>(
          smoother.apply(groups[rollouts[i].group].task.name, scored[i].reward)));
    }
    auto adv = group_advantages(torch::tensor(smoothed), G, grpo.advantage_norm, grpo.adv_eps);

    // 5. μ clipped updates on prompt+completion rows; π_old from the same forward path.
    const auto t_upd = Clock::now();
    model->train();
    Batch batch = make_batch(groups, rollouts, tok.pad_id());
    auto row_valid = adv.valid.to(torch::kFloat32).unsqueeze(1);
    batch.target_mask = batch.target_mask * row_valid;
    const double total_tokens = batch.target_mask.sum().item<double>();
    const double total_rows = (batch.target_mask.sum(1) > 0).sum().item<double>();
    torch::Tensor logp_old = logprobs_no_grad(model, batch, micro, device, cuda);
    torch::Tensor logp_ref =
        reference ? logprobs_no_grad(reference, batch, micro, device, cuda) : torch::Tensor();
    double loss_sum = 0, clip_sum = 0, kl_sum = 0, entropy_sum = 0, grad_norm = 0;
    int64_t updates = 0;
    const double lr = scheduled_lr(stage.optimizer, state.step, stage.steps);
    set_lr(*optimizer, lr);
    if (total_tokens > 0) {
      for (int64_t pass = 0; pass < grpo.updates_per_batch; ++pass) {
        optimizer->zero_grad();
        for (int64_t s = 0; s < batch.tokens.size(0); s += micro) {
          const int64_t e = std::min<int64_t>(batch.tokens.size(0), s + micro);
          auto mask = batch.target_mask.slice(0, s, e).to(device);
          const double mb_tokens = mask.sum().item<double>();
          if (mb_tokens == 0) continue;
          torch::Tensor entropy;
          SurrogateTerms terms;
          {
            AutocastGuard ac(cuda);
            auto logp = token_logprobs(model, batch.tokens.slice(0, s, e).to(device),
                                       batch.attention.slice(0, s, e).to(device), &entropy);
            terms = clipped_surrogate(
                logp, logp_old.slice(0, s, e).to(device),
                logp_ref.defined() ? logp_ref.slice(0, s, e).to(device) : torch::Tensor(),
                adv.advantages.slice(0, s, e).to(device), mask, grpo);
          }
          // Micro-batch means recombine into the batch aggregate.
          const double weight = grpo.loss_agg == "token-mean"
                                    ? mb_tokens / total_tokens
                                    : (mask.sum(1) > 0).sum().item<double>() / total_rows;
          auto loss = terms.loss * weight;
          const double lv = loss.item<double>();
          if (!std::isfinite(lv))
            throw std::runtime_error("GRPO loss is not finite at step " + std::to_string(state.step + 1));
          loss.backward();
          if (pass == 0) {
            loss_sum += lv;
            clip_sum += terms.clip_fraction.item<double>() * mb_tokens / total_tokens;
            kl_sum += terms.kl.item<double>() * mb_tokens / total_tokens;
            entropy_sum += (entropy * mask).sum().item<double>() / total_tokens;
          }
        }
        grad_norm = clip_grad_norm_checked(*model, stage.optimizer.grad_clip);
        optimizer->step();
        ++updates;
      }
      refresh_sampler();
    }
    const double update_s = since(t_upd);
    ++state.step;

    // 6. Metrics, TensorBoard, checkpoint.
    auto rt = torch::tensor(raw);
    auto rate = [&](auto pred) {
      double n = 0;
      for (const auto& s : scored) n += pred(s);
      return n / static_cast<double>(scored.size());
    };
    double completion_len = 0;
    for (const auto& r : rollouts) completion_len += static_cast<double>(r.completion.size());
    double best_overall = 0;
    for (const auto& [task, s] : best_speedup) best_overall = std::max(best_overall, s);
    nlohmann::json rec = {
        {"stage", stage.name},
        {"reward_mean", rt.mean().item<double>()},
        {"reward_std", rt.numel() > 1 ? rt.std().item<double>() : 0.0},
        {"reward_max", rt.max().item<double>()},
        {"reward_smoothed_mean", torch::tensor(smoothed).mean().item<double>()},
        {"format_ok_rate", rate([](const Scored& s) { return s.parsed; })},
        {"compiled_rate", rate([](const Scored& s) { return s.compiled; })},
        {"correct_rate", rate([](const Scored& s) { return s.passed; })},
        {"faster_rate", rate([](const Scored& s) { return s.passed && s.speedup > 1.0; })},
        {"best_speedup", best_overall},
        {"zero_spread_frac", static_cast<double>(adv.zero_spread_groups) / static_cast<double>(B)},
        {"loss", loss_sum},
        {"kl", kl_sum},
        {"clip_fraction", clip_sum},
        {"entropy", entropy_sum},
        {"grad_norm", grad_norm},
        {"updates", updates},
        {"lr", lr},
        {"completion_len", completion_len / static_cast<double>(rollouts.size())},
        {"generate_s", generate_s},
        {"evaluate_s", evaluate_s},
        {"update_s", update_s},
        {"step_s", since(t_step)},
        {"tokens_per_s", generate_s > 0 ? static_cast<double>(generated) / generate_s : 0.0}};
    ctx.metrics.write(state.step, rec);
    for (const auto& [k, v] : rec.items())
      if (v.is_number()) tb.scalar(stage.name + "/" + k, v.get<double>(), state.step);
    tb.flush();
    char status[128];
    std::snprintf(status, sizeof status, "reward %.3f correct %.0f%% best %.2fx",
                  rec["reward_mean"].get<double>(), 100 * rec["correct_rate"].get<double>(),
                  best_overall);
    progress.update(state.step, status);
    if ((stage.checkpoint_every > 0 && state.step % stage.checkpoint_every == 0) ||
        state.step == stage.steps) {
      state.extra = {{"smoother", smoother.state()}, {"best_speedup", best_speedup}};
      last_checkpoint = save_stage_checkpoint(ctx.run_dir.checkpoints_dir(), stage.name, model,
                                              shape, tokenizer_path, *optimizer, state,
                                              job.trainer.keep_checkpoints);
    }
    crash_here_if_asked(stage.name, state.step);
  }
  progress.finish();
  return last_checkpoint;
}

}  // namespace kernelrl
