// configs/debug.yaml end to end on the CPU (host backend): synthetic family data, then
// pretrain -> general_rl -> hgemm_rl through the kernelrl binary, with the metrics every RL
// step must log; then the same job killed after the first hgemm_rl step and resumed gives the
// same per-step metrics as the uninterrupted run (rewards reused from the shared store), through
// steps that updated the policy. Runs with rollout.overlap=1, so the checkpoint the resume
// starts from carries rows sampled a step ahead.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/fs.h"
#include "common/metrics.h"
#include "run_test_util.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using testing::run_command;
using testing::ScratchDir;

using testing::kSrc;
using testing::kBin;

using testing::stage_records;

TEST(DebugPipeline, AllThreeStagesRunOnTheHostBackendAndResumeExactly) {
  ScratchDir dir;
  auto synth = run_command("cd " + kSrc + " && " + kBin + " data synth --families all --n 300 --out " +
                           (dir / "synth.jsonl").string());
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  const std::string job = "cd " + kSrc + " && " + kBin + " train configs/debug.yaml 'data.corpus=[" +
                          (dir / "synth.jsonl").string() + "]' reward.store=" +
                          (dir / "shared.sqlite").string() + " rollout.overlap=1";
  auto a = run_command(job + " --run-dir " + (dir / "a").string());
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto pre = stage_records(dir / "a", "pretrain");
  ASSERT_EQ(pre.size(), 12u);
  EXPECT_TRUE(pre.back().contains("eval_loss"));
  EXPECT_LT(pre.back()["loss"].get<double>(), pre.front()["loss"].get<double>());
  for (const char* stage : {"general_rl", "hgemm_rl"}) {
    SCOPED_TRACE(stage);
    auto recs = stage_records(dir / "a", stage);
    ASSERT_EQ(recs.size(), 2u);
    for (const char* key : {"reward_mean", "reward_std", "reward_max", "compiled_rate",
                            "correct_rate", "faster_rate", "best_speedup", "kl", "clip_fraction",
                            "entropy", "completion_len", "zero_spread_frac", "generate_s",
                            "evaluate_s", "update_s", "tokens_per_s"})
      EXPECT_TRUE(recs[0].contains(key)) << key;
    EXPECT_TRUE(fs::exists(dir / "a/checkpoints" / stage / "step_2/model.safetensors"));
    // The policy learns: with one demonstration per group (rollout.demonstrations: 1) a group
    // holds a passing kernel beside the tiny policy's failures, so it has spread and updates run.
    int64_t updates = 0;
    double min_zero_spread = 1;
    for (const auto& r : recs) {
      updates += r["updates"].get<int64_t>();
      min_zero_spread = std::min(min_zero_spread, r["zero_spread_frac"].get<double>());
      EXPECT_GT(r["demonstrations"].get<double>(), 0);
    }
    EXPECT_GT(updates, 0);
    EXPECT_LT(min_zero_spread, 1.0);
    // rollout.overlap=1: step 2's rows were sampled during step 1, before its update, so after
    // an update their first-pass ratio π_θ/π_old is no longer exactly 1 (one step off-policy).
    EXPECT_EQ(recs[1]["overlap"].get<int64_t>(), 1);
    if (recs[0]["updates"].get<int64_t>() > 0) {
      EXPECT_NE(recs[1]["ratio_mean"].get<double>(), 1.0);
    }
  }
  EXPECT_FALSE(fs::is_empty(dir / "a/tensorboard/hgemm_rl"));
  EXPECT_TRUE(fs::exists(dir / "a/config.yaml"));

  // Kernels sampled from the trained run, written and evaluated.
  auto sample = run_command("cd " + kSrc + " && " + kBin + " sample --run-dir " + (dir / "a").string() +
                            " --task hgemm --shape 64x64x64 -n 2 --max-new-tokens 32 --out " +
                            (dir / "samples").string() + " --evaluate");
  ASSERT_EQ(sample.exit_code, 0) << sample.output;
  EXPECT_TRUE(fs::exists(dir / "samples/hgemm_64x64x64_nn_0.response.txt"));
  EXPECT_THAT(sample.output, ::testing::HasSubstr("checkpoints/hgemm_rl/step_2"));

  // Same job, killed right after hgemm_rl step 1, then resumed.
  auto crashed = run_command("export KERNELRL_DEBUG_CRASH_AT=hgemm_rl:1 && " + job + " --run-dir " +
                             (dir / "b").string());
  ASSERT_EQ(crashed.exit_code, 137) << crashed.output;
  ASSERT_EQ(stage_records(dir / "b", "hgemm_rl").size(), 1u);
  auto resumed = run_command(job + " --run-dir " + (dir / "b").string() + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  for (const char* stage : {"pretrain", "general_rl", "hgemm_rl"}) {
    SCOPED_TRACE(stage);
    auto ra = stage_records(dir / "a", stage), rb = stage_records(dir / "b", stage);
    ASSERT_EQ(ra.size(), rb.size());
    for (size_t i = 0; i < ra.size(); ++i)
      for (const char* key : {"loss", "reward_mean", "reward_max", "completion_len", "kl", "entropy",
                              "grad_norm", "ratio_mean", "updates"})
        if (ra[i].contains(key)) {
          EXPECT_DOUBLE_EQ(ra[i][key].get<double>(), rb[i][key].get<double>())
              << key << " at step " << i + 1;
        }
  }
}

}  // namespace
}  // namespace kernelrl
