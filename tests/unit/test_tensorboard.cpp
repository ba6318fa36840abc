// TensorBoard event files: CRC-32C against the standard check value, and the file read back by
// TensorBoard's own EventAccumulator (the independent reference; skipped without it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/tensorboard.h"
#include "test_util.h"

namespace kernelrl {
namespace {

TEST(TensorBoard, Crc32cCheckValue) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C catalogue's check value
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(TensorBoard, EventFileReadsBackInTensorBoard) {
  testing::ScratchDir dir;
  {
    TensorBoardWriter tb(dir / "tb");
    for (int step = 1; step <= 3; ++step) {
      tb.scalar("reward/mean", 0.5 * step, step);
      tb.scalar("loss", 1.0 / step, step);
    }
  }
  auto r = testing::run_command(std::string(KERNELRL_PYTHON) + " " + KERNELRL_SOURCE_DIR +
                                "/tests/golden/read_tensorboard.py " + (dir / "tb").string());
  if (r.exit_code == 3) GTEST_SKIP() << "python package tensorboard not installed";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("reward/mean 2 1\n"));
  EXPECT_THAT(r.output, ::testing::HasSubstr("reward/mean 3 1.5\n"));
  EXPECT_THAT(r.output, ::testing::HasSubstr("loss 3 0.333333\n"));
}

}  // namespace
}  // namespace kernelrl
