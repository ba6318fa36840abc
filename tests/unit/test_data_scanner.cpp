// Source scanner (units, comments, strings, preprocessor, nesting), feature detection, MinHash
// near-duplicate detection against exact Jaccard, BM25 against hand-computed scores.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "data/corpus/bm25.h"
#include "data/corpus/minhash.h"
#include "data/corpus/source_scanner.h"

namespace kernelrl {
namespace {

const char* kSource = R"SRC(
// A file comment.
#include <cuda_fp16.h>
#define OPEN_BRACE {   /* a macro with a brace: must not open a scope */
#define MULTI(x) \
  do { x; } while (0)

namespace outer {
namespace inner {

/// Adds two halves with "braces" in a string: "{".
__device__ __forceinline__ __half add_h(__half a, __half b) {
  const char* s = "}}}";  // braces in a string
  char c = '}';
  return __hadd(a, b);
}

}  // namespace inner

/** Reduces a block in shared memory.
 *  Uses warp shuffles. */
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) block_sum(const float* x, float* y) {
  __shared__ float buf[BLOCK];
  float v = x[threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  /* } a brace in a comment */
  atomicAdd(y, v);
}

struct Accum : public Base {
 public:
  Accum() : total_{0}, count_(0) { reset(); }
  float mean() const { return total_ / count_; }
 private:
  float total_;
  int count_;
};

int table[] = {1, 2, 3};
const char* raw = R"delim(not { a scope )" } )delim";
}  // namespace outer

int host_fn(int a) {
#if FOO
  if (a) {
#else
  if (!a) {
#endif
    return 1;
  }
  return 0;
}
)SRC";

TEST(SourceScanner, FindsUnitsAndRespectsCommentsStringsAndPreprocessor) {
  auto units = scan_source(kSource);
  std::vector<std::string> got;
  for (const auto& u : units) got.push_back(u.kind + " " + u.name);
  EXPECT_THAT(
      got, ::testing::ElementsAre("device_function outer::inner::add_h", "kernel outer::block_sum",
                                  "class outer::Accum", "function outer::Accum::Accum",
                                  "function outer::Accum::mean", "function host_fn"));
  const SourceUnit& add = units[0];
  EXPECT_EQ(add.doc, "Adds two halves with \"braces\" in a string: \"{\".");
  EXPECT_EQ(add.line, 12);
  EXPECT_EQ(add.code.substr(0, 10), "__device__");
  EXPECT_EQ(add.code.back(), '}');
  EXPECT_NE(add.code.find("return __hadd(a, b);"), std::string::npos);
  const SourceUnit& k = units[1];
  EXPECT_TRUE(k.is_template);
  EXPECT_EQ(k.doc, "Reduces a block in shared memory. Uses warp shuffles.");
  EXPECT_NE(k.code.find("atomicAdd(y, v);\n}"), std::string::npos);
  EXPECT_EQ(k.code.substr(0, 8), "template");
  // The #if/#else branches each open a brace: the scanner skips preprocessor lines, so the
  // function still ends at its own closing brace.
  EXPECT_NE(units.back().code.find("return 0;\n}"), std::string::npos);
}

TEST(SourceScanner, DetectsFeatures) {
  auto units = scan_source(kSource);
  auto f = detect_features(units[1].code);
  std::set<std::string> s(f.begin(), f.end());
  for (const char* want : {"shared_memory", "warp_shuffle", "atomics", "launch_bounds", "loops"})
    EXPECT_TRUE(s.count(want)) << want;
  EXPECT_FALSE(s.count("tensor_core_mma"));
  auto g = detect_features("asm volatile(\"mma.sync.aligned.m16n8k16 ...\"); cp.async.cg ldmatrix");
  std::set<std::string> t(g.begin(), g.end());
  EXPECT_TRUE(t.count("tensor_core_mma") && t.count("cp_async") && t.count("ldmatrix") &&
              t.count("inline_ptx"));
}

TEST(SourceScanner, CleansCommentMarkers) {
  EXPECT_EQ(clean_comment("/**\n * \\brief Adds.\n * More text.\n */"), "Adds. More text.");
  EXPECT_EQ(clean_comment("/// one\n/// two"), "one two");
  EXPECT_EQ(words_of("blockReduce_sum2 HTTP"),
            (std::vector<std::string>{"blockreduce_sum2", "block", "reduce", "sum2", "http"}));
}

// Exact Jaccard of the shingle sets, computed independently of the MinHash code.
double exact_jaccard(const std::string& a, const std::string& b, size_t k) {
  auto shingles = [&](const std::string& s) {
    auto t = code_tokens(s);
    std::set<std::string> out;
    for (size_t i = 0; i + k <= t.size(); ++i) {
      std::string sh;
      for (size_t j = i; j < i + k; ++j) sh += t[j] + "\x1f";
      out.insert(sh);
    }
    return out;
  };
  auto sa = shingles(a), sb = shingles(b);
  size_t inter = 0;
  for (const auto& x : sa) inter += sb.count(x);
  return static_cast<double>(inter) / static_cast<double>(sa.size() + sb.size() - inter);
}

TEST(MinHash, EstimateTracksExactJaccardAndFlagsNearDuplicates) {
  std::string base;
  for (int i = 0; i < 60; ++i)
    base += "acc" + std::to_string(i) + " += x[" + std::to_string(i) + "] * w;\n";
  std::string near = base;
  near.replace(near.find("acc7"), 4, "accX");  // one token changed
  std::string far;
  for (int i = 0; i < 60; ++i)
    far += "y[" + std::to_string(i) + "] = max(y, " + std::to_string(i * 3) + ");\n";
  MinHashDeduper d(/*num_perm=*/256, /*bands=*/32, /*shingle=*/5, /*threshold=*/0.8);
  for (const auto& other : {near, far}) {
    double est = MinHashDeduper::estimate_jaccard(d.signature(base), d.signature(other));
    double ex = exact_jaccard(base, other, 5);
    // Standard error of the estimate: sqrt(J(1-J)/P) <= 0.032 for P = 256; allow 4 sigma.
    EXPECT_NEAR(est, ex, 0.13) << "exact " << ex;
  }
  EXPECT_FALSE(d.is_duplicate_then_add(base));
  EXPECT_TRUE(d.is_duplicate_then_add(near));
  EXPECT_FALSE(d.is_duplicate_then_add(far));
}

TEST(Bm25, ScoresMatchTheFormulaByHand) {
  Bm25Index idx(/*k1=*/1.2, /*b=*/0.75);
  idx.add("shared memory tiling");        // 3 words
  idx.add("warp shuffle reduction");      // 3 words
  idx.add("shared memory shared banks");  // 4 words
  idx.add("tensor core mma");             // 3 words
  idx.finalize();
  // Query "banks": df=1 (doc 2), N=4, avgdl=13/4, |d2|=4, tf=1.
  double idf = std::log(1 + (4 - 1 + 0.5) / (1 + 0.5));
  double norm = 1.2 * (1 - 0.75 + 0.75 * 4 / 3.25);
  double want = idf * 1 * 2.2 / (1 + norm);
  auto hits = idx.search("banks", 3, -1, /*max_df_fraction=*/1.0);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].doc, 2);
  EXPECT_NEAR(hits[0].score, want, 1e-12);
  // "shared": df=2; doc 2 has tf=2 and ranks first; excluding it leaves doc 0.
  hits = idx.search("shared", 3, -1, 1.0);
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].doc, 2);
  EXPECT_EQ(hits[1].doc, 0);
  hits = idx.search("shared", 3, /*exclude=*/2, 1.0);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].doc, 0);
  // Words in more than max_df_fraction of the passages are ignored, in an index of >= 100.
  EXPECT_EQ(idx.search("shared", 3, -1, 0.25).size(), 2u);
  Bm25Index big;
  for (int i = 0; i < 100; ++i)
    big.add(std::string(i % 2 ? "common word" : "common other") + (i == 7 ? " rare" : ""));
  big.finalize();
  EXPECT_TRUE(big.search("common", 3).empty());
  EXPECT_TRUE(big.search("other", 3).empty());
  auto rare = big.search("rare other", 3);
  ASSERT_EQ(rare.size(), 1u);
  EXPECT_EQ(rare[0].doc, 7);
}

}  // namespace
}  // namespace kernelrl
