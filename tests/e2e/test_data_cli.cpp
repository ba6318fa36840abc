// `kernelrl data build|stats|synth` end to end through the binary; bad input exits 2 with one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/corpus/triplet.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using testing::run_command;
using testing::ScratchDir;
using testing::write_text;

using testing::kBin;

TEST(DataCli, BuildStatsSynth) {
  ScratchDir dir;
  write_text(
      dir / "src/k.cu",
      "/// Copies n floats with a grid-stride loop, one element per thread per step.\n"
      "__global__ void copy_kernel(const float* x, float* y, int n) {\n"
      "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
      "    y[i] = x[i];\n}\n");
  write_text(dir / "docs/a.md", "A grid-stride loop lets any grid size cover all n elements.\n");
  auto r = run_command(kBin + " data build --from " + (dir / "src").string() + " --docs " +
                       (dir / "docs").string() + " --out " + (dir / "c.jsonl").string() +
                       " --set min_chars=50");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("triplets written 1"));
  auto ts = read_triplets(dir / "c.jsonl");
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_THAT(ts[0].context, HasSubstr("grid-stride loop lets any grid size"));

  r = run_command(kBin + " data stats " + (dir / "c.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("triplets 1"));
  EXPECT_THAT(r.output, HasSubstr("kernel"));

  r = run_command(kBin + " data synth --families all --n 22 --out " + (dir / "s.jsonl").string() +
                  " --tasks " + KERNELRL_SOURCE_DIR + "/configs/tasks/general.yaml --emit-dir " +
                  (dir / "emit").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto syn = read_triplets(dir / "s.jsonl");
  EXPECT_EQ(syn.size(), 22u);
  EXPECT_TRUE(std::filesystem::exists(dir / "emit/manifest.jsonl"));
}

TEST(DataCli, BadInputExitsTwoWithOneLine) {
  ScratchDir dir;
  auto r = run_command(kBin + " data build --from " + (dir / "missing").string() + " --out " +
                       (dir / "c.jsonl").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("does not exist"));
  write_text(dir / "bad.jsonl", "{\"id\": 1}\n");
  r = run_command(kBin + " data stats " + (dir / "bad.jsonl").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("bad.jsonl:1:"));
  r = run_command(kBin + " data build --from " + dir.path().string() + " --out " +
                  (dir / "c.jsonl").string() + " --set min_chars=abc");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("min_chars"));
  r = run_command(kBin + " data synth --families nope --n 2 --out " + (dir / "s.jsonl").string() +
                  " --tasks " + KERNELRL_SOURCE_DIR + "/configs/tasks/general.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown family \"nope\""));
}

}  // namespace
}  // namespace kernelrl
