// Prompt building and response parsing: sections in the pretraining order, exemplars with
// their scores, code extraction for both response formats, and format failures with reasons.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "model/tokenizer.h"
#include "rollout/group_sampler.h"
#include "rollout/prompt.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;

TaskSpec hgemm() {
  TaskSpec t;
  t.name = "hgemm_256x512x128_tn";
  t.m = 256, t.n = 512, t.k = 128;
  t.layout = "tn";
  return t;
}

TEST(Prompt, HgemmPromptStatesShapeLayoutContractAndExemplars) {
  PromptParts parts;
  parts.exemplars = {{"a", "// slow kernel\n", 0.5}, {"b", "// fast kernel\n", 1.25}};
  std::string p = build_prompt(hgemm(), parts);
  EXPECT_EQ(p.rfind(kInstructionMarker, 0), 0u);  // starts with the instruction
  EXPECT_THAT(p, HasSubstr("M=256, N=512, K=128"));
  EXPECT_THAT(p, HasSubstr("column-major"));
  EXPECT_THAT(p, HasSubstr("Accumulate in fp32"));
  EXPECT_THAT(p, HasSubstr("kernelrl_launch"));
  EXPECT_THAT(p, HasSubstr("measured score 0.500:\n// slow kernel"));
  EXPECT_THAT(p, HasSubstr("measured score 1.250:\n// fast kernel"));
  EXPECT_LT(p.find(kInstructionMarker), p.find(kContextMarker));
  EXPECT_EQ(p.substr(p.size() - std::string(kCodeMarker).size()), kCodeMarker);
}

TEST(Prompt, GeneralTaskListsTensorsAndTolerance) {
  TaskSpec t;
  t.kind = TaskKind::general;
  t.name = "relu_1m";
  t.op = "relu";
  t.description = "y = max(x, 0)";
  t.inputs = {{"x", {1024, 1024}, "f32", "normal"}};
  t.outputs = {{"y", {1024, 1024}, "f32", "normal"}};
  PromptParts parts;
  parts.backend = "host";
  std::string p = build_prompt(t, parts);
  EXPECT_THAT(p, HasSubstr("inputs[0] x: f32 [1024, 1024]"));
  EXPECT_THAT(p, HasSubstr("outputs[0] y: f32 [1024, 1024]"));
  EXPECT_THAT(p, HasSubstr("Tolerance: |out - ref| <= 0.0001 + 0.0001*|ref|"));
  EXPECT_THAT(p, HasSubstr("CPU backend"));
}

TEST(Prompt, SectionsFormatAsksForAnalysisFirst) {
  PromptParts parts;
  parts.response_format = "sections";
  std::string p = build_prompt(hgemm(), parts);
  EXPECT_THAT(p, HasSubstr("analyse"));
  EXPECT_EQ(p.substr(p.size() - std::string(kAnalysisMarker).size()), kAnalysisMarker);
}

// Chat formats (model.prompt_format) wrap the same request as the checkpoint's user turn and
// open the assistant's; the answer's fenced block is the code, its end-of-turn token a stop.
TEST(Prompt, ChatFormatsWrapTheRequestAsAUserTurn) {
  PromptParts parts;
  parts.exemplars = {{"a", "// slow kernel\n", 0.5}};
  const std::string raw = build_prompt(hgemm(), parts);
  parts.prompt_format = "chatml";
  const std::string chat = build_prompt(hgemm(), parts);
  EXPECT_EQ(chat.rfind("<|im_start|>user\n", 0), 0u);
  const std::string open = "<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(chat.substr(chat.size() - open.size()), open);
  EXPECT_THAT(chat, HasSubstr("M=256, N=512, K=128"));
  EXPECT_THAT(chat, HasSubstr("measured score 0.500:\n// slow kernel"));
  EXPECT_THAT(chat, HasSubstr("```cuda code block"));
  EXPECT_THAT(chat, ::testing::Not(HasSubstr(kCodeMarker)));
  parts.prompt_format = "llama3";
  const std::string l3 = build_prompt(hgemm(), parts);
  EXPECT_EQ(l3.rfind("<|start_header_id|>user<|end_header_id|>\n\n", 0), 0u);
  const std::string l3_open = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(l3.substr(l3.size() - l3_open.size()), l3_open);
  EXPECT_EQ(raw.substr(raw.size() - std::string(kCodeMarker).size()), kCodeMarker);
  parts.prompt_format = "alpaca";
  EXPECT_THROW(build_prompt(hgemm(), parts), UserError);
  auto r = parse_response("Here is a fast kernel:\n```cuda\n__global__ void k() {}\n```\nIt tiles.",
                          "code");
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.code, "__global__ void k() {}\n");
}

TEST(ParseResponse, CodeFormatTakesTextUpToTheEndMarker) {
  auto r = parse_response("  int kernelrl_launch() { return 0; }\n<|end|>garbage", "code");
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.code, "int kernelrl_launch() { return 0; }\n");
}

TEST(ParseResponse, SectionsFormatSplitsAnalysisDesignCode) {
  auto r = parse_response(
      "it was memory bound<|design|>tile 128x128<|code|>__global__ void k(){}\n<|end|>",
      "sections");
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.analysis, "it was memory bound");
  EXPECT_EQ(r.design, "tile 128x128");
  EXPECT_EQ(r.code, "__global__ void k(){}\n");
}

TEST(ParseResponse, MarkdownFenceIsUnwrapped) {
  auto r = parse_response("Here you go:\n```cuda\n__global__ void k() {}\n```\nDone.", "code");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.code, "__global__ void k() {}\n");
}

TEST(Prompt, RevisionShowsThePreviousKernelAndTheVerdictLast) {
  PromptParts parts;
  parts.previous_code = "// my first try\n";
  parts.previous_verdict = "wrong_answer/integer_sum_mismatch: 12 of 4096 sums are wrong";
  std::string p = build_prompt(hgemm(), parts);
  EXPECT_THAT(p, HasSubstr("Your previous kernel:\n// my first try"));
  EXPECT_THAT(p, HasSubstr("verdict: wrong_answer/integer_sum_mismatch"));
  EXPECT_LT(p.find("my first try"), p.rfind(kCodeMarker));  // the code marker still ends it
  EXPECT_EQ(p.rfind(kCodeMarker) + std::string(kCodeMarker).size(), p.size());
  EXPECT_THAT(build_prompt(hgemm(), PromptParts{}), ::testing::Not(HasSubstr("previous kernel")));
}

TEST(PromptGroup, AnExemplarThatNeverFitsIsDroppedBeforeShorterOnes) {
  kernelrl::testing::ScratchDir dir;
  {
    std::ofstream corpus(dir / "corpus.txt");
    for (int i = 0; i < 300; ++i)
      corpus << "__global__ void kernel_" << i
             << "(float* out, const float* in) { out[i] = in[i] * " << i << "; }\n";
  }
  TokenizerTrainOptions to;
  to.vocab_size = 400;
  auto tok = Tokenizer::train(dir / "corpus.txt", dir / "tok.model", to);
  PromptParts parts;
  const std::string small_a = "// kernel a\nout[i] = in[i];\n",
                    small_c = "// kernel c\nout[i] = 2 * in[i];\n";
  std::string huge = "// kernel b\n";
  for (int i = 0; i < 400; ++i)
    huge += "out[" + std::to_string(i) + "] = in[" + std::to_string(i) + "];\n";
  parts.exemplars = {{"a", small_a, 0.5}, {"c", small_c, 1.0}, {"b", huge, 2.0}};  // worst first
  PromptParts both = parts;
  both.exemplars = {parts.exemplars[0], parts.exemplars[1]};
  const int64_t need =
      static_cast<int64_t>(tok.encode(build_prompt(hgemm(), both), tok.bos_id() >= 0).size());
  PromptParts alone;
  alone.exemplars = {parts.exemplars[2]};
  const int64_t huge_alone =
      static_cast<int64_t>(tok.encode(build_prompt(hgemm(), alone), tok.bos_id() >= 0).size());
  ASSERT_GT(huge_alone, need + 50);
  // Room for a and c together (and 10 tokens to spare), never for b.
  PromptGroup g = make_prompt_group(hgemm(), parts, tok, need + 10 + 32, 32);
  EXPECT_EQ(g.exemplars_used, 2);
  EXPECT_THAT(g.prompt, HasSubstr("kernel a"));
  EXPECT_THAT(g.prompt, HasSubstr("kernel c"));
  EXPECT_THAT(g.prompt, ::testing::Not(HasSubstr("kernel b")));
  EXPECT_EQ(g.turn_end, "");
  parts.prompt_format = "chatml";
  EXPECT_EQ(make_prompt_group(hgemm(), parts, tok, need + 400, 32).turn_end, "<|im_end|>");
}

// A pool is filtered to what fits before exemplars are drawn: a draw of one from {a, b} where
// b never fits always shows a; the verdicts are remembered per task and exemplar id.
TEST(PromptGroup, ExemplarFitKeepsOnlyThePoolEntriesThatFitAlone) {
  kernelrl::testing::ScratchDir dir;
  {
    std::ofstream corpus(dir / "corpus.txt");
    for (int i = 0; i < 300; ++i) corpus << "out[" << i << "] = in[" << i << "] * " << i << ";\n";
  }
  TokenizerTrainOptions to;
  to.vocab_size = 400;
  auto tok = Tokenizer::train(dir / "corpus.txt", dir / "tok.model", to);
  std::string huge = "// kernel b\n";
  for (int i = 0; i < 400; ++i) huge += "out[" + std::to_string(i) + "] = in[" + std::to_string(i) + "];\n";
  const Exemplar a{"a", "// kernel a\nout[i] = in[i];\n", 0.5}, b{"b", huge, 2.0};
  PromptParts alone;
  alone.exemplars = {a};
  const int64_t need = static_cast<int64_t>(tok.encode(build_prompt(hgemm(), alone), tok.bos_id() >= 0).size());
  ExemplarFit fit(tok, need + 32, 32);  // exactly room for a
  const auto kept = fit.filter(hgemm(), PromptParts{}, {b, a});
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].id, "a");
  ExemplarFit none(tok, need + 31, 32);  // one token short
  EXPECT_TRUE(none.filter(hgemm(), PromptParts{}, {a, b}).empty());
  // Remembered: the same id is not re-tokenized, even if its source were to change.
  EXPECT_EQ(fit.filter(hgemm(), PromptParts{}, {Exemplar{"a", huge, 0.5}}).size(), 1u);
}

TEST(ParseResponse, MissingCodeIsAFormatFailureWithReason) {
  auto a = parse_response("   <|end|>", "code");
  EXPECT_FALSE(a.ok);
  EXPECT_THAT(a.reason, HasSubstr("no code"));
  auto b = parse_response("just analysis, never got to code", "sections");
  EXPECT_FALSE(b.ok);
  EXPECT_THAT(b.reason, HasSubstr("<|code|>"));
}

}  // namespace
}  // namespace kernelrl
