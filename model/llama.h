// The policy: a Llama-architecture decoder in the LibTorch C++ frontend (RMSNorm, rotary
// embeddings in HF's rotate_half convention, SwiGLU MLP, grouped-query attention through
// scaled_dot_product_attention, optional tied embeddings, optional per-layer activation
// checkpointing), a static KV cache for generation, and token_logprobs() for the trainer.
// The same module covers the HF families that differ from Llama only in small options
// (ModelShape.arch): Llama-3 (rope_type llama3 frequency scaling), Qwen2 (q/k/v biases) and
// Qwen3 (per-head RMSNorm of q and k before RoPE, head_dim from the config). Sliding-window
// attention, MoE and other rope types are not implemented (the HF import refuses them).
// Sampling lives in model/generate.h; files (native, HF) in model/checkpoint.h.
//
// Precision: parameters and activations are in the model dtype: bf16 on CUDA (pure bf16, no
// autocast: the same weights serve sampling and training, and bf16 keeps Hopper's flash SDPA and
// tensor cores busy without per-step casts), fp32 on CPU. RMSNorm and RoPE compute in fp32 and
// cast back (as HF does); logits come out in the model dtype and token_logprobs() takes the
// log-softmax in fp32. The trainer instead keeps fp32 weights and runs under bf16 autocast
// (trainer/train_utils.h); a checkpointed layer recomputes under the forward's autocast state.
//
// LoRA (model_config.h's LoraConfig): every q/k/v/o/gate/up/down projection is a Projection
// that may carry an adapter (lora_A, lora_B; PEFT's names); add_lora() attaches them to the
// configured targets and freezes every other parameter, LoraOff switches them off (the GRPO
// KL reference: the base model, no second copy of the weights), merge_lora() folds them in.
//
// Parameter names equal HF LlamaForCausalLM's (Qwen2/Qwen3ForCausalLM's) without the "model."
// prefix (embed_tokens.weight, layers.N.self_attn.q_proj.weight, q_proj.bias, q_norm.weight,
// ..., norm.weight, lm_head.weight).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "model/model_config.h"

namespace kernelrl {

// Rotary frequency scaling. default: inv_freq[i] = θ^(-2i/head_dim). llama3 (Llama 3.1+,
// transformers' _compute_llama3_parameters): with wavelen = 2π / inv_freq, frequencies whose
// wavelength exceeds original_max_position / low_freq_factor are divided by `factor`, those
// below original_max_position / high_freq_factor are kept, and the band between is blended:
//   s = (original_max_position / wavelen - low) / (high - low),
//   inv = (1 - s) · inv / factor + s · inv.
struct RopeScaling {
  std::string type = "default";  // default | llama3
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
  bool operator==(const RopeScaling& o) const;
};

// The resolved architecture: every size concrete (presets and overrides applied).
struct ModelShape {
  std::string arch = "llama";  // llama | qwen2 | qwen3: the HF model_type (export writes it)
  int64_t vocab_size = 0;
  int64_t d_model = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t d_ff = 0;
  int64_t max_seq_len = 0;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  bool tie_embeddings = true;
  int64_t head_size = 0;  // per-head width; 0: d_model / n_heads (HF head_dim when it differs)
  bool qkv_bias = false;  // biases on q/k/v_proj (Qwen2; Llama and Qwen3 attention_bias)
  bool o_bias = false;    // bias on o_proj (Llama and Qwen3 attention_bias)
  bool qk_norm = false;   // per-head RMSNorm of q and k before RoPE (Qwen3)
  RopeScaling rope_scaling;

  int64_t head_dim() const { return head_size > 0 ? head_size : d_model / n_heads; }
  int64_t num_parameters() const;
  void validate() const;         // throws UserError naming the inconsistent field
  std::string describe() const;  // "d 768, 12 layers, heads 12/4, ff 2560, vocab 32000, 114.1M"
  bool operator==(const ModelShape& o) const;
};

// Preset (tiny | small | base | hf) + explicit overrides + vocab size. `vocab_size` is used when
// config.vocab_size is 0 (the tokenizer's size); hf reads config.hf_config (model/checkpoint.h).
ModelShape resolve_shape(const ModelConfig& config, int64_t vocab_size);
// A named preset's shape (tiny | small | base) for a vocabulary.
ModelShape preset_shape(const std::string& preset, int64_t vocab_size);
// ModelConfig.dtype on `device`: auto -> bf16 on CUDA, fp32 on CPU.
torch::Dtype resolve_dtype(const std::string& dtype, const torch::Device& device);

// The static KV cache of one generation batch: per layer K and V of [B, n_kv_heads, capacity,
// head_dim]. All rows share the write index `length` (prompts are left-padded); key_valid[b, t]
// says whether slot t of row b holds a real token (false for left padding).
struct KVCache {
  std::vector<torch::Tensor> k, v;
  torch::Tensor key_valid;  // [B, capacity] bool
  // The same as an additive attention bias in the model dtype (0 valid, -inf not), kept for
  // the whole capacity so that each step's slice is stride-aligned for the SDPA kernels.
  torch::Tensor key_bias;  // [B, capacity]
  int64_t length = 0;      // slots written so far
  int64_t capacity() const { return key_valid.defined() ? key_valid.size(1) : 0; }
  int64_t batch() const { return key_valid.defined() ? key_valid.size(0) : 0; }
  // Keeps only the rows in `rows` (int64 indices on the cache's device).
  void select_rows(const torch::Tensor& rows);
};

// Precomputed rotary tables and attention mask for one forward call.
struct AttentionInputs {
  torch::Tensor cos, sin;  // [B or 1, T, head_dim], model dtype
  torch::Tensor mask;      // [B, 1, T, T_keys] bool (true = attend), or undefined: plain causal
};

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);  // w * x / sqrt(mean(x^2) + eps), in fp32
  torch::Tensor weight;
  double eps;
};
TORCH_MODULE(RMSNorm);

// A linear projection y = x Wᵀ (+ b) that may carry a LoRA adapter:
//   y = x Wᵀ + b + (α/r) · dropout(x) Aᵀ Bᵀ   (Hu et al. 2021, Eq. 3)
// with A [r, in] and B [out, r] in fp32 whatever W's dtype (the adapter's input is cast to fp32
// and its output back; under autocast both run in bf16 with fp32 parameters).
class ProjectionImpl : public torch::nn::Module {
 public:
  ProjectionImpl(int64_t in, int64_t out, bool bias);
  torch::Tensor forward(const torch::Tensor& x);
  // Attaches an adapter: A ~ U(±1/√in) (PEFT's kaiming_uniform(a=√5)), B = 0, scale α/r.
  void attach_lora(int64_t rank, double alpha, double dropout, at::Generator& gen);
  bool has_lora() const { return !lora_A.is_empty(); }
  // W + (α/r) B A in W's dtype (computed in fp32); W itself without an adapter.
  torch::Tensor merged_weight() const;
  // W <- merged_weight(), and the adapter removed.
  void merge_lora();
  torch::Tensor weight, bias;                          // bias undefined when absent
  torch::nn::Linear lora_A{nullptr}, lora_B{nullptr};  // empty holders when no adapter
  double lora_scale = 0.0, lora_dropout = 0.0;
  bool lora_enabled = true;
};
TORCH_MODULE(Projection);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelShape& s);
  // Full sequence (training, scoring, prefill). When `cache` is given, K/V of the T positions
  // are written to cache slots [0, T) of layer `layer`.
  torch::Tensor forward(const torch::Tensor& x, const AttentionInputs& in, KVCache* cache = nullptr,
                        int64_t layer = 0);
  // One new token per row at cache slot cache.length (x: [B, 1, D]); attends to the valid slots.
  torch::Tensor decode(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                       KVCache& cache, int64_t layer, const torch::Tensor& step_mask);
  // The same with static shapes (CUDA-graph capturable): writes at the device index `slot` [1]
  // and attends over the whole capacity, `bias` [B, 1, 1, capacity] masking unwritten slots.
  torch::Tensor decode_static(const torch::Tensor& x, const torch::Tensor& cos,
                              const torch::Tensor& sin, KVCache& cache, int64_t layer,
                              const torch::Tensor& slot, const torch::Tensor& bias);
  Projection q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // Qwen3 only (ModelShape.qk_norm)
  int64_t n_heads, n_kv_heads, head_dim;

 private:
  // q, k, v of x [B, T, d] as [B, heads, T, head_dim], q and k rotated by cos/sin [B, T, hd].
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> rotated_qkv(const torch::Tensor& x,
                                                                      const torch::Tensor& cos,
                                                                      const torch::Tensor& sin);
};
TORCH_MODULE(Attention);

class MLPImpl : public torch::nn::Module {
 public:
  explicit MLPImpl(const ModelShape& s);
  torch::Tensor forward(const torch::Tensor& x);  // down(silu(gate(x)) * up(x))
  Projection gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(MLP);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const ModelShape& s);
  torch::Tensor forward(const torch::Tensor& x, const AttentionInputs& in, KVCache* cache = nullptr,
                        int64_t layer = 0);
  Attention self_attn{nullptr};
  MLP mlp{nullptr};
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

class LlamaModelImpl : public torch::nn::Module {
 public:
  explicit LlamaModelImpl(const ModelShape& shape);

  // tokens [B, T] int64 -> logits [B, T, V] in the model dtype. attention_mask [B, T] (bool or
  // 0/1) marks real tokens; padding may sit anywhere but positions count real tokens only
  // (position = number of real tokens before it), so a left-padded row scores like the unpadded
  // one. Without a mask every token is real and attention is plain causal (flash SDPA).
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& attention_mask = {});
  // The final-norm hidden states [B, T, D] (forward() without the output head).
  torch::Tensor hidden(const torch::Tensor& tokens, const torch::Tensor& attention_mask = {});
  // Output head: [.., D] -> [.., V] (the embedding matrix when tied).
  torch::Tensor logits(const torch::Tensor& hidden_states);

  // An empty cache for `batch` rows and `capacity` slots on the model's device and dtype.
  KVCache new_cache(int64_t batch, int64_t capacity);
  // Prefill: runs tokens [B, P] (mask as in forward) into cache slots [0, P); returns the
  // logits of the last slot [B, V] and sets cache.length = P.
  torch::Tensor prefill(const torch::Tensor& tokens, const torch::Tensor& attention_mask,
                        KVCache& cache);
  // Decode: one token per row (tokens [B], positions [B] = each row's real-token count before
  // it) into slot cache.length; returns logits [B, V] and advances cache.length.
  torch::Tensor decode_step(const torch::Tensor& tokens, const torch::Tensor& positions,
                            KVCache& cache);
  // decode_step with static shapes for CUDA-graph capture: writes slot `slot` (int64 [1] on the
  // device, the caller's cache.length) and attends over all capacity slots through key_bias.
  // Leaves cache.length to the caller. Same result as decode_step up to float rounding.
  torch::Tensor decode_step_static(const torch::Tensor& tokens, const torch::Tensor& positions,
                                   const torch::Tensor& slot, KVCache& cache);

  // Rotary tables for integer positions [B, T] (or [1, T]): cos/sin [B, T, head_dim] (or
  // [1, T, head_dim]), fp32 math, HF order.
  std::pair<torch::Tensor, torch::Tensor> rotary(const torch::Tensor& positions) const;

  const ModelShape& shape() const { return shape_; }
  torch::Device device() const;
  torch::Dtype dtype() const;
  void set_activation_checkpointing(bool on) { checkpointing_ = on; }
  bool activation_checkpointing() const { return checkpointing_; }

  // LoRA: attaches adapters (seeded) to config.targets in every layer and freezes every other
  // parameter. `base_dir` is the checkpoint the frozen weights came from (a LoRA checkpoint
  // saves only the adapters and names it). Throws UserError on a bad target or rank.
  void add_lora(const LoraConfig& config, uint64_t seed, const std::string& base_dir = "");
  bool has_lora() const { return lora_.rank > 0; }
  const LoraConfig& lora() const { return lora_; }
  const std::string& lora_base_dir() const { return lora_base_dir_; }
  void set_lora_enabled(bool on);
  // Folds every adapter into its weight and removes it (the model is plain again, still frozen
  // where it was).
  void merge_lora();
  // The adapters' parameters, by name (empty without LoRA).
  std::vector<std::pair<std::string, torch::Tensor>> lora_parameters();

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tied

 private:
  torch::Tensor run_layers(torch::Tensor x, const AttentionInputs& in, KVCache* cache);
  ModelShape shape_;
  // [head_dim/2] fp32: 1 / theta^(2i/head_dim) (scaled per shape_.rope_scaling), computed on the
  // CPU (rope_inv_freq) and moved (once) to the device rotary() runs on.
  mutable torch::Tensor inv_freq_;
  bool checkpointing_ = false;
  LoraConfig lora_;
  std::string lora_base_dir_;
};
TORCH_MODULE(LlamaModel);

// Switches a model's adapters off for its lifetime (the frozen base model: GRPO's KL
// reference), restoring them after.
class LoraOff {
 public:
  explicit LoraOff(LlamaModel& model) : model_(model) { model_->set_lora_enabled(false); }
  ~LoraOff() { model_->set_lora_enabled(true); }
  LoraOff(const LoraOff&) = delete;
  LoraOff& operator=(const LoraOff&) = delete;

 private:
  LlamaModel& model_;
};

// A randomly initialized model (HF's init: normal(0, 0.02) weights, unit norms) on `device`
// in `dtype`, seeded by `seed` (the global torch RNG is left as it was).
LlamaModel make_model(const ModelShape& shape, torch::Device device = torch::kCPU,
                      torch::Dtype dtype = torch::kFloat32, uint64_t seed = 0);

// The policy a job's `model:` section describes: resolve_shape(config, vocab_size) on `device`
// in resolve_dtype(config.dtype, device), activation checkpointing as configured, seeded init.
LlamaModel make_model(const ModelConfig& config, int64_t vocab_size, torch::Device device,
                      uint64_t seed);

// Log-probabilities of tokens[:, 1:] under a full forward: [B, T-1] fp32, differentiable.
// logprob[b, t] = log softmax(logits[b, t] / τ)[tokens[b, t+1]], τ = `temperature`: the
// policy that samples at temperature τ (model/generate.h), as TRL (GRPOTrainer
// ._get_per_token_logps: logits /= temperature) and verl (logits.div_(temperature)) take the
// policy, old and reference log-probs. `attention_mask` as in forward().
// If `entropy` is given it receives the per-position entropy -Σ p log p of that distribution,
// [B, T-1] fp32 (no gradient). The vocabulary dimension is never held whole: positions go
// through the output head in chunks of about `chunk_bytes` of fp32 logits (0:
// kLogprobChunkBytes), and backward recomputes each chunk's logits, so a 150k vocabulary costs
// O(chunk · V), not O(B · T · V).
inline constexpr int64_t kLogprobChunkBytes = int64_t{256} << 20;
torch::Tensor token_logprobs(LlamaModel& model, const torch::Tensor& tokens,
                             const torch::Tensor& attention_mask = {},
                             torch::Tensor* entropy = nullptr, int64_t chunk_bytes = 0,
                             double temperature = 1.0);

// The output head's part of token_logprobs, on hidden rows h [N, D] and the head weight w [V, D]:
//   logp[n] = log softmax(h[n]·wᵀ / τ)[targets[n]]                                  [N] fp32
// differentiable in h and w, chunked over rows as above; the gradient of one row is
//   ∂logp/∂z = (onehot(target) − softmax(z/τ)) / τ,   z = h·wᵀ.
torch::Tensor head_token_logprobs(const torch::Tensor& h, const torch::Tensor& w,
                                  const torch::Tensor& targets, double temperature = 1.0,
                                  torch::Tensor* entropy = nullptr, int64_t chunk_bytes = 0);

// RoPE inverse frequencies [head_dim/2] fp32 on the CPU for `shape` (θ and rope_scaling): bit-equal
// to transformers' (default and llama3 rope functions) as its from_pretrained computes them, on the
// CPU whatever the model's device (tests/golden/model_hf/rope_golden.py).
torch::Tensor rope_inv_freq(const ModelShape& shape);

// HF rotate_half: (x1, x2) -> (-x2, x1) over the two halves of the last dimension.
torch::Tensor rotate_half(const torch::Tensor& x);
// Rotary embedding: x * cos + rotate_half(x) * sin (cos/sin from LlamaModelImpl::rotary).
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos,
                         const torch::Tensor& sin);

// Reference attention for tests: softmax(QKᵀ/√d + mask)V with explicit ops in fp64.
// q [B, H, Tq, d], k/v [B, H, Tk, d], mask [B or 1, 1, Tq, Tk] bool or undefined (causal).
torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& mask);

}  // namespace kernelrl
