#include "trainer/rl_summary.h"

#include <cstdio>
#include <map>

#include "common/metrics.h"

namespace kernelrl {

RlLearning rl_learning(const std::filesystem::path& metrics, const std::string& stage) {
  RlLearning l;
  l.stage = stage;
  if (!std::filesystem::exists(metrics)) return l;
  std::map<int64_t, nlohmann::json> by_step;  // a resumed run may repeat a step: the last wins
  for (auto& r : MetricsWriter::read_all(metrics))
    if (r.value("stage", "") == stage && r.contains("reward_mean")) {
      const int64_t step = r.value("step", int64_t{0});
      by_step[step] = std::move(r);  // (json's operator= takes its argument by value: moved first)
    }
  l.steps = static_cast<int64_t>(by_step.size());
  if (l.steps == 0) return l;
  const int64_t half = l.steps / 2;
  int64_t i = 0;
  bool after = false;
  for (const auto& [step, r] : by_step) {
    const double correct = r.value("sampled_correct_rate", r.value("correct_rate", 0.0));
    const double reward = r.value("sampled_reward_mean", r.value("reward_mean", 0.0));
    const int64_t u = r.value("updates", int64_t{0});
    const double tokens = r.value("tokens_per_completion", r.value("completion_len", 0.0));
    if (i == 0) l.tokens_first = tokens;
    l.tokens_last = tokens;
    l.tokens_mean += tokens / static_cast<double>(l.steps);
    l.edit_rows += r.value("edit_rows", int64_t{0});
    l.edits_applied += r.value("edits_applied", int64_t{0});
    l.format_failures += r.value("format_failures", int64_t{0});
    l.updates += u;
    l.steps_with_updates += u > 0;
    if (r.contains("probe_before_rows") && l.probe_rows == 0) {  // step 1's row
      l.probe_rows = r.value("probe_before_rows", int64_t{0});
      l.probe_compiled_before = r.value("probe_before_compiled_rate", 0.0);
      l.probe_correct_before = r.value("probe_before_correct_rate", 0.0);
      l.probe_reward_before = r.value("probe_before_reward_mean", 0.0);
    }
    if (r.contains("probe_after_rows")) {  // the last step's row
      after = true;
      l.probe_compiled_after = r.value("probe_after_compiled_rate", 0.0);
      l.probe_correct_after = r.value("probe_after_correct_rate", 0.0);
      l.probe_reward_after = r.value("probe_after_reward_mean", 0.0);
    }
    if (i == 0) l.correct_first = correct, l.reward_first = reward;
    l.correct_last = correct, l.reward_last = reward;
    // Odd step counts: the middle step counts in neither half.
    if (i < half) {
      l.correct_early += correct / static_cast<double>(half);
      l.reward_early += reward / static_cast<double>(half);
    } else if (i >= l.steps - half) {
      l.correct_late += correct / static_cast<double>(half);
      l.reward_late += reward / static_cast<double>(half);
    }
    ++i;
  }
  if (!after) l.probe_rows = 0;  // a stage stopped before its last step: no verdict from half a probe
  return l;
}

std::string format_rl_learning(const RlLearning& l) {
  if (l.steps == 0) return l.stage + ": no RL steps recorded\n";
  char buf[768];
  const int64_t half = l.steps / 2;
  std::snprintf(buf, sizeof buf,
                "%s: %lld steps, %lld with updates (%lld optimizer passes). The policy's own samples "
                "(demonstrations excluded): correct %.0f%% -> %.0f%% (step 1 -> %lld), %.0f%% -> "
                "%.0f%% (mean of steps 1-%lld -> %lld-%lld); reward %.3f -> %.3f, %.3f -> %.3f.\n",
                l.stage.c_str(), static_cast<long long>(l.steps),
                static_cast<long long>(l.steps_with_updates), static_cast<long long>(l.updates),
                100 * l.correct_first, 100 * l.correct_last, static_cast<long long>(l.steps),
                100 * l.correct_early, 100 * l.correct_late, static_cast<long long>(half),
                static_cast<long long>(l.steps - half + 1), static_cast<long long>(l.steps),
                l.reward_first, l.reward_last, l.reward_early, l.reward_late);
  std::string s = buf;
  std::snprintf(buf, sizeof buf, "%s: tokens per completion %.1f -> %.1f (mean %.1f); format failures %lld",
                l.stage.c_str(), l.tokens_first, l.tokens_last, l.tokens_mean,
                static_cast<long long>(l.format_failures));
  s += buf;
  if (l.edit_rows > 0)
    s += "; edit mode: blocks applied in " + std::to_string(l.edits_applied) + " of " +
         std::to_string(l.edit_rows) + " completions";
  s += ".\n";
  if (l.probe_rows > 0) {
    std::snprintf(buf, sizeof buf,
                  "%s: fixed probe (%lld samples: every training task, the same prompts and seeds "
                  "before and after): correct %.0f%% -> %.0f%%, compiled %.0f%% -> %.0f%%, reward "
                  "%.3f -> %.3f.\n",
                  l.stage.c_str(), static_cast<long long>(l.probe_rows), 100 * l.probe_correct_before,
                  100 * l.probe_correct_after, 100 * l.probe_compiled_before, 100 * l.probe_compiled_after,
                  l.probe_reward_before, l.probe_reward_after);
    s += buf;
    if (l.improved())
      s += l.stage + ": the policy learned: its correct rate on the fixed probe rose by 10 points or more.\n";
    else
      s += l.stage + ": no improvement over the stage (" +
           (l.updates == 0 ? std::string("no update was taken: every group's rewards were equal")
                           : std::string("the fixed probe's correct rate did not rise by 10 points")) +
           ").\n";
    return s;
  }
  if (l.steps < 2)
    s += l.stage + ": one step: too few to say whether the policy learned.\n";
  else if (l.improved())
    s += l.stage + ": the policy learned: its correct rate and reward rose over the stage.\n";
  else
    s += l.stage + ": no improvement over the stage (" +
         (l.updates == 0 ? std::string("no update was taken: every group's rewards were equal")
                         : std::string("the second half's correct rate is not 10 points above the first's, or its reward is not above")) +
         ").\n";
  return s;
}

}  // namespace kernelrl
