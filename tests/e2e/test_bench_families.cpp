// `kernelrl bench --families` (the family grid sweep, reward/family_sweep.h) on the host backend,
// where hgemm_host's C++ variants run on the CPU: a sweep cut off by its time budget starts no
// shape, the next run fills the CSV (one row per shape, grid order, every number from the
// evaluator), a third run resumes everything and changes nothing, a foreign CSV and a family
// without host variants are one-line errors, and bench/plot_family_grid.py draws the CSV.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "test_util.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using testing::read_text;
using testing::run_command;
using testing::run_kernelrl;
using testing::ScratchDir;
using testing::write_text;

std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (!line.empty() && line.back() == ',') f.push_back("");
    rows.push_back(f);
  }
  return rows;
}

TEST(BenchFamilies, HostSweepRespectsTheBudgetThenFillsAndResumes) {
  ScratchDir dir;
  write_text(dir / "grid.txt", "# three host-sized shapes\n128x64x128\n64x64x64 tn\n64x128x64\n");
  const std::string base = "bench --families hgemm_host --backend host --grid " +
                           (dir / "grid.txt").string() + " --per-family 2 --seeds 1 --out " +
                           (dir / "sweep.csv").string() + " --cache-dir " +
                           (dir / "cache").string();
  // 1. A budget already spent when the first shape would start: nothing runs, header only.
  auto r = run_kernelrl(base + " --time-budget-s 0.001");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 shapes not started"));
  auto rows = csv_rows(read_text(dir / "sweep.csv"));
  ASSERT_EQ(rows.size(), 1u);
  const std::vector<std::string> h = rows[0];
  auto col = [&](const std::string& name) {
    auto it = std::find(h.begin(), h.end(), name);
    EXPECT_NE(it, h.end()) << name;
    return static_cast<size_t>(it - h.begin());
  };
  // 2. No budget: every shape, in the grid's order, two variants each, all passing.
  r = run_kernelrl(base);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 shapes evaluated in this run, 0 resumed"));
  const std::string filled = read_text(dir / "sweep.csv");
  rows = csv_rows(filled);
  ASSERT_EQ(rows.size(), 4u) << filled;
  const char* shapes[][4] = {
      {"128", "64", "128", "nn"}, {"64", "64", "64", "tn"}, {"64", "128", "64", "nn"}};
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    ASSERT_EQ(row.size(), h.size()) << filled;
    EXPECT_EQ(row[col("M")], shapes[i - 1][0]);
    EXPECT_EQ(row[col("N")], shapes[i - 1][1]);
    EXPECT_EQ(row[col("K")], shapes[i - 1][2]);
    EXPECT_EQ(row[col("layout")], shapes[i - 1][3]);
    EXPECT_EQ(row[col("variants")], "2");
    EXPECT_EQ(row[col("passed")], "2") << row[col("failures")];
    EXPECT_EQ(row[col("best_family")], "hgemm_host");
    EXPECT_THAT(row[col("best_variant")], HasSubstr("hgemm_host_" + std::string(shapes[i - 1][3])));
    const double best = std::stod(row[col("best_us")]), torch = std::stod(row[col("torch_us")]);
    EXPECT_GT(best, 0);
    EXPECT_NEAR(std::stod(row[col("speedup_torch")]), torch / best, 1e-3 * torch / best);
    EXPECT_EQ(row[col("hgemm_host_us")], row[col("best_us")]);
    const double mnk =
        std::stod(row[col("M")]) * std::stod(row[col("N")]) * std::stod(row[col("K")]);
    EXPECT_NEAR(std::stod(row[col("log2_mnk")]), std::log2(mnk), 1e-4);
  }
  std::string md = read_text(dir / "sweep.md");
  EXPECT_THAT(md, HasSubstr("3 of 3 shapes done"));
  EXPECT_THAT(md, HasSubstr("| torch | 3 |"));
  // 3. Everything resumes; the CSV is unchanged.
  r = run_kernelrl(base);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("0 shapes evaluated in this run, 3 resumed"));
  EXPECT_EQ(read_text(dir / "sweep.csv"), filled);

  // The plot of that CSV.
  const std::string png = (dir / "grid.png").string();
  auto p = run_command(std::string(KERNELRL_PYTHON) + " " + KERNELRL_SOURCE_DIR +
                       "/bench/plot_family_grid.py " + (dir / "sweep.csv").string() + " " + png +
                       " --baseline torch");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_EQ(read_text(png).substr(0, 4), "\x89PNG");
}

TEST(BenchFamilies, ForeignCsvAndWrongBackendAreOneLineErrors) {
  ScratchDir dir;
  write_text(dir / "other.csv", "M,N,K,status\n");
  auto r = run_kernelrl("bench --families hgemm_host --backend host --grid " +
                        std::string(KERNELRL_SOURCE_DIR) + "/configs/grids/host.txt --out " +
                        (dir / "other.csv").string() + " --cache-dir " + (dir / "c").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("its header is not this sweep's"));
  r = run_kernelrl("bench --families hgemm_wgmma --backend host --grid small --out " +
                   (dir / "w.csv").string() + " --cache-dir " + (dir / "c").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("hgemm_wgmma has no host variants"));
  r = run_kernelrl("bench --families hgemm_host --kernels " + dir.path().string());
  EXPECT_NE(r.exit_code, 0);  // --kernels and --families exclude each other
}

}  // namespace
}  // namespace kernelrl
