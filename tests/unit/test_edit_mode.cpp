// rollout.completion: edit around the blocks themselves (those are test_edit_blocks.cpp's): the
// config key, the edit-mode prompt and its base, parsing a completion against the base with
// named failures, revision prompts that edit the previous turn's kernel, the step metrics
// (tokens per completion, edits applied, failures by name), and the pretraining edit pairs and
// triplets (measured and compile-checked parameter changes).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "common/config.h"
#include "common/error.h"
#include "data/edit_pairs.h"
#include "model/tokenizer.h"
#include "rollout/edit_blocks.h"
#include "rollout/edit_examples.h"
#include "rollout/group_sampler.h"
#include "rollout/prompt.h"
#include "test_util.h"
#include "trainer/job_config.h"
#include "trainer/multi_turn.h"
#include "trainer/rl_metrics.h"
#include "trainer/rl_summary.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TaskSpec hgemm64() {
  TaskSpec t;
  t.name = "hgemm_64x64x64_nn";
  t.m = t.n = t.k = 64;
  return t;
}

const std::string kSlow = "// kernel slow\nint tile = 16;\nint run() { return tile; }\n";
const std::string kBest = "// kernel best\nint tile = 32;\nint run() { return tile; }\n";

std::string sr_edit(const std::string& search, const std::string& replace) {
  return std::string("<<<<<<< SEARCH\n") + search + "=======\n" + replace + ">>>>>>> REPLACE\n";
}

TEST(EditMode, ConfigKeyDefaultsToFullAndRefusesOtherValues) {
  const std::filesystem::path cfg = std::filesystem::path(KERNELRL_SOURCE_DIR) / "configs";
  EXPECT_EQ(load_job_config(cfg / "quickstart-cpu.yaml", {}).rollout.completion, "full");
  EXPECT_EQ(load_job_config(cfg / "quickstart-cpu-edit.yaml", {}).rollout.completion, "edit");
  EXPECT_EQ(load_job_config(cfg / "quickstart-cpu.yaml", {"rollout.completion=edit"}).rollout.completion, "edit");
  try {
    load_job_config(cfg / "quickstart-cpu.yaml", {"rollout.completion=diff"});
    FAIL() << "rollout.completion=diff loaded";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rollout.completion"));
    EXPECT_THAT(e.what(), HasSubstr("edit"));
  }
  // A demonstration is a whole kernel: refused beside edit completions, at load.
  try {
    load_job_config(cfg / "debug.yaml", {"rollout.completion=edit"});  // demonstrations: 1
    FAIL() << "demonstrations with edit completions loaded";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rollout.demonstrations"));
  }
}

TEST(EditMode, PromptShowsTheBestExemplarAsTheKernelToEdit) {
  PromptParts parts;
  parts.completion = "edit";
  parts.exemplars = {{"s", kSlow, 0.25}, {"b", kBest, 0.75}};  // worst first
  EXPECT_EQ(edit_base_of(parts), kBest);
  const std::string p = build_prompt(hgemm64(), parts);
  EXPECT_THAT(p, HasSubstr("Earlier kernel 1, measured score 0.250:\n" + kSlow));
  EXPECT_THAT(p, HasSubstr("Kernel to edit, measured score 0.750:\n" + kBest));
  EXPECT_THAT(p, Not(HasSubstr("Earlier kernel 2")));
  EXPECT_THAT(p, HasSubstr("answer with SEARCH/REPLACE blocks (a line <<<<<<< SEARCH"));
  EXPECT_EQ(p.substr(p.size() - std::string(kCodeMarker).size()), kCodeMarker);
  // Full completions: the prompt as before.
  parts.completion = "full";
  const std::string full = build_prompt(hgemm64(), parts);
  EXPECT_THAT(full, HasSubstr("Earlier kernel 2, measured score 0.750"));
  EXPECT_THAT(full, Not(HasSubstr("SEARCH")));
  EXPECT_EQ(edit_base_of(parts), "");
  // Edit mode with nothing to show asks for a whole kernel, exactly the full prompt.
  PromptParts none;
  none.completion = "edit";
  EXPECT_EQ(edit_base_of(none), "");
  PromptParts none_full;
  EXPECT_EQ(build_prompt(hgemm64(), none), build_prompt(hgemm64(), none_full));
  // A chat format asks for blocks instead of a fenced kernel.
  parts.completion = "edit";
  parts.prompt_format = "chatml";
  EXPECT_THAT(build_prompt(hgemm64(), parts), HasSubstr("Reply with SEARCH/REPLACE blocks only."));
}

TEST(EditMode, ACompletionIsAppliedToTheBaseOrIsANamedFailure) {
  ParsedResponse ok = parse_response(sr_edit("int tile = 32;\n", "int tile = 48;\n") + kEndMarker + "junk", "code", kBest);
  ASSERT_TRUE(ok.ok) << ok.reason;
  EXPECT_EQ(ok.code, "// kernel best\nint tile = 48;\nint run() { return tile; }\n");
  EXPECT_EQ(ok.edit_blocks, 1);
  EXPECT_EQ(ok.edit_base, kBest);
  EXPECT_EQ(ok.failure, "");
  struct Case {
    std::string completion, failure;
  };
  for (const Case& c : std::vector<Case>{
           {"int tile = 48;\n", "edit_empty"},  // a whole kernel is no edit
           {sr_edit("int tile = 64;\n", "int tile = 8;\n"), "edit_no_match"},
           {sr_edit("int run() { return tile; }\n", "x\n"), "edit_ambiguous"},  // in a doubled base
           {"<<<<<<< SEARCH\nint tile = 32;\n", "edit_malformed"},
       }) {
    SCOPED_TRACE(c.completion);
    const std::string base = c.failure == "edit_ambiguous" ? kBest + kBest : kBest;
    ParsedResponse r = parse_response(c.completion, "code", base);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.failure, c.failure);
    EXPECT_EQ(r.reason.rfind(c.failure + ": ", 0), 0u) << r.reason;
    EXPECT_EQ(r.edit_base, base);
    EXPECT_TRUE(r.code.empty());
  }
  // Without a base (full completions) the parse is as before, its failure named too.
  ParsedResponse none = parse_response("   <|end|>", "code");
  EXPECT_FALSE(none.ok);
  EXPECT_EQ(none.failure, "format_no_code");
  // The sections format: the blocks follow the code marker.
  ParsedResponse sec = parse_response(std::string("think\n") + kCodeMarker + sr_edit("int tile = 32;\n", "int tile = 8;\n"),
                                      "sections", kBest);
  ASSERT_TRUE(sec.ok) << sec.reason;
  EXPECT_THAT(sec.code, HasSubstr("int tile = 8;"));
}

Tokenizer small_tokenizer(const std::filesystem::path& dir) {
  {
    std::ofstream corpus(dir / "corpus.txt");
    for (int i = 0; i < 300; ++i) corpus << "int tile = " << i << "; // kernel " << i << " SEARCH REPLACE\n";
  }
  TokenizerTrainOptions to;
  to.vocab_size = 400;
  return Tokenizer::train(dir / "corpus.txt", dir / "tok.model", to);
}

TEST(EditMode, PromptGroupCarriesItsBaseAndARevisionEditsThePreviousKernel) {
  kernelrl::testing::ScratchDir dir;
  Tokenizer tok = small_tokenizer(dir.path());
  PromptParts parts;
  parts.completion = "edit";
  parts.exemplars = {{"s", kSlow, 0.25}, {"b", kBest, 0.75}};
  PromptGroup g = make_prompt_group(hgemm64(), parts, tok, 4096, 64);
  EXPECT_EQ(g.edit_base, kBest);
  PromptParts full = parts;
  full.completion = "full";
  EXPECT_EQ(make_prompt_group(hgemm64(), full, tok, 4096, 64).edit_base, "");

  // Turn k produced code: turn k+1 edits it.
  Rollout prev;
  prev.parsed = parse_response(sr_edit("int tile = 32;\n", "int tile = 48;\n"), "code", kBest);
  ASSERT_TRUE(prev.parsed.ok);
  Scored verdict;
  verdict.parsed = true;
  PromptParts rev;
  rev.completion = "edit";
  PromptGroup r1 = revision_prompt(hgemm64(), prev, verdict, rev, tok, 4096, 64);
  EXPECT_EQ(r1.edit_base, prev.parsed.code);
  EXPECT_THAT(r1.prompt, HasSubstr("Your previous kernel:\n" + prev.parsed.code));
  EXPECT_THAT(r1.prompt, HasSubstr("Edit it: fix what failed"));
  // Its blocks did not apply: the revision edits the kernel it was editing, and the verdict says
  // why nothing compiled.
  Rollout failed;
  failed.text = sr_edit("int tile = 64;\n", "int tile = 8;\n");
  failed.parsed = parse_response(failed.text, "code", kBest);
  Scored fv;
  fv.format_failure = failed.parsed.failure;
  fv.format_reason = failed.parsed.reason;
  PromptGroup r2 = revision_prompt(hgemm64(), failed, fv, rev, tok, 4096, 64);
  EXPECT_EQ(r2.edit_base, kBest);
  EXPECT_THAT(r2.prompt, HasSubstr("did not apply (edit_no_match: "));
  // A prompt the base does not fit in asks for a whole kernel instead of cutting the base.
  std::string huge;
  for (int i = 0; i < 400; ++i) huge += "int tile = " + std::to_string(i) + ";\n";
  Rollout big;
  big.parsed.ok = true;
  big.parsed.code = huge;
  PromptParts tiny;  // the revision prompt with a one-line kernel: room for ~400 tokens of code
  tiny.previous_code = "int tile = 1;\n";
  tiny.previous_verdict = verdict_of(verdict);
  const int64_t need = static_cast<int64_t>(tok.encode(build_prompt(hgemm64(), tiny), tok.bos_id() >= 0).size());
  ASSERT_GT(static_cast<int64_t>(tok.encode(huge).size()), 800);
  PromptGroup r3 = revision_prompt(hgemm64(), big, verdict, rev, tok, need + 400 + 64, 64);
  EXPECT_EQ(r3.edit_base, "");
  EXPECT_THAT(r3.prompt, HasSubstr("cut to fit the context"));
}

TEST(EditMode, StepMetricsCountTokensEditsAndNamedFailures) {
  StepBatch b;
  b.groups.resize(1);
  b.groups[0].task = hgemm64();
  const std::vector<std::string> completions = {
      sr_edit("int tile = 32;\n", "int tile = 48;\n"),  // applied
      sr_edit("int tile = 32;\n", "int tile = 32;\n"),  // applied, the kernel unchanged
      sr_edit("int tile = 99;\n", "x\n"),               // edit_no_match
      "no blocks at all\n",                          // edit_empty
  };
  for (const auto& c : completions) {
    Rollout r;
    r.completion.assign(c.size() / 4, 7);  // token counts: 1/4 of the characters
    r.text = c;
    r.parsed = parse_response(c, "code", kBest);
    Scored s;
    s.parsed = r.parsed.ok;
    s.format_failure = r.parsed.failure;
    b.rollouts.push_back(r);
    b.scored.push_back(s);
  }
  RlStepResult res;
  res.smoothed.assign(4, 0.0);
  res.advantages.advantages = torch::zeros({4});
  RolloutConfig ro;
  ro.group_size = 4;
  const StepLog log = rl_step_log(b, res, ro);
  const nlohmann::json& m = log.metrics;
  double tokens = 0;
  for (const auto& c : completions) tokens += static_cast<double>(c.size() / 4) / 4.0;
  EXPECT_DOUBLE_EQ(m["tokens_per_completion"].get<double>(), tokens);
  EXPECT_EQ(m["edit_rows"].get<int64_t>(), 4);
  EXPECT_EQ(m["edits_applied"].get<int64_t>(), 2);
  EXPECT_EQ(m["edits_unchanged"].get<int64_t>(), 1);
  EXPECT_EQ(m["format_failures"].get<int64_t>(), 2);
  EXPECT_EQ(m["format_failure_edit_no_match"].get<int64_t>(), 1);
  EXPECT_EQ(m["format_failure_edit_empty"].get<int64_t>(), 1);
  EXPECT_EQ(m["format_failure_edit_ambiguous"].get<int64_t>(), 0);
  EXPECT_THAT(log.status, HasSubstr("edits 2/4"));

  // The run summary reads them back.
  kernelrl::testing::ScratchDir dir;
  nlohmann::json row = m;
  row["stage"] = "hgemm_rl";
  row["step"] = 1;
  kernelrl::testing::write_text(dir / "metrics.jsonl", row.dump() + "\n");
  const RlLearning l = rl_learning(dir / "metrics.jsonl", "hgemm_rl");
  EXPECT_DOUBLE_EQ(l.tokens_mean, tokens);
  EXPECT_EQ(l.edits_applied, 2);
  EXPECT_EQ(l.format_failures, 2);
  EXPECT_THAT(format_rl_learning(l), HasSubstr("blocks applied in 2 of 4 completions"));
}

TEST(EditPairs, MeasuredPairsGoToAFasterVariantOfTheSameFamily) {
  MeasuredShape s;
  s.task = hgemm64();
  s.device = "Dev";
  s.baselines_us["lt-auto"] = 10;
  s.kernels = {{"f_a", "f", "int v = 1;\nint w;\n", 5, "csv"},
               {"g_a", "g", "other\n", 6, "csv"},
               {"f_b", "f", "int v = 2;\nint w;\n", 7, "csv"},
               {"f_c", "f", "int v = 3;\nint w;\n", 9, "csv"}};  // fastest first
  std::vector<EditPair> pairs = measured_edit_pairs({s}, /*per_shape=*/0, /*seed=*/1);
  // f_b -> f_a; f_c -> f_a and f_c -> f_b; nothing across families, nothing from f_a or g_a.
  ASSERT_EQ(pairs.size(), 3u);
  for (const auto& p : pairs) {
    EXPECT_EQ(p.from.family, p.to.family);
    EXPECT_LT(p.to.device_us, p.from.device_us);
    EXPECT_EQ(p.ranked, 4);
  }
  EXPECT_EQ(measured_edit_pairs({s}, 1, 1).size(), 1u);
  MeasuredShape held = s;
  held.task.holdout = true;
  EXPECT_TRUE(measured_edit_pairs({held}, 0, 1).empty());

  const auto t = edit_triplet(pairs[0], "gpu");
  ASSERT_TRUE(t.has_value());
  EXPECT_THAT(t->instruction, HasSubstr("Target device: Dev."));
  EXPECT_THAT(t->instruction, HasSubstr("SEARCH/REPLACE"));
  EXPECT_THAT(t->context, HasSubstr("Rank " + std::to_string(pairs[0].from_rank) + " of the variants"));
  EXPECT_THAT(t->context, HasSubstr("Kernel to edit:\n" + pairs[0].from.source.substr(0, 5)));
  EditResult applied = apply_edit_completion(pairs[0].from.source, t->code);
  ASSERT_TRUE(applied.ok()) << applied.reason;
  EXPECT_EQ(applied.code, pairs[0].to.source);
  EXPECT_THAT(t->tags, ::testing::IsSupersetOf({"edit", "edit_measured", "cuda", "hgemm"}));
}

TEST(EditPairs, ParameterChangesOutsideTheListCompileAndApply) {
  std::vector<TaskSpec> shapes = {hgemm64()};
  int64_t dropped = -1;
  const std::filesystem::path kernels = std::filesystem::path(KERNELRL_SOURCE_DIR) / "kernels";
  std::vector<EditPair> pairs = param_edit_pairs("hgemm_host", shapes, 6, 0, kernels, &dropped);
  ASSERT_EQ(pairs.size(), 6u);
  EXPECT_EQ(dropped, 0);
  bool outside = false;
  for (const auto& p : pairs) {
    SCOPED_TRACE(p.to.name);
    EXPECT_NE(p.from.source, p.to.source);
    outside |= p.to.name.find("TILE16") != std::string::npos || p.to.name.find("TILE128") != std::string::npos;
    const auto t = edit_triplet(p, "host");
    ASSERT_TRUE(t.has_value());
    EXPECT_LT(t->code.size(), 400u) << t->code;  // one Cfg line searched and replaced
    EXPECT_THAT(t->code, HasSubstr("using Cfg = hgemm_host::Config</*TILE="));
    EditResult applied = apply_edit_completion(p.from.source, t->code);
    ASSERT_TRUE(applied.ok()) << applied.reason;
    EXPECT_EQ(applied.code, p.to.source);
  }
  EXPECT_TRUE(outside) << "no tile outside the family's list {32, 64}";
  // A change g++ refuses is dropped: a compiler that fails everything keeps none.
  EXPECT_TRUE(param_edit_pairs("hgemm_host", shapes, 3, 0, kernels, &dropped, "false").empty());
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(with_knob("x\nusing Cfg = C</*A=*/4, /*B=*/true>;\n", "A", 8), "x\nusing Cfg = C</*A=*/8, /*B=*/true>;\n");
  EXPECT_EQ(with_knob("x\nusing Cfg = C</*A=*/4, /*B=*/true>;\n", "B", 1), "");
}

}  // namespace
}  // namespace kernelrl
