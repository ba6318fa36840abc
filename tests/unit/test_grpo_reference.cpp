// GRPO's formulas against an independent reference: tests/golden/grpo_reference.py (Python and
// float64 torch, written from the papers and TRL/verl) computed tests/golden/grpo/golden.json;
// here the C++ functions recompute every case. Covered: reward shaping (overlong penalty, a
// passing row never below failed_reward), smoothing with the σ floor (the erased first success
// of issue 39), group advantages in the three norms, shaping → smoothing → advantages end to
// end, the clipped surrogate (token-mean, sequence-mean, dr-grpo, GSPO, with and without the
// k3 KL) with its gradient, and log-probs at the sampling temperature with entropy and
// gradients through the chunked output head. Each test states its metric and threshold; the
// negative controls show the old behaviour failing the same check.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/llama.h"
#include "test_util.h"
#include "trainer/grpo.h"

// This file's own namespace: the unit tests compile in unity batches (tests/CMakeLists.txt).
namespace kernelrl::grpo_reference_test {
namespace {

using nlohmann::json;

const json& golden() {
  static const json g = [] {
    std::ifstream in(std::string(KERNELRL_SOURCE_DIR) + "/tests/golden/grpo/golden.json");
    if (!in) throw std::runtime_error("tests/golden/grpo/golden.json is missing");
    return json::parse(in);
  }();
  return g;
}

// A nested JSON list of numbers as a float64 tensor (1-D or 2-D).
torch::Tensor tensor_of(const json& j, torch::Dtype dtype = torch::kFloat64) {
  if (j.at(0).is_array()) {
    std::vector<torch::Tensor> rows;
    for (const auto& r : j) rows.push_back(tensor_of(r, torch::kFloat64));
    return torch::stack(rows).to(dtype);
  }
  return torch::tensor(j.get<std::vector<double>>(), torch::kFloat64).to(dtype);
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// The committed numbers are what the reference computes now (it recomputes every case and
// compares, all but the generator line); skipped where KERNELRL_PYTHON has no torch.
TEST(GrpoReference, GoldenFileIsWhatTheReferenceComputes) {
  if (std::string(KERNELRL_PYTHON).empty())
    GTEST_SKIP() << "KERNELRL_PYTHON not set at configure time";
  auto r = testing::run_command(std::string(KERNELRL_PYTHON) + " " + KERNELRL_SOURCE_DIR +
                                "/tests/golden/grpo_reference.py --check");
  if (r.exit_code == 3) GTEST_SKIP() << "torch not importable by " << KERNELRL_PYTHON;
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

GrpoConfig smoothing_config(const json& c) {
  GrpoConfig cfg;
  cfg.smoothing_window = c.at("window").get<int64_t>();
  cfg.smoothing_sigmas = c.at("sigmas").get<double>();
  cfg.smoothing_min_std = c.at("min_std").get<double>();
  return cfg;
}

// Shaping: exact up to one rounding (|Δ| ≤ 1e-12).
TEST(GrpoReference, ShapedRewardKeepsPassingRowsAtOrAboveFailures) {
  int below_before = 0;  // the old shaping, r + R_len, put this many passing rows below −1
  for (const auto& c : golden().at("shaping")) {
    const double r = c.at("reward").get<double>(), failed = c.at("failed_reward").get<double>();
    const bool passed = c.at("passed").get<bool>();
    const int64_t n = c.at("length").get<int64_t>(), max_len = c.at("max_len").get<int64_t>(),
                  buffer = c.at("buffer").get<int64_t>();
    const double got = shaped_reward(r, passed, n, max_len, buffer, failed);
    EXPECT_NEAR(got, c.at("expected").get<double>(), 1e-12) << c.dump();
    if (passed) {
      EXPECT_GE(got, failed) << c.dump();
    }
    below_before += passed && r + overlong_penalty(n, max_len, buffer) < failed;
  }
  EXPECT_GT(below_before, 0);  // the cases include what the docs' claim used to miss
}

// Smoothing: double arithmetic on both sides (|Δ| ≤ 1e-12).
TEST(GrpoReference, SmoothingWithTheSigmaFloorMatches) {
  for (const auto& c : golden().at("smoothing")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    RewardSmoother smoother(smoothing_config(c));
    for (size_t s = 0; s < c.at("steps").size(); ++s) {
      const auto& step = c.at("steps")[s];
      const auto tasks = step.at("tasks").get<std::vector<std::string>>();
      const auto rewards = step.at("rewards").get<std::vector<double>>();
      const auto want = c.at("expected")[s].get<std::vector<double>>();
      // smooth() previews without appending: the same values, twice.
      EXPECT_EQ(smoother.smooth(tasks, rewards), smoother.smooth(tasks, rewards));
      const auto got = smoother.apply_step(tasks, rewards);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-12) << "step " << s << " row " << i;
    }
  }
}

// Issue 39's erased first success: 8 failures (−1) fill the window, σ = 0; the next group is
// [1.3, −1 ×7]. With the floor the success stays above the failures and the group keeps its
// spread; without it (σ_min → 0, the old code) every reward becomes −1 and the group leaves the
// update.
TEST(GrpoReference, FirstSuccessAfterEqualFailuresKeepsItsGroupInTheUpdate) {
  const json& c = golden().at("smoothing").at(0);
  ASSERT_EQ(c.at("name").get<std::string>(), "erased_success_min_std_0.1");
  auto run = [&](double min_std) {
    GrpoConfig cfg = smoothing_config(c);
    cfg.smoothing_min_std = min_std;
    RewardSmoother smoother(cfg);
    const std::vector<std::string> tasks(8, "a");
    smoother.apply_step(tasks, c.at("steps")[0].at("rewards").get<std::vector<double>>());
    const auto smoothed =
        smoother.apply_step(tasks, c.at("steps")[1].at("rewards").get<std::vector<double>>());
    return group_advantages(torch::tensor(smoothed, torch::kFloat64), 8, "group", 1e-4);
  };
  const GroupAdvantages fixed = run(0.1);
  EXPECT_EQ(fixed.zero_spread_groups, 0);
  EXPECT_GT(fixed.advantages[0].item<float>(), 0.f);  // the success is pushed up
  EXPECT_TRUE(fixed.valid.all().item<bool>());
  const GroupAdvantages old = run(1e-300);  // the old bound μ ± k·σ with σ = 0
  EXPECT_EQ(old.zero_spread_groups, 1);
  EXPECT_FALSE(old.valid.any().item<bool>());
}

// Advantages: float64 in, float32 out (|Δ| ≤ 2e-6 on values of order 1).
TEST(GrpoReference, GroupAdvantagesInEveryNormMatch) {
  for (const auto& c : golden().at("advantages")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    auto g = group_advantages(tensor_of(c.at("rewards")), c.at("group_size").get<int64_t>(),
                              c.at("norm").get<std::string>(), c.at("eps").get<double>());
    EXPECT_LE(max_abs_diff(g.advantages, tensor_of(c.at("expected"))), 2e-6);
    const auto valid = c.at("valid").get<std::vector<bool>>();
    for (size_t i = 0; i < valid.size(); ++i) EXPECT_EQ(g.valid[i].item<bool>(), valid[i]) << i;
    EXPECT_EQ(g.zero_spread_groups, c.at("zero_spread_groups").get<int64_t>());
  }
}

// Shaping → smoothing → advantages as the RL step chains them (trainer/grpo_stage.cpp).
TEST(GrpoReference, ShapingSmoothingAdvantagesEndToEnd) {
  for (const auto& c : golden().at("pipeline")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    RewardSmoother smoother(smoothing_config(c));
    std::vector<double> last;
    for (size_t s = 0; s < c.at("steps").size(); ++s) {
      std::vector<double> shaped;
      for (const auto& row : c.at("steps")[s])
        shaped.push_back(
            shaped_reward(row.at("reward").get<double>(), row.at("passed").get<bool>(),
                          row.at("length").get<int64_t>(), c.at("max_len").get<int64_t>(),
                          c.at("buffer").get<int64_t>(), c.at("failed_reward").get<double>()));
      const auto want_shaped = c.at("shaped")[s].get<std::vector<double>>();
      for (size_t i = 0; i < shaped.size(); ++i) EXPECT_NEAR(shaped[i], want_shaped[i], 1e-12);
      last = smoother.apply_step(std::vector<std::string>(shaped.size(), "t"), shaped);
      const auto want_smoothed = c.at("smoothed")[s].get<std::vector<double>>();
      for (size_t i = 0; i < last.size(); ++i) EXPECT_NEAR(last[i], want_smoothed[i], 1e-12);
    }
    auto g = group_advantages(torch::tensor(last, torch::kFloat64),
                              c.at("group_size").get<int64_t>(), "group", 1e-4);
    EXPECT_LE(max_abs_diff(g.advantages, tensor_of(c.at("advantages"))), 2e-6);
    EXPECT_EQ(g.zero_spread_groups, 0);
  }
}

// The surrogate in float64 (the same code runs in fp32 in training): loss, clip fraction, KL,
// mean ratio and ∂loss/∂logp within 1e-12.
TEST(GrpoReference, ClippedSurrogateEveryAggregationMatches) {
  int cases = 0;
  for (const auto& c : golden().at("surrogate")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const json& k = c.at("config");
    GrpoConfig cfg;
    cfg.clip_eps_low = k.at("clip_eps_low").get<double>();
    cfg.clip_eps_high = k.at("clip_eps_high").get<double>();
    cfg.kl_coef = k.at("kl_coef").get<double>();
    cfg.loss_agg = k.at("loss_agg").get<std::string>();
    cfg.ratio_level = k.at("ratio_level").get<std::string>();
    auto logp = tensor_of(c.at("logp")).requires_grad_(true);
    const auto ref = c.at("logp_ref").is_null() ? torch::Tensor() : tensor_of(c.at("logp_ref"));
    auto t = clipped_surrogate(logp, tensor_of(c.at("logp_old")), ref,
                               tensor_of(c.at("advantages")), tensor_of(c.at("mask")), cfg,
                               c.at("max_completion_tokens").get<int64_t>());
    const json& e = c.at("expected");
    EXPECT_NEAR(t.loss.item<double>(), e.at("loss").get<double>(), 1e-12);
    EXPECT_NEAR(t.clip_fraction.item<double>(), e.at("clip_fraction").get<double>(), 1e-12);
    EXPECT_NEAR(t.kl.item<double>(), e.at("kl").get<double>(), 1e-12);
    EXPECT_NEAR(t.ratio_mean.item<double>(), e.at("ratio_mean").get<double>(), 1e-12);
    t.loss.backward();
    EXPECT_LE(max_abs_diff(logp.grad(), tensor_of(e.at("grad_logp"))), 1e-12);
    ++cases;
  }
  EXPECT_EQ(cases, 8);
}

TEST(GrpoReference, DrGrpoRefusesAMissingCompletionBudget) {
  GrpoConfig cfg;
  cfg.loss_agg = "dr-grpo";
  auto x = torch::zeros({1, 2});
  EXPECT_THROW(clipped_surrogate(x, x, {}, torch::ones({1}), torch::ones({1, 2}), cfg), c10::Error);
}

// Log-probs at the sampling temperature through the chunked output head (3 rows of logits at a
// time, fp32 logits as in training): log-probs, entropy and the gradients in h and w within
// 1e-5 of the float64 reference (|values| ≤ ~5). At T ≠ 1 the untempered log-probs (the old
// code's) miss the reference by far more.
TEST(GrpoReference, HeadLogprobsAtTheSamplingTemperatureMatch) {
  for (const auto& c : golden().at("logprobs")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const double temperature = c.at("temperature").get<double>();
    auto h = tensor_of(c.at("h"), torch::kFloat32).requires_grad_(true);
    auto w = tensor_of(c.at("w"), torch::kFloat32).requires_grad_(true);
    const auto targets = torch::tensor(c.at("targets").get<std::vector<int64_t>>(), torch::kInt64);
    const json& e = c.at("expected");
    const int64_t chunk_bytes = w.size(0) * 4 * 3;
    torch::Tensor entropy;
    auto logp = head_token_logprobs(h, w, targets, temperature, &entropy, chunk_bytes);
    EXPECT_LE(max_abs_diff(logp, tensor_of(e.at("logp"))), 1e-5);
    EXPECT_LE(max_abs_diff(entropy, tensor_of(e.at("entropy"))), 1e-5);
    (logp * tensor_of(c.at("grad_out"), torch::kFloat32)).sum().backward();
    EXPECT_LE(max_abs_diff(h.grad(), tensor_of(e.at("grad_h"))), 1e-5);
    EXPECT_LE(max_abs_diff(w.grad(), tensor_of(e.at("grad_w"))), 1e-5);
    {
      torch::NoGradGuard ng;  // the no-grad path (π_old, π_ref) gives the same values
      EXPECT_LE(max_abs_diff(head_token_logprobs(h, w, targets, temperature, nullptr, chunk_bytes),
                             tensor_of(e.at("logp"))),
                1e-5);
      if (temperature != 1.0) {
        EXPECT_GT(max_abs_diff(head_token_logprobs(h, w, targets, 1.0, nullptr, chunk_bytes),
                               tensor_of(e.at("logp"))),
                  1e-2);
      }
    }
  }
}

}  // namespace
}  // namespace kernelrl::grpo_reference_test
