// Reward (CUDA-L2 Eq. 3), length measures and timing statistics against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "reward/eval_result.h"
#include "reward/evaluator.h"
#include "reward/reward_formula.h"

namespace kernelrl {
namespace {

TEST(RewardFormula, SingleTermMatchesHandComputation) {
  RewardConfig cfg;
  cfg.alpha = 0.5;
  cfg.beta = 0.25;
  cfg.length_measure = "kchars";
  cfg.speedup_clip = 10;
  std::string src(2000, 'x');  // L = 2 kchars
  std::string why;
  // r = 100/80 - 0.5*0.2 - 0.25*2 = 1.25 - 0.1 - 0.5 = 0.65
  double r = compute_reward(cfg, {{100.0, 80.0, 0.2}}, src, &why);
  EXPECT_NEAR(r, 0.65, 1e-12);
  EXPECT_NE(why.find("1.25"), std::string::npos) << why;
}

TEST(RewardFormula, MeanOverTermsAndClipping) {
  RewardConfig cfg;
  cfg.alpha = 1.0;
  cfg.beta = 0.0;
  cfg.speedup_clip = 3.0;
  // terms: speedup 10 clipped to 3, minus 0.5; speedup 0.5 minus 0 -> (2.5 + 0.5) / 2 = 1.5
  std::string why;
  double r = compute_reward(cfg, {{100.0, 10.0, 0.5}, {50.0, 100.0, 0.0}}, "k", &why);
  EXPECT_NEAR(r, 1.5, 1e-12);
  EXPECT_NE(why.find("clipped"), std::string::npos) << why;
}

TEST(RewardFormula, APassingCandidateNeverScoresBelowAFailingOne) {
  RewardConfig cfg;
  cfg.alpha = 0.0;
  cfg.beta = 1.0;
  cfg.failed_reward = -1.0;
  // speedup 0.1 minus 1.0·L(5 kchars) = -4.9, clipped to failed_reward.
  std::string why;
  double r = compute_reward(cfg, {{10.0, 100.0, 0.0}}, std::string(5000, 'x'), &why);
  EXPECT_EQ(r, -1.0);
  EXPECT_NE(why.find("-4.9"), std::string::npos) << why;
  EXPECT_NE(why.find("clipped to -1"), std::string::npos) << why;
}

TEST(RewardFormula, NoTermsGivesFailedReward) {
  RewardConfig cfg;
  cfg.failed_reward = -2.5;
  EXPECT_EQ(compute_reward(cfg, {}, "x"), -2.5);
}

TEST(RewardFormula, LengthMeasures) {
  std::string s = "int a = b+1;\nreturn a;\n";
  EXPECT_NEAR(code_length(s, "kchars"), s.size() / 1000.0, 1e-15);
  EXPECT_NEAR(code_length(s, "klines"), 2 / 1000.0, 1e-15);
  // int a = b + 1 ; return a ;  -> 10 tokens
  EXPECT_NEAR(code_length(s, "ktokens"), 10 / 1000.0, 1e-15);
  EXPECT_NEAR(code_length("x\ny", "klines"), 2 / 1000.0, 1e-15);  // no trailing newline
  EXPECT_THROW(code_length(s, "bytes"), UserError);
}

TEST(RewardFormula, TimingStatsPercentiles) {
  // 1..11: median 6, p10 = 2, p90 = 10 (linear interpolation of order statistics), mean 6,
  // sample stddev sqrt(11) -> cv = sqrt(11)/6.
  std::vector<double> s;
  for (int i = 11; i >= 1; --i) s.push_back(i);
  auto t = timing_stats(s);
  EXPECT_EQ(t.n, 11);
  EXPECT_DOUBLE_EQ(t.median_us, 6);
  EXPECT_DOUBLE_EQ(t.p10_us, 2);
  EXPECT_DOUBLE_EQ(t.p90_us, 10);
  EXPECT_DOUBLE_EQ(t.mean_us, 6);
  EXPECT_NEAR(t.cv, std::sqrt(11.0) / 6.0, 1e-12);
  EXPECT_FALSE(timing_stats({}).valid());
}

TEST(RewardFormula, ResultJsonRoundTrip) {
  EvalResult r;
  r.hash = "abc";
  r.status = EvalStatus::wrong_answer;
  r.check = "fp16_accumulation";
  r.baselines["cublas-max"] = timing_stats({1, 2, 3});
  r.metrics["x"] = 1;
  auto back = result_from_json(to_json(r));
  EXPECT_EQ(back.status, EvalStatus::wrong_answer);
  EXPECT_EQ(back.check, "fp16_accumulation");
  EXPECT_DOUBLE_EQ(back.baselines["cublas-max"].median_us, 2);
  EXPECT_EQ(back.metrics["x"], 1);
  for (int s = 0; s <= static_cast<int>(EvalStatus::internal_error); ++s)
    EXPECT_EQ(status_from_name(status_name(static_cast<EvalStatus>(s))), static_cast<EvalStatus>(s));
}

TEST(RewardBaselines, ReportNamesMapToMeasuredOnes) {
  using V = std::vector<std::string>;
  EXPECT_EQ(raw_baselines_for("cublas-max", "nn"), (V{"cublas-nn", "cublas-tn"}));
  EXPECT_EQ(raw_baselines_for("lt-auto", "tn"), (V{"lt-auto-tn"}));
  EXPECT_EQ(raw_baselines_for("lt-heuristic-max", "nn"), (V{"lt-heuristic-nn", "lt-heuristic-tn"}));
  EXPECT_EQ(raw_baselines_for("torch", "tn"), (V{"torch"}));
  EXPECT_THROW(raw_baselines_for("mkl", "nn"), ConfigError);
  EXPECT_EQ(report_baseline_names().size(), 8u);
}

}  // namespace
}  // namespace kernelrl
