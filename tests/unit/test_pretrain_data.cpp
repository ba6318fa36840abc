// Pretraining data: packing into overlapping rows with the loss mask (all tokens vs code only),
// the deterministic held-out split, and sibling exemplars added to family triplets' context.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"
#include "trainer/pretrain_stage.h"

namespace kernelrl {
namespace {

Triplet family(const std::string& id, const std::string& fam, const std::string& code) {
  return {id, "write " + fam, "ctx", code, "family:" + id, {"family", fam, "cuda"}};
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
