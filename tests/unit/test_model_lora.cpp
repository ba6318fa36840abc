// LoRA adapters (model/llama.h Projection, LlamaModelImpl::add_lora): zero-initialized adapters
// leave the logits bit-identical; an optimizer step changes the adapters and nothing else (also
// through activation checkpointing, whose frozen-embedding input would otherwise cut the
// adapters off from autograd); LoraOff gives the base model's logits exactly (GRPO's KL
// reference); merged weights equal the unmerged forward (max |Δlogit| ≤ 1e-5, fp32 CPU) and an
// HF export holds them merged; checkpoints save adapters only over a base directory and load
// back to the same logits; bad targets are one-line errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "model/checkpoint.h"
#include "test_util.h"

// This file's own namespace: the unit tests compile in unity batches (tests/CMakeLists.txt),
// where two files' helpers in one anonymous namespace would clash.
namespace kernelrl::model_lora_test {
using kernelrl::testing::ScratchDir;

static const int kOneThread = (torch::set_num_threads(1), 0);

namespace {

std::vector<ModelShape> shapes() {
  ModelShape llama = preset_shape("tiny", 61);
  ModelShape qwen2 = llama;
  qwen2.arch = "qwen2", qwen2.qkv_bias = true, qwen2.tie_embeddings = false;
  ModelShape qwen3 = llama;
  qwen3.arch = "qwen3", qwen3.qk_norm = true, qwen3.head_size = 24;
  return {llama, qwen2, qwen3};
}

LoraConfig all_targets(int64_t rank = 4) {
  LoraConfig c;
  c.rank = rank;
  c.alpha = 8.0;
  c.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return c;
}

torch::Tensor tokens() {
  return torch::randint(61, {2, 11}, at::detail::createCPUGenerator(5), torch::kInt64);
}

torch::Tensor logits_of(LlamaModel m, const torch::Tensor& t) {
  torch::NoGradGuard ng;
  return m->forward(t).to(torch::kFloat32);
}

std::map<std::string, torch::Tensor> snapshot(LlamaModel& m) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : m->named_parameters()) out[p.key()] = p.value().detach().clone();
  return out;
}

// One AdamW step on -Σ logprob of the tokens, every parameter handed to the optimizer (frozen
// ones included: freezing must hold by itself).
void train_step(LlamaModel& m, const torch::Tensor& t) {
  m->train();
  torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  opt.zero_grad();
  auto loss = -token_logprobs(m, t).sum();
  loss.backward();
  opt.step();
  m->eval();
}

bool is_adapter(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

}  // namespace

TEST(Lora, ZeroInitAdaptersLeaveLogitsUnchanged) {
  for (const ModelShape& s : shapes()) {
    SCOPED_TRACE(s.describe());
    auto m = make_model(s, torch::kCPU, torch::kFloat32, 3);
    auto before = logits_of(m, tokens());
    add_lora_adapters(m, all_targets(), /*seed=*/1, /*base_dir=*/"");
    EXPECT_TRUE(m->has_lora());
    auto after = logits_of(m, tokens());
    EXPECT_TRUE(torch::equal(before, after))
        << "max |Δ| " << (before - after).abs().max().item<double>();
    int64_t adapters = 0, trainable = 0;
    for (const auto& p : m->named_parameters()) {
      trainable += p.value().requires_grad();
      if (!is_adapter(p.key())) {
        EXPECT_FALSE(p.value().requires_grad()) << p.key() << " is not frozen";
        continue;
      }
      ++adapters;
      EXPECT_TRUE(p.value().requires_grad()) << p.key();
      EXPECT_EQ(p.value().scalar_type(), torch::kFloat32);
      if (p.key().find("lora_B") != std::string::npos)
        EXPECT_EQ(p.value().abs().max().item<double>(), 0.0) << p.key();
      else
        EXPECT_GT(p.value().abs().max().item<double>(), 0.0) << p.key();
    }
    EXPECT_EQ(adapters, 2 * 7 * s.n_layers);
    EXPECT_EQ(trainable, adapters);
  }
  // Only the configured targets get adapters; a bad target or rank is a one-line error.
  auto m = make_model(shapes()[0], torch::kCPU, torch::kFloat32, 3);
  LoraConfig qv;
  qv.rank = 2;
  qv.targets = {"q_proj", "v_proj"};
  add_lora_adapters(m, qv, 1, "");
  EXPECT_EQ(m->lora_parameters().size(), 2u * 2 * 2);
  EXPECT_EQ(m->named_parameters().find("layers.0.self_attn.k_proj.lora_A.weight"), nullptr);
  auto fresh = make_model(shapes()[0], torch::kCPU, torch::kFloat32, 3);
  LoraConfig bad = qv;
  bad.targets = {"qkv_proj"};
  try {
    add_lora_adapters(fresh, bad, 1, "");
    ADD_FAILURE() << "no error for target qkv_proj";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.lora.targets"), std::string::npos) << e.what();
  }
  EXPECT_THROW(add_lora_adapters(m, qv, 1, ""), UserError);  // already has adapters
}

TEST(Lora, AStepChangesOnlyAdaptersAndLoraOffIsTheBase) {
  for (bool checkpointing : {false, true}) {
    for (const ModelShape& s : shapes()) {
      SCOPED_TRACE(s.describe() + (checkpointing ? " checkpointed" : ""));
      auto m = make_model(s, torch::kCPU, torch::kFloat32, 4);
      m->set_activation_checkpointing(checkpointing);
      auto base_logits = logits_of(m, tokens());
      LoraConfig c = all_targets();
      c.dropout = 0.1;  // in training only
      add_lora_adapters(m, c, 2, "");
      auto before = snapshot(m);
      train_step(m, tokens());
      int64_t changed_adapters = 0;
      for (const auto& p : m->named_parameters()) {
        const bool same = torch::equal(p.value(), before[p.key()]);
        if (is_adapter(p.key()))
          changed_adapters += !same;
        else
          EXPECT_TRUE(same) << p.key() << " changed";
      }
      // Every adapter moved: B by its gradient, A by weight decay alone (its gradient is zero
      // while B = 0).
      EXPECT_EQ(changed_adapters, 2 * 7 * s.n_layers);
      auto tuned = logits_of(m, tokens());
      EXPECT_GT((tuned - base_logits).abs().max().item<double>(), 1e-4);
      {
        LoraOff off(m);  // the KL reference: the base, bit for bit
        EXPECT_TRUE(torch::equal(logits_of(m, tokens()), base_logits));
      }
      EXPECT_TRUE(torch::equal(logits_of(m, tokens()), tuned));
      // A second step moves the A matrices too (B is no longer zero).
      auto mid = snapshot(m);
      train_step(m, tokens());
      for (const auto& [name, p] : m->lora_parameters())
        EXPECT_FALSE(torch::equal(p, mid[name])) << name << " did not move on step 2";
    }
  }
}

TEST(Lora, MergedEqualsUnmergedAndExportsMerged) {
  ScratchDir dir;
  for (const ModelShape& s : shapes()) {
    SCOPED_TRACE(s.describe());
    auto m = make_model(s, torch::kCPU, torch::kFloat32, 5);
    auto base = logits_of(m, tokens());
    add_lora_adapters(m, all_targets(8), 3, "");
    train_step(m, tokens());
    train_step(m, tokens());
    auto unmerged = logits_of(m, tokens());
    EXPECT_GT((unmerged - base).abs().max().item<double>(), 1e-2);  // the adapters matter
    // The HF export folds the adapters in: a plain model with the same logits.
    export_hf(dir / s.arch, m);
    auto names = read_safetensors(dir / s.arch / "model.safetensors");
    for (const auto& [name, t] : names) EXPECT_FALSE(is_adapter(name)) << name;
    auto exported = import_hf(dir / s.arch, torch::kCPU);
    EXPECT_FALSE(exported.model->has_lora());
    const double export_diff =
        (logits_of(exported.model, tokens()) - unmerged).abs().max().item<double>();
    EXPECT_LT(export_diff, 1e-5);
    // Merging in place: the same.
    m->merge_lora();
    EXPECT_FALSE(m->has_lora());
    EXPECT_TRUE(m->lora_parameters().empty());
    const double merge_diff = (logits_of(m, tokens()) - unmerged).abs().max().item<double>();
    EXPECT_LT(merge_diff, 1e-5);
    std::printf("%s: max |dlogit| merged vs unmerged %.2e, exported %.2e (logits up to %.2f)\n",
                s.arch.c_str(), merge_diff, export_diff, unmerged.abs().max().item<double>());
  }
}

TEST(Lora, CheckpointsSaveAdaptersOverTheirBase) {
  ScratchDir dir;
  const ModelShape s = shapes()[1];
  auto base = make_model(s, torch::kCPU, torch::kFloat32, 6);
  export_hf(dir / "base", base);  // the pretrained checkpoint a user points at
  auto m = import_hf(dir / "base", torch::kCPU).model;
  add_lora_adapters(m, all_targets(), 4, (dir / "base").string());
  train_step(m, tokens());
  auto want = logits_of(m, tokens());
  save_checkpoint(dir / "ckpt", m, s, {}, {{"step", 1}});
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "adapter_model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "model.safetensors"));  // the base is not copied
  EXPECT_EQ(read_safetensors(dir / "ckpt" / "adapter_model.safetensors").size(),
            m->lora_parameters().size());
  auto back = load_checkpoint(dir / "ckpt", torch::kCPU);
  EXPECT_TRUE(back.model->has_lora());
  EXPECT_EQ(back.model->lora().rank, 4);
  EXPECT_TRUE(torch::equal(logits_of(back.model, tokens()), want));
  // A checkpoint of a checkpoint keeps pointing at the same base.
  save_checkpoint(dir / "ckpt2", back.model, s);
  EXPECT_TRUE(
      torch::equal(logits_of(load_checkpoint(dir / "ckpt2", torch::kCPU).model, tokens()), want));
  // Without a base directory everything is saved.
  auto own = make_model(s, torch::kCPU, torch::kFloat32, 7);
  add_lora_adapters(own, all_targets(), 4, "");
  train_step(own, tokens());
  save_checkpoint(dir / "full", own, s);
  EXPECT_TRUE(fs::exists(dir / "full" / "model.safetensors"));
  EXPECT_TRUE(torch::equal(logits_of(load_checkpoint(dir / "full", torch::kCPU).model, tokens()),
                           logits_of(own, tokens())));
  // The base gone: a one-line error naming it.
  fs::remove_all(dir / "base");
  try {
    load_checkpoint(dir / "ckpt", torch::kCPU);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("is gone"), std::string::npos) << e.what();
  }
}

}  // namespace kernelrl::model_lora_test
