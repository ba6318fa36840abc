#include "trainer/rl_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include <torch/types.h>

namespace kernelrl {

nlohmann::json outcome_metrics(const std::vector<Scored>& scored) {
  auto rate = [&](auto pred) {
    double n = 0;
    for (const auto& s : scored) n += pred(s);
    return n / static_cast<double>(scored.size());
  };
  double mean = 0;
  for (const auto& s : scored) mean += s.reward / scored.size();
  return {{"reward_mean", mean},
          {"format_ok_rate", rate([](const Scored& s) { return s.parsed; })},
          {"compiled_rate", rate([](const Scored& s) { return s.compiled; })},
          {"correct_rate", rate([](const Scored& s) { return s.passed; })},
          {"faster_rate", rate([](const Scored& s) { return s.passed && s.speedup > 1.0; })}};
}

namespace {

// Reward statistics and the outcome rates over every row (demonstrations included).
nlohmann::json reward_metrics(const std::vector<Scored>& scored,
                              const std::vector<double>& smoothed) {
  nlohmann::json out = outcome_metrics(scored);
  const double mean = out["reward_mean"].get<double>();
  double mean_s = 0, max = -INFINITY, var = 0;
  for (size_t i = 0; i < scored.size(); ++i) {
    mean_s += smoothed[i] / scored.size();
    max = std::max(max, scored[i].reward);
    var += (scored[i].reward - mean) * (scored[i].reward - mean);
  }
  out["reward_std"] = scored.size() > 1 ? std::sqrt(var / (scored.size() - 1)) : 0.0;
  out["reward_max"] = max;
  out["reward_smoothed_mean"] = mean_s;
  return out;
}

// The policy's own rows (not demonstrations), the demonstrations and the completion length.
nlohmann::json sampled_metrics(const StepBatch& step) {
  const auto& rollouts = step.rollouts;
  const auto& scored = step.scored;
  double completion_len = 0, demos = 0;
  for (const auto& r : rollouts) {
    completion_len += static_cast<double>(r.completion.size()) / rollouts.size();
    demos += r.finish_reason == "demonstration";
  }
  double sampled = 0, sampled_ok = 0, sampled_compiled = 0, sampled_reward = 0;
  for (size_t i = 0; i < scored.size(); ++i) {
    if (rollouts[i].finish_reason == "demonstration") continue;
    ++sampled;
    sampled_ok += scored[i].passed;
    sampled_compiled += scored[i].compiled;
    sampled_reward += scored[i].reward;
  }
  auto per_sampled = [&](double x) { return sampled > 0 ? x / sampled : 0.0; };
  return {{"sampled_compiled_rate", per_sampled(sampled_compiled)},
          {"sampled_correct_rate", per_sampled(sampled_ok)},
          {"sampled_reward_mean", per_sampled(sampled_reward)},
          {"demonstrations", demos},
          {"completion_len", completion_len}};
}

// Tokens per completion (the policy's own rows: what a step's generation costs per sample), the
// edit-mode rows whose blocks applied (and those that left the kernel as it was: the exemplar
// copied), and the format failures by name (scored without compiling).
nlohmann::json completion_metrics(const StepBatch& step) {
  double sampled = 0, tokens = 0;
  int64_t edit_rows = 0, applied = 0, unchanged = 0, failures = 0;
  std::map<std::string, int64_t> by_name = {{"format_no_code", 0}, {"edit_empty", 0}, {"edit_malformed", 0},
                                            {"edit_no_match", 0}, {"edit_ambiguous", 0}};
  for (size_t i = 0; i < step.rollouts.size(); ++i) {
    const Rollout& r = step.rollouts[i];
    if (r.finish_reason != "demonstration") {
      ++sampled;
      tokens += static_cast<double>(r.completion.size());
    }
    const ParsedResponse& p = r.parsed;
    edit_rows += !p.edit_base.empty();
    if (p.ok && p.edit_blocks > 0) {
      ++applied;
      unchanged += p.code == p.edit_base || p.code == p.edit_base + "\n";
    }
    if (i < step.scored.size() && !step.scored[i].parsed) {
      ++failures;
      const std::string& name = step.scored[i].format_failure;
      ++by_name[name.empty() ? "format_no_code" : name];
    }
  }
  nlohmann::json out = {{"tokens_per_completion", sampled > 0 ? tokens / sampled : 0.0},
                        {"edit_rows", edit_rows},
                        {"edits_applied", applied},
                        {"edits_unchanged", unchanged},
                        {"format_failures", failures}};
  for (const auto& [name, n] : by_name) out["format_failure_" + name] = n;
  return out;
}

nlohmann::json update_metrics(const GrpoUpdateStats& upd) {
  const GrpoPassStats first = upd.passes.empty() ? GrpoPassStats{} : upd.passes.front();
  const GrpoPassStats last = upd.passes.empty() ? GrpoPassStats{} : upd.passes.back();
  return {{"loss", first.loss},
          {"kl", first.kl},
          {"clip_fraction", first.clip_fraction},
          {"entropy", first.entropy},
          {"ratio_mean", first.ratio_mean},
          {"grad_norm", first.grad_norm},
          {"loss_last", last.loss},
          {"grad_norm_last", last.grad_norm},
          {"updates", static_cast<int64_t>(upd.passes.size())},
          {"update_tokens", upd.tokens}};
}

// The generate / compile / time / update split (StepTimes).
nlohmann::json time_metrics(const StepTimes& t, int64_t overlap) {
  return {{"prompts_s", t.prompts},
          {"generate_s", t.generate},
          {"compile_s", t.compile},
          {"compile_wait_s", t.compile_wait},
          {"time_s", t.time},
          {"wait_s", t.wait},
          {"runner_start_s", t.runner_start},
          {"runners", t.runners},
          {"spare_runners", t.spare_runners},
          {"baseline_disagreed", t.baseline_disagreed},
          {"evaluate_s", t.compile + t.time},
          {"overlap", overlap},
          {"update_s", t.update},
          {"step_s", t.wall},
          {"tokens_per_s", t.generate > 0 ? static_cast<double>(t.tokens) / t.generate : 0.0}};
}

// Per turn of multi-turn refinement: correct rate and mean reward (rows are turn-major).
void add_turn_metrics(nlohmann::json& rec, const std::vector<Scored>& scored, int64_t turns) {
  if (turns <= 1) return;
  const size_t n = scored.size() / static_cast<size_t>(turns);
  for (int64_t k = 0; k < turns; ++k) {
    double ok = 0, r = 0;
    for (size_t j = k * n; j < (k + 1) * n; ++j) ok += scored[j].passed, r += scored[j].reward;
    rec["turn" + std::to_string(k + 1) + "_correct_rate"] = ok / n;
    rec["turn" + std::to_string(k + 1) + "_reward_mean"] = r / n;
  }
}

// Per row, for the metrics (and the data-parallel test: the same on any number of ranks).
std::vector<double> advantages_of(const GroupAdvantages& adv) {
  const torch::Tensor a = adv.advantages.to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
}

}  // namespace

StepLog rl_step_log(const StepBatch& step, const RlStepResult& result, const RolloutConfig& ro) {
  const std::vector<Scored>& scored = step.scored;
  StepLog log;
  nlohmann::json& rec = log.metrics;
  rec = reward_metrics(scored, result.smoothed);
  rec.update(sampled_metrics(step));
  rec.update(completion_metrics(step));
  rec.update(update_metrics(result.update));
  rec.update(time_metrics(step.times, ro.overlap));
  rec["best_speedup"] = result.best_speedup;
  rec["zero_spread_frac"] = static_cast<double>(result.advantages.zero_spread_groups) /
                            static_cast<double>(scored.size() / ro.group_size);
  rec["resample_rounds"] = result.resample_rounds;
  rec["lr"] = result.lr;
  rec["candidates"] = static_cast<int64_t>(scored.size());
  rec["advantages"] = advantages_of(result.advantages);
  add_turn_metrics(rec, scored, ro.turns);
  char status[160];
  const double mean = rec["reward_mean"].get<double>(), correct = rec["correct_rate"].get<double>();
  if (rec["demonstrations"].get<double>() > 0)
    std::snprintf(status, sizeof status, "reward %.3f correct %.0f%% (sampled %.0f%%) best %.2fx",
                  mean, 100 * correct, 100 * rec["sampled_correct_rate"].get<double>(),
                  result.best_speedup);
  else
    std::snprintf(status, sizeof status, "reward %.3f correct %.0f%% best %.2fx", mean,
                  100 * correct, result.best_speedup);
  log.status = status;
  if (rec["edit_rows"].get<int64_t>() > 0) {
    std::snprintf(status, sizeof status, " edits %lld/%lld, %.0f tok/completion",
                  static_cast<long long>(rec["edits_applied"].get<int64_t>()),
                  static_cast<long long>(rec["edit_rows"].get<int64_t>()),
                  rec["tokens_per_completion"].get<double>());
    log.status += status;
  }
  return log;
}

}  // namespace kernelrl
