// Prompts for the RL stages and the parser of the policy's responses. A prompt uses the same
// sections as the pretraining triplets (instruction, context, code, with the tokenizer's
// markers), so a policy pretrained on triplets continues a prompt with code:
//   <|instruction|> task: operation, shapes, layout, accumulation, the candidate contract
//   <|context|>     retrieved docs, profiling metrics, contrastive exemplars with their scores
//   <|code|>        (the policy writes from here; `sections` format asks for analysis and
//                    design first, as CUDA-L1 does)
// It does not sample or evaluate.
#pragma once

#include <string>
#include <vector>

#include "data/tasks/task.h"
#include "rollout/exemplars.h"

namespace kernelrl {

struct PromptParts {
  std::string context;                   // retrieved documentation passages (may be empty)
  std::string profile;                   // profiling metrics of earlier candidates (may be empty)
  std::vector<Exemplar> exemplars;       // scored earlier kernels, worst first
  std::string response_format = "code";  // code | sections
  std::string backend = "gpu";           // gpu: CUDA C++ for nvcc | host: C++ for g++ (CPU backend)
  // The evaluator's device, named in the instruction, with the context's first line asking for
  // rank 1 at the shape (rollout.prompt_device; the speed-annotated pretraining examples of
  // speed_annotation() use the same words). "" = neither.
  std::string device;
  // model.prompt_format: raw (the sections above) | chatml | llama3 (the same request as a
  // user turn, asking for a fenced code block; model/chat_format.h).
  std::string prompt_format = "raw";
  // Multi-turn refinement (turn > 1): the policy's previous kernel for this task and what the
  // evaluator said of it; the prompt then asks for a revision (no exemplars on later turns).
  std::string previous_code;
  std::string previous_verdict;
  // rollout.completion: full (the policy writes the whole kernel) | edit (it answers with
  // SEARCH/REPLACE blocks, rollout/edit_blocks.h, against the code the prompt shows: the last,
  // best-scored exemplar, shown as the kernel to edit, or on a revision the previous kernel).
  // A prompt with no code to show asks for a full kernel.
  std::string completion = "full";
};

// The code an edit-mode prompt built from `parts` shows to edit: previous_code on a revision,
// else the last (best-scored) exemplar's source; "" when there is none or completion is full
// (the prompt then asks for a whole kernel).
std::string edit_base_of(const PromptParts& parts);

// The kernel to edit in an edit-mode prompt's context ("Kernel to edit, measured score s:" +
// code; score < 0 omits the score, as the pretraining edit examples do).
std::string edit_base_block(const std::string& source, double score);

// One earlier kernel in a prompt's context ("Earlier kernel i, measured score s:" + code);
// score < 0 omits the score (pretraining shows unscored siblings the same way).
std::string exemplar_block(size_t index, const std::string& source, double score);

// The task in words: the operation, shapes, dtypes, layout, accumulation and the contract.
std::string describe_task(const TaskSpec& task, const std::string& backend);

// The instruction section of a prompt: describe_task plus what is asked for (speed, the CUDA-L1
// sections when parts.response_format is "sections", SEARCH/REPLACE blocks when
// parts.completion is "edit"). Pretraining writes family
// triplets with the same text, so the policy has seen its RL prompts before RL starts.
std::string task_instruction(const TaskSpec& task, const PromptParts& parts);

// The instruction's line naming the device ("Target device: NVIDIA H100 80GB HBM3.").
std::string device_line(const std::string& device);
// The annotation of a measured kernel at a shape (the context of a speed-annotated example):
//   "Rank r of the variants measured at this shape on DEVICE. n measured; device time T us
//    (timing); REF R us, speedup x."
// The RL prompt's aim line is its first sentence with r = 1 (speed_aim).
std::string speed_annotation(int64_t rank, int64_t of, const std::string& device, double time_us,
                             const std::string& timing, const std::string& reference,
                             double reference_us);
std::string speed_aim(const std::string& device);

// The full prompt text (ends with the code marker, or the analysis marker for `sections`; in a
// chat format, with the opening of the assistant's turn).
std::string build_prompt(const TaskSpec& task, const PromptParts& parts);

struct ParsedResponse {
  bool ok = false;
  std::string code;      // the candidate source (edit mode: the edited kernel)
  std::string analysis;  // sections format only
  std::string design;    // sections format only
  std::string reason;    // why ok is false
  // The named format failure when ok is false (scored reward.failed_reward, never compiled):
  // format_no_code, or in edit mode edit_empty | edit_malformed | edit_no_match |
  // edit_ambiguous (rollout/edit_blocks.h).
  std::string failure;
  std::string edit_base;    // edit mode: the code the blocks apply to
  int64_t edit_blocks = 0;  // edit mode: blocks applied (ok only)
};

// Extracts the code: the text after the last code marker (or, failing that, the last fenced
// ``` block) up to the end marker. A response with no code is a format failure with a reason.
// With an `edit_base` (the prompt group's, edit mode) the code section holds SEARCH/REPLACE
// blocks instead, applied to the base; one that does not apply is a named format failure.
ParsedResponse parse_response(const std::string& completion, const std::string& response_format,
                              const std::string& edit_base = "");

}  // namespace kernelrl
