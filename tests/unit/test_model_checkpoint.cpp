// Model files: safetensors round trip and every corruption path, load_parameters' dtype/shape/
// missing/unexpected checks, native checkpoints (round trip, tokenizer copy, corrupt metadata),
// HF export/import in C++ (single file and sharded; Llama, Llama-3 rope scaling, Qwen2, Qwen3),
// config.json refusals, and parity with Hugging Face transformers for every family, fp32 and bf16
// (tests/golden/model_hf/hf_parity.py, skipped when KERNELRL_PYTHON lacks transformers).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "common/error.h"
#include "model/checkpoint.h"
#include "model/tokenizer.h"
#include "test_util.h"

// This file's own namespace: the unit tests compile in unity batches (tests/CMakeLists.txt),
// where two files' helpers in one anonymous namespace would clash.
namespace kernelrl::model_checkpoint_test {

// Tiny tensors: one intra-op thread (OpenMP spinning on a loaded 2-core CI box costs 100x).
static const int kOneThread = (torch::set_num_threads(1), 0);
using kernelrl::testing::ScratchDir;

namespace {

ModelShape tiny() {
  return preset_shape("tiny", 97);
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_bytes(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}
// A safetensors file with `header` as its JSON header and `data` after it.
void write_raw(const fs::path& p, const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  write_bytes(p, out + header + data);
}

// Expects a UserError whose message contains `needle`.
template <class F>
void expect_user_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning \"" << needle << "\"";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "multi-line: " << e.what();
  }
}

torch::Tensor tokens() {
  return torch::randint(97, {2, 9}, at::detail::createCPUGenerator(3), torch::kInt64);
}

torch::Tensor logits_of(LlamaModel& m, const torch::Tensor& t) {
  torch::NoGradGuard ng;
  return m->forward(t.to(m->device())).to(torch::kFloat32).cpu();
}

// Tiny shapes of the non-Llama-2 families, as their HF configs describe them.
std::vector<ModelShape> family_shapes() {
  ModelShape llama3 = tiny();
  llama3.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64};
  ModelShape qwen2 = tiny();
  qwen2.arch = "qwen2", qwen2.qkv_bias = true, qwen2.rope_theta = 1e6;
  ModelShape qwen3 = tiny();
  qwen3.arch = "qwen3", qwen3.qk_norm = true, qwen3.head_size = 32, qwen3.tie_embeddings = false;
  ModelShape qwen3_bias = qwen3;
  qwen3_bias.qkv_bias = qwen3_bias.o_bias = true, qwen3_bias.head_size = 0;
  return {llama3, qwen2, qwen3, qwen3_bias};
}

}  // namespace

TEST(Safetensors, RoundTripAllDtypesAndMetadata) {
  ScratchDir dir;
  auto g = at::detail::createCPUGenerator(1);
  std::vector<std::pair<std::string, torch::Tensor>> in = {
      {"a.f32", torch::randn({3, 4}, g)},
      {"b.bf16", torch::randn({5}, g).to(torch::kBFloat16)},
      {"c.f16", torch::randn({2, 2, 2}, g).to(torch::kFloat16)},
      {"d.i64", torch::arange(7, torch::kInt64)},
      {"e.scalar", torch::tensor(3.5f).reshape({})},
      {"f.empty", torch::zeros({0, 3})},
      {"g.noncontig", torch::randn({4, 6}, g).t()}};
  write_safetensors(dir / "x.safetensors", in, {{"who", "test"}});
  auto out = read_safetensors(dir / "x.safetensors");
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [name, t] : in) {
    ASSERT_TRUE(out.count(name)) << name;
    EXPECT_EQ(out[name].scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(out[name].sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(out[name], t)) << name;
  }
  auto meta = read_safetensors_metadata(dir / "x.safetensors");
  EXPECT_EQ(meta["who"], "test");
  EXPECT_EQ(meta["format"], "pt");
  // 8-byte header length, then a header padded to a multiple of 8.
  const std::string bytes = read_bytes(dir / "x.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
}

TEST(Safetensors, CorruptFilesAreOneLineUserErrors) {
  ScratchDir dir;
  const fs::path p = dir / "bad.safetensors";
  expect_user_error([&] { read_safetensors(dir / "absent.safetensors"); }, "not found");
  write_bytes(p, "abc");
  expect_user_error([&] { read_safetensors(p); }, "shorter than");
  write_raw(p, std::string(40, ' '), "");
  {  // header length larger than the file
    std::string b = read_bytes(p);
    b[0] = static_cast<char>(200);
    write_bytes(p, b);
  }
  expect_user_error([&] { read_safetensors(p); }, "exceeds the file");
  write_raw(p, "{not json", "");
  expect_user_error([&] { read_safetensors(p); }, "not a JSON object");
  write_raw(p, "[1, 2]", "");
  expect_user_error([&] { read_safetensors(p); }, "not a JSON object");
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [2]}})", std::string(8, '\0'));
  expect_user_error([&] { read_safetensors(p); }, "needs dtype, shape and data_offsets");
  write_raw(p, R"({"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})",
            std::string(8, '\0'));
  expect_user_error([&] { read_safetensors(p); }, "unsupported dtype");
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})",
            std::string(8, '\0'));
  expect_user_error([&] { read_safetensors(p); }, "outside the 8-byte data section");
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
            std::string(8, '\0'));
  expect_user_error([&] { read_safetensors(p); }, "needs 12");
  write_raw(p, R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})",
            std::string(8, '\0'));
  expect_user_error([&] { read_safetensors(p); }, "bad shape");
}

TEST(Checkpoint, LoadParametersRejectsWrongDtypeShapeMissingAndUnexpected) {
  auto model = make_model(tiny(), torch::kCPU, torch::kFloat32, 1);
  std::map<std::string, torch::Tensor> good;
  for (const auto& p : model->named_parameters()) good[p.key()] = p.value().detach().clone();
  auto bad = good;
  bad["norm.weight"] = torch::ones({64}, torch::kInt64);
  expect_user_error([&] { load_parameters(model, bad, "", "f"); },
                    "weights must be F32, F16 or BF16");
  bad = good;
  bad["layers.0.mlp.up_proj.weight"] = torch::zeros({176, 63});
  expect_user_error([&] { load_parameters(model, bad, "", "f"); },
                    "has shape [176, 63], expected [176, 64]");
  bad = good;
  bad.erase("layers.1.self_attn.v_proj.weight");
  expect_user_error([&] { load_parameters(model, bad, "", "f"); },
                    "missing tensor \"layers.1.self_attn.v_proj.weight\"");
  bad = good;
  bad["layers.7.mlp.up_proj.weight"] = torch::zeros({1});
  expect_user_error([&] { load_parameters(model, bad, "", "f"); }, "unexpected tensor");
  // bf16 weights convert into an fp32 model.
  auto half = good;
  for (auto& [k, v] : half) v = v.to(torch::kBFloat16);
  load_parameters(model, half, "", "f");
  EXPECT_TRUE(torch::equal(model->named_parameters()["norm.weight"],
                           good["norm.weight"].to(torch::kBFloat16).to(torch::kFloat32)));
}

TEST(Checkpoint, NativeRoundTripWithTokenizerAndExtra) {
  ScratchDir dir;
  ModelShape s = tiny();
  s.tie_embeddings = false;
  auto model = make_model(s, torch::kCPU, torch::kFloat32, 2);
  write_bytes(dir / "tok.model", "not really a tokenizer, but copied byte for byte");
  save_checkpoint(dir / "ckpt", model, s, dir / "tok.model", {{"step", 12}, {"stage", "pretrain"}});
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "checkpoint.json"));
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(dir.path()))
    leftovers += e.path().filename() != "ckpt" && e.path().filename() != "tok.model";
  EXPECT_EQ(leftovers, 0) << "temp directories left behind";
  auto c = load_checkpoint(dir / "ckpt", torch::kCPU);
  EXPECT_TRUE(c.shape == s);
  EXPECT_EQ(c.extra["step"], 12);
  ASSERT_TRUE(c.tokenizer_path.has_value());
  EXPECT_EQ(read_bytes(*c.tokenizer_path), read_bytes(dir / "tok.model"));
  auto t = tokens();
  EXPECT_TRUE(torch::equal(logits_of(model, t), logits_of(c.model, t)));
  // Saving again over it replaces it.
  auto other = make_model(s, torch::kCPU, torch::kFloat32, 3);
  save_checkpoint(dir / "ckpt", other, s);
  auto c2 = load_checkpoint(dir / "ckpt", torch::kCPU);
  EXPECT_TRUE(torch::equal(logits_of(other, t), logits_of(c2.model, t)));
  EXPECT_FALSE(c2.tokenizer_path.has_value());
}

TEST(Checkpoint, CorruptOrMissingFilesAreUserErrors) {
  ScratchDir dir;
  auto model = make_model(tiny(), torch::kCPU, torch::kFloat32, 4);
  save_checkpoint(dir / "c", model, tiny());
  expect_user_error([&] { load_checkpoint(dir / "nope", torch::kCPU); }, "not found");
  fs::create_directories(dir / "empty");
  expect_user_error([&] { load_checkpoint(dir / "empty", torch::kCPU); }, "no checkpoint.json");
  const std::string meta = read_bytes(dir / "c" / "checkpoint.json");
  write_bytes(dir / "c" / "checkpoint.json", meta.substr(0, meta.size() / 2));
  expect_user_error([&] { load_checkpoint(dir / "c", torch::kCPU); }, "not a JSON object");
  write_bytes(dir / "c" / "checkpoint.json",
              R"({"format": "kernelrl-checkpoint", "format_version": 9})");
  expect_user_error([&] { load_checkpoint(dir / "c", torch::kCPU); }, "format_version 9");
  write_bytes(dir / "c" / "checkpoint.json", meta);
  const std::string weights = read_bytes(dir / "c" / "model.safetensors");
  write_bytes(dir / "c" / "model.safetensors", weights.substr(0, weights.size() - 100));
  expect_user_error([&] { load_checkpoint(dir / "c", torch::kCPU); }, "truncated");
  fs::remove(dir / "c" / "model.safetensors");
  expect_user_error([&] { load_checkpoint(dir / "c", torch::kCPU); }, "not found");
  // A checkpoint of another shape.
  ModelShape wide = tiny();
  wide.d_model = 128;
  auto m2 = make_model(wide, torch::kCPU, torch::kFloat32, 5);
  save_checkpoint(dir / "w", m2, wide);
  write_bytes(dir / "c" / "model.safetensors", read_bytes(dir / "w" / "model.safetensors"));
  expect_user_error([&] { load_checkpoint(dir / "c", torch::kCPU); }, "expected [");
}

TEST(Checkpoint, HfExportImportRoundTripSingleAndSharded) {
  ScratchDir dir;
  for (bool tied : {true, false}) {
    ModelShape s = tiny();
    s.tie_embeddings = tied;
    auto model = make_model(s, torch::kCPU, torch::kFloat32, 6);
    export_hf(dir / "single", model);
    export_hf(dir / "sharded", model, {}, /*max_shard_bytes=*/20000);
    EXPECT_TRUE(fs::exists(dir / "sharded" / "model.safetensors.index.json"));
    EXPECT_FALSE(fs::exists(dir / "sharded" / "model.safetensors"));
    int shards = 0;
    for (const auto& e : fs::directory_iterator(dir / "sharded"))
      shards += e.path().extension() == ".safetensors";
    EXPECT_GT(shards, 2);
    auto t = tokens();
    for (const char* sub : {"single", "sharded"}) {
      auto c = import_hf(dir / sub, torch::kCPU);
      EXPECT_TRUE(c.shape == s) << sub;
      EXPECT_TRUE(torch::equal(logits_of(model, t), logits_of(c.model, t))) << sub;
    }
    auto names = read_safetensors(dir / "single" / "model.safetensors");
    EXPECT_TRUE(names.count("model.layers.0.self_attn.q_proj.weight"));
    EXPECT_EQ(names.count("lm_head.weight"), tied ? 0u : 1u);
  }
  // load_checkpoint falls back to HF import for an HF directory.
  auto c = load_checkpoint(dir / "single", torch::kCPU);
  EXPECT_FALSE(c.shape.tie_embeddings);
  // The index must list every shard's tensors.
  std::string index = read_bytes(dir / "sharded" / "model.safetensors.index.json");
  auto pos = index.find("\"model.norm.weight\"");
  ASSERT_NE(pos, std::string::npos);
  index.replace(pos, 19, "\"model.nrm.weight\"");
  write_bytes(dir / "sharded" / "model.safetensors.index.json", index);
  expect_user_error([&] { import_hf(dir / "sharded", torch::kCPU); },
                    "not listed there by the index");
}

// Every family: HF export -> import and native save -> load give the same shape and logits;
// the parameter names are HF's (biases, q/k norms).
TEST(Checkpoint, FamiliesRoundTripThroughHfAndNativeFiles) {
  ScratchDir dir;
  auto t = tokens();
  for (const ModelShape& s : family_shapes()) {
    SCOPED_TRACE(s.describe());
    auto model = make_model(s, torch::kCPU, torch::kFloat32, 7);
    EXPECT_EQ(model->parameters().size() > 0, true);
    int64_t n = 0;
    for (const auto& p : model->parameters()) n += p.numel();
    EXPECT_EQ(n, s.num_parameters());
    export_hf(dir / s.arch, model);
    auto c = import_hf(dir / s.arch, torch::kCPU);
    EXPECT_TRUE(c.shape == s);
    EXPECT_TRUE(torch::equal(logits_of(model, t), logits_of(c.model, t)));
    save_checkpoint(dir / "native", model, s);
    auto n2 = load_checkpoint(dir / "native", torch::kCPU);
    EXPECT_TRUE(n2.shape == s);
    EXPECT_TRUE(torch::equal(logits_of(model, t), logits_of(n2.model, t)));
    auto names = read_safetensors(dir / s.arch / "model.safetensors");
    EXPECT_EQ(names.count("model.layers.1.self_attn.k_proj.bias"), s.qkv_bias ? 1u : 0u);
    EXPECT_EQ(names.count("model.layers.1.self_attn.o_proj.bias"), s.o_bias ? 1u : 0u);
    EXPECT_EQ(names.count("model.layers.1.self_attn.q_norm.weight"), s.qk_norm ? 1u : 0u);
  }
  // A format_version 1 checkpoint (shape without the family keys) still loads, as Llama.
  auto model = make_model(tiny(), torch::kCPU, torch::kFloat32, 8);
  save_checkpoint(dir / "v1", model, tiny());
  auto meta = nlohmann::json::parse(read_bytes(dir / "v1" / "checkpoint.json"));
  meta["format_version"] = 1;
  for (const char* k : {"arch", "head_dim", "qkv_bias", "o_bias", "qk_norm", "rope_scaling"})
    meta["shape"].erase(k);
  write_bytes(dir / "v1" / "checkpoint.json", meta.dump());
  auto v1 = load_checkpoint(dir / "v1", torch::kCPU);
  EXPECT_TRUE(v1.shape == tiny());
  EXPECT_TRUE(torch::equal(logits_of(model, t), logits_of(v1.model, t)));
}

// Llama-3 rope scaling by hand (Llama 3.1's formula, not transformers' code): head_dim 16,
// θ 10000, original context 64, factor 8, bands at wavelengths 16 and 64.
TEST(Checkpoint, Llama3RopeFrequenciesFollowTheFormula) {
  ModelShape s = family_shapes()[0];
  s.d_model = 64, s.n_heads = 4;  // head_dim 16
  auto got = rope_inv_freq(s);
  ASSERT_EQ(got.numel(), 8);
  for (int i = 0; i < 8; ++i) {
    const double base = std::pow(10000.0, -2.0 * i / 16);
    const double wavelen = 2 * M_PI / base;
    double want = base;  // wavelen < 16: kept
    if (wavelen > 64) {
      want = base / 8;
    } else if (wavelen >= 16) {
      const double smooth = (64 / wavelen - 1.0) / (4.0 - 1.0);
      want = (1 - smooth) * base / 8 + smooth * base;
    }
    EXPECT_NEAR(got[i].item<double>(), want, 1e-6 * base) << "i=" << i << " wavelen " << wavelen;
  }
  s.rope_scaling = RopeScaling{};
  EXPECT_NEAR(rope_inv_freq(s)[7].item<double>(), std::pow(10000.0, -14.0 / 16), 1e-9);
}

TEST(Checkpoint, HfConfigRejectsWhatThisModelDoesNotImplement) {
  nlohmann::json j = hf_config(tiny(), torch::kFloat32);
  EXPECT_TRUE(shape_from_hf_config(j, "c") == tiny());
  for (const ModelShape& s : family_shapes())
    EXPECT_TRUE(shape_from_hf_config(hf_config(s, torch::kFloat32), "c") == s) << s.describe();
  // Each refusal is one line naming the key.
  auto refused = [&](nlohmann::json bad, const std::string& key) {
    expect_user_error([&] { shape_from_hf_config(bad, "c"); }, "\"" + key + "\"");
  };
  auto bad = j;
  bad["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 5e5}, {"factor", 4.0}};
  refused(bad, "rope_parameters.rope_type");
  bad = j;
  bad.erase("rope_parameters");
  bad["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  refused(bad, "rope_scaling.type");
  bad["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}};
  refused(bad, "rope_scaling.high_freq_factor");
  bad = j;
  bad["model_type"] = "mistral";
  refused(bad, "model_type");
  bad.erase("model_type");
  refused(bad, "model_type");
  bad = j;
  bad["mlp_bias"] = true;
  refused(bad, "mlp_bias");
  bad = j;
  bad["hidden_act"] = "gelu";
  refused(bad, "hidden_act");
  bad = hf_config(family_shapes()[1], torch::kFloat32);
  bad["use_sliding_window"] = true;
  refused(bad, "use_sliding_window");
  bad["use_sliding_window"] = false;
  bad["layer_types"] = {"full_attention", "sliding_attention"};
  refused(bad, "layer_types");
  bad = j;
  bad["partial_rotary_factor"] = 0.5;
  refused(bad, "partial_rotary_factor");
  bad = j;
  bad.erase("hidden_size");
  refused(bad, "hidden_size");
  bad = j;
  bad["rms_norm_eps"] = nullptr;
  expect_user_error([&] { shape_from_hf_config(bad, "c"); }, "wrong type");
  // transformers 4.x layout: rope_theta and rope_scaling at the top level (Llama 3.1's config).
  auto old = hf_config(family_shapes()[0], torch::kFloat32);
  old.erase("rope_parameters");
  old["rope_theta"] = 10000.0;
  old["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 64}};
  EXPECT_TRUE(shape_from_hf_config(old, "c") == family_shapes()[0]);
  // Qwen3 without head_dim takes transformers' default 128.
  auto q3 = hf_config(family_shapes()[2], torch::kFloat32);
  q3.erase("head_dim");
  EXPECT_EQ(shape_from_hf_config(q3, "c").head_dim(), 128);
}

// Parity with transformers (an independent implementation): an HF-saved model imported here
// gives HF's logits, and a model exported here gives the same logits in transformers.
// fp32 CPU; metric max |Δlogit|; threshold 1e-4.
TEST(HfParity, ImportAndExportMatchTransformersOnCpu) {
  const std::string py = KERNELRL_PYTHON;
  const std::string script =
      std::string(KERNELRL_SOURCE_DIR) + "/tests/golden/model_hf/hf_parity.py";
  if (py.empty())
    GTEST_SKIP() << "KERNELRL_PYTHON not set at configure time: no transformers reference";
  auto probe = kernelrl::testing::run_command(py + " " + script + " probe");
  if (probe.exit_code != 0)
    GTEST_SKIP() << "transformers/safetensors not importable by " << py << ": " << probe.output;
  ScratchDir dir;
  auto made = kernelrl::testing::run_command(py + " " + script + " make " + (dir / "hf").string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  std::string check_dirs;
  for (const char* sub :
       {"tied", "sharded", "llama3", "qwen2_tied", "qwen2", "qwen3", "qwen3_bias"}) {
    auto c = import_hf(dir / "hf" / sub, torch::kCPU);
    auto ref = read_safetensors(dir / "hf" / sub / "reference.safetensors");
    auto got = logits_of(c.model, ref["tokens"]);
    const double diff = (got - ref["logits"]).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << sub << " import: max |Δlogit| vs transformers";
    std::cout << sub << " import: max |dlogit| = " << diff << " (" << c.shape.describe() << ")\n";
    if (std::string(sub) == "llama3") {
      // Negative control: without the llama3 frequency scaling the logits are visibly off.
      ASSERT_EQ(c.shape.rope_scaling.type, "llama3");
      ModelShape plain = c.shape;
      plain.rope_scaling = RopeScaling{};
      LlamaModel unscaled(plain);
      load_parameters(unscaled, read_safetensors(dir / "hf" / sub / "model.safetensors"), "model.",
                      sub);
      EXPECT_GT((logits_of(unscaled, ref["tokens"]) - ref["logits"]).abs().max().item<double>(),
                1e-3);
    }
    // Export a perturbed copy (so HF cannot pass by reading its own file) and let HF check it.
    {
      torch::NoGradGuard ng;
      for (auto& p : c.model->parameters()) p.mul_(1.01);
    }
    // Negative control: the perturbation is visible at this threshold.
    EXPECT_GT((logits_of(c.model, ref["tokens"]) - ref["logits"]).abs().max().item<double>(), 1e-3);
    const fs::path out = dir / (std::string("export_") + sub);
    export_hf(out, c.model);
    write_safetensors(out / "cpp_reference.safetensors",
                      {{"tokens", ref["tokens"]}, {"logits", logits_of(c.model, ref["tokens"])}});
    check_dirs += " " + out.string();
  }
  auto checked =
      kernelrl::testing::run_command(py + " " + script + " check" + check_dirs + " --atol 1e-4");
  std::cout << checked.output;
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
}

// The same in bf16, where parity is bit for bit: transformers' bf16 models (every weight and bias
// nonzero) imported in bf16 give its logits exactly, on the CPU. Metric: logits differing in any
// bit; threshold 0. Catches rounding-order differences that fp32 hides below 1e-4: biases added
// after a separately rounded x Wᵀ (Qwen2, Qwen3 attention_bias: ~1e-2 off before 2026-11-26).
TEST(HfParity, Bf16ImportIsBitExactOnCpu) {
  const std::string py = KERNELRL_PYTHON;
  const std::string script =
      std::string(KERNELRL_SOURCE_DIR) + "/tests/golden/model_hf/hf_parity.py";
  if (py.empty())
    GTEST_SKIP() << "KERNELRL_PYTHON not set at configure time: no transformers reference";
  auto probe = kernelrl::testing::run_command(py + " " + script + " probe");
  if (probe.exit_code != 0)
    GTEST_SKIP() << "transformers/safetensors not importable by " << py << ": " << probe.output;
  ScratchDir dir;
  auto made = kernelrl::testing::run_command(py + " " + script + " make " + (dir / "hf").string() +
                                             " --dtype bfloat16");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  for (const char* sub :
       {"tied", "sharded", "llama3", "qwen2_tied", "qwen2", "qwen3", "qwen3_bias"}) {
    auto c = import_hf(dir / "hf" / sub, torch::kCPU, torch::kBFloat16);
    ASSERT_EQ(c.model->dtype(), torch::kBFloat16);
    auto ref = read_safetensors(dir / "hf" / sub / "reference.safetensors");
    torch::NoGradGuard ng;
    auto got = c.model->forward(ref["tokens"]).to(torch::kFloat32);
    ASSERT_EQ(got.sizes(), ref["logits"].sizes()) << sub;
    EXPECT_EQ((got != ref["logits"]).sum().item<int64_t>(), 0)
        << sub << " bf16 import: max |dlogit| " << (got - ref["logits"]).abs().max().item<double>();
  }
}

// `kernelrl sample --checkpoint DIR --prompt ... -n 2` prints completions from a checkpoint that
// carries its tokenizer (runs the binary when it has been built next to the tests).
TEST(SampleCli, PrintsCompletionsFromACheckpoint) {
  if (!fs::exists(KERNELRL_BIN)) GTEST_SKIP() << "kernelrl binary not built";
  ScratchDir dir;
  {
    std::ofstream corpus(dir / "corpus.txt");
    for (int i = 0; i < 200; ++i)
      corpus << "__global__ void k" << i << "(float* x) { x[0] = " << i << "; }\n";
  }
  TokenizerTrainOptions to;
  to.vocab_size = 400;
  auto tok = Tokenizer::train(dir / "corpus.txt", dir / "tok.model", to);
  ModelShape s = preset_shape("tiny", tok.vocab_size());
  auto model = make_model(s, torch::kCPU, torch::kFloat32, 8);
  save_checkpoint(dir / "ckpt", model, s, dir / "tok.model", {{"step", 0}});
  auto r = kernelrl::testing::run_kernelrl(
      "sample --checkpoint " + (dir / "ckpt").string() +
      " --prompt '__global__ void' -n 2 --max-new-tokens 8 --device cpu");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--- completion 1: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--- completion 2:"), std::string::npos) << r.output;
  auto no_prompt =
      kernelrl::testing::run_kernelrl("sample --checkpoint " + (dir / "ckpt").string());
  EXPECT_EQ(no_prompt.exit_code, 2) << no_prompt.output;
  // --run-dir without --task is bad input (the run-dir path itself is the trainer's).
  auto run_dir = kernelrl::testing::run_kernelrl("sample --run-dir " + dir.path().string());
  EXPECT_EQ(run_dir.exit_code, 2) << run_dir.output;
}

}  // namespace kernelrl::model_checkpoint_test
