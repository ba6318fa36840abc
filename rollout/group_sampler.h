// Group generation for GRPO: one prompt per task (with contrastive exemplars that fit the
// context), G sampled completions per prompt from the policy, each parsed into a candidate
// kernel. Evaluation and the update are the trainer's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/tasks/task.h"
#include "model/llama.h"
#include "model/tokenizer.h"
#include "rollout/prompt.h"
#include "rollout/rollout_config.h"

namespace kernelrl {

struct PromptGroup {
  TaskSpec task;
  std::string prompt;
  std::vector<int64_t> prompt_ids;  // with bos when the tokenizer has one
  int64_t exemplars_used = 0;       // after dropping those that did not fit
  std::string turn_end;             // the chat format's end-of-turn token ("" for raw): a stop
  std::string edit_base;  // rollout.completion edit: the code the completions' SEARCH/REPLACE
                          // blocks apply to (edit_base_of the prompt's parts); "" = full kernels
};

struct Rollout {
  size_t group = 0;                    // index into the PromptGroup list
  std::vector<int64_t> completion;     // sampled token ids
  std::vector<float> sample_logprobs;  // under the sampling policy at its temperature, before
                                       // top-k/top-p (GenerationResult::logprobs)
  // Per completion token, under the training forward of the policy that sampled the row, when
  // the row was sampled a step ahead (rollout.overlap); empty: the update computes π_old itself.
  std::vector<float> policy_logprobs;
  std::string text;
  std::string finish_reason;  // eos | stop | length
  ParsedResponse parsed;
};

// Builds the prompt for `task`; drops the exemplars that cannot fit even alone, then the
// lowest-scored ones until prompt + max_new_tokens fits max_seq_len. Throws UserError when even
// the bare prompt does not fit.
PromptGroup make_prompt_group(const TaskSpec& task, PromptParts parts, const Tokenizer& tokenizer,
                              int64_t max_seq_len, int64_t max_new_tokens);

// The exemplars of a task's pool that fit its prompt alone (prompt + max_new_tokens within
// max_seq_len), remembered per (task, exemplar id). Pools are filtered before exemplars are
// drawn from them, so a draw never spends a slot on a kernel no prompt can show (an
// hgemm_wgmma variant is ~18k characters): with rollout.seed_grid's three seeds, the draw
// otherwise often showed none of the fitting ones, or only the slower one (issue 25).
class ExemplarFit {
 public:
  ExemplarFit(const Tokenizer& tokenizer, int64_t max_seq_len, int64_t max_new_tokens)
      : tok_(tokenizer), budget_(max_seq_len - max_new_tokens) {}
  // `parts` as the prompt will be built (its exemplars are ignored); pool order kept.
  std::vector<Exemplar> filter(const TaskSpec& task, const PromptParts& parts,
                               const std::vector<Exemplar>& pool);

 private:
  const Tokenizer& tok_;
  int64_t budget_;
  std::map<std::string, bool> fits_;  // task + '\n' + exemplar id
};

// G completions for every group (rows ordered group by group), sampled with `seed`; the rows
// draw as rows first_row, first_row + 1, ... of a larger batch (a data-parallel rank's share).
std::vector<Rollout> sample_groups(LlamaModel& model, const Tokenizer& tokenizer,
                                   const std::vector<PromptGroup>& groups, int64_t group_size,
                                   const SamplingConfig& sampling,
                                   const std::string& response_format, uint64_t seed,
                                   int64_t* generated_tokens = nullptr, double* seconds = nullptr,
                                   int64_t first_row = 0);

}  // namespace kernelrl
