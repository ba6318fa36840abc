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

TEST(RewardSmoother, ClipsThenWinsorizesPerTask) {
  GrpoConfig cfg;
  cfg.reward_clip_low = -1;
  cfg.reward_clip_high = 1000;
  cfg.smoothing_window = 8;
  cfg.smoothing_sigmas = 3;
  RewardSmoother s(cfg);
  EXPECT_EQ(s.apply("a", -5), -1);  // clipped, and the window takes −1
  RewardSmoother t(cfg);
  for (int i = 1; i <= 8; ++i) EXPECT_EQ(t.apply("a", i), i);  // window filling: untouched
  EXPECT_NEAR(t.apply("a", 100), 11.848469, 1e-5);  // mean 4.5 + 3·stdev(1..8)
  EXPECT_EQ(t.apply("b", 100), 100);                // another task's window is its own
  RewardSmoother u(cfg);
  u.load_state(t.state());
  EXPECT_DOUBLE_EQ(u.apply("a", 3), t.apply("a", 3));  // state round-trips for resume
}

}  // namespace
}  // namespace kernelrl
