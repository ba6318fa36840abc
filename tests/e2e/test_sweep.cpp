// `kernelrl sweep`: every grid point runs in its own run directory and the summary table has
// one row per point with each point's final metrics; a point may be data-parallel
// (ranks_per_point); a bad grid key fails before any run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/fs.h"
#include "data/corpus/triplet.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using testing::read_text;
using testing::run_kernelrl;
using testing::ScratchDir;
using testing::write_text;

TEST(Sweep, GridOfPretrainRunsWithSummary) {
  ScratchDir dir;
  std::vector<Triplet> docs;
  for (int i = 0; i < 40; ++i)
    docs.push_back({"d" + std::to_string(i), "Write kernel " + std::to_string(i % 4) + ".", "ctx",
                    "__global__ void k" + std::to_string(i % 4) + "(float* x) { x[threadIdx.x] *= 2.0f; }\n",
                    "t", {}});
  write_triplets(dir / "c.jsonl", docs);
  write_text(dir / "job.yaml",
             "run: {device: cpu}\nmodel: {preset: tiny}\n"
             "data: {corpus: [" + (dir / "c.jsonl").string() + "], tokenizer_vocab_size: 400}\n"
             "trainer: {stages: [{name: pre, kind: pretrain, steps: 2, batch_size: 2, seq_len: 32,\n"
             "  eval_every: 0, optimizer: {warmup_steps: 1}}]}\n");
  write_text(dir / "sweep.yaml", "base: job.yaml\ngrid:\n  trainer.stages.0.optimizer.lr: [1.0e-3, 3.0e-3]\n"
                                 "dir: " + (dir / "out").string() + "\nmetrics: [loss, lr]\n");
  auto r = run_kernelrl("sweep " + (dir / "sweep.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string csv = read_text(dir / "out/summary.csv");
  EXPECT_THAT(csv, HasSubstr("point,exit_code,run_dir,pre/loss,pre/lr"));
  EXPECT_THAT(csv, HasSubstr("\"trainer.stages.0.optimizer.lr=1.0e-3\",0,"));
  EXPECT_THAT(csv, HasSubstr("\"trainer.stages.0.optimizer.lr=3.0e-3\",0,"));
  EXPECT_TRUE(fs::exists(dir / "out/summary.md"));
  int rows = 0;
  for (char c : csv) rows += c == '\n';
  EXPECT_EQ(rows, 3);  // header + two points
}

// ranks_per_point: 2 runs each point as `kernelrl train --nproc 2` (2 gloo ranks here).
TEST(Sweep, PointsCanBeDataParallel) {
  ScratchDir dir;
  std::vector<Triplet> docs;
  for (int i = 0; i < 40; ++i)
    docs.push_back({"d" + std::to_string(i), "Write kernel " + std::to_string(i % 4) + ".", "ctx",
                    "__global__ void k" + std::to_string(i % 4) + "(float* x) { x[threadIdx.x] *= 2.0f; }\n",
                    "t", {}});
  write_triplets(dir / "c.jsonl", docs);
  write_text(dir / "job.yaml",
             "run: {device: cpu}\nmodel: {preset: tiny}\n"
             "data: {corpus: [" + (dir / "c.jsonl").string() + "], tokenizer_vocab_size: 400}\n"
             "trainer: {stages: [{name: pre, kind: pretrain, steps: 2, batch_size: 2, seq_len: 32,\n"
             "  eval_every: 0, optimizer: {warmup_steps: 1}}]}\n");
  write_text(dir / "sweep.yaml", "base: job.yaml\ngrid:\n  trainer.stages.0.optimizer.lr: [1.0e-3]\n"
                                 "ranks_per_point: 2\ndir: " + (dir / "out").string() + "\nmetrics: [loss]\n");
  auto r = run_kernelrl("sweep " + (dir / "sweep.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(read_text(dir / "out/summary.csv"), HasSubstr("\"trainer.stages.0.optimizer.lr=1.0e-3\",0,"));
  const fs::path run = dir / "out/0_trainer.stages.0.optimizer.lr_1.0e-3";
  EXPECT_THAT(read_text(run / "logs/kernelrl.log"), HasSubstr("data parallel over 2 ranks (gloo)"));
  EXPECT_TRUE(fs::exists(run / "logs/kernelrl.rank1.log"));
}

TEST(Sweep, BadGridKeyFailsBeforeRunning) {
  ScratchDir dir;
  write_text(dir / "job.yaml", "trainer: {stages: [{kind: pretrain}]}\n");
  write_text(dir / "sweep.yaml", "base: job.yaml\ngrid: {reward.alpah: [1, 2]}\ndir: " +
                                     (dir / "out").string() + "\n");
  auto r = run_kernelrl("sweep " + (dir / "sweep.yaml").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("reward.alpah: unknown key"));
  EXPECT_FALSE(fs::exists(dir / "out/0_reward.alpah_1"));
}

}  // namespace
}  // namespace kernelrl
