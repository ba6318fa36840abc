// ModelConfig: the policy's architecture and precision, mirrored 1:1 by the YAML `model:`
// section. Presets fill the shape; explicit keys override the preset's values.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace kernelrl {

// LoRA adapters (Hu et al. 2021, "LoRA", Eq. 3): a target projection W becomes
//   h = W x + (alpha / rank) · B A dropout(x),  A [rank, in] ~ U(±1/√in), B [out, rank] = 0,
// so training starts from the base model's outputs. The base is frozen; only A and B train.
struct LoraConfig {
  int64_t rank = 0;      // 0: no adapters (full fine-tuning)
  double alpha = 16.0;   // scale = alpha / rank
  double dropout = 0.0;  // dropout on the adapter's input while training
  std::vector<std::string> targets = {"q_proj", "k_proj", "v_proj", "o_proj"};

  void visit(cfg::Visitor& v) {
    v.field("rank", rank, "adapter rank; 0 = no LoRA (full fine-tuning)", cfg::at_least(0));
    v.field("alpha", alpha, "scale = alpha / rank", cfg::greater_than(0));
    v.field("dropout", dropout, "dropout on the adapter input in training",
            cfg::in_closed_open(0, 1));
    v.field("targets", targets,
            "projections with adapters: q_proj k_proj v_proj o_proj "
            "gate_proj up_proj down_proj",
            {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"});
  }
};

struct ModelConfig {
  std::string preset = "tiny";        // tiny | small (~30M) | base (~120M) | hf (read hf_config)
  std::string hf_config = "";         // path to an HF config.json when preset is hf
  std::string hf_path = "";           // HF checkpoint dir the first stage starts from (weights,
                                      // config.json, tokenizer.json); empty: the stages' own
  std::string prompt_format = "raw";  // raw | chatml | llama3 (model/chat_format.h)
  int64_t vocab_size = 0;             // 0: take it from the tokenizer
  int64_t d_model = 0;                // 0: from the preset
  int64_t n_layers = 0;               // 0: from the preset
  int64_t n_heads = 0;                // 0: from the preset
  int64_t n_kv_heads = 0;             // 0: from the preset (grouped-query attention when < heads)
  int64_t d_ff = 0;                   // 0: from the preset (SwiGLU hidden size)
  int64_t max_seq_len = 0;            // 0: from the preset
  double rope_theta = 10000.0;        // rotary embedding base
  double norm_eps = 1e-5;             // RMSNorm epsilon
  bool tie_embeddings = true;         // share input embedding and output head
  std::string dtype = "auto";         // auto (bf16 on CUDA, fp32 on CPU) | fp32 | bf16
  bool activation_checkpointing = false;  // recompute each layer in backward to save memory
  LoraConfig lora;                        // adapters for the RL stages (rank 0: none)

  void visit(cfg::Visitor& v) {
    v.field("preset", preset, "tiny | small (~30M) | base (~120M) | hf",
            {"tiny", "small", "base", "hf"});
    v.field("hf_config", hf_config, "HF config.json path when preset is hf");
    v.field("hf_path", hf_path,
            "HF checkpoint directory (config.json, safetensors, tokenizer.json) the first stage "
            "starts from; empty = start from the stages' own checkpoints");
    v.field("prompt_format", prompt_format,
            "raw | chatml (Qwen instruct) | llama3 (Llama 3 instruct): the turn layout of prompts",
            {"raw", "chatml", "llama3"});
    v.field("vocab_size", vocab_size, "0 = from the tokenizer", cfg::at_least(0));
    v.field("d_model", d_model, "hidden size; 0 = preset", cfg::at_least(0));
    v.field("n_layers", n_layers, "decoder layers; 0 = preset", cfg::at_least(0));
    v.field("n_heads", n_heads, "attention heads; 0 = preset", cfg::at_least(0));
    v.field("n_kv_heads", n_kv_heads, "key/value heads (GQA); 0 = preset", cfg::at_least(0));
    v.field("d_ff", d_ff, "SwiGLU hidden size; 0 = preset", cfg::at_least(0));
    v.field("max_seq_len", max_seq_len, "context length; 0 = preset", cfg::at_least(0));
    v.field("rope_theta", rope_theta, "rotary embedding base", cfg::greater_than(0));
    v.field("norm_eps", norm_eps, "RMSNorm epsilon", cfg::greater_than(0));
    v.field("tie_embeddings", tie_embeddings, "share embedding and output head");
    v.field("dtype", dtype, "auto | fp32 | bf16", {"auto", "fp32", "bf16"});
    v.field("activation_checkpointing", activation_checkpointing, "recompute layers in backward");
    v.section("lora", lora, "LoRA adapters (base frozen); rank 0 = full fine-tuning");
  }
};

}  // namespace kernelrl
