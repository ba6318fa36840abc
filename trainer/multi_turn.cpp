#include "trainer/multi_turn.h"

#include <chrono>
#include <cstdio>

#include "common/error.h"
#include "rollout/group_sampler.h"

namespace kernelrl {

std::string verdict_of(const Scored& s) {
  if (!s.parsed) {
    if (s.format_failure.rfind("edit_", 0) == 0)  // edit mode: why the blocks did not apply
      return "your SEARCH/REPLACE blocks did not apply (" + s.format_reason + "); nothing was compiled";
    return "no code was found in your response (format failure)";
  }
  const EvalResult& r = s.result;
  char buf[256];
  if (s.passed) {
    std::snprintf(buf, sizeof buf,
                  "correct; %.2f us on the device against %.2f us for %s (speedup %.3f)",
                  r.cand.median_us, r.t_ref_us, r.reference.c_str(), r.speedup);
    return buf;
  }
  std::string why =
      std::string(status_name(r.status)) + (r.check.empty() ? "" : "/" + r.check) + ": " +
      (r.status == EvalStatus::compile_error && !r.compile_log.empty() ? r.compile_log : r.reason);
  if (why.size() > 600) why = why.substr(0, 600) + " ...";
  return why;
}

PromptGroup revision_prompt(const TaskSpec& task, const Rollout& previous, const Scored& verdict,
                            PromptParts parts, const Tokenizer& tokenizer, int64_t max_seq_len,
                            int64_t max_new_tokens) {
  // Edit mode: the revision edits the previous turn's kernel, or, when its blocks did not apply,
  // the kernel that turn was editing; with neither, it asks for a whole kernel.
  const std::string& base = previous.parsed.ok ? previous.parsed.code : previous.parsed.edit_base;
  if (parts.completion == "edit" && base.empty()) parts.completion = "full";
  parts.previous_code = parts.completion == "edit" ? base : previous.parsed.ok ? previous.parsed.code : previous.text;
  parts.previous_verdict = verdict_of(verdict);
  for (int cut = 0;; ++cut) {
    try {
      return make_prompt_group(task, parts, tokenizer, max_seq_len, max_new_tokens);
    } catch (const UserError&) {
      if (parts.completion == "edit") {  // a cut kernel is no base to edit: ask for a whole one
        parts.completion = "full";
        --cut;
        continue;
      }
      if (parts.previous_code.empty() || cut >= 6) throw;
      parts.previous_code = parts.previous_code.substr(0, parts.previous_code.size() / 2) +
                            "\n... (cut to fit the context)";
      if (cut == 5) parts.previous_code.clear();
    }
  }
}

void refine_turns(StepBatch& batch, int64_t turns, const MakeRevision& revision,
                  const SampleTurn& sample_turn) {
  using Clock = std::chrono::steady_clock;
  const size_t R = batch.rollouts.size();  // rows of turn 1
  for (int64_t turn = 1; turn < turns; ++turn) {
    const auto t0 = Clock::now();
    std::vector<PromptGroup> prompts;
    for (size_t j = 0; j < R; ++j) {
      const size_t prev = static_cast<size_t>(turn - 1) * R + j;
      const Rollout& r = batch.rollouts[prev];
      prompts.push_back(revision(batch.groups[r.group].task, r, batch.scored[prev]));
    }
    const double prompts_s = std::chrono::duration<double>(Clock::now() - t0).count();
    StepBatch more = sample_turn(std::move(prompts), turn);
    more.times.prompts += prompts_s;
    batch.append(std::move(more));
  }
}

}  // namespace kernelrl
