// Triplet JSONL: round trip, and every malformed line rejected with file:line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/corpus/triplet.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::write_text;

TEST(Triplet, RoundTripKeepsEveryField) {
  ScratchDir dir;
  Triplet a{"id-1",         "Write a kernel \"x\"\nwith newline",
            "ctx {braces}", "__global__ void k() {}",
            "file.cu:3",    {"kernel", "shared_memory"}};
  Triplet b{"id-2", "i", "", "c", "", {}};
  write_triplets(dir / "t.jsonl", {a, b});
  auto r = read_triplets(dir / "t.jsonl");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].id, a.id);
  EXPECT_EQ(r[0].instruction, a.instruction);
  EXPECT_EQ(r[0].context, a.context);
  EXPECT_EQ(r[0].code, a.code);
  EXPECT_EQ(r[0].source, a.source);
  EXPECT_EQ(r[0].tags, a.tags);
  EXPECT_TRUE(r[1].tags.empty());
  EXPECT_EQ(testing::read_text(dir / "t.jsonl").find('\n'), to_jsonl(a).size());
}

std::string error_for(const std::string& content) {
  ScratchDir dir;
  write_text(dir / "c.jsonl", content);
  try {
    read_triplets(dir / "c.jsonl");
  } catch (const UserError& e) {
    std::string msg = e.what();
    // Make the message independent of the scratch path.
    size_t p = msg.find("c.jsonl:");
    return p == std::string::npos ? msg : msg.substr(p);
  }
  return "<no error>";
}

TEST(Triplet, MalformedLinesNameFileAndLine) {
  const std::string ok =
      R"({"id":"a","instruction":"i","context":"c","code":"k","source":"s","tags":[]})";
  EXPECT_THAT(error_for(ok + "\n{not json\n"), HasSubstr("c.jsonl:2: not valid JSON"));
  EXPECT_THAT(error_for(ok + "\n\n[1,2]\n"), HasSubstr("c.jsonl:3: expected a JSON object"));
  EXPECT_THAT(error_for(R"({"id":"a","context":"c","code":"k"})"),
              HasSubstr("c.jsonl:1: missing field \"instruction\""));
  EXPECT_THAT(error_for(R"({"id":"a","instruction":3,"context":"c","code":"k"})"),
              HasSubstr("c.jsonl:1: field \"instruction\" must be a string"));
  EXPECT_THAT(error_for(R"({"id":"a","instruction":"i","context":"c","code":"k","tags":"x"})"),
              HasSubstr("c.jsonl:1: field \"tags\" must be a list of strings"));
  EXPECT_THAT(error_for(R"({"id":"a","instruction":"i","context":"c","code":"k","extra":1})"),
              HasSubstr("c.jsonl:1: unknown field \"extra\""));
  EXPECT_THAT(error_for(R"({"id":"","instruction":"i","context":"c","code":"k"})"),
              HasSubstr("c.jsonl:1: field \"id\" is empty"));
  EXPECT_EQ(error_for(ok + "\n" + ok + "\n"), "<no error>");
}

TEST(Triplet, MissingFileIsAUserError) {
  EXPECT_THROW(read_triplets("/nonexistent/dir/c.jsonl"), UserError);
}

}  // namespace
}  // namespace kernelrl
