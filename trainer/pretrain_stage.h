// The continued-pretraining stage (CUDA-L2 §3.2.1): triplets are laid out in the prompt
// template
//   <bos><|instruction|>{instruction}\n<|context|>{context}\n<|code|>{code}<|end|>
// (the same sections the RL prompts use), packed into fixed-length sequences, and trained with
// next-token cross-entropy on all tokens or on code tokens only, AdamW, warmup + cosine,
// gradient accumulation and clipping, bf16 autocast on CUDA, held-out perplexity every
// eval_every steps, and checkpoints that resume exactly (same losses as without the
// interruption: data order is a pure function of seed and step). The stage is a StageStep on
// the shared stage loop (trainer/stage_loop.h: resume, metrics, checkpoint cadence).
#pragma once

#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/corpus/triplet.h"
#include "data/tasks/task.h"
#include "model/llama.h"
#include "model/tokenizer.h"
#include "trainer/stage_context.h"

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
// text is exactly the prompt hgemm_rl will show followed by the variant (with `device`, the
// rollout.prompt_device the RL prompts name, its device line and aim line too). Deterministic.
void add_exemplar_context(std::vector<Triplet>& triplets, double rate,
                          const std::vector<TaskSpec>& hgemm_shapes = {},
                          const std::string& device = "");

// Whether `t` carries every tag of `tags` (data.corpus_tags; an empty list keeps everything).
bool has_tags(const Triplet& t, const std::vector<std::string>& tags);

// Deterministic held-out split by a hash of the triplet id.
bool is_holdout(const std::string& id, double fraction);

// Loads the tokenizer named by data.tokenizer, or trains one into <run_dir>/tokenizer.model
// from `triplets` (reused when it is already there).
Tokenizer stage_tokenizer(const StageContext& ctx, const std::vector<Triplet>& triplets,
                          std::filesystem::path* path_out);

// One micro-batch of packed rows on the model's device: tokens [B, L+1] int64, loss_mask
// [B, L+1] float (as in PackedSequences).
struct LmBatch {
  torch::Tensor tokens;
  torch::Tensor loss_mask;
  // The loss denominator when > 0: the targets of the whole micro-batch over every rank of a
  // data-parallel step (this rank holds a shard of its rows); 0: this batch's own Σ m.
  double target_count = 0;
};

class GradSync;

// What one optimizer step measured.
struct LmStepStats {
  double loss = 0;            // mean over the micro-batches of each one's masked mean loss
  double grad_norm = 0;       // total gradient L2 norm, before clipping
  int64_t target_tokens = 0;  // targets with mask 1, over all micro-batches
  bool fused_adamw = false;   // the update ran as at::_fused_adamw_ (adamw_step)
};

// The pretraining optimizer step, shared by run_pretrain_stage and bench/bench_pretrain.cpp.
// Zero grads; per micro-batch (k of them) the forward under bf16 autocast (CUDA) and backward of
//   loss_i / k,   loss_i = Σ_t m_t · −log softmax(logits_{t−1})[x_t] / max(1, Σ_t m_t)
// (log-softmax in fp32); then ONE device→host copy of the k losses, target counts and the
// total gradient norm; throws std::runtime_error, taking no step, when a loss or the norm is
// not finite; clips to grad_clip (0 = off); adamw_step (fused on CUDA unless fused_adamw is
// false). The learning rate is the caller's (set_lr). Inputs should already be on the device:
// a blocking host→device copy is a sync of its own.
// Data-parallel (`sync` given): every rank passes its shard of each micro-batch with
// target_count = the micro-batch's targets over all ranks, so its loss is
//   Σ_{its rows} m_t · nll_t / target_count / k
// and the all-reduced (summed) gradient and loss are the single-process ones of the global
// batch; the last backward overlaps the bucketed all-reduce, and the norm, clip and step run on
// the summed gradient, identical on every rank.
LmStepStats lm_train_step(LlamaModel& model, torch::optim::AdamW& optimizer,
                          const std::vector<LmBatch>& micro_batches, double grad_clip,
                          bool fused_adamw = true, GradSync* sync = nullptr);

// Runs the stage; returns its final checkpoint directory.
std::filesystem::path run_pretrain_stage(StageContext& ctx);

}  // namespace kernelrl
