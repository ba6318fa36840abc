// The pretraining optimizer step (lm_train_step) on the CPU against the step the pretrain stage
// ran before it was factored out (written out below: a loss .item() per micro-batch, per-tensor
// norms, the stock AdamW step): the same losses, grad norms and parameters, bit for bit, with
// gradient accumulation, a partial loss mask and active clipping. A non-finite loss takes no
// step. The foreach grad norm against a float64 sum of squares. Stage checkpoints keep their
// tokenizer through the pruning when the stage was resumed from one of them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

#include "common/fs.h"
#include "test_util.h"
#include "trainer/pretrain_stage.h"
#include "trainer/train_utils.h"

// This file's own namespace: the unit tests compile in unity batches (tests/CMakeLists.txt),
// where two files' helpers in one anonymous namespace would clash.
namespace kernelrl::pretrain_step_test {

// Tiny tensors: one intra-op thread (OpenMP spinning on a loaded 2-core CI box costs 100x).
static const int kOneThread = (torch::set_num_threads(1), 0);

namespace {

constexpr int64_t kVocab = 97;

std::vector<LmBatch> micro_batches(int64_t step, int64_t k, int64_t B, int64_t L) {
  auto g = at::detail::createCPUGenerator(100 + step);
  std::vector<LmBatch> out;
  for (int64_t i = 0; i < k; ++i) {
    auto tokens = torch::randint(kVocab, {B, L + 1}, g, torch::kInt64);
    auto mask = torch::randint(2, {B, L + 1}, g, torch::kInt64).to(torch::kFloat32);
    mask.select(1, 0).zero_();
    out.push_back({tokens, mask});
  }
  return out;
}

// The stage's step before lm_train_step existed (trainer/pretrain_stage.cpp, 4e20313).
LmStepStats reference_step(LlamaModel& model, torch::optim::AdamW& opt,
                           const std::vector<LmBatch>& batches, double max_norm) {
  opt.zero_grad();
  double loss_sum = 0;
  int64_t targets_sum = 0;
  for (const auto& b : batches) {
    auto inputs = b.tokens.slice(1, 0, -1);
    auto targets = b.tokens.slice(1, 1);
    auto m = b.loss_mask.slice(1, 1);
    auto logits = model->forward(inputs).to(torch::kFloat32);
    auto nll = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    auto loss = (nll * m.reshape({-1})).sum() / m.sum().clamp_min(1.0);
    const double lv = loss.item<double>();
    (loss / static_cast<double>(batches.size())).backward();
    loss_sum += lv;
    targets_sum += b.loss_mask.slice(1, 1).sum().item<int64_t>();
  }
  std::vector<torch::Tensor> grads, norms;
  for (auto& p : model->parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  for (auto& g : grads) norms.push_back(g.detach().to(torch::kFloat32).norm());
  const double total = torch::stack(norms).norm().item<double>();
  if (max_norm > 0 && total > max_norm)
    for (auto& g : grads) g.mul_(max_norm / (total + 1e-6));
  opt.step();
  return {loss_sum / static_cast<double>(batches.size()), total, targets_sum};
}

}  // namespace

TEST(PretrainStep, MatchesThePreviousStageStepBitForBit) {
  auto a = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 5);
  auto b = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 5);
  OptimizerConfig oc;
  oc.lr = 3e-3;
  oc.grad_clip = 0.5;  // below the first steps' norms (~2-4): clipping is exercised
  auto opt_a = make_adamw(*a, oc);
  auto opt_b = make_adamw(*b, oc);
  a->train();
  b->train();
  int clipped = 0;
  for (int64_t step = 0; step < 4; ++step) {
    const auto batches = micro_batches(step, /*k=*/2, /*B=*/3, /*L=*/16);
    set_lr(*opt_a, scheduled_lr(oc, step, 4));
    set_lr(*opt_b, scheduled_lr(oc, step, 4));
    const LmStepStats got = lm_train_step(a, *opt_a, batches, oc.grad_clip);
    const LmStepStats want = reference_step(b, *opt_b, batches, oc.grad_clip);
    EXPECT_EQ(got.loss, want.loss) << "step " << step;
    EXPECT_EQ(got.grad_norm, want.grad_norm) << "step " << step;
    EXPECT_EQ(got.target_tokens, want.target_tokens) << "step " << step;
    EXPECT_GT(got.target_tokens, 0);
    EXPECT_LT(got.target_tokens, 2 * 3 * 16);  // the mask is partial
    clipped += got.grad_norm > oc.grad_clip;
  }
  EXPECT_GT(clipped, 0);
  auto pb = b->named_parameters();
  for (const auto& p : a->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
}

TEST(PretrainStep, NonFiniteLossTakesNoStep) {
  auto model = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 6);
  auto opt = make_adamw(*model, OptimizerConfig{});
  {
    torch::NoGradGuard ng;
    model->embed_tokens->weight[0].fill_(NAN);
  }
  auto batches = micro_batches(0, 1, 2, 8);
  batches[0].tokens.select(1, 3).fill_(0);  // every row reads the poisoned embedding
  std::vector<torch::Tensor> before;
  for (const auto& p : model->parameters()) before.push_back(p.detach().clone());
  try {
    lm_train_step(model, *opt, batches, 1.0);
    FAIL() << "a NaN loss must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(opt->state().empty());  // the optimizer never stepped
  size_t i = 0;
  for (const auto& p : model->parameters()) {
    EXPECT_TRUE(torch::equal(p.detach().nan_to_num(0), before[i].nan_to_num(0)));
    ++i;
  }
}

// Metric: |foreach norm − sqrt(Σ g² in float64)| / that; threshold 1e-6 (fp32 partial sums).
TEST(PretrainStep, GradNormAndClipAgainstFloat64) {
  auto g = at::detail::createCPUGenerator(7);
  std::vector<torch::Tensor> grads = {torch::randn({33, 17}, g), torch::randn({5}, g),
                                      torch::randn({2, 3, 4}, g)};
  double sum_sq = 0;
  for (const auto& t : grads) sum_sq += t.to(torch::kFloat64).pow(2).sum().item<double>();
  const double want = std::sqrt(sum_sq);
  const double got = total_grad_norm(grads).item<double>();
  EXPECT_LT(std::abs(got - want) / want, 1e-6) << got << " vs " << want;
  clip_grads(grads, got, /*max_norm=*/1.0);
  EXPECT_NEAR(total_grad_norm(grads).item<double>(), 1.0, 1e-5);
  clip_grads(grads, 0.5, /*max_norm=*/1.0);  // below the limit: untouched
  EXPECT_NEAR(total_grad_norm(grads).item<double>(), 1.0, 1e-5);
}

// A stage resumed from its own checkpoint reads its tokenizer from that directory; with
// keep_checkpoints 1 the next save prunes it, and the save after that found no tokenizer
// ("tokenizer model '.../step_2/tokenizer.model' not found": the H100 lift run of 2026-11-27
// lost its RL at step 4). Every save must carry the same bytes, however many saves follow.
TEST(StageCheckpoint, AResumedStageKeepsItsTokenizerThroughThePruning) {
  testing::ScratchDir dir;
  const std::string bytes = "a tokenizer's bytes\n";
  testing::write_text(dir / "pretrain/tokenizer.model", bytes);
  auto model = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 5);
  auto opt = make_adamw(*model, OptimizerConfig{});
  const fs::path ckpts = dir / "checkpoints";
  fs::path tok = dir / "pretrain/tokenizer.model";
  TrainState st;
  st.step = 2;
  const fs::path step2 = save_stage_checkpoint(ckpts, "rl", model, model->shape(), &tok, *opt, st, 1);
  EXPECT_EQ(tok, step2 / "tokenizer.model");  // pointed at the copy the checkpoint carries
  // Resumed from step_2: the policy's tokenizer is that checkpoint's.
  tok = step2 / "tokenizer.model";
  for (int64_t step = 3; step <= 5; ++step) {
    st.step = step;
    fs::path saved;
    ASSERT_NO_THROW(saved = save_stage_checkpoint(ckpts, "rl", model, model->shape(), &tok, *opt, st, 1))
        << "step " << step;
    EXPECT_EQ(read_file(saved / "tokenizer.model", "tokenizer"), bytes) << "step " << step;
    EXPECT_FALSE(fs::exists(ckpts / "rl" / ("step_" + std::to_string(step - 1)))) << "keep 1 prunes";
  }
  // Resumed from an older checkpoint while a newer step exists: the save keeps what it wrote.
  st.step = 4;
  const fs::path older = save_stage_checkpoint(ckpts, "rl", model, model->shape(), &tok, *opt, st, 1);
  EXPECT_TRUE(fs::exists(older / "tokenizer.model"));
  EXPECT_EQ(tok, older / "tokenizer.model");
}

}  // namespace kernelrl::pretrain_step_test
