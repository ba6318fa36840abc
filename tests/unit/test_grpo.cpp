// GRPO math against hand-computed values (docs/grpo.md): advantages in the three modes,
// zero-spread groups, the clipped surrogate on both sides of the clip, both aggregations,
// gradients that vanish where the clip binds, the k3 KL estimator, and reward smoothing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "trainer/grpo.h"

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
