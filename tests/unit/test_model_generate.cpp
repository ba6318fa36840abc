// KV-cache sampling on CPU (fp32): top-k/top-p masks and the inverse-CDF draw against
// hand-computed values; decoding logprobs against a full forward (token_logprobs) of each
// unpadded prompt+completion; greedy against the full forward's argmax; seeded determinism;
// EOS, stop strings and batch compaction.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>

#include "model/generate.h"
#include "model/tokenizer.h"
#include "test_util.h"

// This file's own namespace: the unit tests compile in unity batches (tests/CMakeLists.txt),
// where two files' helpers in one anonymous namespace would clash.
namespace kernelrl::model_generate_test {

// Tiny tensors: one intra-op thread (OpenMP spinning on a loaded 2-core CI box costs 100x).
static const int kOneThread = (torch::set_num_threads(1), 0);

namespace {

constexpr int64_t kVocab = 61;

LlamaModel tiny_model(uint64_t seed) {
  return make_model(preset_shape("tiny", kVocab), torch::kCPU, torch::kFloat32, seed);
}

std::vector<std::vector<int64_t>> prompts() {
  return {{1, 5, 9, 2, 7}, {3}, {10, 11, 12, 13, 14, 15, 16, 17, 18}, {4, 4, 4}};
}

bool is_neg_inf(const torch::Tensor& x) {
  return std::isinf(x.item<double>()) && x.item<double>() < 0;
}

}  // namespace

TEST(Sampling, TopKTopPTemperatureMasks) {
  // p = [0.5, 0.25, 0.15, 0.10] in vocabulary order 2, 0, 3, 1 (so sorting matters).
  auto logits = torch::log(torch::tensor({{0.25, 0.10, 0.5, 0.15}})).to(torch::kFloat32);
  auto k2 = filter_logits(logits, 1.0, 2, 1.0);
  EXPECT_FALSE(is_neg_inf(k2[0][0]));
  EXPECT_FALSE(is_neg_inf(k2[0][2]));
  EXPECT_TRUE(is_neg_inf(k2[0][1]));
  EXPECT_TRUE(is_neg_inf(k2[0][3]));
  // top-p 0.7: mass before each token (descending) = 0, .5, .75, .9 -> keep tokens 2 and 0.
  auto p7 = filter_logits(logits, 1.0, 0, 0.7);
  EXPECT_FALSE(is_neg_inf(p7[0][2]));
  EXPECT_FALSE(is_neg_inf(p7[0][0]));
  EXPECT_TRUE(is_neg_inf(p7[0][3]));
  EXPECT_TRUE(is_neg_inf(p7[0][1]));
  // top-p 0.5: mass before token 0 is exactly 0.5 -> only the top token survives.
  auto p5 = filter_logits(logits, 1.0, 0, 0.5);
  EXPECT_EQ(torch::isfinite(p5).sum().item<int64_t>(), 1);
  EXPECT_FALSE(is_neg_inf(p5[0][2]));
  // top-p 0.8 keeps 3 tokens: .5 + .25 < .8 so token 3 is needed.
  EXPECT_EQ(torch::isfinite(filter_logits(logits, 1.0, 0, 0.8)).sum().item<int64_t>(), 3);
  // temperature divides the logits.
  auto t2 = filter_logits(logits, 2.0, 0, 1.0);
  EXPECT_NEAR(t2[0][2].item<double>(), std::log(0.5) / 2, 1e-6);
  // top-k then top-p: k = 3 renormalizes to (.5, .25, .15)/.9 before p.
  auto kp = filter_logits(logits, 1.0, 3, 0.6);  // before: 0, .556 -> keep 2 tokens
  EXPECT_EQ(torch::isfinite(kp).sum().item<int64_t>(), 2);
}

TEST(Sampling, InverseCdfDrawsTheRightToken) {
  auto logits =
      torch::log(torch::tensor({{0.5, 0.25, 0.15, 0.10}})).to(torch::kFloat32).repeat({5, 1});
  auto u = torch::tensor({0.0f, 0.4f, 0.6f, 0.8f, 0.95f});
  auto tok = sample_from_logits(logits, u);
  const int64_t want[5] = {0, 0, 1, 2, 3};  // cdf = .5, .75, .9, 1
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(tok[i].item<int64_t>(), want[i]) << "u=" << u[i].item<float>();
  // A leading zero-probability token is never drawn, even at u = 0.
  auto masked = torch::tensor({{-INFINITY, 0.0f, 0.0f}});
  EXPECT_EQ(sample_from_logits(masked, torch::tensor({0.0f}))[0].item<int64_t>(), 1);
}

// The invariant GRPO relies on: logprobs collected while decoding (KV cache, left padding,
// batched) equal a full forward of each unpadded prompt + completion, both of the tempered
// distribution softmax(logits / T) (before top-k/top-p). fp32 CPU: 1e-4. The untempered forward
// (what the trainer computed before issue 39) is not what was sampled: it misses by more.
TEST(Generate, DecodeLogprobsMatchFullForward) {
  auto model = tiny_model(21);
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.temperature = 0.9;
  o.top_k = 20;
  o.top_p = 0.95;
  o.seed = 3;
  auto r = generate(model, prompts(), o);
  ASSERT_EQ(r.tokens.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(r.tokens[i].size(), 24u);
    EXPECT_EQ(r.finish_reason[i], "length");
    std::vector<int64_t> seq = prompts()[i];
    seq.insert(seq.end(), r.tokens[i].begin(), r.tokens[i].end());
    auto lp = token_logprobs(model, torch::tensor(seq).unsqueeze(0), {}, nullptr, 0, o.temperature);
    auto untempered = token_logprobs(model, torch::tensor(seq).unsqueeze(0));
    const int64_t P = prompts()[i].size();
    double miss = 0;
    for (size_t j = 0; j < r.tokens[i].size(); ++j) {
      EXPECT_NEAR(r.logprobs[i][j], lp[0][P - 1 + j].item<double>(), 1e-4)
          << "row " << i << " tok " << j;
      miss = std::max(miss, std::abs(r.logprobs[i][j] - untempered[0][P - 1 + j].item<double>()));
    }
    EXPECT_GT(miss, 1e-3) << "row " << i;
  }
}

// The HF families' options (Llama-3 rope scaling, Qwen2 q/k/v biases, Qwen3 q/k norms with
// head_dim != d_model / n_heads, q/k/v/o biases) take the same path through the KV cache:
// decoding logprobs equal the full forward's, eager and static decode steps agree.
TEST(Generate, EveryFamilyDecodesLikeItsFullForward) {
  ModelShape llama3 = preset_shape("tiny", kVocab);
  llama3.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 16};
  ModelShape qwen2 = preset_shape("tiny", kVocab);
  qwen2.arch = "qwen2", qwen2.qkv_bias = true;
  ModelShape qwen3 = preset_shape("tiny", kVocab);
  qwen3.arch = "qwen3", qwen3.qk_norm = true, qwen3.head_size = 24;
  qwen3.qkv_bias = qwen3.o_bias = true;
  for (const ModelShape& s : {llama3, qwen2, qwen3}) {
    SCOPED_TRACE(s.describe());
    auto model = make_model(s, torch::kCPU, torch::kFloat32, 31);
    GenerateOptions o;
    o.max_new_tokens = 12;
    o.seed = 5;
    auto r = generate(model, prompts(), o);
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      std::vector<int64_t> seq = prompts()[i];
      seq.insert(seq.end(), r.tokens[i].begin(), r.tokens[i].end());
      auto lp = token_logprobs(model, torch::tensor(seq).unsqueeze(0));
      const int64_t P = prompts()[i].size();
      for (size_t j = 0; j < r.tokens[i].size(); ++j)
        EXPECT_NEAR(r.logprobs[i][j], lp[0][P - 1 + j].item<double>(), 1e-4) << i << "," << j;
    }
    torch::NoGradGuard ng;
    auto tokens = torch::tensor({{0, 0, 5, 6, 7}, {1, 2, 3, 4, 5}}, torch::kInt64);
    auto mask = tokens != 0;
    auto a = model->new_cache(2, 20), b = model->new_cache(2, 20);
    auto la = model->prefill(tokens, mask, a);
    model->prefill(tokens, mask, b);
    auto pos = mask.sum(1).to(torch::kInt64);
    for (int step = 0; step < 4; ++step) {
      auto tok = la.argmax(-1);
      la = model->decode_step(tok, pos, a);
      auto lb = model->decode_step_static(tok, pos, torch::full({1}, b.length, torch::kInt64), b);
      b.length += 1;
      pos = pos + 1;
      EXPECT_LT((la - lb).abs().max().item<double>(), 1e-5) << "step " << step;
    }
  }
}

TEST(Generate, GreedyEqualsArgmaxOfFullForward) {
  auto model = tiny_model(22);
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.temperature = 0;
  auto r = generate(model, prompts(), o);
  for (size_t i = 0; i < 4; ++i) {
    std::vector<int64_t> seq = prompts()[i];
    for (size_t j = 0; j < r.tokens[i].size(); ++j) {
      torch::NoGradGuard ng;
      auto logits = model->forward(torch::tensor(seq).unsqueeze(0));
      EXPECT_EQ(r.tokens[i][j], logits[0][-1].argmax().item<int64_t>())
          << "row " << i << " step " << j;
      seq.push_back(r.tokens[i][j]);
    }
  }
}

TEST(Generate, SameSeedSameTokensOtherSeedOtherTokens) {
  auto model = tiny_model(23);
  GenerateOptions o;
  o.max_new_tokens = 20;
  o.seed = 7;
  auto a = generate(model, prompts(), o);
  auto b = generate(model, prompts(), o);
  EXPECT_EQ(a.tokens, b.tokens);
  o.seed = 8;
  auto c = generate(model, prompts(), o);
  EXPECT_NE(a.tokens, c.tokens);
  // A row's draws do not depend on its batch: prompt 2 alone gives the same tokens.
  o.seed = 7;
  auto single = generate(model, {prompts()[0]}, o);
  EXPECT_EQ(single.tokens[0], a.tokens[0]);
}

TEST(Generate, EosFinishesRowsIndependentlyAndCompactionKeepsResults) {
  auto model = tiny_model(24);
  GenerateOptions o;
  o.max_new_tokens = 40;
  o.seed = 11;
  o.temperature = 1.5;  // flat enough that EOS shows up in some rows
  o.sync_interval = 2;
  std::vector<std::vector<int64_t>> many;
  for (int i = 0; i < 16; ++i) many.push_back({int64_t(1 + i % 7), int64_t(2 + i)});
  // The EOS: the token most often sampled first without one, so it shows up.
  o.eos_ids = {};
  auto free_run = generate(model, many, o);
  std::map<int64_t, int> count;
  for (const auto& t : free_run.tokens)
    for (int64_t id : t) count[id]++;
  int64_t eos = std::max_element(count.begin(), count.end(), [](auto& x, auto& y) {
                  return x.second < y.second;
                })->first;
  o.eos_ids = {eos};
  o.compact = true;
  auto a = generate(model, many, o);
  o.compact = false;
  auto b = generate(model, many, o);
  int finished_early = 0;
  for (size_t i = 0; i < many.size(); ++i) {
    EXPECT_EQ(a.tokens[i], b.tokens[i]) << "row " << i;
    const auto& t = a.tokens[i];
    auto first = std::find(t.begin(), t.end(), eos);
    if (first != t.end()) {
      EXPECT_EQ(first + 1, t.end()) << "tokens after EOS in row " << i;
      EXPECT_EQ(a.finish_reason[i], "eos");
      ++finished_early;
    } else {
      EXPECT_EQ(t.size(), 40u);
      EXPECT_EQ(a.finish_reason[i], "length");
    }
    ASSERT_EQ(a.logprobs[i].size(), t.size());
    for (size_t j = 0; j < t.size(); ++j) EXPECT_NEAR(a.logprobs[i][j], b.logprobs[i][j], 1e-4);
    // the prefix before EOS is the free run's (same uniforms, same model)
    for (size_t j = 0; j < t.size(); ++j) EXPECT_EQ(t[j], free_run.tokens[i][j]);
  }
  EXPECT_GT(finished_early, 0);
  EXPECT_LT(a.generated_tokens, 16 * 40);
}

TEST(Generate, StopStringsCutAtTheCompletingToken) {
  kernelrl::testing::ScratchDir dir;
  {
    std::ofstream corpus(dir / "corpus.txt");
    for (int i = 0; i < 300; ++i)
      corpus << "__global__ void kernel_" << i
             << "(float* out, const float* in) { out[i] = in[i] * " << i << "; }\n";
  }
  TokenizerTrainOptions to;
  to.vocab_size = 400;
  auto tok = Tokenizer::train(dir / "corpus.txt", dir / "tok.model", to);
  auto model = make_model(preset_shape("tiny", tok.vocab_size()), torch::kCPU, torch::kFloat32, 25);
  GenerateOptions o;
  o.max_new_tokens = 30;
  o.seed = 5;
  o.sync_interval = 4;
  o.stop_strings = {"a", "e", "o", ";"};
  auto r = generate(model, tok, {"__global__ void", "out[i] =", "float"}, o);
  int stopped = 0;
  for (size_t i = 0; i < 3; ++i) {
    if (r.finish_reason[i] != "stop") continue;
    ++stopped;
    auto has_stop = [&](const std::string& s) {
      for (const auto& st : o.stop_strings)
        if (s.find(st) != std::string::npos) return true;
      return false;
    };
    EXPECT_TRUE(has_stop(r.text[i])) << r.text[i];
    auto shorter = r.tokens[i];
    shorter.pop_back();
    EXPECT_FALSE(has_stop(tok.decode(shorter))) << "stopped late: " << r.text[i];
  }
  EXPECT_GT(stopped, 0);
  EXPECT_THROW(generate(model, {{1, 2}}, o), UserError);  // stop strings need a tokenizer
}

// The graph-capturable decode step (static shapes, device slot index, full-capacity attention
// through the additive key bias) equals the eager one. fp32 CPU, max |Δlogit| < 1e-5.
TEST(Generate, StaticDecodeStepEqualsEagerDecodeStep) {
  auto model = tiny_model(27);
  torch::NoGradGuard ng;
  auto tokens = torch::tensor({{0, 0, 5, 6, 7}, {1, 2, 3, 4, 5}}, torch::kInt64);
  auto mask = tokens != 0;
  auto a = model->new_cache(2, 20), b = model->new_cache(2, 20);
  auto la = model->prefill(tokens, mask, a);
  auto lb = model->prefill(tokens, mask, b);
  auto pos = mask.sum(1).to(torch::kInt64);
  for (int step = 0; step < 6; ++step) {
    auto tok = la.argmax(-1);
    la = model->decode_step(tok, pos, a);
    lb = model->decode_step_static(tok, pos, torch::full({1}, b.length, torch::kInt64), b);
    b.length += 1;
    pos = pos + 1;
    EXPECT_LT((la - lb).abs().max().item<double>(), 1e-5) << "step " << step;
  }
}

TEST(Generate, BadInputsAreUserErrors) {
  auto model = tiny_model(26);
  GenerateOptions o;
  EXPECT_THROW(generate(model, {{}}, o), UserError);
  EXPECT_THROW(generate(model, {{kVocab}}, o), UserError);
  o.max_new_tokens = 600;  // tiny max_seq_len is 512
  EXPECT_THROW(generate(model, {{1}}, o), UserError);
  o.max_new_tokens = 4;
  o.top_p = 0;
  EXPECT_THROW(generate(model, {{1}}, o), UserError);
}

}  // namespace kernelrl::model_generate_test
