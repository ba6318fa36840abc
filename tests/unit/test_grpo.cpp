// GRPO math against hand-computed values (docs/grpo.md): advantages in the three modes,
// zero-spread groups, the clipped surrogate on both sides of the clip, both aggregations,
// gradients that vanish where the clip binds, the k3 KL estimator, and reward smoothing; then
// the RL step's pieces that need no policy (DAPO resampling, turns, rows ahead, metrics).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "common/error.h"
#include "trainer/dynamic_sampling.h"
#include "trainer/grpo.h"
#include "trainer/multi_turn.h"
#include "trainer/rl_metrics.h"
#include "trainer/rl_pending.h"

namespace kernelrl {
namespace {

std::vector<float> vec(const torch::Tensor& t) {
  auto c = t.to(torch::kFloat32).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// Values computed independently (Python statistics.stdev, by hand for the surrogate).
TEST(GroupAdvantages, GroupNormalisedWithSampleStd) {
  auto r = torch::tensor({1.f, 2.f, 3.f, 4.f, 5.f, 5.f, 5.f, 5.f});
  auto g = group_advantages(r, 4, "group", 1e-4);
  auto a = vec(g.advantages);
  const float want[] = {-1.161805f, -0.387268f, 0.387268f, 1.161805f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(a[i], want[i], 1e-5);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(a[i], 0.f);  // zero-spread group
  EXPECT_EQ(g.zero_spread_groups, 1);
  auto valid = g.valid.to(torch::kInt32);
  EXPECT_EQ(valid.sum().item<int>(), 4);
  EXPECT_EQ(valid[5].item<int>(), 0);
}

TEST(GroupAdvantages, DrGrpoHasNoStdScaling) {
  auto a = vec(group_advantages(torch::tensor({1.f, 2.f, 3.f, 4.f}), 4, "none", 1e-4).advantages);
  EXPECT_FLOAT_EQ(a[0], -1.5f);
  EXPECT_FLOAT_EQ(a[3], 1.5f);
}

TEST(GroupAdvantages, BatchNormUsesBatchStd) {
  auto r = torch::tensor({1.f, 2.f, 3.f, 4.f, 5.f, 5.f, 5.f, 5.f});
  auto a = vec(group_advantages(r, 4, "batch", 1e-4).advantages);
  EXPECT_NEAR(a[0], -0.948623f, 1e-5);
  EXPECT_NEAR(a[3], 0.948623f, 1e-5);
  EXPECT_EQ(a[6], 0.f);
}

TEST(GroupAdvantages, RejectsRaggedGroups) {
  EXPECT_THROW(group_advantages(torch::ones({5}), 4, "group", 1e-4), c10::Error);
}

// Two rows, ratios [0.5, 1.0, 1.5]; row 0 has A = +1, row 1 has A = −1 and its last token masked.
// ε_low = 0.2, ε_high = 0.28 → clip range [0.8, 1.28].
//   row 0 tokens: −min(0.5, 0.8) = −0.5, −1.0, −min(1.5, 1.28) = −1.28   (clip binds on token 2)
//   row 1 tokens: −min(−0.5, −0.8) = 0.8, 1.0, (masked)                    (clip binds on token 0)
struct SurrogateCase {
  torch::Tensor logp, logp_old, mask, adv;
  SurrogateCase() {
    logp_old = torch::log(torch::tensor({{0.3f, 0.2f, 0.4f}, {0.25f, 0.5f, 0.1f}}));
    auto ratio = torch::tensor({{0.5f, 1.0f, 1.5f}, {0.5f, 1.0f, 1.5f}});
    logp = (logp_old + torch::log(ratio)).detach().requires_grad_(true);
    mask = torch::tensor({{1.f, 1.f, 1.f}, {1.f, 1.f, 0.f}});
    adv = torch::tensor({1.f, -1.f});
  }
};

TEST(ClippedSurrogate, TokenMeanValueAndClipFraction) {
  SurrogateCase c;
  GrpoConfig cfg;
  cfg.clip_eps_low = 0.2;
  cfg.clip_eps_high = 0.28;
  auto t = clipped_surrogate(c.logp, c.logp_old, {}, c.adv, c.mask, cfg);
  EXPECT_NEAR(t.loss.item<float>(), (-0.5 - 1.0 - 1.28 + 0.8 + 1.0) / 5, 1e-5);
  EXPECT_NEAR(t.clip_fraction.item<float>(), 2.0 / 5, 1e-6);
  EXPECT_NEAR(t.kl.item<float>(), 0.0, 1e-7);
  EXPECT_NEAR(t.ratio_mean.item<float>(), (0.5 + 1.0 + 1.5 + 0.5 + 1.0) / 5, 1e-5);
}

TEST(ClippedSurrogate, SequenceMeanAveragesRowsFirst) {
  SurrogateCase c;
  GrpoConfig cfg;
  cfg.loss_agg = "sequence-mean";
  auto t = clipped_surrogate(c.logp, c.logp_old, {}, c.adv, c.mask, cfg);
  EXPECT_NEAR(t.loss.item<float>(), ((-0.5 - 1.0 - 1.28) / 3 + (0.8 + 1.0) / 2) / 2, 1e-5);
}

TEST(ClippedSurrogate, GspoSequenceRatioValueClipAndGradient) {
  SurrogateCase c;
  GrpoConfig cfg;
  cfg.ratio_level = "sequence";
  cfg.clip_eps_low = 0.2;
  cfg.clip_eps_high = 0.28;
  auto t = clipped_surrogate(c.logp, c.logp_old, {}, c.adv, c.mask, cfg);
  // Row 0: s = (0.5·1·1.5)^(1/3) = 0.908560, A = 1, unclipped: L = −0.908560.
  // Row 1: s = (0.5·1)^(1/2) = 0.707107 < 0.8 with A = −1: clipped, L = 0.8. Mean over rows.
  const double s0 = std::cbrt(0.75);
  EXPECT_NEAR(t.loss.item<float>(), (-s0 + 0.8) / 2, 1e-5);
  EXPECT_NEAR(t.clip_fraction.item<float>(), 2.0 / 5, 1e-6);  // row 1's 2 of 5 tokens
  t.loss.backward();
  auto g = c.logp.grad();
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(g[0][j].item<float>(), -s0 / 3 / 2, 1e-6);  // ∂(−s0)/∂logp_t / 2
  for (int j = 0; j < 3; ++j) EXPECT_EQ(g[1][j].item<float>(), 0.f);  // clipped row, masked token
}

TEST(ClippedSurrogate, GradientVanishesWhereTheClipBinds) {
  SurrogateCase c;
  GrpoConfig cfg;
  auto t = clipped_surrogate(c.logp, c.logp_old, {}, c.adv, c.mask, cfg);
  t.loss.backward();
  auto g = c.logp.grad();
  // d/dlogp of −ρA/5 is −ρA/5 where unclipped.
  EXPECT_NEAR(g[0][0].item<float>(), -0.5f / 5, 1e-6);
  EXPECT_NEAR(g[0][1].item<float>(), -1.0f / 5, 1e-6);
  EXPECT_EQ(g[0][2].item<float>(), 0.f);  // ratio 1.5 > 1.28 with A > 0: clipped
  EXPECT_EQ(g[1][0].item<float>(), 0.f);  // ratio 0.5 < 0.8 with A < 0: clipped
  EXPECT_NEAR(g[1][1].item<float>(), 1.0f / 5, 1e-6);
  EXPECT_EQ(g[1][2].item<float>(), 0.f);  // masked
}

TEST(ClippedSurrogate, K3KlMatchesClosedForm) {
  // Equal policies apart from the reference: ratio 1, A = 0, so the loss is β·mean k3.
  auto logp = torch::log(torch::tensor({{0.5f, 0.25f, 0.5f}})).requires_grad_(true);
  auto ref = torch::log(torch::tensor({{0.5f, 0.5f, 0.25f}}));  // d = 0, ln 2, −ln 2
  GrpoConfig cfg;
  cfg.kl_coef = 0.5;
  auto t = clipped_surrogate(logp, logp.detach(), ref, torch::zeros({1}), torch::ones({1, 3}), cfg);
  const double k3_ln2 = 2.0 - std::log(2.0) - 1.0, k3_mln2 = 0.5 + std::log(2.0) - 1.0;
  EXPECT_NEAR(t.kl.item<float>(), (0 + k3_ln2 + k3_mln2) / 3, 1e-6);
  EXPECT_NEAR(t.loss.item<float>(), 0.5 * (k3_ln2 + k3_mln2) / 3, 1e-6);
  EXPECT_GE(t.kl.item<float>(), 0.f);
}

TEST(TurnReturns, DiscountOverLaterTurns) {
  // Two trajectories, three turns: rows [t1a, t1b, t2a, t2b, t3a, t3b].
  const std::vector<double> r = {-1, 0.5, -1, 1.0, 2.0, 1.5};
  auto R = turn_returns(r, 3, 0.5);
  // a: R3 = 2, R2 = -1 + 0.5·2 = 0, R1 = -1 + 0.5·0 = -1; b: R3 = 1.5, R2 = 1.75, R1 = 1.375
  const std::vector<double> want = {-1, 1.375, 0, 1.75, 2.0, 1.5};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(R[i], want[i]) << i;
  EXPECT_EQ(turn_returns(r, 1, 0.5), r);  // one turn: the rewards themselves
}

TEST(OverlongPenalty, DapoSoftPunishment) {
  // L_max 100, L_cache 20: free up to 80, linear to −1 at 100, −1 beyond; buffer 0 = off.
  EXPECT_EQ(overlong_penalty(80, 100, 20), 0.0);
  EXPECT_DOUBLE_EQ(overlong_penalty(90, 100, 20), -0.5);
  EXPECT_DOUBLE_EQ(overlong_penalty(100, 100, 20), -1.0);
  EXPECT_EQ(overlong_penalty(101, 100, 20), -1.0);
  EXPECT_EQ(overlong_penalty(100, 100, 0), 0.0);
}

TEST(RewardSmoother, WinsorizesPerTaskAgainstTheWindowBeforeTheStep) {
  GrpoConfig cfg;
  cfg.smoothing_window = 8;
  cfg.smoothing_sigmas = 3;
  RewardSmoother t(cfg);
  // Window filling (fewer than 8 rewards before the step): untouched.
  std::vector<double> first = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(t.apply_step(std::vector<std::string>(8, "a"), first), first);
  // mean(1..8) + 3·stdev(1..8) = 4.5 + 3·2.449490 = 11.848469; task b has no window yet.
  auto got = t.apply_step({"a", "b"}, {100, 100});
  EXPECT_NEAR(got[0], 11.848469, 1e-5);
  EXPECT_EQ(got[1], 100);
  RewardSmoother u(cfg);
  u.load_state(t.state());
  EXPECT_EQ(u.apply_step({"a"}, {3}), t.apply_step({"a"}, {3}));  // state round-trips for resume
}

TEST(RewardSmoother, AStepIsNotWinsorizedAgainstItsOwnSamples) {
  // 7 rewards of 0 in the window, then a step of 8 samples of 50: with per-sample updates the
  // 2nd..8th sample would be winsorized against a window already holding the 1st (which had
  // filled it to 8); per step, the window before it holds 7 (< 8): nothing is touched.
  GrpoConfig cfg;
  cfg.smoothing_window = 64;
  cfg.smoothing_sigmas = 1;
  RewardSmoother s(cfg);
  s.apply_step(std::vector<std::string>(7, "a"), std::vector<double>(7, 0.0));
  const std::vector<double> step(8, 50.0);
  EXPECT_EQ(s.apply_step(std::vector<std::string>(8, "a"), step), step);
  // The next step sees all 15: mean 26.67, sd 25.82 (unbiased): 50 stays, 100 -> mean + sd.
  auto next = s.apply_step({"a", "a"}, {50, 100});
  EXPECT_EQ(next[0], 50);
  EXPECT_NEAR(next[1], 400.0 / 15 + std::sqrt((7 * std::pow(400.0 / 15, 2) + 8 * std::pow(50 - 400.0 / 15, 2)) / 14), 1e-9);
}

}  // namespace
}  // namespace kernelrl

// The RL step's pieces outside the policy (trainer/step_batch.h and what works on it): DAPO's
// group selection, multi-turn appending, the rows-ahead checkpoint format and the metrics row,
// on hand-made rows.
namespace kernelrl {
namespace {

// `rewards[g]` are group g's rows' rewards, tasks named t<g>.
StepBatch batch_of(const std::vector<std::vector<double>>& rewards) {
  StepBatch b;
  for (size_t g = 0; g < rewards.size(); ++g) {
    PromptGroup pg;
    pg.task.name = "t" + std::to_string(g);
    b.groups.push_back(pg);
    for (double r : rewards[g]) {
      Rollout row;
      row.group = g;
      row.text = pg.task.name;
      b.rollouts.push_back(row);
      Scored s;
      s.reward = r;
      b.scored.push_back(s);
    }
  }
  return b;
}

std::vector<double> raw_rewards(const StepBatch& b) {
  std::vector<double> r;
  for (const Scored& s : b.scored) r.push_back(s.reward);
  return r;
}

TEST(DynamicSampling, KeepsGroupsWithSpreadFirstInSamplingOrder) {
  StepBatch b = batch_of({{1, 1}, {0, 1}, {2, 2}, {3, 0}});
  EXPECT_FALSE(group_has_spread(b, raw_rewards(b), 0));
  EXPECT_TRUE(group_has_spread(b, raw_rewards(b), 1));
  keep_groups_with_spread(b, raw_rewards(b), 3);  // t1, t3 (spread) and t0 (first flat), in order
  ASSERT_EQ(b.groups.size(), 3u);
  EXPECT_EQ(b.groups[0].task.name, "t0");
  EXPECT_EQ(b.groups[1].task.name, "t1");
  EXPECT_EQ(b.groups[2].task.name, "t3");
  ASSERT_EQ(b.rollouts.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(b.rollouts[i].group, i / 2);  // renumbered
    EXPECT_EQ(b.rollouts[i].text, b.groups[i / 2].task.name);
  }
  EXPECT_EQ(b.scored[5].reward, 0);
}

TEST(DynamicSampling, ResamplesUntilEnoughGroupsHaveSpread) {
  StepBatch b = batch_of({{1, 1}, {0, 1}});  // B = 2, one group with spread
  b.generated = 10;
  std::vector<std::pair<int64_t, int64_t>> asked;
  int64_t rounds = resample_flat_groups(
      b, 2, 3,
      [&](int64_t round, int64_t count) {
        asked.emplace_back(round, count);
        StepBatch more = batch_of({{5, 5}});  // flat again
        if (round == 2) more = batch_of({{4, 6}});
        more.generated = 7;
        more.times.generate = 0.5;
        return more;
      },
      raw_rewards);
  EXPECT_EQ(rounds, 2);
  EXPECT_EQ(asked, (std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 1}}));
  ASSERT_EQ(b.groups.size(), 2u);  // the two with spread: the first round's flat group dropped
  EXPECT_EQ(b.groups[1].task.name, "t0");  // round 2's group (its own t0), renumbered to 1
  EXPECT_EQ(b.scored[2].reward, 4);
  EXPECT_EQ(b.generated, 24);            // every round's tokens count
  EXPECT_DOUBLE_EQ(b.times.generate, 1.0);
  // Off (R = 0): nothing sampled, nothing dropped.
  StepBatch c = batch_of({{1, 1}, {0, 1}});
  EXPECT_EQ(resample_flat_groups(
                c, 2, 0, [](int64_t, int64_t) -> StepBatch { throw 1; }, raw_rewards),
            0);
  EXPECT_EQ(c.groups.size(), 2u);
}

// Dynamic sampling decides on the rewards the advantages see (the RL step passes overlong
// shaping + smoothing, as here), not on the evaluator's: a group whose raw rewards differ but
// smooth to one value has no spread and is resampled; a group of equal raw rewards that overlong
// shaping separates has spread and is kept. Deciding on raw rewards (the old code) would keep
// the first and resample the second.
TEST(DynamicSampling, DecidesOnShapedAndSmoothedRewards) {
  GrpoConfig cfg;  // window 64, k = 3, σ_min = 0.1
  cfg.overlong_buffer = 16;
  RewardSmoother smoother(cfg);
  // Task t0's window: 8 rewards of 0, so it winsorizes at 0 ± 0.3 (the floor).
  smoother.apply_step(std::vector<std::string>(8, "t0"), std::vector<double>(8, 0.0));
  const int64_t max_len = 120;
  auto advantage_rewards = [&](const StepBatch& b) {
    std::vector<std::string> tasks;
    std::vector<double> shaped;
    for (size_t i = 0; i < b.rollouts.size(); ++i) {
      tasks.push_back(b.groups[b.rollouts[i].group].task.name);
      shaped.push_back(shaped_reward(b.scored[i].reward, b.scored[i].passed,
                                     static_cast<int64_t>(b.rollouts[i].completion.size()), max_len,
                                     cfg.overlong_buffer, /*failed_reward=*/-1.0));
    }
    return smoother.smooth(tasks, shaped);
  };
  // t0: raw 5 and 6, both above 0.3: flat once smoothed. t1 (no window yet): both pass at 1.0,
  // the second 118 tokens long (R_len = −0.875): spread once shaped.
  StepBatch b = batch_of({{5, 6}, {1, 1}});
  for (auto& s : b.scored) s.passed = true;
  b.rollouts[3].completion.assign(118, 7);
  EXPECT_TRUE(group_has_spread(b, raw_rewards(b), 0));
  EXPECT_FALSE(group_has_spread(b, raw_rewards(b), 1));
  EXPECT_FALSE(group_has_spread(b, advantage_rewards(b), 0));
  EXPECT_TRUE(group_has_spread(b, advantage_rewards(b), 1));
  int64_t asked = 0;
  const int64_t rounds = resample_flat_groups(
      b, 2, 1,
      [&](int64_t, int64_t count) {
        asked = count;
        StepBatch more = batch_of({{0, 1}});
        more.groups[0].task.name = "t2";
        return more;
      },
      advantage_rewards);
  EXPECT_EQ(rounds, 1);
  EXPECT_EQ(asked, 1);  // t1 counted as having spread, t0 not
  ASSERT_EQ(b.groups.size(), 2u);
  EXPECT_EQ(b.groups[0].task.name, "t1");
  EXPECT_EQ(b.groups[1].task.name, "t2");
  // The smoother's windows were only read: t0 still holds its 8 rewards.
  EXPECT_EQ(smoother.state()["t0"].size(), 8u);
}

TEST(MultiTurn, AppendsTurnsInTrajectoryOrder) {
  StepBatch b = batch_of({{0, 1}, {2, 3}});  // turn 1: 4 trajectories
  std::vector<std::string> seen;
  refine_turns(
      b, 3,
      [&](const TaskSpec& task, const Rollout& previous, const Scored& verdict) {
        seen.push_back(task.name + ":" + previous.text + ":" + std::to_string(int(verdict.reward)));
        PromptGroup g;
        g.task = task;
        return g;
      },
      [&](std::vector<PromptGroup> prompts, int64_t turn) {
        StepBatch more;
        more.groups = std::move(prompts);
        for (size_t j = 0; j < more.groups.size(); ++j) {
          Rollout r;
          r.group = j;
          r.text = "turn" + std::to_string(turn + 1);
          more.rollouts.push_back(r);
          Scored s;
          s.reward = 10 * (turn + 1) + static_cast<double>(j);
          more.scored.push_back(s);
        }
        return more;
      });
  ASSERT_EQ(b.rollouts.size(), 12u);
  EXPECT_EQ(seen.front(), "t0:t0:0");
  EXPECT_EQ(seen[4], "t0:turn2:20");  // turn 3's first prompt revises turn 2's first row
  EXPECT_EQ(b.scored[11].reward, 33);
  EXPECT_EQ(b.groups[b.rollouts[11].group].task.name, "t1");
}

TEST(MultiTurn, VerdictSaysWhatTheEvaluatorFound) {
  Scored none;
  EXPECT_EQ(verdict_of(none), "no code was found in your response (format failure)");
  Scored bad;
  bad.parsed = true;
  bad.result.status = EvalStatus::compile_error;
  bad.result.compile_log = std::string(700, 'e');
  const std::string v = verdict_of(bad);
  EXPECT_EQ(v.size(), 604u);  // cut at 600 characters
  EXPECT_EQ(v.substr(v.size() - 4), " ...");
}

TEST(PendingRows, RoundTripThroughTheCheckpointFormat) {
  StepBatch p;
  PromptGroup g;
  g.task.name = "b";
  g.prompt = "write it";
  g.prompt_ids = {1, 2, 3};
  g.exemplars_used = 2;
  p.groups.push_back(g);
  Rollout r;
  r.group = 0;
  r.completion = {7, 8};
  r.text = "<|code|>int x;<|end|>";
  r.finish_reason = "eos";
  r.policy_logprobs = {-0.5f, -1.25f};
  p.rollouts.push_back(r);
  p.generated = 2;
  TaskSpec a, b;
  a.name = "a";
  b.name = "b";
  b.kind = TaskKind::hgemm;
  const nlohmann::json j = nlohmann::json::parse(pending_rows_json(p).dump());
  StepBatch back = pending_rows_from_json(j, {a, b}, "raw", "code");
  EXPECT_EQ(back.generated, 2);
  ASSERT_EQ(back.groups.size(), 1u);
  EXPECT_EQ(back.groups[0].task.kind, TaskKind::hgemm);  // the stage's task, found by name
  EXPECT_EQ(back.groups[0].prompt_ids, g.prompt_ids);
  EXPECT_EQ(back.groups[0].exemplars_used, 2);
  ASSERT_EQ(back.rollouts.size(), 1u);
  EXPECT_EQ(back.rollouts[0].policy_logprobs, r.policy_logprobs);
  EXPECT_EQ(back.rollouts[0].completion, r.completion);
  EXPECT_EQ(back.rollouts[0].parsed.ok, parse_response(r.text, "code").ok);
  EXPECT_TRUE(back.scored.empty());
  EXPECT_THROW(pending_rows_from_json(j, {a}, "raw", "code"), UserError);
}

TEST(RlMetrics, RowCarriesEveryFieldWithHandComputedValues) {
  StepBatch b = batch_of({{-1, 1}});
  b.scored[1].parsed = b.scored[1].compiled = b.scored[1].passed = true;
  b.scored[1].speedup = 2;
  b.rollouts[1].finish_reason = "demonstration";
  b.rollouts[0].completion = {1, 2, 3, 4};
  b.times.generate = 2;
  b.times.tokens = 10;
  RlStepResult r;
  r.smoothed = {-0.5, 1};
  r.advantages = group_advantages(torch::tensor({-1.f, 1.f}), 2, "group", 1e-4);
  r.update.passes = {GrpoPassStats{0.25, 0.1, 0.01, 2, 1, 3}, GrpoPassStats{0.5, 0, 0, 0, 0, 4}};
  r.lr = 1e-3;
  r.best_speedup = 2;
  RolloutConfig ro;
  ro.group_size = 2;
  StepLog log = rl_step_log(b, r, ro);
  const nlohmann::json& m = log.metrics;
  EXPECT_DOUBLE_EQ(m["reward_mean"].get<double>(), 0);
  EXPECT_NEAR(m["reward_std"].get<double>(), std::sqrt(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(m["reward_smoothed_mean"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(m["correct_rate"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(m["faster_rate"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(m["sampled_correct_rate"].get<double>(), 0);  // the demonstration passed
  EXPECT_DOUBLE_EQ(m["sampled_reward_mean"].get<double>(), -1);
  EXPECT_DOUBLE_EQ(m["demonstrations"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(m["completion_len"].get<double>(), 2);
  EXPECT_DOUBLE_EQ(m["loss"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(m["grad_norm"].get<double>(), 3);
  EXPECT_DOUBLE_EQ(m["loss_last"].get<double>(), 0.5);
  EXPECT_EQ(m["updates"].get<int64_t>(), 2);
  EXPECT_DOUBLE_EQ(m["tokens_per_s"].get<double>(), 5);
  EXPECT_DOUBLE_EQ(m["zero_spread_frac"].get<double>(), 0);
  EXPECT_EQ(m["advantages"].size(), 2u);
  EXPECT_FALSE(m.contains("turn1_correct_rate"));  // single turn
  for (const char* k : {"reward_max", "format_ok_rate", "compiled_rate", "sampled_compiled_rate",
                        "best_speedup", "kl", "clip_fraction", "entropy", "ratio_mean", "grad_norm_last",
                        "update_tokens", "resample_rounds", "lr", "prompts_s", "generate_s", "compile_s",
                        "compile_wait_s", "time_s", "wait_s", "runner_start_s", "runners", "spare_runners",
                        "baseline_disagreed", "evaluate_s", "overlap", "update_s", "step_s", "candidates",
                        "tokens_per_completion", "edit_rows", "edits_applied", "edits_unchanged",
                        "format_failures", "format_failure_format_no_code", "format_failure_edit_empty",
                        "format_failure_edit_malformed", "format_failure_edit_no_match",
                        "format_failure_edit_ambiguous"})
    EXPECT_TRUE(m.contains(k)) << k;
  EXPECT_EQ(m["format_failures"].get<int64_t>(), 1);  // row 0 has no code
  EXPECT_DOUBLE_EQ(m["tokens_per_completion"].get<double>(), 4);  // the policy's own row only
  EXPECT_EQ(m.size(), 54u);  // the loop adds stage, step and time
  EXPECT_EQ(log.status, "reward 0.000 correct 50% (sampled 0%) best 2.00x");
}

}  // namespace
}  // namespace kernelrl
