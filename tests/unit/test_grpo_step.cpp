// The GRPO update's glue (trainer/grpo_step.h) on the CPU with a tiny policy, against
// independent references: the padded batch and its t−1 target mask written out by hand; the
// gradients of grpo_update with micro-batches of 1 row and of all rows against one full-batch
// surrogate computed directly (token-mean and sequence-mean); the first pass's ratio is exactly
// 1 when π_old comes from the same forward path; rows of zero-spread groups take no part; a LoRA
// update changes only the adapters and its KL reference is the base (adapters off); the
// sampler's log-probs equal the update's at the sampling temperature T ≠ 1 (π_old from the
// sampler gives a first-pass ratio of 1), and Dr.GRPO's constant normalizer recombines over
// micro-batches like the other aggregations.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/checkpoint.h"
#include "model/generate.h"
#include "trainer/grpo.h"
#include "trainer/grpo_step.h"
#include "trainer/train_utils.h"

// This file's own namespace: the unit tests compile in unity batches (tests/CMakeLists.txt),
// where two files' helpers in one anonymous namespace would clash.
namespace kernelrl::grpo_step_test {

static const int kOneThread = (torch::set_num_threads(1), 0);

namespace {

constexpr int64_t kVocab = 61;
constexpr int64_t kPad = 0;
constexpr double kTemperature = 0.7;  // the rows' sampling temperature (configs use 0.6-1.0)

SamplingConfig sampled_at(double temperature) {
  SamplingConfig s;
  s.temperature = temperature;
  s.max_new_tokens = 8;
  return s;
}

// Two prompts, two completions each, of different lengths.
void make_rollouts(std::vector<PromptGroup>* groups, std::vector<Rollout>* rollouts) {
  groups->resize(2);
  (*groups)[0].prompt_ids = {5, 6, 7};
  (*groups)[1].prompt_ids = {8, 9};
  auto add = [&](size_t g, std::vector<int64_t> c) {
    Rollout r;
    r.group = g;
    r.completion = std::move(c);
    rollouts->push_back(r);
  };
  add(0, {11, 12});
  add(0, {13, 14, 15, 16});
  add(1, {17});
  add(1, {18, 19, 20});
}

TEST(GrpoStep, BatchRowsAndTheShiftedTargetMask) {
  std::vector<PromptGroup> groups;
  std::vector<Rollout> rollouts;
  make_rollouts(&groups, &rollouts);
  RlBatch b = make_rl_batch(groups, rollouts, kPad, sampled_at(kTemperature));
  EXPECT_EQ(b.temperature, kTemperature);
  EXPECT_EQ(b.max_new_tokens, 8);
  // Longest row: 3 + 4 = 7 tokens.
  ASSERT_EQ(b.tokens.sizes(), (std::vector<int64_t>{4, 7}));
  ASSERT_EQ(b.target_mask.sizes(), (std::vector<int64_t>{4, 6}));
  const std::vector<std::vector<int64_t>> tokens = {
      {5, 6, 7, 11, 12, 0, 0}, {5, 6, 7, 13, 14, 15, 16}, {8, 9, 17, 0, 0, 0, 0}, {8, 9, 18, 19, 20, 0, 0}};
  // Index t scores token t+1: completion tokens sit at 3.. (rows 0, 1) and 2.. (rows 2, 3).
  const std::vector<std::vector<float>> mask = {
      {0, 0, 1, 1, 0, 0}, {0, 0, 1, 1, 1, 1}, {0, 1, 0, 0, 0, 0}, {0, 1, 1, 1, 0, 0}};
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t t = 0; t < 7; ++t) {
      EXPECT_EQ(b.tokens[i][t].item<int64_t>(), tokens[i][t]) << i << "," << t;
      EXPECT_EQ(b.attention[i][t].item<bool>(), tokens[i][t] != 0) << i << "," << t;
    }
    for (int64_t t = 0; t < 6; ++t) EXPECT_EQ(b.target_mask[i][t].item<float>(), mask[i][t]) << i << "," << t;
  }
}

struct Fixture {
  std::vector<PromptGroup> groups;
  std::vector<Rollout> rollouts;
  RlBatch batch;
  torch::Tensor adv, valid;
};

Fixture make_fixture() {
  Fixture s;
  make_rollouts(&s.groups, &s.rollouts);
  s.batch = make_rl_batch(s.groups, s.rollouts, kPad, sampled_at(kTemperature));
  s.adv = torch::tensor({1.0f, -1.0f, 0.7f, -0.7f});
  s.valid = torch::ones({4}, torch::kBool);
  return s;
}

std::vector<torch::Tensor> grads_of(LlamaModel& m) {
  std::vector<torch::Tensor> g;
  for (auto& p : m->parameters()) g.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return g;
}

// The surrogate over the whole batch in one forward, straight from clipped_surrogate.
std::vector<torch::Tensor> full_batch_grads(const Fixture& s, const GrpoConfig& cfg,
                                            const torch::Tensor& logp_old) {
  auto m = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 3);
  m->train();
  auto logp = token_logprobs(m, s.batch.tokens, s.batch.attention, nullptr, 0, kTemperature);
  auto mask = s.batch.target_mask * s.valid.to(torch::kFloat32).unsqueeze(1);
  clipped_surrogate(logp, logp_old, {}, s.adv, mask, cfg, s.batch.max_new_tokens).loss.backward();
  return grads_of(m);
}

void expect_close(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>() /
                                (b[i].abs().max().item<double>() + 1e-12));
  EXPECT_LT(worst, 1e-4);
}

void gradients_match_for(const std::string& agg) {
  Fixture s = make_fixture();
  GrpoConfig cfg;
  cfg.loss_agg = agg;
  OptimizerConfig oc;
  oc.lr = 1e-30;  // (AdamW needs lr > 0) the step leaves the weights as they were to fp32
  // A fixed π_old that differs from π so ratios ≠ 1 and some clips are active.
  auto g = at::detail::createCPUGenerator(9);
  const auto logp_old = -torch::rand({4, 6}, g) * 4;
  const auto want = full_batch_grads(s, cfg, logp_old);
  for (int64_t micro : {1, 2, 4}) {
    auto m = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 3);
    m->train();
    auto opt = make_adamw(*m, oc);
    auto st = grpo_update(m, *opt, s.batch, s.adv, s.valid, logp_old, {}, cfg, micro, /*clip=*/0.0, false);
    ASSERT_EQ(st.passes.size(), 1u);
    EXPECT_EQ(st.tokens, 10);  // 2 + 4 + 1 + 3 completion tokens
    SCOPED_TRACE(agg + " micro " + std::to_string(micro));
    expect_close(grads_of(m), want);
  }
}

TEST(GrpoStep, MicroBatchesOfOneAndOfAllGiveTheFullBatchGradients) {
  gradients_match_for("token-mean");
  gradients_match_for("sequence-mean");
  gradients_match_for("dr-grpo");
}

// Dr.GRPO's normalizer is the constant N·L_max: the loss of the batch is Σ m·L / (4 rows · 8),
// whatever the rows' lengths; token-mean divides by the 10 tokens instead.
TEST(GrpoStep, DrGrpoDividesByRowsTimesTheCompletionBudget) {
  Fixture s = make_fixture();
  auto g = at::detail::createCPUGenerator(9);
  const auto logp_old = -torch::rand({4, 6}, g) * 4;
  auto loss_of = [&](const std::string& agg) {
    GrpoConfig cfg;
    cfg.loss_agg = agg;
    auto m = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 3);
    OptimizerConfig oc;
    oc.lr = 1e-30;
    auto opt = make_adamw(*m, oc);
    return grpo_update(m, *opt, s.batch, s.adv, s.valid, logp_old, {}, cfg, 3, 0.0, false)
        .passes.at(0)
        .loss;
  };
  EXPECT_NEAR(loss_of("dr-grpo"), loss_of("token-mean") * 10.0 / (4 * 8), 1e-6);
}

// The sampler returns log-probs of the tempered distribution softmax(logits / T) (before top-k/p),
// and the update's forward at the batch's temperature gives the same numbers: π_old taken from
// the sampler would make the first pass's ratio 1. At T = 1 instead (the old update, which
// ignored the sampling temperature) they differ. fp32 CPU: |Δ| ≤ 1e-4, the decode-vs-forward
// tolerance of test_model_generate.
TEST(GrpoStep, SamplerLogprobsAreTheUpdatesAtTheSamplingTemperature) {
  auto m = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 6);
  m->eval();
  std::vector<PromptGroup> groups(2);
  groups[0].prompt_ids = {5, 6, 7};
  groups[1].prompt_ids = {8, 9};
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.temperature = kTemperature;
  o.top_k = 20;
  o.seed = 11;
  o.eos_ids = {-1};
  std::vector<Rollout> rollouts;
  std::vector<std::vector<int64_t>> prompts;
  for (size_t gi = 0; gi < 2; ++gi)
    for (int k = 0; k < 2; ++k) {
      prompts.push_back(groups[gi].prompt_ids);
      Rollout r;
      r.group = gi;
      rollouts.push_back(r);
    }
  const GenerationResult res = generate(m, prompts, o);
  for (size_t i = 0; i < rollouts.size(); ++i) {
    rollouts[i].completion = res.tokens[i];
    rollouts[i].sample_logprobs = res.logprobs[i];
  }
  auto worst_gap = [&](double temperature) {
    RlBatch batch = make_rl_batch(groups, rollouts, kPad, sampled_at(temperature));
    const torch::Tensor lp = rl_logprobs(m, batch, 3);
    double worst = 0;
    for (size_t i = 0; i < rollouts.size(); ++i) {
      const auto row =
          lp[static_cast<int64_t>(i)].masked_select(batch.target_mask[static_cast<int64_t>(i)] > 0);
      EXPECT_EQ(row.numel(), static_cast<int64_t>(rollouts[i].sample_logprobs.size()));
      worst = std::max(
          worst, (row - torch::tensor(rollouts[i].sample_logprobs)).abs().max().item<double>());
    }
    return worst;
  };
  EXPECT_LE(worst_gap(kTemperature), 1e-4);
  EXPECT_GT(worst_gap(1.0), 1e-2);
  // π_old from the sampler: the first pass's ratio is 1 (to the same tolerance).
  RlBatch batch = make_rl_batch(groups, rollouts, kPad, sampled_at(kTemperature));
  torch::Tensor logp_old = torch::zeros(batch.target_mask.sizes());
  for (size_t i = 0; i < rollouts.size(); ++i)
    logp_old[static_cast<int64_t>(i)].masked_scatter_(
        batch.target_mask[static_cast<int64_t>(i)] > 0, torch::tensor(rollouts[i].sample_logprobs));
  GrpoConfig cfg;
  OptimizerConfig oc;
  oc.lr = 1e-3;
  m->train();
  auto opt = make_adamw(*m, oc);
  auto st = grpo_update(m, *opt, batch, torch::tensor({1.0f, -1.0f, 0.5f, -0.5f}),
                        torch::ones({4}, torch::kBool), logp_old, {}, cfg, 2, 1.0, false);
  ASSERT_EQ(st.passes.size(), 1u);
  EXPECT_NEAR(st.passes[0].ratio_mean, 1.0, 1e-4);
  EXPECT_EQ(st.passes[0].clip_fraction, 0.0);
}

TEST(GrpoStep, FirstPassRatioIsExactlyOneAndLaterPassesMove) {
  Fixture s = make_fixture();
  GrpoConfig cfg;
  cfg.updates_per_batch = 3;
  OptimizerConfig oc;
  oc.lr = 1e-2;
  auto m = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 4);
  m->train();
  auto opt = make_adamw(*m, oc);
  const auto logp_old = rl_logprobs(m, s.batch, 2);
  auto st = grpo_update(m, *opt, s.batch, s.adv, s.valid, logp_old, {}, cfg, 2, 1.0, false);
  ASSERT_EQ(st.passes.size(), 3u);
  EXPECT_DOUBLE_EQ(st.passes[0].ratio_mean, 1.0);
  EXPECT_EQ(st.passes[0].clip_fraction, 0.0);
  EXPECT_NE(st.passes[2].ratio_mean, 1.0);  // the policy moved between passes
  EXPECT_GT(st.passes[0].grad_norm, 0.0);
}

TEST(GrpoStep, RowsOfZeroSpreadGroupsTakeNoPart) {
  Fixture s = make_fixture();
  s.valid = torch::tensor({true, true, false, false});
  s.adv = torch::tensor({1.0f, -1.0f, 0.0f, 0.0f});
  GrpoConfig cfg;
  OptimizerConfig oc;
  oc.lr = 1e-30;
  auto g = at::detail::createCPUGenerator(2);
  const auto logp_old = -torch::rand({4, 6}, g) * 4;
  const auto want = full_batch_grads(s, cfg, logp_old);
  auto m = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 3);
  m->train();
  auto opt = make_adamw(*m, oc);
  auto st = grpo_update(m, *opt, s.batch, s.adv, s.valid, logp_old, {}, cfg, 1, 0.0, false);
  EXPECT_EQ(st.tokens, 6);  // rows 0 and 1: 2 + 4 completion tokens
  expect_close(grads_of(m), want);
  // No valid row at all: no optimizer step.
  s.valid = torch::zeros({4}, torch::kBool);
  auto none = grpo_update(m, *opt, s.batch, s.adv, s.valid, logp_old, {}, cfg, 1, 0.0, false);
  EXPECT_TRUE(none.passes.empty());
}

// LoRA through the GRPO update (the RL stage's path): π_ref is the base with adapters off
// (LoraOff), make_adamw takes the adapters only, and μ = 2 passes with a KL term change the
// adapters and nothing else; afterwards LoraOff still gives the base's log-probs exactly.
TEST(GrpoStep, LoraUpdateChangesOnlyAdaptersAndTheReferenceIsTheBase) {
  Fixture s = make_fixture();
  GrpoConfig cfg;
  cfg.updates_per_batch = 2;
  cfg.kl_coef = 0.1;
  OptimizerConfig oc;
  oc.lr = 1e-2;
  auto m = make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, 5);
  const auto base_logp = rl_logprobs(m, s.batch, 2);
  LoraConfig lc;
  lc.rank = 4;
  lc.targets = {"q_proj", "v_proj", "gate_proj", "down_proj"};
  add_lora_adapters(m, lc, /*seed=*/1, /*base_dir=*/"");
  std::map<std::string, torch::Tensor> before;
  for (const auto& p : m->named_parameters()) before[p.key()] = p.value().detach().clone();
  m->train();
  auto opt = make_adamw(*m, oc);
  int64_t in_optimizer = 0;
  for (const auto& g : opt->param_groups()) in_optimizer += static_cast<int64_t>(g.params().size());
  EXPECT_EQ(in_optimizer, static_cast<int64_t>(m->lora_parameters().size()));
  const auto logp_old = rl_logprobs(m, s.batch, 2);
  torch::Tensor logp_ref;
  {
    LoraOff base(m);
    logp_ref = rl_logprobs(m, s.batch, 2);
  }
  EXPECT_TRUE(torch::equal(logp_ref, base_logp));
  EXPECT_TRUE(torch::equal(logp_old, base_logp));  // B = 0: the adapters start as the identity
  auto st = grpo_update(m, *opt, s.batch, s.adv, s.valid, logp_old, logp_ref, cfg, 2, 1.0, false);
  ASSERT_EQ(st.passes.size(), 2u);
  EXPECT_EQ(st.passes[0].kl, 0.0);  // π = π_ref before the first step
  EXPECT_GT(st.passes[1].kl, 0.0);
  for (const auto& p : m->named_parameters()) {
    const bool adapter = p.key().find(".lora_") != std::string::npos;
    EXPECT_EQ(!torch::equal(p.value(), before[p.key()]), adapter) << p.key();
  }
  {
    LoraOff base(m);
    EXPECT_TRUE(torch::equal(rl_logprobs(m, s.batch, 2), base_logp));
  }
  EXPECT_FALSE(torch::equal(rl_logprobs(m, s.batch, 2), base_logp));
}

}  // namespace

}  // namespace kernelrl::grpo_step_test
