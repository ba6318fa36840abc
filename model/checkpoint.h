// Model files: safetensors read/write (header parsed and written with nlohmann-json, validated
// strictly), the native checkpoint directory, and Hugging Face import/export of the Llama,
// Qwen2 and Qwen3 families (config.json + model.safetensors, or sharded with
// model.safetensors.index.json).
// Optimizer state and run bookkeeping are the trainer's (trainer/), not this file's.
//
// Native checkpoint directory (format_version 2; version 1, whose shapes lack the HF-family
// keys, reads as Llama):
//   checkpoint.json    {"format": "kernelrl-checkpoint", "format_version": 2, "shape": {...},
//                       "dtype": "bf16"|"fp32",
//                       "tokenizer": "tokenizer.model"|"tokenizer.json"|null,
//                       "tokenizer_origin": "<path it was copied from>", "extra": {...}}
//   model.safetensors  parameters under their LlamaModel names (HF names minus "model.")
//   tokenizer.model    a copy of the tokenizer, so the directory is self-contained (an HF
//                      tokenizer: tokenizer.json and, when it has one, tokenizer_config.json)
//   LoRA: checkpoint.json carries "lora" {rank, alpha, dropout, targets}; a policy whose frozen
//   base came from a directory saves adapter_model.safetensors (adapters only, PEFT's tensor
//   names minus the prefix) and "base": that directory, read again at load; otherwise
//   model.safetensors holds base and adapters.
// It is written to a temp directory beside the target and renamed into place.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/llama.h"

namespace kernelrl {

namespace fs = std::filesystem;

// ---- safetensors -------------------------------------------------------------------------

// Reads every tensor (CPU, the file's dtype). Throws UserError naming the file for: a file
// shorter than its header, a header that is not a JSON object, entries without dtype/shape/
// data_offsets, unknown dtypes, offsets outside the data or not matching shape × dtype size.
std::map<std::string, torch::Tensor> read_safetensors(const fs::path& path);
// The header's "__metadata__" (empty when absent).
std::map<std::string, std::string> read_safetensors_metadata(const fs::path& path);
// Writes tensors (any device; contiguous copies are taken) atomically. Supported dtypes: F64,
// F32, F16, BF16, I64, I32, I16, I8, U8, BOOL. `metadata` always gets format=pt (transformers
// refuses files without it).
void write_safetensors(const fs::path& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Copies `tensors` into the model's parameters. Names are the model's after removing `prefix`
// from the file's names (HF: "model." except lm_head). Floating dtypes are converted to the
// model dtype; anything else, a missing or unexpected tensor, or a shape mismatch is a
// UserError naming the tensor and `origin`. Rotary inv_freq buffers (old HF files) are ignored.
void load_parameters(LlamaModel& model, const std::map<std::string, torch::Tensor>& tensors,
                     const std::string& prefix, const std::string& origin);

// ---- native checkpoints ------------------------------------------------------------------

struct Checkpoint {
  LlamaModel model{nullptr};
  ModelShape shape;
  fs::path dir;
  std::optional<fs::path> tokenizer_path;  // inside dir, when the checkpoint carries one
  nlohmann::json extra;                    // whatever the saver passed (step, stage, ...)
};

// Saves model (its shape must equal `shape`), a copy of `tokenizer_path` (may be empty) and
// `extra` into `dir`, replacing an existing checkpoint there. Returns the name of the tokenizer
// file the checkpoint carries ("tokenizer.model" or "tokenizer.json"; "" without one).
std::string save_checkpoint(const fs::path& dir, LlamaModel& model, const ModelShape& shape,
                            const fs::path& tokenizer_path = {}, const nlohmann::json& extra = {});
// Loads a native checkpoint onto `device` in `dtype` (default: bf16 on CUDA, fp32 on CPU;
// LoRA adapters stay fp32).
// A directory holding an HF checkpoint (config.json, no checkpoint.json) is imported instead.
Checkpoint load_checkpoint(const fs::path& dir, torch::Device device,
                           std::optional<torch::Dtype> dtype = std::nullopt);

nlohmann::json shape_to_json(const ModelShape& s);
ModelShape shape_from_json(const nlohmann::json& j, const std::string& origin);

// ---- Hugging Face ------------------------------------------------------------------------

// An HF config.json (model_type llama, qwen2 or qwen3; transformers 4.x or 5.x layout) ->
// shape. What the model does not implement is a one-line UserError naming the key: another
// model_type, rope types other than default/llama3, partial rotary, sliding-window layers,
// mlp_bias, activations other than silu.
// Defaults for absent keys are transformers' (Qwen3 head_dim 128, rope_theta 10000, ...).
ModelShape shape_from_hf_config(const nlohmann::json& config, const std::string& origin);
ModelShape shape_from_hf_config_file(const fs::path& path);
// config.json content for `shape` (Llama/Qwen2/Qwen3ForCausalLM per shape.arch) with
// torch_dtype from `dtype`.
nlohmann::json hf_config(const ModelShape& shape, torch::Dtype dtype, int64_t bos_id = 1,
                         int64_t eos_id = 2);

// LoRA adapters for a loaded policy (LlamaModelImpl::add_lora, adapters in fp32 whatever the
// base's dtype). `base_dir`: where the frozen base was read from (checkpoints then save only
// the adapters), empty to save everything.
void add_lora_adapters(LlamaModel& model, const LoraConfig& config, uint64_t seed,
                       const std::string& base_dir);

// Writes config.json and model.safetensors (HF names, model dtype; LoRA adapters merged into
// their weights, W + (α/r) B A) into `dir`; with
// max_shard_bytes > 0 writes model-0000i-of-0000n.safetensors shards of at most that size plus
// model.safetensors.index.json. Copies `tokenizer_path` when given (as tokenizer.model, or an
// HF tokenizer.json with its tokenizer_config.json).
void export_hf(const fs::path& dir, LlamaModel& model, const fs::path& tokenizer_path = {},
               int64_t max_shard_bytes = 0);
// Reads an HF directory (config.json + model.safetensors or the sharded index); its tokenizer
// is tokenizer.json, else tokenizer.model.
Checkpoint import_hf(const fs::path& dir, torch::Device device,
                     std::optional<torch::Dtype> dtype = std::nullopt);

}  // namespace kernelrl
