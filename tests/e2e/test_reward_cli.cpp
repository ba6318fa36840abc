// `kernelrl eval` and `kernelrl bench` end to end on the host backend: verdict table, JSON,
// exit codes (0 passed, 1 failed, 2 bad input), the bench CSV with its summary rows and resume.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace kernelrl {
namespace {

std::string kernels() { return std::string(KERNELRL_SOURCE_DIR) + "/tests/data/kernels/"; }

TEST(RewardCli, EvalPassFailAndBadInput) {
  testing::ScratchDir dir;
  std::string common = " --backend host --cache-dir " + (dir / "cache").string() + " --store " +
                       (dir / "r.sqlite").string() + " --l2 hot";
  auto ok = testing::run_kernelrl("eval " + kernels() + "host_hgemm_ok.cpp --shape 16x24x64" + common +
                                  " --json " + (dir / "r.json").string());
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("verdict  ok"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("torch"), std::string::npos) << ok.output;
  auto j = nlohmann::json::parse(testing::read_text(dir / "r.json"));
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["backend"], "host");
  EXPECT_GT(j["candidate"]["median_us"].get<double>(), 0);

  auto bad = testing::run_kernelrl("eval " + kernels() + "host_unwritten.cpp --shape 16x24x64" + common);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("unwritten_output"), std::string::npos) << bad.output;

  auto shape = testing::run_kernelrl("eval " + kernels() + "host_hgemm_ok.cpp --shape 16x24" + common);
  EXPECT_EQ(shape.exit_code, 2) << shape.output;
  EXPECT_NE(shape.output.find("kernelrl: error: shape \"16x24\""), std::string::npos) << shape.output;
  auto missing = testing::run_kernelrl("eval /nonexistent.cu --shape 1x1x1" + common);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
}

TEST(RewardCli, BenchWritesCsvWithSummaryAndResumes) {
  testing::ScratchDir dir;
  auto kdir = dir / "kernels";
  testing::write_text(kdir / "16_24_64.cpp", testing::read_text(kernels() + "host_hgemm_ok.cpp"));
  testing::write_text(kdir / "32_16_64.cpp", testing::read_text(kernels() + "host_hgemm_ok.cpp"));
  testing::write_text(dir / "grid.txt", "# three shapes, one without a kernel\n16x24x64\n32x16x64\n8x8x8\n");
  std::string cmd = "bench --kernels " + kdir.string() + " --grid " + (dir / "grid.txt").string() +
                    " --out " + (dir / "out.csv").string() + " --backend host --l2 hot --cache-dir " +
                    (dir / "cache").string();
  auto r = testing::run_kernelrl(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string csv = testing::read_text(dir / "out.csv");
  EXPECT_NE(csv.find("M,N,K,status,check,t_cand_us,cv,t_cand_call_us,torch_us,torch_call_us,speedup_torch,reward"), std::string::npos) << csv;
  EXPECT_NE(csv.find("16,24,64,ok"), std::string::npos) << csv;
  EXPECT_NE(csv.find("8,8,8,missing"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nmean,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nwins,"), std::string::npos) << csv;
  EXPECT_NE(r.output.find("2 passed, 1 missing"), std::string::npos) << r.output;
  auto again = testing::run_kernelrl(cmd);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("(2 from the store)"), std::string::npos) << again.output;
}

}  // namespace
}  // namespace kernelrl
