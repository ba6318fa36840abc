#include "rollout/group_sampler.h"

#include "common/error.h"
#include "model/chat_format.h"
#include "model/generate.h"

namespace kernelrl {

namespace {

// Whether `task`'s prompt with `e` as its only exemplar leaves max_new_tokens of the context.
bool fits_alone(const TaskSpec& task, PromptParts parts, const Exemplar& e, const Tokenizer& tokenizer,
                int64_t budget) {
  parts.exemplars = {e};
  return static_cast<int64_t>(tokenizer.encode(build_prompt(task, parts), tokenizer.bos_id() >= 0).size()) <=
         budget;
}

}  // namespace

PromptGroup make_prompt_group(const TaskSpec& task, PromptParts parts, const Tokenizer& tokenizer,
                              int64_t max_seq_len, int64_t max_new_tokens) {
  PromptGroup g;
  g.task = task;
  const int64_t budget = max_seq_len - max_new_tokens;
  // An exemplar that cannot fit even alone is dropped first: otherwise a long best exemplar
  // (a Hopper family variant is ~10k tokens) would push every shorter one out before itself.
  if (parts.exemplars.size() > 1) {
    std::vector<Exemplar> fitting;
    for (const auto& e : parts.exemplars)
      if (fits_alone(task, parts, e, tokenizer, budget)) fitting.push_back(e);
    parts.exemplars = std::move(fitting);
  }
  for (;;) {
    g.prompt = build_prompt(task, parts);
    g.prompt_ids = tokenizer.encode(g.prompt, /*add_bos=*/tokenizer.bos_id() >= 0);
    if (static_cast<int64_t>(g.prompt_ids.size()) <= budget) break;
    if (parts.exemplars.empty())
      throw UserError("task " + task.name + ": its prompt is " +
                      std::to_string(g.prompt_ids.size()) + " tokens, but model.max_seq_len " +
                      std::to_string(max_seq_len) + " minus rollout.sampling.max_new_tokens " +
                      std::to_string(max_new_tokens) + " leaves " + std::to_string(budget));
    parts.exemplars.erase(parts.exemplars.begin());  // worst first: drop the lowest score
  }
  g.exemplars_used = static_cast<int64_t>(parts.exemplars.size());
  g.turn_end = turn_end(parts.prompt_format);
  g.edit_base = edit_base_of(parts);
  return g;
}

std::vector<Exemplar> ExemplarFit::filter(const TaskSpec& task, const PromptParts& parts,
                                          const std::vector<Exemplar>& pool) {
  std::vector<Exemplar> out;
  for (const auto& e : pool) {
    auto [it, fresh] = fits_.try_emplace(task.name + '\n' + e.id, false);
    if (fresh) it->second = fits_alone(task, parts, e, tok_, budget_);
    if (it->second) out.push_back(e);
  }
  return out;
}

std::vector<Rollout> sample_groups(LlamaModel& model, const Tokenizer& tokenizer,
                                   const std::vector<PromptGroup>& groups, int64_t group_size,
                                   const SamplingConfig& sampling,
                                   const std::string& response_format, uint64_t seed,
                                   int64_t* generated_tokens, double* seconds, int64_t first_row) {
  std::vector<std::vector<int64_t>> prompts;
  for (const auto& g : groups)
    for (int64_t i = 0; i < group_size; ++i) prompts.push_back(g.prompt_ids);
  GenerateOptions opts;
  opts.max_new_tokens = sampling.max_new_tokens;
  opts.temperature = sampling.temperature;
  opts.top_k = sampling.top_k;
  opts.top_p = sampling.top_p;
  opts.seed = seed;
  opts.row_offset = static_cast<uint64_t>(first_row);
  opts.stop_strings = {kEndMarker};
  const int64_t end_id = tokenizer.piece_to_id(kEndMarker);
  if (end_id != tokenizer.unk_id()) opts.eos_ids.push_back(end_id);
  if (tokenizer.eos_id() >= 0) opts.eos_ids.push_back(tokenizer.eos_id());
  if (!groups.empty() && !groups[0].turn_end.empty()) {  // a chat format's end of turn
    opts.stop_strings.push_back(groups[0].turn_end);
    const int64_t turn_id = tokenizer.piece_to_id(groups[0].turn_end);
    if (turn_id >= 0 && turn_id != tokenizer.unk_id()) opts.eos_ids.push_back(turn_id);
  }
  GenerationResult res = generate(model, prompts, opts, &tokenizer);
  std::vector<Rollout> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Rollout& r = out[i];
    r.group = i / static_cast<size_t>(group_size);
    r.completion = res.tokens[i];
    r.sample_logprobs = res.logprobs[i];
    r.text = res.text[i];
    r.finish_reason = res.finish_reason[i];
    r.parsed = parse_response(r.text, response_format, groups[r.group].edit_base);
  }
  if (generated_tokens) *generated_tokens = res.generated_tokens;
  if (seconds) *seconds = res.seconds;
  return out;
}

}  // namespace kernelrl
