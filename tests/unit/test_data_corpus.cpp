// Corpus builder on a small tree: unit filtering, exact and near duplicates, BM25 context from
// --docs, instructions from doc comments and features, and `data stats` counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/corpus/corpus_builder.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::write_text;

const char* kKernels = R"(
/// Scales a vector by a constant factor using a grid-stride loop over all elements.
__global__ void scale_kernel(float* x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    x[i] = a * x[i];
  }
}

/// Block reduction of partial sums staged in shared memory, then one atomic per block.
__global__ void reduce_kernel(const float* x, float* out, int n) {
  __shared__ float buf[256];
  buf[threadIdx.x] = threadIdx.x < n ? x[threadIdx.x] : 0.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (int i = 0; i < 256; ++i) s += buf[i];
    atomicAdd(out, s);
  }
}

__device__ int tiny() { return 1; }
)";

TEST(CorpusBuilder, BuildsTripletsWithContextAndDropsDuplicates) {
  ScratchDir dir;
  write_text(dir / "src/a.cu", kKernels);
  // An exact duplicate (other whitespace) and a near duplicate (one identifier renamed).
  std::string dup = kKernels;
  dup.insert(dup.find("x[i] = a"), "  ");
  write_text(dir / "src/sub/b.cuh", dup);
  std::string near = kKernels;
  near.replace(near.find("buf[threadIdx.x] ="), 3, "tmp");
  near.replace(near.find("scale_kernel"), 12, "scale_kernel2");
  write_text(dir / "src/sub/c.cuh", near.substr(0, near.find("__device__ int tiny")));
  write_text(dir / "src/notes.txt", "__global__ void ignored() { not scanned, wrong extension }");
  write_text(dir / "docs/guide.md",
             "# Shared memory\n\nShared memory reductions stage partial sums per block and "
             "finish with an atomic add.\n\n# Loops\n\nA grid-stride loop covers all elements "
             "with any grid size.\n");
  CorpusBuildConfig cfg;
  cfg.min_chars = 60;
  auto rep = build_corpus(cfg, {dir / "src"}, {dir / "docs"}, dir / "out.jsonl");
  EXPECT_EQ(rep.files_scanned, 3);
  EXPECT_EQ(rep.dropped_short, 2);     // tiny() in a.cu and in b.cuh
  EXPECT_EQ(rep.exact_duplicates, 2);  // b.cuh's two kernels
  EXPECT_GE(rep.near_duplicates, 1);   // c.cuh's reduce_kernel
  auto ts = read_triplets(dir / "out.jsonl");
  ASSERT_EQ(static_cast<int64_t>(ts.size()), rep.written);
  ASSERT_GE(ts.size(), 2u);
  const Triplet& scale = ts[0];
  EXPECT_THAT(scale.instruction, HasSubstr("CUDA kernel `scale_kernel`"));
  EXPECT_THAT(scale.instruction, HasSubstr("grid-stride loop over all elements"));
  EXPECT_THAT(scale.context, HasSubstr("[guide.md]"));
  EXPECT_THAT(scale.context, HasSubstr("grid-stride loop covers all elements"));
  EXPECT_EQ(scale.code.substr(0, 10), "__global__");
  EXPECT_THAT(scale.source, HasSubstr("src/a.cu:3"));
  const Triplet& red = ts[1];
  EXPECT_THAT(red.instruction, HasSubstr("shared memory"));
  EXPECT_THAT(red.instruction, HasSubstr("atomic operations"));
  EXPECT_THAT(red.tags, ::testing::IsSupersetOf({"kernel", "shared_memory", "atomics"}));
  for (const auto& t : ts) EXPECT_FALSE(t.context.empty()) << t.id;

  auto st = corpus_stats(dir / "out.jsonl");
  EXPECT_EQ(st.triplets, static_cast<int64_t>(ts.size()));
  EXPECT_EQ(st.duplicate_ids + st.exact_duplicate_code + st.near_duplicate_code, 0);
  EXPECT_EQ(st.tags["kernel"], rep.kinds["kernel"]);
  EXPECT_THAT(st.format(), HasSubstr("tags:"));
}

TEST(CorpusBuilder, StatsCountDuplicates) {
  ScratchDir dir;
  Triplet a{"a", "i",
            "c", "__global__ void k(float* x) { x[0] = 1.0f; x[1] = 2.0f; x[2] = 3.0f; }",
            "",  {"kernel"}};
  Triplet b = a;
  b.id = "b";
  Triplet c = a;  // same id, other code
  c.code = "int f() { return 42; }";
  write_triplets(dir / "d.jsonl", {a, b, c});
  auto st = corpus_stats(dir / "d.jsonl");
  EXPECT_EQ(st.triplets, 3);
  EXPECT_EQ(st.duplicate_ids, 1);
  EXPECT_EQ(st.exact_duplicate_code, 1);
  EXPECT_EQ(st.tags["kernel"], 3);
}

TEST(CorpusBuilder, MissingInputIsAUserError) {
  ScratchDir dir;
  CorpusBuildConfig cfg;
  EXPECT_THROW(build_corpus(cfg, {dir / "nope"}, {}, dir / "o.jsonl"), UserError);
  EXPECT_THAT(split_passages("a b\n\nc d\n", 1000), ::testing::ElementsAre("a b c d"));
  EXPECT_THAT(split_passages("aaaa bbbb\n\ncccc", 9), ::testing::ElementsAre("aaaa bbbb", "cccc"));
}

}  // namespace
}  // namespace kernelrl
