// SEARCH/REPLACE edit blocks (rollout/edit_blocks.h): parsing, applying in order, exact
// whole-line matching, CR LF, the named failures, and line diffs that apply back to their
// target (on hand-written texts and on real family variants).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/families.h"
#include "rollout/edit_blocks.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;

const std::string kBase =
    "int a = 1;\n"
    "int b = 2;\n"
    "  int c = 3;\n"
    "int d = 4;\n";

std::string sr_block(const std::string& search, const std::string& replace) {
  return std::string("<<<<<<< SEARCH\n") + search + "=======\n" + replace + ">>>>>>> REPLACE\n";
}

TEST(EditBlocks, OneBlockReplacesItsLines) {
  EditResult r = apply_edit_completion(kBase, sr_block("int b = 2;\n", "int b = 20;\n"));
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.code, "int a = 1;\nint b = 20;\n  int c = 3;\nint d = 4;\n");
  EXPECT_EQ(r.blocks.size(), 1u);
}

TEST(EditBlocks, BlocksApplyInOrderEachToTheTextBeforeItLeft) {
  // The second block's SEARCH text exists only after the first block's edit.
  EditResult r = apply_edit_completion(
      kBase, sr_block("int a = 1;\n", "int a = 1;\nint e = 5;\n") + sr_block("int e = 5;\n", "int e = 6;\n"));
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.code, "int a = 1;\nint e = 6;\nint b = 2;\n  int c = 3;\nint d = 4;\n");
  // In the other order the first block (e = 5) matches nothing yet.
  EditResult swapped = apply_edit_completion(
      kBase, sr_block("int e = 5;\n", "int e = 6;\n") + sr_block("int a = 1;\n", "int a = 1;\nint e = 5;\n"));
  EXPECT_EQ(swapped.failure, EditFailure::no_match);
  EXPECT_THAT(swapped.reason, HasSubstr("block 1"));
}

TEST(EditBlocks, WhitespaceMustMatchExactly) {
  EXPECT_EQ(apply_edit_completion(kBase, sr_block("int c = 3;\n", "int c = 30;\n")).failure, EditFailure::no_match)
      << "indentation differs, and a match must start at a line start";
  EXPECT_EQ(apply_edit_completion(kBase, sr_block("int b = 2; \n", "x\n")).failure, EditFailure::no_match)
      << "a trailing space differs";
  EXPECT_EQ(apply_edit_completion(kBase, sr_block("int  b = 2;\n", "x\n")).failure, EditFailure::no_match);
  EditResult ok = apply_edit_completion(kBase, sr_block("  int c = 3;\n", "  int c = 30;\n"));
  ASSERT_TRUE(ok.ok()) << ok.reason;
  EXPECT_THAT(ok.code, HasSubstr("  int c = 30;\n"));
  // A line's tail is not a match either (b = 2 is not a whole line of "int b = 2;").
  EXPECT_EQ(apply_edit_completion(kBase, sr_block("b = 2;\n", "x\n")).failure, EditFailure::no_match);
}

TEST(EditBlocks, CrLfInTheCompletionOrTheBaseReadsAsLf) {
  const std::string crlf = "<<<<<<< SEARCH\r\nint b = 2;\r\n=======\r\nint b = 7;\r\n>>>>>>> REPLACE\r\n";
  EditResult r = apply_edit_completion(kBase, crlf);
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.code, "int a = 1;\nint b = 7;\n  int c = 3;\nint d = 4;\n");
  std::string base_crlf = "int a = 1;\r\nint b = 2;\r\n";
  EditResult r2 = apply_edit_completion(base_crlf, sr_block("int b = 2;\n", "int b = 3;\n"));
  ASSERT_TRUE(r2.ok()) << r2.reason;
  EXPECT_EQ(r2.code, "int a = 1;\nint b = 3;\n");
}

TEST(EditBlocks, ASearchTextFoundTwiceIsAmbiguous) {
  const std::string base = "x = 0;\ny = 1;\nx = 0;\n";
  EditResult r = apply_edit_completion(base, sr_block("x = 0;\n", "x = 9;\n"));
  EXPECT_EQ(r.failure, EditFailure::ambiguous);
  EXPECT_STREQ(edit_failure_name(r.failure), "edit_ambiguous");
  EXPECT_THAT(r.reason, HasSubstr("matches 2 places"));
  EXPECT_TRUE(r.code.empty());
  // Overlapping matches count: "a\na\n" sits twice in "a\na\na\n".
  EXPECT_EQ(apply_edit_completion("a\na\na\n", sr_block("a\na\n", "b\n")).failure, EditFailure::ambiguous);
  // More context makes it unique.
  EditResult ok = apply_edit_completion(base, sr_block("y = 1;\nx = 0;\n", "y = 1;\nx = 9;\n"));
  ASSERT_TRUE(ok.ok()) << ok.reason;
  EXPECT_EQ(ok.code, "x = 0;\ny = 1;\nx = 9;\n");
}

TEST(EditBlocks, AnEmptyReplaceDeletes) {
  EditResult r = apply_edit_completion(kBase, sr_block("int b = 2;\n  int c = 3;\n", ""));
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.code, "int a = 1;\nint d = 4;\n");
}

TEST(EditBlocks, UnterminatedOrBrokenBlocksAreMalformed) {
  for (const std::string& bad : {
           std::string("<<<<<<< SEARCH\nint b = 2;\n=======\nint b = 3;\n"),      // no REPLACE line
           std::string("<<<<<<< SEARCH\nint b = 2;\n"),                           // no divider
           std::string("<<<<<<< SEARCH\nint b = 2;\n>>>>>>> REPLACE\n"),          // REPLACE first
           std::string("<<<<<<< SEARCH\n=======\nint z;\n>>>>>>> REPLACE\n"),     // empty SEARCH
           std::string("=======\n"),                                              // stray divider
           std::string("<<<<<<< SEARCH\na\n<<<<<<< SEARCH\nb\n=======\nc\n>>>>>>> REPLACE\n"),
           std::string("<<<<<<< SEARCH\na\n=======\nb\n=======\nc\n>>>>>>> REPLACE\n"),
       }) {
    SCOPED_TRACE(bad);
    EditResult r = apply_edit_completion(kBase, bad);
    EXPECT_EQ(r.failure, EditFailure::malformed);
    EXPECT_STREQ(edit_failure_name(r.failure), "edit_malformed");
    EXPECT_FALSE(r.reason.empty());
  }
  EXPECT_THAT(apply_edit_completion(kBase, "<<<<<<< SEARCH\nint b = 2;\n=======\nx\n").reason,
              HasSubstr("not terminated"));
}

TEST(EditBlocks, NoBlockIsEmptyAndTextOutsideBlocksIsIgnored) {
  EXPECT_EQ(apply_edit_completion(kBase, "").failure, EditFailure::empty);
  EXPECT_EQ(apply_edit_completion(kBase, "int main() { return 0; }\n").failure, EditFailure::empty);
  EXPECT_STREQ(edit_failure_name(EditFailure::empty), "edit_empty");
  EditResult r = apply_edit_completion(
      kBase, "Smaller tiles:\n```\n" + sr_block("int d = 4;\n", "int d = 8;\n") + "```\ndone");
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.code, "int a = 1;\nint b = 2;\n  int c = 3;\nint d = 8;\n");
  // Marker lines may carry trailing blanks, and the last line may lack its newline.
  EditResult t = apply_edit_completion(kBase, "<<<<<<< SEARCH  \nint a = 1;\n======= \nint a = 0;\n>>>>>>> REPLACE");
  ASSERT_TRUE(t.ok()) << t.reason;
  EXPECT_EQ(t.code.substr(0, 11), "int a = 0;\n");
  EXPECT_STREQ(edit_failure_name(EditFailure::no_match), "edit_no_match");
}

TEST(EditBlocks, FormattedBlocksParseBack) {
  std::vector<EditBlock> blocks = {{"int a = 1;\n", "int a = 2;\n"}, {"int d = 4;\n", ""}};
  EditResult r = parse_edit_blocks(format_edit_blocks(blocks));
  ASSERT_TRUE(r.ok()) << r.reason;
  ASSERT_EQ(r.blocks.size(), 2u);
  EXPECT_EQ(r.blocks[0].search, "int a = 1;\n");
  EXPECT_EQ(r.blocks[0].replace, "int a = 2;\n");
  EXPECT_EQ(r.blocks[1].replace, "");
}

TEST(EditBlocks, DiffBlocksApplyBackToTheTarget) {
  struct Case {
    std::string from, to;
  };
  const std::vector<Case> cases = {
      {kBase, "int a = 1;\nint b = 5;\n  int c = 3;\nint d = 4;\n"},               // one line
      {kBase, "int a = 1;\nint b = 2;\nint x;\n  int c = 3;\nint d = 4;\n"},       // an insertion
      {kBase, "int b = 2;\n  int c = 3;\n"},                                       // deletions
      {"x\ny\nx\ny\nz\n", "x\ny\nx\nq\nz\n"},  // the changed line's neighbours repeat: needs context
      {"x\nx\nx\n", "x\nx\nx\nx\n"},           // an insertion into identical lines
      {"a\nb\nc\nd\ne\nf\n", "A\nb\nc\nD\ne\nF\n"},  // three hunks
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.from + "->\n" + c.to);
    std::vector<EditBlock> blocks = diff_edit_blocks(c.from, c.to);
    ASSERT_FALSE(blocks.empty());
    EditResult r = apply_edit_completion(c.from, format_edit_blocks(blocks));
    ASSERT_TRUE(r.ok()) << r.reason;
    EXPECT_EQ(r.code, c.to);
  }
  EXPECT_TRUE(diff_edit_blocks(kBase, kBase).empty());
  EXPECT_EQ(diff_edit_blocks("a\nb\nc\nd\ne\nf\n", "A\nb\nc\nD\ne\nF\n").size(), 3u);
}

TEST(EditBlocks, DiffOfTwoFamilyVariantsIsSmallAndAppliesBack) {
  // hgemm_host's variants differ in their instance block (the tile): a parameter change is a
  // few lines, not a whole kernel.
  std::vector<KernelVariant> vs = hgemm_family_variants("hgemm_host");
  ASSERT_GE(vs.size(), 2u);
  const KernelVariant* a = nullptr;
  const KernelVariant* b = nullptr;
  for (const auto& v : vs)
    for (const auto& w : vs)
      if (v.layout == w.layout && v.acc == w.acc && v.params != w.params) a = &v, b = &w;
  ASSERT_TRUE(a && b);
  std::vector<EditBlock> blocks = diff_edit_blocks(a->source, b->source);
  ASSERT_FALSE(blocks.empty());
  const std::string text = format_edit_blocks(blocks);
  EXPECT_LT(text.size(), a->source.size() / 4) << text;
  EditResult r = apply_edit_completion(a->source, text);
  ASSERT_TRUE(r.ok()) << r.reason;
  EXPECT_EQ(r.code, b->source.back() == '\n' ? b->source : b->source + "\n");
}

}  // namespace
}  // namespace kernelrl
