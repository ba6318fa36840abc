// Pretraining data: packing into overlapping rows with the loss mask (all tokens vs code only),
// the deterministic held-out split, and sibling exemplars added to family triplets' context.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/tasks/task_suite.h"
#include "model/tokenizer.h"
#include "rollout/prompt.h"
#include "test_util.h"
#include "trainer/pretrain_stage.h"

namespace kernelrl {
namespace {

Triplet family(const std::string& id, const std::string& fam, const std::string& code) {
  return {id, "write " + fam, "ctx", code, "family:" + id, {"family", fam, "cuda"}};
}

// A HGEMM family triplet shown with a sibling becomes, token for token, the prompt the
// hgemm_rl stage builds (rollout/prompt.h) for a shape of the grid, followed by its own code.
TEST(PretrainData, HgemmFamilyTripletsBecomeTheRlPromptOfAGridShape) {
  auto hgemm = [](const std::string& id, const std::string& backend, const std::string& layout,
                  const std::string& acc, const std::string& code) {
    return Triplet{id, "write it", "docs", code, "family:" + id,
                   {"family", "hgemm_tiled", backend, "hgemm", "layout_" + layout, "acc_" + acc}};
  };
  std::vector<Triplet> docs = {hgemm("t1", "cuda", "tn", "f16", "K1\n"),
                               hgemm("t2", "cuda", "tn", "f16", "K2\n"),
                               hgemm("h1", "host", "nn", "f32", "H1\n"),
                               hgemm("h2", "host", "nn", "f32", "H2\n")};
  const std::vector<TaskSpec> shapes = {hgemm_task(64, 128, 256), hgemm_task(512, 64, 64)};
  auto out = docs;
  add_exemplar_context(out, 1.0, shapes);
  for (size_t i = 0; i < out.size(); ++i) {
    SCOPED_TRACE(docs[i].id);
    const Triplet& t = out[i];
    EXPECT_EQ(t.code, docs[i].code);
    const std::string sibling = docs[i ^ 1].code;  // the only other variant of its backend
    // Which grid shape: find the one whose prompt matches; exactly one must.
    int matches = 0;
    for (const auto& s : shapes) {
      TaskSpec task = hgemm_task(s.m, s.n, s.k, i < 2 ? "tn" : "nn", i < 2 ? "f16" : "f32");
      PromptParts parts;
      parts.backend = i < 2 ? "gpu" : "host";
      parts.exemplars = {{"sib", sibling, /*score=*/-1}};
      const std::string prompt = build_prompt(task, parts);
      const std::string text = format_triplet(t);
      if (text == prompt + t.code + kEndMarker) ++matches;
    }
    EXPECT_EQ(matches, 1) << format_triplet(t);
  }
  // Without shapes (or for general families) the instruction and docs context stay.
  auto plain = docs;
  add_exemplar_context(plain, 1.0);
  EXPECT_EQ(plain[0].instruction, "write it");
  EXPECT_THAT(plain[0].context, ::testing::StartsWith("docs\nEarlier kernel 1:\n"));
}

TEST(PretrainData, SiblingExemplarsComeFromTheSameFamilyAndAreDeterministic) {
  std::vector<Triplet> docs = {family("a1", "tiled", "A1"), family("a2", "tiled", "A2"),
                               family("a3", "tiled", "A3"), family("b1", "wmma", "B1"),
                               family("b2", "wmma", "B2"), family("c1", "lonely", "C1"),
                               {"x", "plain", "ctx", "X", "file.cu:1", {"kernel"}}};
  auto once = docs;
  add_exemplar_context(once, 1.0);
  for (size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(docs[i].id);
    const std::string& ctx = once[i].context;
    ASSERT_THAT(ctx, ::testing::HasSubstr("Earlier kernel 1:\n"));
    const char fam = docs[i].id[0];
    // The sibling is a different variant of the same family.
    bool same_family = false;
    for (const auto& d : docs)
      if (d.id[0] == fam && d.id != docs[i].id && ctx.find("\n" + d.code + "\n") != std::string::npos)
        same_family = true;
    EXPECT_TRUE(same_family) << ctx;
    EXPECT_EQ(ctx.find("\n" + docs[i].code + "\n"), std::string::npos) << "shown itself";
  }
  EXPECT_EQ(once[5].context, "ctx");  // a family of one has no sibling
  EXPECT_EQ(once[6].context, "ctx");  // not a family triplet
  auto twice = docs;
  add_exemplar_context(twice, 1.0);
  for (size_t i = 0; i < docs.size(); ++i) EXPECT_EQ(once[i].context, twice[i].context);
  auto none = docs;
  add_exemplar_context(none, 0.0);
  for (size_t i = 0; i < docs.size(); ++i) EXPECT_EQ(none[i].context, docs[i].context);
}

TEST(PretrainData, HoldoutSplitIsStableAndNearTheFraction) {
  int held = 0;
  for (int i = 0; i < 20000; ++i) held += is_holdout("doc" + std::to_string(i), 0.1);
  EXPECT_NEAR(held / 20000.0, 0.1, 0.01);
  EXPECT_EQ(is_holdout("doc7", 0.1), is_holdout("doc7", 0.1));
  EXPECT_FALSE(is_holdout("doc7", 0.0));
}

TEST(PretrainData, FormatUsesTheSectionMarkersInOrder) {
  Triplet t{"i", "INSTR", "CTX", "CODE", "s", {}};
  EXPECT_EQ(format_triplet(t), std::string(kInstructionMarker) + "INSTR\n" + kContextMarker +
                                   "CTX\n" + kCodeMarker + "CODE" + kEndMarker);
}

}  // namespace
}  // namespace kernelrl
