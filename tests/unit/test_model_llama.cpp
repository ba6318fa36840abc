// The Llama decoder on CPU (fp32): shapes and parameter counts, causal masking, GQA against an
// explicitly duplicated multi-head model, RoPE against hand-computed values and, bit for bit,
// against transformers' tables (tests/golden/model_hf/rope_golden.safetensors), SDPA against an
// explicit softmax(QKᵀ/√d)V written here from the weights, padding invariance, token_logprobs,
// and activation checkpointing gradients.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>

#include "model/checkpoint.h"
#include "model/llama.h"

// This file's own namespace: the unit tests compile in unity batches (tests/CMakeLists.txt),
// where two files' helpers in one anonymous namespace would clash.
namespace kernelrl::model_llama_test {

// Tiny tensors: one intra-op thread (OpenMP spinning on a loaded 2-core CI box costs 100x).
static const int kOneThread = (torch::set_num_threads(1), 0);

namespace {

ModelShape tiny(int64_t vocab = 97) {
  return preset_shape("tiny", vocab);
}

torch::Tensor random_tokens(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  auto g = at::detail::createCPUGenerator(seed);
  return torch::randint(V, {B, T}, g, torch::kInt64);
}

// Max |a - b| as a double.
double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

}  // namespace

TEST(ModelShape, PresetsAndParameterCount) {
  auto model = make_model(tiny(), torch::kCPU, torch::kFloat32, 1);
  int64_t counted = 0;
  for (const auto& p : model->parameters()) counted += p.numel();
  EXPECT_EQ(counted, tiny().num_parameters());
  ModelShape base = preset_shape("base", 32000);
  EXPECT_EQ(base.n_layers, 12);
  EXPECT_EQ(base.d_model, 768);
  EXPECT_EQ(base.n_kv_heads, 4);
  EXPECT_NEAR(base.num_parameters() / 1e6, 114.0, 6.0);                        // "~120M"
  EXPECT_NEAR(preset_shape("small", 4096).num_parameters() / 1e6, 27.3, 3.0);  // "~30M"
  ModelShape untied = tiny();
  untied.tie_embeddings = false;
  LlamaModel m2(untied);
  counted = 0;
  for (const auto& p : m2->parameters()) counted += p.numel();
  EXPECT_EQ(counted, untied.num_parameters());
}

TEST(ModelShape, MakeModelFromConfig) {
  ModelConfig c;
  c.preset = "tiny";
  c.d_ff = 96;
  c.activation_checkpointing = true;
  auto m = make_model(c, 50, torch::kCPU, /*seed=*/3);
  EXPECT_EQ(m->shape().d_ff, 96);
  EXPECT_EQ(m->shape().vocab_size, 50);
  EXPECT_EQ(m->dtype(), torch::kFloat32);  // auto on CPU
  EXPECT_TRUE(m->activation_checkpointing());
  c.dtype = "bf16";
  EXPECT_EQ(make_model(c, 50, torch::kCPU, 3)->dtype(), torch::kBFloat16);
}

TEST(ModelShape, ResolveAppliesOverridesAndRejectsBadShapes) {
  ModelConfig c;
  c.preset = "tiny";
  c.n_layers = 3;
  c.rope_theta = 500000;
  ModelShape s = resolve_shape(c, 1000);
  EXPECT_EQ(s.n_layers, 3);
  EXPECT_EQ(s.vocab_size, 1000);
  EXPECT_EQ(s.rope_theta, 500000);
  c.n_kv_heads = 3;  // 4 heads are not a multiple of 3
  EXPECT_THROW(resolve_shape(c, 1000), UserError);
  c.n_kv_heads = 0;
  EXPECT_THROW(resolve_shape(c, 0), UserError);  // no vocabulary anywhere
  c.preset = "hf";
  EXPECT_THROW(resolve_shape(c, 1000), UserError);  // hf without hf_config
}

TEST(Model, ForwardShapesAndHfParameterNames) {
  auto model = make_model(tiny(), torch::kCPU, torch::kFloat32, 2);
  auto logits = model->forward(random_tokens(3, 11, 97, 1));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 11, 97}));
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  auto names = model->named_parameters();
  EXPECT_NE(names.find("embed_tokens.weight"), nullptr);
  EXPECT_NE(names.find("layers.1.self_attn.k_proj.weight"), nullptr);
  EXPECT_NE(names.find("layers.0.mlp.gate_proj.weight"), nullptr);
  EXPECT_NE(names.find("layers.0.post_attention_layernorm.weight"), nullptr);
  EXPECT_NE(names.find("norm.weight"), nullptr);
  EXPECT_EQ(names.find("lm_head.weight"), nullptr);  // tied by default
  EXPECT_EQ(names["layers.0.self_attn.k_proj.weight"].sizes(),
            (std::vector<int64_t>{2 * 16, 64}));  // 2 kv heads of 16
}

TEST(Model, CausalMaskingFutureTokensDoNotChangePastLogits) {
  auto model = make_model(tiny(), torch::kCPU, torch::kFloat32, 3);
  auto a = random_tokens(2, 16, 97, 5);
  auto b = a.clone();
  b.narrow(1, 9, 7).random_(97);  // change positions 9..15
  torch::NoGradGuard ng;
  auto la = model->forward(a), lb = model->forward(b);
  EXPECT_LT(max_diff(la.narrow(1, 0, 9), lb.narrow(1, 0, 9)), 1e-5);
  EXPECT_GT(max_diff(la.narrow(1, 9, 7), lb.narrow(1, 9, 7)), 1e-3);  // the test can fail
}

TEST(Model, RotaryMatchesHandComputedValues) {
  ModelShape s = tiny();
  s.d_model = 16, s.n_heads = 4, s.n_kv_heads = 2;  // head_dim 4
  LlamaModel model(s);
  auto [cos, sin] = model->rotary(torch::tensor({{0, 1, 2}}, torch::kInt64));
  ASSERT_EQ(cos.sizes(), (std::vector<int64_t>{1, 3, 4}));
  // inv_freq = [1, 1/10000^(2/4)] = [1, 0.01]; emb = [p, p/100, p, p/100].
  const double f[2] = {1.0, 0.01};
  for (int p = 0; p < 3; ++p)
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(cos[0][p][i].item<double>(), std::cos(p * f[i % 2]), 1e-6);
      EXPECT_NEAR(sin[0][p][i].item<double>(), std::sin(p * f[i % 2]), 1e-6);
    }
  // x = [1, 2, 3, 4] at position 1: rotate_half(x) = [-3, -4, 1, 2].
  auto x = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f});
  auto y = apply_rope(x, cos[0][1], sin[0][1]);
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.01), s2 = std::sin(0.01);
  const double expect[4] = {1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i].item<double>(), expect[i], 1e-6);
}

namespace {

// transformers' RoPE tables (tests/golden/model_hf/rope_golden.py, generated on the CPU).
std::map<std::string, torch::Tensor> rope_golden() {
  return read_safetensors(std::string(KERNELRL_SOURCE_DIR) +
                          "/tests/golden/model_hf/rope_golden.safetensors");
}

// The shape of the golden file's configuration row c: θ, head_dim, factor, low, high, original
// max position (factor 0: unscaled).
ModelShape rope_shape(const torch::Tensor& c) {
  ModelShape s = tiny();
  const auto v = [&](int i) { return c[i].item<double>(); };
  s.rope_theta = v(0);
  s.n_heads = s.n_kv_heads = 2;
  s.d_model = 2 * static_cast<int64_t>(v(1));
  if (v(2) > 0) s.rope_scaling = {"llama3", v(2), v(3), v(4), static_cast<int64_t>(v(5))};
  return s;
}

std::string describe_rope(const ModelShape& s) {
  const RopeScaling& r = s.rope_scaling;
  return "theta " + std::to_string(s.rope_theta) + ", head_dim " + std::to_string(s.head_dim()) +
         ", " + r.type + " factor " + std::to_string(r.factor) + " low " +
         std::to_string(r.low_freq_factor) + " high " + std::to_string(r.high_freq_factor) +
         " original " + std::to_string(r.original_max_position);
}

// Elements of a and b (same dtype) that differ in any bit.
int64_t bits_differ(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.scalar_type(), b.scalar_type());
  EXPECT_EQ(a.sizes(), b.sizes());
  return (a != b).sum().item<int64_t>();
}

// The llama3 formula with `2π / inv_freq` and `old_len / wavelen` as single divisions (model/'s
// code until 2026-11-26): the negative control of the golden test.
torch::Tensor llama3_inv_freq_one_division(const ModelShape& shape) {
  const int64_t hd = shape.head_dim();
  const RopeScaling& r = shape.rope_scaling;
  auto inv = 1.0 / torch::pow(shape.rope_theta,
                              torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) / hd);
  const double old_len = static_cast<double>(r.original_max_position);
  auto wavelen = 2 * M_PI / inv;
  auto scaled = torch::where(wavelen > old_len / r.low_freq_factor, inv / r.factor, inv);
  auto s = (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  auto medium = (wavelen < old_len / r.high_freq_factor).logical_not() &
                (wavelen > old_len / r.low_freq_factor).logical_not();
  return torch::where(medium, (1 - s) * scaled / r.factor + s * scaled, scaled);
}

}  // namespace

// rope_inv_freq against LlamaRotaryEmbedding.inv_freq for nine configurations (Llama-3.1/3.2,
// Llama-3 scaling on θ = 10000, unscaled). Metric: elements differing in any bit; threshold 0.
// Both sides run LibTorch's vectorized CPU kernels (AVX2 and AVX-512 give the same bits; the
// scalar fallback, ATEN_CPU_CAPABILITY=default, rounds pow differently).
TEST(RopeGolden, InverseFrequenciesEqualTransformersBitForBit) {
  const auto golden = rope_golden();
  const auto& configs = golden.at("configs");
  ASSERT_EQ(configs.size(0), 9);
  int64_t control_misses = 0;
  for (int64_t i = 0; i < configs.size(0); ++i) {
    const ModelShape s = rope_shape(configs[i]);
    const auto& want = golden.at("inv_freq." + std::to_string(i));
    auto got = rope_inv_freq(s);
    ASSERT_EQ(got.device(), torch::Device(torch::kCPU));
    EXPECT_EQ(bits_differ(got, want), 0) << "configuration " << i << ": " << describe_rope(s);
    if (s.rope_scaling.type == "llama3")
      control_misses += bits_differ(llama3_inv_freq_one_division(s), want);
  }
  // Negative control: one rounding more or less in the medium band is seen (the old code missed
  // 2 frequencies by one ulp in each of configurations 4-6, the θ = 10000 rows).
  EXPECT_GT(control_misses, 0);
}

// The rotary tables of Llama-3.1-8B's configuration at 128 positions up to 131071 against
// LlamaRotaryEmbedding.forward: fp32, and bf16 (transformers' fp32 tables rounded). Metric:
// elements differing in any bit; threshold 0.
TEST(RopeGolden, RotaryTablesEqualTransformersInFp32AndBf16) {
  const auto golden = rope_golden();
  ModelShape s = rope_shape(golden.at("configs")[0]);
  s.n_layers = 1;
  s.max_seq_len = 131072;
  ASSERT_EQ(s.head_dim(), 128);
  ASSERT_EQ(s.rope_scaling.type, "llama3");
  LlamaModel model(s);
  const auto positions = golden.at("positions").unsqueeze(0);
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    model->to(dtype);
    auto [cos, sin] = model->rotary(positions);
    ASSERT_EQ(cos.scalar_type(), dtype);
    EXPECT_EQ(bits_differ(cos[0], golden.at("cos").to(dtype)), 0) << "cos " << dtype;
    EXPECT_EQ(bits_differ(sin[0], golden.at("sin").to(dtype)), 0) << "sin " << dtype;
  }
}

// The attention module against an explicit computation from its weights: projections by
// matmul, RoPE by the HF formula, kv head h/G for query head h, softmax(QKᵀ/√d)V in fp64.
TEST(Model, AttentionMatchesExplicitSoftmaxReference) {
  ModelShape s = tiny();
  auto model = make_model(s, torch::kCPU, torch::kFloat32, 4);
  auto& attn = model->layers->ptr<DecoderLayerImpl>(0)->self_attn;
  const int64_t B = 2, T = 9, H = s.n_heads, Hk = s.n_kv_heads, d = s.head_dim();
  auto g = at::detail::createCPUGenerator(9);
  auto x = torch::randn({B, T, s.d_model}, g);
  auto mask2d = torch::ones({B, T}, torch::kBool);
  mask2d[1].narrow(0, 0, 3).fill_(false);  // row 1 left-padded by 3
  for (bool padded : {false, true}) {
    torch::Tensor pos = padded ? (mask2d.to(torch::kInt64).cumsum(1) - 1).clamp_min(0)
                               : torch::arange(T).unsqueeze(0).expand({B, T});
    auto [cos, sin] = model->rotary(pos);
    torch::Tensor mask4;  // [B, 1, T, T]
    if (padded) {
      auto causal = torch::ones({T, T}, torch::kBool).tril();
      mask4 =
          (causal.unsqueeze(0) & (mask2d.unsqueeze(1) | torch::eye(T, torch::kBool).unsqueeze(0)))
              .unsqueeze(1);
    }
    torch::NoGradGuard ng;
    auto got = attn->forward(x, AttentionInputs{cos, sin, mask4});

    auto q = torch::matmul(x, attn->q_proj->weight.t()).view({B, T, H, d}).transpose(1, 2);
    auto k = torch::matmul(x, attn->k_proj->weight.t()).view({B, T, Hk, d}).transpose(1, 2);
    auto v = torch::matmul(x, attn->v_proj->weight.t()).view({B, T, Hk, d}).transpose(1, 2);
    auto rot = [&](const torch::Tensor& t) {
      auto h = d / 2;
      auto rh = torch::cat({-t.narrow(-1, h, h), t.narrow(-1, 0, h)}, -1);
      return t * cos.unsqueeze(1) + rh * sin.unsqueeze(1);
    };
    q = rot(q), k = rot(k);
    auto idx = torch::floor_divide(torch::arange(H), H / Hk);  // kv head of each query head
    auto out = reference_attention(q, k.index_select(1, idx), v.index_select(1, idx), mask4);
    auto want = torch::matmul(out.transpose(1, 2).reshape({B, T, H * d}), attn->o_proj->weight.t());
    EXPECT_LT(max_diff(got, want), 2e-5) << (padded ? "padded" : "causal");
  }
}

// GQA: a 2-kv-head model equals a 4-kv-head model whose kv heads are the 2 duplicated.
TEST(Model, GroupedQueryAttentionEqualsDuplicatedHeads) {
  ModelShape gqa = tiny();
  ModelShape mha = gqa;
  mha.n_kv_heads = mha.n_heads;
  auto a = make_model(gqa, torch::kCPU, torch::kFloat32, 6);
  auto b = make_model(mha, torch::kCPU, torch::kFloat32, 7);
  torch::NoGradGuard ng;
  auto pa = a->named_parameters(), pb = b->named_parameters();
  const int64_t d = gqa.head_dim(), G = gqa.n_heads / gqa.n_kv_heads;
  for (const auto& p : pb) {
    const auto& src = pa[p.key()];
    if (p.key().find("k_proj") != std::string::npos ||
        p.key().find("v_proj") != std::string::npos) {
      // kv head h of b = kv head h / G of a
      auto w = src.view({gqa.n_kv_heads, d, gqa.d_model}).repeat_interleave(G, 0);
      p.value().copy_(w.reshape({mha.n_heads * d, mha.d_model}));
    } else {
      p.value().copy_(src);
    }
  }
  auto t = random_tokens(2, 13, 97, 8);
  EXPECT_LT(max_diff(a->forward(t), b->forward(t)), 1e-5);
}

TEST(Model, LeftPaddedRowScoresLikeTheUnpaddedRow) {
  auto model = make_model(tiny(), torch::kCPU, torch::kFloat32, 10);
  auto seq = random_tokens(1, 7, 97, 11);
  auto padded = torch::cat({torch::full({1, 4}, 0, torch::kInt64), seq}, 1);
  auto mask =
      torch::cat({torch::zeros({1, 4}, torch::kBool), torch::ones({1, 7}, torch::kBool)}, 1);
  torch::NoGradGuard ng;
  auto l1 = model->forward(seq);
  auto l2 = model->forward(padded, mask).narrow(1, 4, 7);
  EXPECT_LT(max_diff(l1, l2), 1e-5);
  EXPECT_TRUE(torch::isfinite(model->forward(padded, mask)).all().item<bool>());  // pads: no NaN
}

TEST(Model, TokenLogprobsAreLogSoftmaxOfTheNextToken) {
  auto model = make_model(tiny(), torch::kCPU, torch::kFloat32, 12);
  auto t = random_tokens(2, 10, 97, 13);
  torch::Tensor ent;
  auto lp = token_logprobs(model, t, {}, &ent);
  ASSERT_EQ(lp.sizes(), (std::vector<int64_t>{2, 9}));
  torch::NoGradGuard ng;
  auto logits = model->forward(t).to(torch::kFloat64);
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 9; ++i) {
      auto row = logits[b][i];
      const double lse = torch::logsumexp(row, 0).item<double>();
      EXPECT_NEAR(lp[b][i].item<double>(), row[t[b][i + 1].item<int64_t>()].item<double>() - lse,
                  1e-5);
      auto p = torch::softmax(row, 0);
      EXPECT_NEAR(ent[b][i].item<double>(), -(p * p.log()).sum().item<double>(), 1e-4);
    }
}

// Chunked over positions (3 rows of logits at a time here), token_logprobs gives the values,
// entropies and parameter gradients of the plain log_softmax over whole logits (fp64 reference
// built from forward(); metric max |Δ|, threshold 1e-5 values, 1e-5 relative gradients), tied
// and untied heads.
TEST(Model, ChunkedTokenLogprobsEqualTheWholeLogSoftmaxWithGradients) {
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    ModelShape s = tiny();
    s.tie_embeddings = tied;
    auto a = make_model(s, torch::kCPU, torch::kFloat32, 15);
    auto b = make_model(s, torch::kCPU, torch::kFloat32, 15);
    auto t = random_tokens(2, 10, 97, 16);
    auto coef = torch::randn({2, 9}, at::detail::createCPUGenerator(17));
    // Reference: whole logits, log_softmax, gather.
    auto logits = a->forward(t).to(torch::kFloat64);
    auto ref = logits.narrow(1, 0, 9)
                   .log_softmax(-1)
                   .gather(-1, t.narrow(1, 1, 9).unsqueeze(-1))
                   .squeeze(-1);
    (ref * coef).sum().backward();
    torch::Tensor ent;
    auto got = token_logprobs(b, t, {}, &ent, /*chunk_bytes=*/97 * 4 * 3);
    EXPECT_LT((got - ref.to(torch::kFloat32)).abs().max().item<double>(), 1e-5);
    auto p = logits.narrow(1, 0, 9).softmax(-1);
    auto ref_ent = -(p * p.log()).sum(-1);
    EXPECT_LT((ent - ref_ent.to(torch::kFloat32)).abs().max().item<double>(), 1e-5);
    EXPECT_FALSE(ent.requires_grad());
    (got * coef).sum().backward();
    auto pa = a->named_parameters(), pb = b->named_parameters();
    for (const auto& kv : pa) {
      auto ga = kv.value().grad(), gb = pb[kv.key()].grad();
      ASSERT_TRUE(gb.defined()) << kv.key();
      const double scale = ga.abs().max().item<double>() + 1e-12;
      EXPECT_LT((ga - gb).abs().max().item<double>() / scale, 1e-5) << kv.key();
    }
    // No grad mode: the same values.
    torch::NoGradGuard ng;
    EXPECT_TRUE(torch::equal(token_logprobs(b, t, {}, nullptr, 97 * 4 * 3), got.detach()));
  }
}

TEST(Model, ActivationCheckpointingGivesTheSameGradients) {
  auto a = make_model(tiny(), torch::kCPU, torch::kFloat32, 14);
  auto b = make_model(tiny(), torch::kCPU, torch::kFloat32, 14);
  b->set_activation_checkpointing(true);
  a->train();
  b->train();
  auto t = random_tokens(2, 12, 97, 15);
  auto mask = torch::ones({2, 12}, torch::kBool);
  mask[0].narrow(0, 0, 2).fill_(false);
  // with a padding mask and without one (plain causal path)
  (token_logprobs(a, t, mask).sum() + token_logprobs(a, t).sum()).backward();
  (token_logprobs(b, t, mask).sum() + token_logprobs(b, t).sum()).backward();
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& p : pa) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    ASSERT_TRUE(pb[p.key()].grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0) << p.key();
    EXPECT_LT(max_diff(p.value().grad(), pb[p.key()].grad()), 1e-5) << p.key();
  }
}

}  // namespace kernelrl::model_llama_test
