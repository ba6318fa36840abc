// `kernelrl sweep`: every grid point runs in its own run directory and the summary table has
// one row per point with each point's final metrics; a point may be data-parallel
// (ranks_per_point); a bad grid key fails before any run; without a GPU a sweep that names a
// cpu_base runs that job's points (the answer to "is a GPU visible" is injected).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/fs.h"
#include "data/corpus/triplet.h"
#include "test_util.h"
#include "trainer/sweep.h"

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

// The choice of job is load_sweep's, from the injected GPU answer: cpu_base only without a GPU,
// base otherwise, and base on both where the file names no cpu_base.
TEST(Sweep, CpuBaseOnlyWhereNoGpuIsVisible) {
  ScratchDir dir;
  // A valid job (the load-time cross-checks want a pretraining corpus listed; it is not read).
  const std::string job = "data: {corpus: [c.jsonl]}\ntrainer: {stages: [{name: pre, kind: pretrain, steps: 2}]}\n";
  write_text(dir / "gpu.yaml", job);
  write_text(dir / "cpu.yaml", "run: {device: cpu}\n" + job);
  write_text(dir / "sweep.yaml", "base: gpu.yaml\ncpu_base: cpu.yaml\nparallel: per-gpu\n"
                                 "grid: {reward.alpha: [0.0, 0.1]}\n");
  fs::path base;
  std::string note = "stale";
  SweepConfig s = load_sweep(dir / "sweep.yaml", {}, /*gpu_visible=*/true, &base, &note);
  EXPECT_EQ(base, dir / "gpu.yaml");
  EXPECT_EQ(note, "");
  EXPECT_EQ(s.parallel, "per-gpu");

  s = load_sweep(dir / "sweep.yaml", {}, /*gpu_visible=*/false, &base, &note);
  EXPECT_EQ(base, dir / "cpu.yaml");
  EXPECT_EQ(s.parallel, "sequential");  // no GPUs to place points on
  EXPECT_THAT(note, HasSubstr("no GPU visible"));
  EXPECT_THAT(note, HasSubstr((dir / "cpu.yaml").string()));
  EXPECT_EQ(note.find('\n'), std::string::npos);  // one line

  write_text(dir / "plain.yaml", "base: gpu.yaml\ngrid: {reward.alpha: [0.0]}\n");
  s = load_sweep(dir / "plain.yaml", {}, /*gpu_visible=*/false, &base, &note);
  EXPECT_EQ(base, dir / "gpu.yaml");
  EXPECT_EQ(note, "");

  // A cpu_base that is missing is the user's error, named by its key, found only where it is used.
  write_text(dir / "missing.yaml", "base: gpu.yaml\ncpu_base: nope.yaml\ngrid: {reward.alpha: [0.0]}\n");
  EXPECT_NO_THROW(load_sweep(dir / "missing.yaml", {}, /*gpu_visible=*/true, &base, &note));
  try {
    load_sweep(dir / "missing.yaml", {}, /*gpu_visible=*/false, &base, &note);
    ADD_FAILURE() << "a missing cpu_base loaded";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cpu_base:"));
  }
}

// The shipped sweep: the GPU quickstart where a GPU is visible, the CPU quickstart's points
// (every grid point a valid job of that config) where none is.
TEST(Sweep, ShippedSweepRunsTheCpuQuickstartWithoutGpu) {
  const fs::path sweep_file = fs::path(KERNELRL_SOURCE_DIR) / "configs/sweep.yaml";
  fs::path base;
  std::string note;
  load_sweep(sweep_file, {}, /*gpu_visible=*/true, &base, &note);
  EXPECT_EQ(base.filename(), "quickstart.yaml");
  load_sweep(sweep_file, {}, /*gpu_visible=*/false, &base, &note);
  EXPECT_EQ(base.filename(), "quickstart-cpu.yaml");
  EXPECT_THAT(note, HasSubstr("quickstart-cpu.yaml"));
}

}  // namespace
}  // namespace kernelrl
