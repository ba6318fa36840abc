// Batched sampling from the policy with a static KV cache: prefill the (left-padded) prompts,
// then decode one token per step for the whole batch. Rows finish independently (EOS ids, stop
// strings, max tokens); finished rows are dropped from the batch at host checks, so they stop
// costing compute. Temperature, top-k and top-p; a seeded RNG (same seed -> same tokens).
// Group bookkeeping, prompts and rewards are rollout/'s; this file only samples.
//
// Host syncs: one per `sync_interval` decode steps (is everything finished? stop strings?
// compaction), none per token otherwise. On CUDA the decode step (all layers) is one CUDA graph
// replay, so the per-token CPU cost is the graph launch plus a few sampling kernels.
//
// Randomness: uniforms u[t, row] for every step and prompt row are drawn up front on the CPU,
// row i from a generator seeded with splitmix64(seed, i); the token is the inverse CDF of the
// filtered distribution at u (in vocabulary order). A row's draws depend on neither the batch
// it shares nor the device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/llama.h"

namespace kernelrl {

class Tokenizer;

struct GenerateOptions {
  int64_t max_new_tokens = 256;           // completion budget per row
  double temperature = 1.0;               // softmax temperature; 0 = greedy (argmax)
  int64_t top_k = 0;                      // keep the k most likely tokens; 0 = off
  double top_p = 1.0;                     // keep the smallest set with mass ≥ p; 1 = off
  uint64_t seed = 0;                      // RNG seed of the uniforms
  uint64_t row_offset = 0;                // row i draws as row row_offset + i of a larger batch
                                          // (a data-parallel rank's share of the global rows)
  std::vector<int64_t> eos_ids;           // stop ids; empty: the tokenizer's eos (if any)
  std::vector<std::string> stop_strings;  // stop when the completion text contains one
  int64_t pad_id = -1;                    // left-padding and filler id; -1: tokenizer's pad, else 0
  int64_t sync_interval = 16;             // decode steps between host checks
  bool compact = true;                    // drop finished rows from the batch at host checks
  // On CUDA: replay the model's decode step as a CUDA graph (static shapes, attends over the
  // whole cache capacity; re-captured when compaction changes the batch). Off: eager steps.
  bool cuda_graph = true;
};

struct GenerationResult {
  // Per prompt, in input order. tokens include the EOS token that ended a row; a row stopped
  // by a stop string ends with the token that completed it.
  std::vector<std::vector<int64_t>> tokens;
  // log p(token) under softmax(logits / temperature) (temperature 0: softmax(logits)), the
  // tempered distribution before top-k/top-p, as token_logprobs(..., temperature) and TRL/verl
  // compute the policy's log-probs; fp32 from the model-dtype logits; aligned with tokens.
  std::vector<std::vector<float>> logprobs;
  std::vector<std::string> text;           // decoded completion (empty without a tokenizer)
  std::vector<std::string> finish_reason;  // "eos" | "stop" | "length"
  int64_t prompt_tokens = 0;               // real prompt tokens over all rows
  int64_t generated_tokens = 0;            // completion tokens over all rows
  int64_t decode_steps = 0;                // decode steps run (≤ max_new_tokens)
  double seconds = 0;                      // wall time including the final device sync
};

// Samples a completion for every prompt (token ids, not padded). `tokenizer` (optional) gives
// eos/pad defaults, stop-string checks and text.
GenerationResult generate(LlamaModel& model, const std::vector<std::vector<int64_t>>& prompts,
                          const GenerateOptions& options, const Tokenizer* tokenizer = nullptr);
// Encodes each prompt (with BOS when the tokenizer has one) and samples.
GenerationResult generate(LlamaModel& model, const Tokenizer& tokenizer,
                          const std::vector<std::string>& prompts, const GenerateOptions& options);

// The sampling distribution's logits: logits / temperature, then top-k (tokens below the k-th
// largest set to -inf; ties with it are kept), then top-p (in descending order, a token is kept
// iff the mass before it is < p, so the most likely token always stays). [B, V] fp32 in and out.
torch::Tensor filter_logits(const torch::Tensor& logits, double temperature, int64_t top_k,
                            double top_p);

// Inverse-CDF draw: for each row the first token t with Σ_{j≤t} p_j ≥ u·Σ_j p_j, where
// p = softmax(filtered_logits). u [B] in [0, 1). Returns [B] int64.
torch::Tensor sample_from_logits(const torch::Tensor& filtered_logits, const torch::Tensor& u);

}  // namespace kernelrl
