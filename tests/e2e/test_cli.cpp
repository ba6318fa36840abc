// The kernelrl binary as a user runs it: one-line errors with non-zero exits, --version,
// --help, resolved config output, and run-dir refusal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::run_kernelrl;
using testing::ScratchDir;
using testing::write_text;

using testing::kSrc;

using testing::count_lines;

TEST(Cli, MissingConfigIsOneLineAndNonZero) {
  auto r = run_kernelrl("train does-not-exist.yaml");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("config file 'does-not-exist.yaml' not found"));
}

TEST(Cli, UnknownOverrideKeyIsOneLineAndNonZero) {
  auto r = run_kernelrl("train " + kSrc + "/configs/quickstart.yaml foo.bar=1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("foo: unknown key"));
}

TEST(Cli, BadValueNamesKeyPath) {
  auto r = run_kernelrl("train " + kSrc + "/configs/quickstart.yaml rollout.sampling.top_p=abc");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("rollout.sampling.top_p: expected a number in (0, 1], got \"abc\""));
}

TEST(Cli, VersionNamesLibTorchAndCuda) {
  auto r = run_kernelrl("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, StartsWith("kernelrl "));
  EXPECT_THAT(r.output, HasSubstr("LibTorch 2."));
  EXPECT_THAT(r.output, HasSubstr("CUDA available: "));
}

TEST(Cli, EverySubcommandHasHelp) {
  for (const char* cmd : {"train", "sample", "eval", "bench", "sweep", "data", "tokenizer", "report"}) {
    SCOPED_TRACE(cmd);
    auto r = run_kernelrl(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("Usage"));
  }
}

TEST(Cli, PrintConfigShowsResolvedValuesWithOverrides) {
  auto r = run_kernelrl("train " + kSrc + "/configs/quickstart.yaml reward.alpha=0.75 --print-config");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("alpha: 0.75"));
}

TEST(Cli, ReportSummarisesMetrics) {
  ScratchDir dir;
  write_text(dir / "run/metrics.jsonl",
             "{\"step\":1,\"stage\":\"pre\",\"loss\":4.0}\n{\"step\":2,\"stage\":\"pre\",\"loss\":3.0}\n");
  auto r = run_kernelrl("report " + (dir / "run").string() + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"first\": 4.0"));
  EXPECT_THAT(r.output, HasSubstr("\"last\": 3.0"));
  auto bad = run_kernelrl("report " + dir.path().string());
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.output, HasSubstr("has no metrics.jsonl"));
}

}  // namespace
}  // namespace kernelrl
