// The trainer's CUDA fast paths against the stock ones on the GPU: the fused AdamW step
// (at::_fused_adamw_ over torch::optim::AdamW's own state) against torch::optim::AdamW::step on
// the same parameters and gradients, and across an optimizer.pt round trip; an activation-
// checkpointed layer recomputing under the forward's autocast state (the same gradients as
// without checkpointing); the grouped-query flash path against repeated heads; the pretrain step
// (lm_train_step) on CUDA. Skips without a CUDA device. Each test prints its measured error.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <sstream>

#include "gpu_test_util.h"
#include "model/llama.h"
#include "trainer/pretrain_stage.h"
#include "trainer/train_utils.h"

using namespace kernelrl;

namespace {

const torch::Device kCuda(torch::kCUDA, 0);

double max_abs(const torch::Tensor& t) {
  return t.abs().max().item<double>();
}

// Gives both models the same random gradients (seeded by step), ~N(0, 1e-2).
void set_same_grads(LlamaModel& a, LlamaModel& b, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  auto pb = b->named_parameters();
  for (auto& p : a->named_parameters()) {
    auto g = (torch::randn(p.value().sizes(), gen) * 1e-2).to(kCuda);
    p.value().mutable_grad() = g.clone();
    pb[p.key()].mutable_grad() = g.clone();
  }
}

// Largest |a − b| over parameters, and over each AdamW moment relative to its largest |value|;
// the step counts must agree exactly.
struct OptimizerDiff {
  double param = 0, exp_avg = 0, exp_avg_sq = 0;
};
OptimizerDiff compare(LlamaModel& a, torch::optim::AdamW& oa, LlamaModel& b,
                      torch::optim::AdamW& ob) {
  OptimizerDiff d;
  auto pb = b->named_parameters();
  for (auto& p : a->named_parameters()) {
    const auto& q = pb[p.key()];
    d.param = std::max(d.param, max_abs(p.value() - q));
    auto& sa = static_cast<torch::optim::AdamWParamState&>(
        *oa.state().at(p.value().unsafeGetTensorImpl()));
    auto& sb = static_cast<torch::optim::AdamWParamState&>(*ob.state().at(q.unsafeGetTensorImpl()));
    EXPECT_EQ(sa.step(), sb.step()) << p.key();
    d.exp_avg = std::max(d.exp_avg, max_abs(sa.exp_avg() - sb.exp_avg()) / max_abs(sb.exp_avg()));
    d.exp_avg_sq = std::max(d.exp_avg_sq,
                            max_abs(sa.exp_avg_sq() - sb.exp_avg_sq()) / max_abs(sb.exp_avg_sq()));
  }
  return d;
}

// All parameter gradients, flattened into one fp32 vector.
torch::Tensor flat_grads(LlamaModel& model) {
  std::vector<torch::Tensor> parts;
  for (auto& p : model->parameters()) parts.push_back(p.grad().reshape({-1}));
  return torch::cat(parts);
}

}  // namespace

// Metric: max |Δ| over parameters (|p| ≤ 1) and max |Δ| / max |value| per moment, fused vs
// stock, after 3 steps with changing lr, weight decay on matrices, none on norms. Thresholds:
// 2e-6 on parameters (a few fp32 ulps of 1; the update itself is ~lr = 1e-3, its rounding
// ~1e-10), 1e-6 on the moments (~16 fp32 ulps: the fused kernel computes m and v in double then
// rounds once, the stock step rounds after each op). Poison: the parameters must have moved.
TEST(TrainerGpu, FusedAdamWMatchesStockStepAndItsCheckpoint) {
  REQUIRE_CUDA();
  const ModelShape shape = preset_shape("small", 1000);
  auto a = make_model(shape, kCuda, torch::kFloat32, 3);
  auto b = make_model(shape, kCuda, torch::kFloat32, 3);
  auto initial = a->named_parameters()["layers.0.self_attn.q_proj.weight"].detach().clone();
  OptimizerConfig oc;
  oc.lr = 1e-3;
  auto oa = make_adamw(*a, oc);
  auto ob = make_adamw(*b, oc);
  for (int step = 0; step < 3; ++step) {
    set_lr(*oa, oc.lr * (1.0 - 0.25 * step));
    set_lr(*ob, oc.lr * (1.0 - 0.25 * step));
    set_same_grads(a, b, 10 + step);
    EXPECT_TRUE(adamw_step(*oa));  // the fused kernel ran
    ob->step();
  }
  const auto moved =
      max_abs(a->named_parameters()["layers.0.self_attn.q_proj.weight"].detach() - initial);
  EXPECT_GT(moved, 0.5 * oc.lr);
  OptimizerDiff d = compare(a, *oa, b, *ob);
  std::cout << "fused vs stock AdamW, 3 steps: max |dp| " << d.param << ", exp_avg rel "
            << d.exp_avg << ", exp_avg_sq rel " << d.exp_avg_sq << " (params moved " << moved
            << ")\n";
  EXPECT_LT(d.param, 2e-6);
  EXPECT_LT(d.exp_avg, 1e-6);
  EXPECT_LT(d.exp_avg_sq, 1e-6);

  // optimizer.pt round trip: the fused step's state, saved and loaded into a stock optimizer
  // over a copy of the parameters, continues as the fused one does.
  auto c = make_model(shape, kCuda, torch::kFloat32, 4);
  {
    torch::NoGradGuard ng;
    auto pa = a->named_parameters();
    for (auto& p : c->named_parameters()) p.value().copy_(pa[p.key()]);
  }
  auto oc_stock = make_adamw(*c, oc);
  std::stringstream bytes;
  torch::save(*oa, bytes);
  torch::load(*oc_stock, bytes);
  set_same_grads(a, c, 20);
  EXPECT_TRUE(adamw_step(*oa));
  oc_stock->step();
  d = compare(a, *oa, c, *oc_stock);
  std::cout << "after optimizer.pt round trip, one more step: max |dp| " << d.param << "\n";
  EXPECT_LT(d.param, 2e-6);
  EXPECT_LT(d.exp_avg, 1e-6);
  EXPECT_LT(d.exp_avg_sq, 1e-6);
}

// Gradients of a bf16-autocast forward (backward outside autocast, as the trainer runs it) with
// and without activation checkpointing. The recomputation must run under autocast too: in fp32
// it would change every weight gradient by about bf16 rounding (relative ~1e-3). Metric:
// ‖g_ckpt − g‖ / ‖g‖ against the run-to-run spread of the same plain backward (flash's backward
// may accumulate in a varying order); threshold 4·spread + 1e-5.
TEST(TrainerGpu, CheckpointedLayerRecomputesUnderAutocast) {
  REQUIRE_CUDA();
  auto model = make_model(preset_shape("small", 1000), kCuda, torch::kFloat32, 5);
  model->train();
  auto gen = at::detail::createCPUGenerator(6);
  auto tokens = torch::randint(1000, {2, 256}, gen, torch::kInt64).to(kCuda);
  auto grads = [&](bool checkpointing) {
    model->set_activation_checkpointing(checkpointing);
    model->zero_grad();
    torch::Tensor loss;
    {
      AutocastGuard ac(true);
      loss = -token_logprobs(model, tokens).mean();
    }
    loss.backward();
    return flat_grads(model).clone();
  };
  auto g1 = grads(false), g2 = grads(false), g3 = grads(true);
  const double norm = g1.norm().item<double>();
  const double spread = (g1 - g2).norm().item<double>() / norm;
  const double diff = (g3 - g1).norm().item<double>() / norm;
  std::cout << "checkpointed vs plain grads under autocast: rel " << diff << " (plain run-to-run "
            << spread << ")\n";
  ASSERT_TRUE(std::isfinite(norm) && norm > 0);
  EXPECT_LE(diff, 4 * spread + 1e-5);
}

// The no-mask forward (grouped-query flash when SDPA picks it) against the masked path (K/V heads
// repeated, explicit all-true mask) on the same tokens under autocast. Metric: max |Δ logit| /
// max |logit|; threshold 2e-2 (bf16 kernels differ in rounding; a wrong kv-head mapping gives
// O(1)).
TEST(TrainerGpu, GroupedQueryFlashPathMatchesRepeatedHeads) {
  REQUIRE_CUDA();
  auto model = make_model(preset_shape("small", 1000), kCuda, torch::kFloat32, 7);
  model->train();
  auto gen = at::detail::createCPUGenerator(8);
  auto tokens = torch::randint(1000, {2, 512}, gen, torch::kInt64).to(kCuda);
  torch::NoGradGuard ng;
  AutocastGuard ac(true);
  auto plain = model->forward(tokens).to(torch::kFloat32);
  auto masked = model->forward(tokens, torch::ones_like(tokens)).to(torch::kFloat32);
  const auto q = torch::randn({2, 8, 512, 64}, torch::TensorOptions(kCuda).dtype(torch::kBFloat16));
  const auto kv =
      torch::randn({2, 4, 512, 64}, torch::TensorOptions(kCuda).dtype(torch::kBFloat16));
  const int64_t backend = at::_fused_sdp_choice(q, kv, kv, std::nullopt, 0.0, /*is_causal=*/true,
                                                std::nullopt, /*enable_gqa=*/true);
  const double rel = max_abs(plain - masked) / max_abs(masked);
  std::cout << "GQA SDPA backend " << backend << " (1 = flash: K/V not repeated); no-mask vs "
            << "masked logits rel " << rel << "\n";
  EXPECT_LT(rel, 2e-2);
}

// The pretrain step on CUDA: fused AdamW, finite loss near ln V at the start, target count.
TEST(TrainerGpu, PretrainStepRunsFusedOnCuda) {
  REQUIRE_CUDA();
  const int64_t V = 1000, B = 2, L = 128;
  auto model = make_model(preset_shape("small", V), kCuda, torch::kFloat32, 9);
  model->train();
  auto opt = make_adamw(*model, OptimizerConfig{});
  auto gen = at::detail::createCPUGenerator(10);
  std::vector<LmBatch> batches;
  for (int i = 0; i < 2; ++i) {
    auto mask = torch::ones({B, L + 1});
    mask.select(1, 0).zero_();
    batches.push_back(
        {torch::randint(V, {B, L + 1}, gen, torch::kInt64).to(kCuda), mask.to(kCuda)});
  }
  const LmStepStats s1 = lm_train_step(model, *opt, batches, 1.0);
  const LmStepStats s2 = lm_train_step(model, *opt, batches, 1.0);
  std::cout << "pretrain step on CUDA: loss " << s1.loss << " -> " << s2.loss << ", grad norm "
            << s1.grad_norm << "\n";
  EXPECT_NEAR(s1.loss, std::log(static_cast<double>(V)), 0.5);
  EXPECT_TRUE(std::isfinite(s2.loss) && std::isfinite(s1.grad_norm) && s1.grad_norm > 0);
  EXPECT_EQ(s1.target_tokens, 2 * B * L);
  const auto& state = static_cast<torch::optim::AdamWParamState&>(
      *opt->state().at(model->parameters()[0].unsafeGetTensorImpl()));
  EXPECT_EQ(state.step(), 2);
  EXPECT_TRUE(state.exp_avg().is_cuda());
}
