#include "model/llama.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/SDPBackend.h>
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/init.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <tuple>

#include "common/error.h"
#include "model/checkpoint.h"

namespace kernelrl {
namespace F = torch::nn::functional;

// ---- shapes ------------------------------------------------------------------------------

bool RopeScaling::operator==(const RopeScaling& o) const {
  return type == o.type && factor == o.factor && low_freq_factor == o.low_freq_factor &&
         high_freq_factor == o.high_freq_factor && original_max_position == o.original_max_position;
}

int64_t ModelShape::num_parameters() const {
  const int64_t hd = head_dim();
  int64_t attn = d_model * hd * n_heads * 2 + d_model * hd * n_kv_heads * 2;
  if (qkv_bias) attn += hd * (n_heads + 2 * n_kv_heads);
  if (o_bias) attn += d_model;
  if (qk_norm) attn += 2 * hd;
  const int64_t mlp = 3 * d_model * d_ff;
  const int64_t per_layer = attn + mlp + 2 * d_model;
  return vocab_size * d_model * (tie_embeddings ? 1 : 2) + n_layers * per_layer + d_model;
}

void ModelShape::validate() const {
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw UserError("model shape: " + msg);
  };
  need(arch == "llama" || arch == "qwen2" || arch == "qwen3",
       "arch must be llama, qwen2 or qwen3, got \"" + arch + "\"");
  need(vocab_size > 0, "vocab_size must be > 0 (set model.vocab_size or give a tokenizer)");
  need(d_model > 0 && n_layers > 0 && n_heads > 0 && n_kv_heads > 0 && d_ff > 0 && max_seq_len > 0,
       "d_model, n_layers, n_heads, n_kv_heads, d_ff and max_seq_len must all be > 0");
  need(head_size >= 0, "head_size must be >= 0 (0 = d_model / n_heads)");
  need(head_size > 0 || d_model % n_heads == 0, "d_model (" + std::to_string(d_model) +
                                                    ") must be a multiple of n_heads (" +
                                                    std::to_string(n_heads) + ")");
  need(n_heads % n_kv_heads == 0, "n_heads (" + std::to_string(n_heads) +
                                      ") must be a multiple of n_kv_heads (" +
                                      std::to_string(n_kv_heads) + ")");
  need(head_dim() % 2 == 0, "head_dim must be even for rotary embeddings");
  need(rope_theta > 0 && norm_eps > 0, "rope_theta and norm_eps must be > 0");
  // What each HF family can express (export writes the family's config.json).
  if (arch == "qwen2")
    need(qkv_bias && !o_bias && !qk_norm, "qwen2 has q/k/v biases, no o_proj bias, no q/k norm");
  else
    need(qkv_bias == o_bias, arch + " has biases on all of q/k/v/o_proj or on none");
  need(qk_norm == (arch == "qwen3"), "q/k RMSNorm is Qwen3's (and only Qwen3's)");
  const RopeScaling& r = rope_scaling;
  need(r.type == "default" || r.type == "llama3",
       "rope_scaling.type must be default or llama3, got \"" + r.type + "\"");
  if (r.type == "llama3")
    need(r.factor > 0 && r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor &&
             r.original_max_position > 0,
         "llama3 rope scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
         "original_max_position > 0");
}

std::string ModelShape::describe() const {
  char buf[320];
  std::snprintf(
      buf, sizeof buf,
      "%s, d %lld, %lld layers, heads %lld/%lld x %lld, ff %lld, vocab %lld, %.1fM params",
      arch.c_str(), (long long)d_model, (long long)n_layers, (long long)n_heads,
      (long long)n_kv_heads, (long long)head_dim(), (long long)d_ff, (long long)vocab_size,
      num_parameters() / 1e6);
  return buf;
}

bool ModelShape::operator==(const ModelShape& o) const {
  return arch == o.arch && vocab_size == o.vocab_size && d_model == o.d_model &&
         n_layers == o.n_layers && n_heads == o.n_heads && n_kv_heads == o.n_kv_heads &&
         d_ff == o.d_ff && max_seq_len == o.max_seq_len && rope_theta == o.rope_theta &&
         norm_eps == o.norm_eps && tie_embeddings == o.tie_embeddings &&
         head_dim() == o.head_dim() && qkv_bias == o.qkv_bias && o_bias == o.o_bias &&
         qk_norm == o.qk_norm && rope_scaling == o.rope_scaling;
}

ModelShape preset_shape(const std::string& preset, int64_t vocab_size) {
  ModelShape s;
  s.vocab_size = vocab_size;
  if (preset == "tiny") {  // tests and CPU: GQA 4/2 so grouped attention is always exercised
    s.d_model = 64, s.n_layers = 2, s.n_heads = 4, s.n_kv_heads = 2, s.d_ff = 176,
    s.max_seq_len = 512;
  } else if (preset == "small") {  // ~27M + embeddings
    s.d_model = 512, s.n_layers = 8, s.n_heads = 8, s.n_kv_heads = 4, s.d_ff = 1536,
    s.max_seq_len = 2048;
  } else if (preset == "base") {  // ~90M + embeddings (~114M with a 32k vocabulary)
    s.d_model = 768, s.n_layers = 12, s.n_heads = 12, s.n_kv_heads = 4, s.d_ff = 2560,
    s.max_seq_len = 2048;
  } else {
    throw UserError("model.preset: expected one of tiny, small, base, hf, got \"" + preset + "\"");
  }
  return s;
}

ModelShape resolve_shape(const ModelConfig& c, int64_t vocab_size) {
  ModelShape s;
  if (c.preset == "hf") {
    if (c.hf_config.empty())
      throw UserError("model.hf_config: required when model.preset is hf (path to config.json)");
    s = shape_from_hf_config_file(c.hf_config);
    if (c.max_seq_len > 0) s.max_seq_len = c.max_seq_len;
    s.validate();
    return s;
  }
  s = preset_shape(c.preset, c.vocab_size > 0 ? c.vocab_size : vocab_size);
  if (c.d_model > 0) s.d_model = c.d_model;
  if (c.n_layers > 0) s.n_layers = c.n_layers;
  if (c.n_heads > 0) s.n_heads = c.n_heads;
  if (c.n_kv_heads > 0) s.n_kv_heads = c.n_kv_heads;
  if (c.n_heads > 0 && c.n_kv_heads == 0 && s.n_heads % s.n_kv_heads != 0) s.n_kv_heads = s.n_heads;
  if (c.d_ff > 0) s.d_ff = c.d_ff;
  if (c.max_seq_len > 0) s.max_seq_len = c.max_seq_len;
  s.rope_theta = c.rope_theta;
  s.norm_eps = c.norm_eps;
  s.tie_embeddings = c.tie_embeddings;
  s.validate();
  return s;
}

torch::Dtype resolve_dtype(const std::string& dtype, const torch::Device& device) {
  if (dtype == "fp32") return torch::kFloat32;
  if (dtype == "bf16") return torch::kBFloat16;
  if (dtype == "auto") return device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
  throw UserError("model.dtype: expected one of auto, fp32, bf16, got \"" + dtype + "\"");
}

// ---- KV cache ----------------------------------------------------------------------------

void KVCache::select_rows(const torch::Tensor& rows) {
  for (auto& t : k) t = t.index_select(0, rows);
  for (auto& t : v) t = t.index_select(0, rows);
  key_valid = key_valid.index_select(0, rows);
  key_bias = key_bias.index_select(0, rows);
}

// ---- layers ------------------------------------------------------------------------------

// HF rotate_half: (x1, x2) -> (-x2, x1) over the two halves of the head dimension.
torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// x * cos + rotate_half(x) * sin; cos/sin broadcast over heads.
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos,
                         const torch::Tensor& sin) {
  return x * cos + rotate_half(x) * sin;
}

namespace {

// [B, Hkv, T, d] -> [B, Hkv * G, T, d]: query head h reads kv head h / G (HF repeat_kv).
torch::Tensor repeat_kv(const torch::Tensor& x, int64_t groups) {
  if (groups == 1) return x;
  const auto B = x.size(0), H = x.size(1), T = x.size(2), D = x.size(3);
  return x.unsqueeze(2).expand({B, H, groups, T, D}).reshape({B, H * groups, T, D});
}

torch::nn::Linear linear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

// q, k, v as SDPA receives them: cast to the autocast dtype when CUDA autocast is on (what
// autocast itself does to SDPA's floating inputs), else unchanged.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> autocast_inputs(const torch::Tensor& q,
                                                                        const torch::Tensor& k,
                                                                        const torch::Tensor& v) {
  if (!at::autocast::is_autocast_enabled(at::kCUDA)) return {q, k, v};
  const auto dtype = at::autocast::get_autocast_dtype(at::kCUDA);
  return {q.to(dtype), k.to(dtype), v.to(dtype)};
}

// Turns CUDA autocast on with `dtype` for its scope (the checkpointed layer's recomputation
// runs on the autograd thread, which does not inherit the forward's autocast state).
class ScopedCudaAutocast {
 public:
  explicit ScopedCudaAutocast(std::optional<at::ScalarType> dtype) : on_(dtype.has_value()) {
    if (!on_) return;
    previous_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
    previous_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, *dtype);
    at::autocast::increment_nesting();
  }
  ~ScopedCudaAutocast() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCUDA, previous_enabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, previous_dtype_);
  }
  ScopedCudaAutocast(const ScopedCudaAutocast&) = delete;
  ScopedCudaAutocast& operator=(const ScopedCudaAutocast&) = delete;

 private:
  bool on_;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kBFloat16;
};

}  // namespace

ProjectionImpl::ProjectionImpl(int64_t in, int64_t out, bool with_bias) {
  // Left uninitialized: make_model and the loaders fill every weight (initializing an 8B
  // model's projections on the CPU only to overwrite them took minutes).
  weight = register_parameter("weight", torch::empty({out, in}));
  if (with_bias) bias = register_parameter("bias", torch::empty({out}));
}

torch::Tensor ProjectionImpl::forward(const torch::Tensor& x) {
  // at::linear, the op transformers' nn.Linear calls: with a bias it is one fused addmm (bias
  // added before the single rounding to bf16). The C++ frontend's F::linear instead rounds
  // x Wᵀ and adds the bias after, a bf16 ulp off wherever the bias is nonzero (Qwen2's q/k/v).
  auto y = at::linear(x, weight, bias);  // an undefined bias: none
  if (!lora_A || !lora_enabled) return y;
  auto h = x.to(lora_A->weight.scalar_type());
  if (lora_dropout > 0 && is_training())
    h = F::dropout(h, F::DropoutFuncOptions().p(lora_dropout).training(true));
  // (α/r) · B A x: two thin matmuls, never the [out, in] product.
  auto delta = F::linear(F::linear(h, lora_A->weight), lora_B->weight) * lora_scale;
  return y + delta.to(y.scalar_type());
}

void ProjectionImpl::attach_lora(int64_t rank, double alpha, double dropout, at::Generator& gen) {
  TORCH_CHECK(!lora_A, "projection already has an adapter");
  const int64_t in = weight.size(1), out = weight.size(0);
  auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  lora_A =
      register_module("lora_A", torch::nn::Linear(torch::nn::LinearOptions(in, rank).bias(false)));
  lora_B =
      register_module("lora_B", torch::nn::Linear(torch::nn::LinearOptions(rank, out).bias(false)));
  torch::NoGradGuard ng;
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  lora_A->weight.set_data(
      torch::empty({rank, in}, opts).uniform_(-bound, bound, gen).to(weight.device()));
  lora_B->weight.set_data(torch::zeros({out, rank}, opts.device(weight.device())));
  lora_scale = alpha / static_cast<double>(rank);
  lora_dropout = dropout;
}

torch::Tensor ProjectionImpl::merged_weight() const {
  if (!lora_A) return weight;
  torch::NoGradGuard ng;
  auto delta =
      torch::matmul(lora_B->weight.to(torch::kFloat32), lora_A->weight.to(torch::kFloat32));
  return (weight.to(torch::kFloat32) + lora_scale * delta).to(weight.scalar_type());
}

void ProjectionImpl::merge_lora() {
  if (!lora_A) return;
  {
    torch::NoGradGuard ng;
    weight.copy_(merged_weight());
  }
  unregister_module("lora_A");
  unregister_module("lora_B");
  lora_A = nullptr;
  lora_B = nullptr;
  lora_scale = 0.0;
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  // y = w ⊙ x / sqrt(mean(x²) + ε), normalized in fp32 and cast back before the weight (HF).
  // An fp32 x (the training residual stream) has no cast back, so the expression is exactly
  // at::rms_norm's: one fused kernel on CUDA (forward and backward), the same ops on the CPU.
  if (x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32)
    return at::rms_norm(x, {weight.size(0)}, weight, eps);
  auto xf = x.to(torch::kFloat32);
  xf = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * xf.to(x.scalar_type());
}

AttentionImpl::AttentionImpl(const ModelShape& s)
    : n_heads(s.n_heads), n_kv_heads(s.n_kv_heads), head_dim(s.head_dim()) {
  q_proj = register_module("q_proj", Projection(s.d_model, n_heads * head_dim, s.qkv_bias));
  k_proj = register_module("k_proj", Projection(s.d_model, n_kv_heads * head_dim, s.qkv_bias));
  v_proj = register_module("v_proj", Projection(s.d_model, n_kv_heads * head_dim, s.qkv_bias));
  o_proj = register_module("o_proj", Projection(n_heads * head_dim, s.d_model, s.o_bias));
  if (s.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(head_dim, s.norm_eps));
    k_norm = register_module("k_norm", RMSNorm(head_dim, s.norm_eps));
  }
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> AttentionImpl::rotated_qkv(
    const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t B = x.size(0), T = x.size(1);
  auto q = q_proj(x).view({B, T, n_heads, head_dim});
  auto k = k_proj(x).view({B, T, n_kv_heads, head_dim});
  if (q_norm) {  // Qwen3: RMSNorm over each head's vector, before the rotation
    q = q_norm(q);
    k = k_norm(k);
  }
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  auto v = v_proj(x).view({B, T, n_kv_heads, head_dim}).transpose(1, 2);
  const auto c = cos.unsqueeze(1), s = sin.unsqueeze(1);
  return {apply_rope(q, c, s), apply_rope(k, c, s), v};
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const AttentionInputs& in,
                                     KVCache* cache, int64_t layer) {
  const int64_t B = x.size(0), T = x.size(1);
  auto [q, k, v] = rotated_qkv(x, in.cos, in.sin);
  if (cache) {
    cache->k[layer].narrow(2, 0, T).copy_(k);
    cache->v[layer].narrow(2, 0, T).copy_(v);
  }
  const int64_t groups = n_heads / n_kv_heads;
  // softmax(QKᵀ/√d + mask)V; with no mask, is_causal selects the flash kernel on Hopper.
  torch::Tensor out;
  if (groups > 1 && !in.mask.defined() && x.is_cuda()) {
    // The flash kernel reads kv head h / G itself (enable_gqa): no repeat_kv copies of K and V.
    // Asked with the tensors the kernel gets: under CUDA autocast SDPA runs in its dtype, so
    // cast as autocast would (the same values; autocast then has nothing left to cast).
    auto [q16, k16, v16] = autocast_inputs(q, k, v);
    if (at::_fused_sdp_choice(q16, k16, v16, std::nullopt, /*dropout_p=*/0.0, /*is_causal=*/true,
                              std::nullopt, /*enable_gqa=*/true) ==
        static_cast<int64_t>(at::SDPBackend::flash_attention))
      out = at::scaled_dot_product_attention(q16, k16, v16, std::nullopt, /*dropout_p=*/0.0,
                                             /*is_causal=*/true, std::nullopt,
                                             /*enable_gqa=*/true);
  }
  if (!out.defined())
    out = at::scaled_dot_product_attention(
        q, repeat_kv(k, groups), repeat_kv(v, groups),
        in.mask.defined() ? std::optional<torch::Tensor>(in.mask) : std::nullopt,
        /*dropout_p=*/0.0, /*is_causal=*/!in.mask.defined());
  return o_proj(out.transpose(1, 2).reshape({B, T, n_heads * head_dim}));
}

torch::Tensor AttentionImpl::decode(const torch::Tensor& x, const torch::Tensor& cos,
                                    const torch::Tensor& sin, KVCache& cache, int64_t layer,
                                    const torch::Tensor& step_mask) {
  const int64_t B = x.size(0);
  const int64_t L = cache.length;
  const int64_t groups = n_heads / n_kv_heads;
  auto [q, k, v] = rotated_qkv(x, cos, sin);
  cache.k[layer].narrow(2, L, 1).copy_(k);
  cache.v[layer].narrow(2, L, 1).copy_(v);
  // One query per row: the G query heads that share a kv head become G "query positions" of
  // that kv head (same keys, same mask), so GQA needs no copy of the cache.
  auto qg = q.reshape({B, n_kv_heads, groups, head_dim});
  auto out = at::scaled_dot_product_attention(qg, cache.k[layer].narrow(2, 0, L + 1),
                                              cache.v[layer].narrow(2, 0, L + 1), step_mask);
  return o_proj(out.reshape({B, 1, n_heads * head_dim}));
}

torch::Tensor AttentionImpl::decode_static(const torch::Tensor& x, const torch::Tensor& cos,
                                           const torch::Tensor& sin, KVCache& cache, int64_t layer,
                                           const torch::Tensor& slot, const torch::Tensor& bias) {
  const int64_t B = x.size(0);
  const int64_t groups = n_heads / n_kv_heads;
  auto [q, k, v] = rotated_qkv(x, cos, sin);
  cache.k[layer].index_copy_(2, slot, k);
  cache.v[layer].index_copy_(2, slot, v);
  auto qg = q.reshape({B, n_kv_heads, groups, head_dim});
  auto out = at::scaled_dot_product_attention(qg, cache.k[layer], cache.v[layer], bias);
  return o_proj(out.reshape({B, 1, n_heads * head_dim}));
}

MLPImpl::MLPImpl(const ModelShape& s) {
  gate_proj = register_module("gate_proj", Projection(s.d_model, s.d_ff, /*bias=*/false));
  up_proj = register_module("up_proj", Projection(s.d_model, s.d_ff, /*bias=*/false));
  down_proj = register_module("down_proj", Projection(s.d_ff, s.d_model, /*bias=*/false));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  return down_proj(F::silu(gate_proj(x)) * up_proj(x));  // SwiGLU
}

DecoderLayerImpl::DecoderLayerImpl(const ModelShape& s) {
  self_attn = register_module("self_attn", Attention(s));
  mlp = register_module("mlp", MLP(s));
  input_layernorm = register_module("input_layernorm", RMSNorm(s.d_model, s.norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm(s.d_model, s.norm_eps));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const AttentionInputs& in,
                                        KVCache* cache, int64_t layer) {
  auto h = x + self_attn->forward(input_layernorm(x), in, cache, layer);
  return h + mlp(post_attention_layernorm(h));
}

// ---- activation checkpointing --------------------------------------------------------------

namespace {

// Runs a decoder layer without keeping its activations; backward re-runs it with grad enabled
// and backpropagates through the recomputation (parameters get their gradients there).
struct CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               torch::Tensor cos, torch::Tensor sin, torch::Tensor mask,
                               int64_t layer_address) {
    ctx->save_for_backward({x, cos, sin, mask});
    ctx->saved_data["layer"] = layer_address;
    // The recomputation must run in the forward's precision (as torch.utils.checkpoint does).
    const bool autocast = x.is_cuda() && at::autocast::is_autocast_enabled(at::kCUDA);
    ctx->saved_data["autocast_dtype"] =
        autocast ? static_cast<int64_t>(at::autocast::get_autocast_dtype(at::kCUDA)) : -1;
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(layer_address);
    return layer->forward(x, AttentionInputs{cos, sin, mask.numel() ? mask : torch::Tensor()});
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(ctx->saved_data["layer"].toInt());
    auto x = saved[0].detach().requires_grad_(true);
    const int64_t autocast_dtype = ctx->saved_data["autocast_dtype"].toInt();
    torch::Tensor y;
    {
      torch::AutoGradMode enable(true);
      ScopedCudaAutocast autocast(
          autocast_dtype < 0
              ? std::nullopt
              : std::optional<at::ScalarType>(static_cast<at::ScalarType>(autocast_dtype)));
      y = layer->forward(
          x, AttentionInputs{saved[1], saved[2], saved[3].numel() ? saved[3] : torch::Tensor()});
    }
    torch::autograd::backward({y}, {grad_out[0]});
    return {x.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

// ---- the model ---------------------------------------------------------------------------

LlamaModelImpl::LlamaModelImpl(const ModelShape& shape) : shape_(shape) {
  shape_.validate();
  embed_tokens =
      register_module("embed_tokens", torch::nn::Embedding(shape.vocab_size, shape.d_model));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < shape.n_layers; ++i) layers->push_back(DecoderLayer(shape));
  norm = register_module("norm", RMSNorm(shape.d_model, shape.norm_eps));
  if (!shape.tie_embeddings)
    lm_head = register_module("lm_head", linear(shape.d_model, shape.vocab_size));
  inv_freq_ = rope_inv_freq(shape);
}

torch::Tensor rope_inv_freq(const ModelShape& shape) {
  // transformers' rope functions, op for op on the CPU, so that the fp32 values are bit-equal:
  // Python's `scalar / tensor` is tensor.reciprocal() * scalar (two roundings), not one division,
  // and `tensor / scalar` a true division on the CPU. The CPU is where transformers computes them
  // for a loaded checkpoint too (from_pretrained's _init_weights runs on the default device and
  // copies into the GPU buffer). On a GPU, torch's pow (CUDA powf) and division by a scalar (a
  // multiply by its reciprocal) round differently: a model that transformers builds directly on the
  // GPU (from_config under torch.device("cuda")) has other values (docs/benchmarks.md, 2026-11-26).
  const int64_t hd = shape.head_dim();
  // inv_freq[i] = 1 / θ^(2i/d), i < d/2: `1.0 / (base ** (arange(0, d, 2).float() / d))`.
  auto inv =
      torch::pow(shape.rope_theta, torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) / hd)
          .reciprocal();
  const RopeScaling& r = shape.rope_scaling;
  if (r.type != "llama3") return inv;
  // Llama 3.1 (_compute_llama3_parameters): long wavelengths slowed by `factor`, short ones kept,
  // the band between blended by s. The Python expression sits beside each line.
  const double old_len = static_cast<double>(r.original_max_position);
  const double low_wavelen = old_len / r.low_freq_factor;  // Python floats (double)
  const double high_wavelen = old_len / r.high_freq_factor;
  auto wavelen = inv.reciprocal() * (2 * M_PI);  // 2 * math.pi / inv_freq
  auto scaled = torch::where(wavelen > low_wavelen, inv / r.factor, inv);
  // (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
  auto s = (wavelen.reciprocal() * old_len - r.low_freq_factor) /
           (r.high_freq_factor - r.low_freq_factor);
  // (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
  auto smoothed = (1 - s) * scaled / r.factor + s * scaled;
  // ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
  auto medium = (wavelen < high_wavelen).logical_not() & (wavelen > low_wavelen).logical_not();
  return torch::where(medium, smoothed, scaled);
}

torch::Device LlamaModelImpl::device() const {
  return embed_tokens->weight.device();
}
torch::Dtype LlamaModelImpl::dtype() const {
  return embed_tokens->weight.scalar_type();
}

std::pair<torch::Tensor, torch::Tensor> LlamaModelImpl::rotary(
    const torch::Tensor& positions) const {
  if (inv_freq_.device() != positions.device()) inv_freq_ = inv_freq_.to(positions.device());
  const auto& inv = inv_freq_;
  // angle[b, t, i] = pos[b, t] · inv_freq[i]; emb = cat(angle, angle) so rotate_half pairs
  // dimension i with i + d/2 (HF's convention, not the interleaved one of the original paper).
  auto angle = positions.to(torch::kFloat32).unsqueeze(-1) * inv;
  auto emb = torch::cat({angle, angle}, -1);
  return {emb.cos().to(dtype()), emb.sin().to(dtype())};
}

void LlamaModelImpl::add_lora(const LoraConfig& config, uint64_t seed,
                              const std::string& base_dir) {
  if (config.rank <= 0) throw UserError("model.lora.rank: must be > 0 to add adapters");
  if (has_lora()) throw UserError("model.lora: this policy already carries adapters");
  if (config.targets.empty()) throw UserError("model.lora.targets: name at least one projection");
  auto gen = at::detail::createCPUGenerator(seed);
  for (auto& p : parameters()) p.requires_grad_(false);  // the base is frozen
  for (int64_t i = 0; i < shape_.n_layers; ++i) {
    auto* layer = layers->ptr<DecoderLayerImpl>(i).get();
    for (const std::string& t : config.targets) {
      Projection p = t == "q_proj"      ? layer->self_attn->q_proj
                     : t == "k_proj"    ? layer->self_attn->k_proj
                     : t == "v_proj"    ? layer->self_attn->v_proj
                     : t == "o_proj"    ? layer->self_attn->o_proj
                     : t == "gate_proj" ? layer->mlp->gate_proj
                     : t == "up_proj"   ? layer->mlp->up_proj
                     : t == "down_proj" ? layer->mlp->down_proj
                                        : Projection(nullptr);
      if (!p)
        throw UserError("model.lora.targets: \"" + t +
                        "\" is not one of q_proj, k_proj, v_proj, "
                        "o_proj, gate_proj, up_proj, down_proj");
      p->attach_lora(config.rank, config.alpha, config.dropout, gen);
    }
  }
  lora_ = config;
  lora_base_dir_ = base_dir;
}

void LlamaModelImpl::set_lora_enabled(bool on) {
  for (auto& m : modules(/*include_self=*/false))
    if (auto* p = m->as<ProjectionImpl>()) p->lora_enabled = on;
}

void LlamaModelImpl::merge_lora() {
  for (auto& m : modules(/*include_self=*/false))
    if (auto* p = m->as<ProjectionImpl>()) p->merge_lora();
  lora_ = LoraConfig{};
  lora_.rank = 0;
  lora_base_dir_.clear();
}

std::vector<std::pair<std::string, torch::Tensor>> LlamaModelImpl::lora_parameters() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : named_parameters())
    if (p.key().find(".lora_") != std::string::npos) out.emplace_back(p.key(), p.value());
  return out;
}

torch::Tensor LlamaModelImpl::run_layers(torch::Tensor x, const AttentionInputs& in,
                                         KVCache* cache) {
  const bool ckpt = checkpointing_ && is_training() && torch::GradMode::is_enabled() && !cache;
  // A frozen embedding (LoRA) gives an input without grad: the checkpointed layers would then
  // be cut off from autograd and their adapters get no gradient.
  if (ckpt && !x.requires_grad()) x = x.detach().requires_grad_(true);
  for (int64_t i = 0; i < shape_.n_layers; ++i) {
    auto* layer = layers->ptr<DecoderLayerImpl>(i).get();
    if (ckpt) {
      // autograd Functions take defined tensors only: an empty tensor stands for "no mask".
      auto mask =
          in.mask.defined() ? in.mask : torch::empty({0}, in.cos.options().dtype(torch::kBool));
      x = CheckpointedLayer::apply(x, in.cos, in.sin, mask,
                                   static_cast<int64_t>(reinterpret_cast<intptr_t>(layer)));
    } else {
      x = layer->forward(x, in, cache, i);
    }
  }
  return norm(x);
}

namespace {

// Positions and attention mask of a (possibly padded) batch. Without a mask: arange [1, T] and
// plain causal. With one: position = real tokens before it; query i attends key j iff j ≤ i and
// j is real, and always itself so that padding queries never see an all-masked row (NaN).
std::pair<torch::Tensor, torch::Tensor> positions_and_mask(const torch::Tensor& tokens,
                                                           const torch::Tensor& attention_mask) {
  const int64_t T = tokens.size(1);
  if (!attention_mask.defined()) {
    // [1, T]: every row has the same positions, so the rotary tables broadcast over the batch.
    return {torch::arange(T, tokens.options().dtype(torch::kInt64)).unsqueeze(0), torch::Tensor()};
  }
  TORCH_CHECK(attention_mask.sizes() == tokens.sizes(),
              "attention_mask must be [B, T] like tokens");
  auto valid = attention_mask.to(torch::kBool);
  auto pos = (valid.to(torch::kInt64).cumsum(1) - 1).clamp_min(0);
  auto opts = tokens.options().dtype(torch::kBool);
  auto causal = torch::ones({T, T}, opts).tril();
  auto eye = torch::eye(T, opts);
  auto mask = causal.unsqueeze(0) & (valid.unsqueeze(1) | eye.unsqueeze(0));
  return {pos, mask.unsqueeze(1)};
}

}  // namespace

torch::Tensor LlamaModelImpl::hidden(const torch::Tensor& tokens,
                                     const torch::Tensor& attention_mask) {
  TORCH_CHECK(tokens.dim() == 2 && tokens.scalar_type() == torch::kInt64,
              "tokens must be [B, T] int64, got ", tokens.sizes(), " ", tokens.scalar_type());
  TORCH_CHECK(tokens.size(1) <= shape_.max_seq_len, "sequence of ", tokens.size(1),
              " tokens exceeds max_seq_len ", shape_.max_seq_len);
  auto [pos, mask] = positions_and_mask(tokens, attention_mask);
  auto [cos, sin] = rotary(pos);
  return run_layers(embed_tokens(tokens), AttentionInputs{cos, sin, mask}, nullptr);
}

torch::Tensor LlamaModelImpl::logits(const torch::Tensor& h) {
  return lm_head ? lm_head(h) : torch::nn::functional::linear(h, embed_tokens->weight);
}

torch::Tensor LlamaModelImpl::forward(const torch::Tensor& tokens,
                                      const torch::Tensor& attention_mask) {
  return logits(hidden(tokens, attention_mask));
}

KVCache LlamaModelImpl::new_cache(int64_t batch, int64_t capacity) {
  // Capacity rounded up to 16 slots: keeps mask rows aligned for the mem-efficient SDPA kernel.
  capacity = (capacity + 15) / 16 * 16;
  KVCache c;
  auto opts = torch::TensorOptions().device(device()).dtype(dtype());
  for (int64_t i = 0; i < shape_.n_layers; ++i) {
    c.k.push_back(torch::zeros({batch, shape_.n_kv_heads, capacity, shape_.head_dim()}, opts));
    c.v.push_back(torch::zeros({batch, shape_.n_kv_heads, capacity, shape_.head_dim()}, opts));
  }
  c.key_valid = torch::zeros({batch, capacity}, opts.dtype(torch::kBool));
  c.key_bias = torch::full({batch, capacity}, -std::numeric_limits<double>::infinity(), opts);
  return c;
}

torch::Tensor LlamaModelImpl::prefill(const torch::Tensor& tokens,
                                      const torch::Tensor& attention_mask, KVCache& cache) {
  const int64_t B = tokens.size(0), P = tokens.size(1);
  TORCH_CHECK(cache.batch() == B && P <= cache.capacity(), "cache of ", cache.batch(), "x",
              cache.capacity(), " cannot take a prefill of ", B, "x", P);
  auto [pos, mask] = positions_and_mask(tokens, attention_mask);
  auto [cos, sin] = rotary(pos);
  auto h = run_layers(embed_tokens(tokens), AttentionInputs{cos, sin, mask}, &cache);
  auto valid = attention_mask.defined() ? attention_mask.to(torch::kBool)
                                        : torch::ones({B, P}, cache.key_valid.options());
  cache.key_valid.narrow(1, 0, P).copy_(valid);
  cache.key_bias.narrow(1, 0, P).masked_fill_(valid, 0.0);
  cache.length = P;
  return logits(h.select(1, P - 1));
}

torch::Tensor LlamaModelImpl::decode_step(const torch::Tensor& tokens,
                                          const torch::Tensor& positions, KVCache& cache) {
  const int64_t B = tokens.size(0);
  const int64_t L = cache.length;
  TORCH_CHECK(L < cache.capacity(), "KV cache full (", cache.capacity(), " slots)");
  auto x = embed_tokens(tokens.view({B, 1}));
  auto [cos, sin] = rotary(positions.view({B, 1}));
  cache.key_valid.select(1, L).fill_(true);
  cache.key_bias.select(1, L).fill_(0.0);
  auto step_mask = cache.key_bias.narrow(1, 0, L + 1).unsqueeze(1).unsqueeze(1);  // [B,1,1,L+1]
  for (int64_t i = 0; i < shape_.n_layers; ++i) {
    auto* layer = layers->ptr<DecoderLayerImpl>(i).get();
    x = x + layer->self_attn->decode(layer->input_layernorm(x), cos, sin, cache, i, step_mask);
    x = x + layer->mlp(layer->post_attention_layernorm(x));
  }
  cache.length = L + 1;
  return logits(norm(x)).squeeze(1);
}

torch::Tensor LlamaModelImpl::decode_step_static(const torch::Tensor& tokens,
                                                 const torch::Tensor& positions,
                                                 const torch::Tensor& slot, KVCache& cache) {
  const int64_t B = tokens.size(0);
  auto x = embed_tokens(tokens.view({B, 1}));
  auto [cos, sin] = rotary(positions.view({B, 1}));
  cache.key_valid.index_fill_(1, slot, true);
  cache.key_bias.index_fill_(1, slot, 0.0);
  auto bias = cache.key_bias.unsqueeze(1).unsqueeze(1);  // [B, 1, 1, capacity]
  for (int64_t i = 0; i < shape_.n_layers; ++i) {
    auto* layer = layers->ptr<DecoderLayerImpl>(i).get();
    x = x +
        layer->self_attn->decode_static(layer->input_layernorm(x), cos, sin, cache, i, slot, bias);
    x = x + layer->mlp(layer->post_attention_layernorm(x));
  }
  return logits(norm(x)).squeeze(1);
}

LlamaModel make_model(const ModelShape& shape, torch::Device device, torch::Dtype dtype,
                      uint64_t seed) {
  LlamaModel model(shape);
  auto gen = at::detail::createCPUGenerator(seed);
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) {
    const std::string& name = p.key();
    if (name.find("norm") != std::string::npos) {
      p.value().fill_(1.0);
    } else {
      p.value().normal_(0.0, 0.02, gen);
    }
  }
  model->to(device, dtype);
  return model;
}

LlamaModel make_model(const ModelConfig& config, int64_t vocab_size, torch::Device device,
                      uint64_t seed) {
  LlamaModel model = make_model(resolve_shape(config, vocab_size), device,
                                resolve_dtype(config.dtype, device), seed);
  model->set_activation_checkpointing(config.activation_checkpointing);
  return model;
}

namespace {

// The dtype the output head's matmul runs in: the autocast dtype under CUDA autocast (what
// autocast would cast to), else the weight's. Backward runs on the autograd thread, where
// autocast is off: it uses the dtype the forward recorded.
at::ScalarType head_dtype(const torch::Tensor& h, const torch::Tensor& w) {
  if (h.is_cuda() && at::autocast::is_autocast_enabled(at::kCUDA))
    return at::autocast::get_autocast_dtype(at::kCUDA);
  return w.scalar_type();
}

// fp32 logits of rows h [n, D] under the head weight w [V, D], the matmul in `dtype`.
torch::Tensor head_logits(const torch::Tensor& h, const torch::Tensor& w, at::ScalarType dtype) {
  return torch::matmul(h.to(dtype), w.to(dtype).t()).to(torch::kFloat32);
}

// The logits at temperature τ: z / τ (the same division model/generate.cpp's filter_logits makes,
// so the sampler's log-probs and these agree to the bit on the same logits). τ = 1: z itself.
torch::Tensor tempered(torch::Tensor z, double temperature) {
  return temperature == 1.0 ? z : z / temperature;
}

// log p(target) = z_t − logsumexp(z) of z = h·wᵀ / τ for rows h [N, D], `rows` at a time; with
// `entropy`, H = −Σ p log p = logsumexp(z) − Σ p z as well. Outputs [N] fp32.
void chunked_logprobs(const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& targets,
                      at::ScalarType dtype, int64_t rows, double temperature, torch::Tensor& logp,
                      torch::Tensor* entropy) {
  const int64_t N = h.size(0);
  logp = torch::empty({N}, h.options().dtype(torch::kFloat32));
  for (int64_t s = 0; s < N; s += rows) {
    const int64_t n = std::min(rows, N - s);
    auto z = tempered(head_logits(h.narrow(0, s, n), w, dtype), temperature);
    auto lse = z.logsumexp(-1);
    logp.narrow(0, s, n).copy_(z.gather(-1, targets.narrow(0, s, n).unsqueeze(-1)).squeeze(-1) -
                               lse);
    if (entropy) {
      auto p = (z - lse.unsqueeze(-1)).exp();
      entropy->narrow(0, s, n).copy_(lse - (p * z).sum(-1));
    }
  }
}

// The same as a differentiable op whose backward recomputes each chunk's logits z = h·Wᵀ:
//   ∂ log p(t) / ∂z = (onehot(t) − softmax(z/τ)) / τ,  ∂/∂h = (∂/∂z) W,  ∂/∂W = (∂/∂z)ᵀ h.
// `entropy` (an input that needs no gradient) is filled as a side output.
struct ChunkedLogprob : public torch::autograd::Function<ChunkedLogprob> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor h,
                               torch::Tensor w, torch::Tensor targets, torch::Tensor entropy,
                               int64_t rows, double temperature) {
    const at::ScalarType dtype = head_dtype(h, w);
    ctx->save_for_backward({h, w, targets});
    ctx->saved_data["rows"] = rows;
    ctx->saved_data["dtype"] = static_cast<int64_t>(dtype);
    ctx->saved_data["temperature"] = temperature;
    torch::Tensor logp;
    chunked_logprobs(h, w, targets, dtype, rows, temperature, logp,
                     entropy.numel() ? &entropy : nullptr);
    return logp;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &h = saved[0], &w = saved[1], &targets = saved[2];
    const int64_t rows = ctx->saved_data["rows"].toInt();
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const bool need_h = ctx->needs_input_grad(0), need_w = ctx->needs_input_grad(1);
    const auto g = grad_out[0].to(torch::kFloat32);
    const int64_t N = h.size(0);
    torch::Tensor gh = need_h ? torch::empty_like(h) : torch::Tensor();
    torch::Tensor gw =
        need_w ? torch::zeros(w.sizes(), w.options().dtype(torch::kFloat32)) : torch::Tensor();
    const auto wd = w.to(dtype);
    for (int64_t s = 0; s < N; s += rows) {
      const int64_t n = std::min(rows, N - s);
      const auto hc = h.narrow(0, s, n);
      auto gz = -tempered(head_logits(hc, w, dtype), temperature).softmax(-1);
      gz.scatter_add_(-1, targets.narrow(0, s, n).unsqueeze(-1), torch::ones({n, 1}, gz.options()));
      gz = (gz * (g.narrow(0, s, n) / temperature).unsqueeze(-1)).to(dtype);
      if (need_h) gh.narrow(0, s, n).copy_(torch::matmul(gz, wd));
      if (need_w) gw.add_(torch::matmul(gz.t(), hc.to(dtype)).to(torch::kFloat32));
    }
    return {gh,
            need_w ? gw.to(w.scalar_type()) : torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor head_token_logprobs(const torch::Tensor& h, const torch::Tensor& w,
                                  const torch::Tensor& targets, double temperature,
                                  torch::Tensor* entropy, int64_t chunk_bytes) {
  TORCH_CHECK(h.dim() == 2 && w.dim() == 2 && h.size(1) == w.size(1),
              "head_token_logprobs needs h [N, D] and w [V, D]");
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == h.size(0), "targets must be [N]");
  TORCH_CHECK(temperature > 0, "log-probs at temperature ", temperature, ": it must be > 0");
  const int64_t budget = chunk_bytes > 0 ? chunk_bytes : kLogprobChunkBytes;
  const int64_t rows = std::max<int64_t>(1, budget / (w.size(0) * 4));
  torch::Tensor ent = entropy ? torch::empty({h.size(0)}, h.options().dtype(torch::kFloat32))
                              : torch::empty({0}, h.options().dtype(torch::kFloat32));
  torch::Tensor logp;
  if (torch::GradMode::is_enabled() && (h.requires_grad() || w.requires_grad())) {
    logp = ChunkedLogprob::apply(h, w, targets, ent, rows, temperature);
  } else {
    chunked_logprobs(h, w, targets, head_dtype(h, w), rows, temperature, logp,
                     entropy ? &ent : nullptr);
  }
  if (entropy) *entropy = ent;
  return logp;
}

torch::Tensor token_logprobs(LlamaModel& model, const torch::Tensor& tokens,
                             const torch::Tensor& attention_mask, torch::Tensor* entropy,
                             int64_t chunk_bytes, double temperature) {
  TORCH_CHECK(tokens.dim() == 2 && tokens.size(1) >= 2, "token_logprobs needs tokens [B, T>=2]");
  const int64_t B = tokens.size(0), T = tokens.size(1);
  auto h = model->hidden(tokens, attention_mask).narrow(1, 0, T - 1);
  const auto hf = h.reshape({B * (T - 1), h.size(-1)});
  const auto targets = tokens.narrow(1, 1, T - 1).reshape({-1});
  const torch::Tensor w = model->lm_head ? model->lm_head->weight : model->embed_tokens->weight;
  torch::Tensor ent;
  torch::Tensor logp =
      head_token_logprobs(hf, w, targets, temperature, entropy ? &ent : nullptr, chunk_bytes);
  if (entropy) *entropy = ent.view({B, T - 1});
  return logp.view({B, T - 1});
}

torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& mask) {
  const double d = static_cast<double>(q.size(-1));
  auto scores =
      torch::matmul(q.to(torch::kFloat64), k.to(torch::kFloat64).transpose(-2, -1)) / std::sqrt(d);
  auto m = mask;
  if (!m.defined()) {
    m = torch::ones({q.size(-2), k.size(-2)}, q.options().dtype(torch::kBool)).tril();
  }
  scores = scores.masked_fill(m.logical_not(), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v.to(torch::kFloat64)).to(q.scalar_type());
}

}  // namespace kernelrl
