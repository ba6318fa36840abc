// The continued-pretraining stage (CUDA-L2 §3.2.1): triplets are laid out in the prompt
// template
//   <bos><|instruction|>{instruction}\n<|context|>{context}\n<|code|>{code}<|end|>
// (the same sections the RL prompts use), packed into fixed-length sequences, and trained with
// next-token cross-entropy on all tokens or on code tokens only, AdamW, warmup + cosine,
// gradient accumulation and clipping, bf16 autocast on CUDA, held-out perplexity every
// eval_every steps, and checkpoints that resume exactly (same losses as without the
// interruption: data order is a pure function of seed and step).
#pragma once

#include <torch/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/task.h"
#include "data/tokenizer.h"
#include "data/triplet.h"
#include "trainer/pipeline.h"

namespace kernelrl {

// Packed sequences: tokens [N, L+1] int64; loss_mask [N, L+1] float, 1 where the token is a
// training target (position 0 of a row is never a target).
struct PackedSequences {
  torch::Tensor tokens;
  torch::Tensor loss_mask;
  int64_t documents = 0;
  int64_t size() const { return tokens.defined() ? tokens.size(0) : 0; }
};

// A triplet's text in the template above (without bos).
std::string format_triplet(const Triplet& t);

// Tokenizes and concatenates the triplets (each opened by bos when the tokenizer has one) into
// rows of seq_len + 1 tokens with stride seq_len, so every target has its predecessor.
PackedSequences pack_triplets(const std::vector<Triplet>& triplets, const Tokenizer& tokenizer,
                              int64_t seq_len, bool code_only_loss);

// For a share `rate` of kernel-family triplets (source "family:..."), appends a sibling variant
// of the same family and backend (chosen by a hash of the id) to the context as an unscored
// "Earlier kernel" block, so pretraining sees the RL prompt's exemplar layout. HGEMM family
// triplets among them become RL prompts outright when `hgemm_shapes` is non-empty: the
// instruction is rollout's task_instruction for one of those shapes (by the id's hash) with the
// variant's layout and accumulation, and the context is the sibling block alone, so the packed
// text is exactly the prompt hgemm_rl will show followed by the variant. Deterministic.
void add_exemplar_context(std::vector<Triplet>& triplets, double rate,
                          const std::vector<TaskSpec>& hgemm_shapes = {});

// Deterministic held-out split by a hash of the triplet id.
bool is_holdout(const std::string& id, double fraction);

// Loads the tokenizer named by data.tokenizer, or trains one into <run_dir>/tokenizer.model
// from `triplets` (reused when it is already there).
Tokenizer stage_tokenizer(const StageContext& ctx, const std::vector<Triplet>& triplets,
                          std::filesystem::path* path_out);

// Runs the stage; returns its final checkpoint directory.
std::filesystem::path run_pretrain_stage(StageContext& ctx);

}  // namespace kernelrl
