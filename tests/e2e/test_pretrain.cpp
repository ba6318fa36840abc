// The pretrain stage end to end through the kernelrl binary on the CPU: a tiny model on a
// small synthetic corpus trains, its held-out loss falls, checkpoints appear, and a run killed
// after step 5 (checkpoint at 3) resumes to the same per-step losses as an uninterrupted run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/fs.h"
#include "common/metrics.h"
#include "data/corpus/triplet.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using testing::run_command;
using testing::run_kernelrl;
using testing::ScratchDir;
using testing::write_text;

// Kernels that differ in names and constants: enough structure for a tiny model to learn.
void write_corpus(const fs::path& path) {
  std::vector<Triplet> docs;
  const char* ops[] = {"add", "mul", "sub", "max", "min"};
  const char* sym[] = {"+", "*", "-", ">", "<"};
  for (int i = 0; i < 160; ++i) {
    Triplet t;
    const int o = i % 5;
    t.id = "doc" + std::to_string(i);
    t.instruction = std::string("Write a CUDA kernel that applies ") + ops[o] + " elementwise with block size " +
                    std::to_string(64 << (i % 3)) + ".";
    t.context = "Threads index with blockIdx.x * blockDim.x + threadIdx.x.";
    t.code = std::string("__global__ void ") + ops[o] + "_kernel(const float* a, const float* b, float* c, int n) {\n"
             "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "  if (i < n) c[i] = a[i] " + sym[o] + " b[i];\n}\n";
    t.source = "test";
    t.tags = {"elementwise"};
    docs.push_back(t);
  }
  write_triplets(path, docs);
}

std::string config(const fs::path& corpus) {
  return "run: {name: pt, seed: 3, device: cpu}\n"
         "model: {preset: tiny}\n"
         "data: {corpus: [" + corpus.string() + "], tokenizer_vocab_size: 320, holdout_fraction: 0.1}\n"
         "trainer:\n"
         "  stages:\n"
         "    - {name: pre, kind: pretrain, steps: 8, batch_size: 4, seq_len: 64, eval_every: 4,\n"
         "       eval_batches: 2, checkpoint_every: 3, optimizer: {lr: 3.0e-3, warmup_steps: 2}}\n";
}

std::vector<double> losses(const fs::path& run) {
  std::vector<double> out;
  for (const auto& r : MetricsWriter::read_all(run / "metrics.jsonl"))
    if (r.value("stage", "") == "pre") out.push_back(r.at("loss").get<double>());
  return out;
}

TEST(PretrainStage, TrainsEvaluatesCheckpointsAndResumesExactly) {
  ScratchDir dir;
  write_corpus(dir / "corpus.jsonl");
  write_text(dir / "job.yaml", config(dir / "corpus.jsonl"));

  auto a = run_kernelrl("train " + (dir / "job.yaml").string() + " --run-dir " + (dir / "a").string());
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto recs = MetricsWriter::read_all(dir / "a/metrics.jsonl");
  ASSERT_EQ(recs.size(), 8u);
  ASSERT_TRUE(recs[3].contains("eval_loss"));
  ASSERT_TRUE(recs[7].contains("eval_loss"));
  EXPECT_LT(recs[7]["eval_loss"].get<double>(), recs[3]["eval_loss"].get<double>());
  EXPECT_LT(recs[7]["loss"].get<double>(), recs[0]["loss"].get<double>());
  EXPECT_TRUE(fs::exists(dir / "a/checkpoints/pre/step_8/model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "a/checkpoints/pre/step_8/optimizer.pt"));
  EXPECT_FALSE(fs::exists(dir / "a/checkpoints/pre/step_3"));  // keep_checkpoints = 2
  EXPECT_TRUE(fs::exists(dir / "a/config.yaml"));

  // Killed right after step 5 (newest checkpoint: step 3), then resumed.
  auto crashed = run_command("KERNELRL_DEBUG_CRASH_AT=pre:5 " + std::string(KERNELRL_BIN) +
                             " train " + (dir / "job.yaml").string() + " --run-dir " +
                             (dir / "b").string());
  ASSERT_NE(crashed.exit_code, 0);
  ASSERT_EQ(losses(dir / "b").size(), 5u);
  auto again = run_kernelrl("train " + (dir / "job.yaml").string() + " --run-dir " +
                            (dir / "b").string());
  EXPECT_NE(again.exit_code, 0);  // a non-empty run dir without --resume is refused
  EXPECT_THAT(again.output, ::testing::HasSubstr("--resume"));
  auto resumed = run_kernelrl("train " + (dir / "job.yaml").string() + " --run-dir " +
                              (dir / "b").string() + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  auto la = losses(dir / "a"), lb = losses(dir / "b");
  ASSERT_EQ(lb.size(), 8u);
  for (size_t i = 0; i < la.size(); ++i) EXPECT_DOUBLE_EQ(la[i], lb[i]) << "step " << i + 1;
}

TEST(PretrainStage, MissingCorpusIsOneClearLine) {
  ScratchDir dir;
  write_text(dir / "job.yaml", config(dir / "nope.jsonl"));
  auto r = run_kernelrl("train " + (dir / "job.yaml").string() + " --run-dir " + (dir / "r").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, ::testing::HasSubstr("data.corpus[0]: '"));
  EXPECT_THAT(r.output, ::testing::HasSubstr("not found"));
}

}  // namespace
}  // namespace kernelrl
