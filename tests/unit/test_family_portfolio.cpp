// The per-shape pruning of family sweeps (data/family_portfolio.h): the curated candidate lists
// exist in the generators, the arch gate holds, the cost model's numbers match a hand
// computation, and the picks follow the tile-fit rules at the shapes where they matter
// (large square, tiny, skinny with a deep K).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/error.h"
#include "data/family_portfolio.h"
#include "data/tasks/task_suite.h"

namespace kernelrl {
namespace {

int64_t variant_param(const KernelVariant& v, const char* name) {
  for (const auto& [k, x] : v.params)
    if (k == name) return x;
  return -1;
}

const std::vector<std::string> kHopper = {"hgemm_wgmma", "hgemm_cutlass"};

int count(const std::vector<KernelVariant>& vs, const std::string& family) {
  int n = 0;
  for (const auto& v : vs) n += v.family == family;
  return n;
}

TEST(FamilyPortfolio, CuratedListsExistInBothLayoutsAndAreDistinct) {
  PortfolioOptions all;
  all.per_family = 0;
  for (const std::string layout : {"nn", "tn"}) {
    auto vs = shape_portfolio(hgemm_task(4096, 4096, 4096, layout), kHopper, "sm_90a", all);
    EXPECT_EQ(count(vs, "hgemm_wgmma"), 20) << layout;
    EXPECT_EQ(count(vs, "hgemm_cutlass"), 12) << layout;
    std::set<std::string> names;
    for (const auto& v : vs) {
      EXPECT_EQ(v.layout, layout);
      EXPECT_EQ(v.acc, "f32");
      names.insert(v.name);
    }
    EXPECT_EQ(names.size(), vs.size());
  }
  // Families without a curated list offer every variant of the layout and accumulation.
  auto mma = shape_portfolio(hgemm_task(256, 256, 256, "tn", "f16"), {"hgemm_mma"}, "sm_80", all);
  size_t expected = 0;
  for (const auto& v : hgemm_family_variants("hgemm_mma"))
    expected += v.layout == "tn" && v.acc == "f16";
  EXPECT_EQ(mma.size(), expected);
}

TEST(FamilyPortfolio, HopperFamiliesOnlyOnSm90aAndBadNamesAreErrors) {
  const TaskSpec t = hgemm_task(1024, 1024, 1024);
  EXPECT_TRUE(shape_portfolio(t, kHopper, "sm_80").empty());
  EXPECT_EQ(shape_portfolio(t, kHopper, "sm_90a").size(), 6u);
  EXPECT_THROW(shape_portfolio(t, {"hgemm_nope"}, "sm_90a"), UserError);
  EXPECT_THROW(shape_portfolio(t, {"softmax"}, "sm_90a"), UserError);
}

TEST(FamilyPortfolio, ModelMatchesAHandComputation) {
  // 8192^3 on 132 SMs, 128x256 tile: 32·64 = 2048 tiles, 16 waves (2048/132 = 15.5),
  // each 2·128·256·8192 / 5.5e12 s = 97.6 us (e = 1): 1561.8 us + 3 us.
  const TaskSpec big = hgemm_task(8192, 8192, 8192);
  KernelVariant v;
  v.family = "hgemm_wgmma";
  v.params = {{"BM", 128}, {"BN", 256}, {"SPLITK", 1}};
  EXPECT_NEAR(portfolio_model_us(v, big, 132), 16 * 2.0 * 128 * 256 * 8192 / 5.5e12 * 1e6 + 3,
              1e-6);
  // Split-K 4 of 64x128 tiles on 128x8192x8192: 2·64 = 128 tiles · 4 = 512 units, 4 waves of
  // 2·64·128·2048 / (5.5e12 · (8192/32768)^0.15) s, the reduction 2·4·128·8192·4 B / 3e12 B/s,
  // a second launch of 2 us and the fixed 3 us.
  const TaskSpec skinny = hgemm_task(128, 8192, 8192);
  v.params = {{"BM", 64}, {"BN", 128}, {"SPLITK", 4}};
  const double e = std::pow(64.0 * 128 / (128.0 * 256), 0.15);
  EXPECT_NEAR(portfolio_model_us(v, skinny, 132),
              4 * 2.0 * 64 * 128 * 2048 / (5.5e12 * e) * 1e6 +
                  2.0 * 4 * 128 * 8192 * 4 / 3e12 * 1e6 + 2 + 3,
              1e-6);
  // hgemm_wgmma runs a split as kernels/hgemm_wgmma.cuh's run<> does, and the model ranks it so:
  // 1024x1024 partials are 4 MiB, so 8 fit in the 32 MiB workspace and split 16 runs as 8;
  // K 3072 is 48 k-blocks, so split 32 runs as 24 ranges of 2 (no empty range).
  auto wgmma_us = [](int64_t split, const TaskSpec& t) {
    KernelVariant w;
    w.family = "hgemm_wgmma";
    w.params = {{"BM", 64}, {"BN", 128}, {"BK", 64}, {"SPLITK", split}};
    return portfolio_model_us(w, t, 132);
  };
  const TaskSpec square = hgemm_task(1024, 1024, 16384);
  EXPECT_DOUBLE_EQ(wgmma_us(16, square), wgmma_us(8, square));
  const TaskSpec short_k = hgemm_task(64, 64, 3072);
  EXPECT_DOUBLE_EQ(wgmma_us(32, short_k), wgmma_us(24, short_k));
  EXPECT_NE(wgmma_us(32, short_k), wgmma_us(16, short_k));
  // Stream-K (hgemm_cutlass SCHED 2) has no wave tail: 1.05 · 64 tiles of 128x128 over 132 SMs.
  v.family = "hgemm_cutlass";
  v.params = {{"BM", 128}, {"BN", 128}, {"SCHED", 2}};
  const double e2 = std::pow(0.5, 0.15);
  EXPECT_NEAR(portfolio_model_us(v, skinny, 132),
              1.05 * 64 * 2.0 * 128 * 128 * 8192 / (132 * 5.5e12 * e2) * 1e6 + 3, 1e-6);
}

TEST(FamilyPortfolio, PicksFollowTheShape) {
  // Large square: the measured leaders (docs/benchmarks.md) are in.
  auto big = shape_portfolio(hgemm_task(8192, 8192, 8192, "tn"), kHopper, "sm_90a");
  ASSERT_EQ(big.size(), 6u);
  bool wgmma_leader = false, cutlass_big = false;
  for (const auto& v : big) {
    wgmma_leader |= v.family == "hgemm_wgmma" && variant_param(v, "BM") == 128 &&
                    variant_param(v, "BN") == 256 && variant_param(v, "STAGES") == 4 &&
                    variant_param(v, "SPLITK") == 1;
    cutlass_big |=
        v.family == "hgemm_cutlass" && variant_param(v, "BM") * variant_param(v, "BN") == 128 * 256;
    EXPECT_EQ(variant_param(v, "SPLITK") > 1, false) << v.name;  // no split-K with 2048 tiles
  }
  EXPECT_TRUE(wgmma_leader);
  EXPECT_TRUE(cutlass_big);
  // Tiny: small tiles only; each family's first pick is its smallest tile (wgmma 64x128 or
  // 128x64, CUTLASS ping-pong 64x64).
  auto tiny = shape_portfolio(hgemm_task(64, 64, 64), kHopper, "sm_90a");
  ASSERT_EQ(tiny.size(), 6u);
  for (const auto& v : tiny)
    EXPECT_LE(variant_param(v, "BM") * variant_param(v, "BN"), 128 * 128) << v.name;
  EXPECT_EQ(variant_param(tiny[0], "BM") * variant_param(tiny[0], "BN"), 64 * 128) << tiny[0].name;
  EXPECT_EQ(variant_param(tiny[3], "BM") * variant_param(tiny[3], "BN"), 64 * 64) << tiny[3].name;
  // Skinny with a deep K (64 tiles of 128x128 on 132 SMs): split-K or stream-K is offered by
  // each family, and no family repeats a class (tile, split, schedule) in its three.
  auto skinny = shape_portfolio(hgemm_task(128, 8192, 8192), kHopper, "sm_90a");
  bool split = false, streamk = false;
  std::set<std::string> classes;
  for (const auto& v : skinny) {
    split |= v.family == "hgemm_wgmma" && variant_param(v, "SPLITK") > 1;
    streamk |= v.family == "hgemm_cutlass" && variant_param(v, "SCHED") == 2;
    EXPECT_TRUE(classes
                    .insert(v.family + std::to_string(variant_param(v, "BM")) + "x" +
                            std::to_string(variant_param(v, "BN")) + "/" +
                            std::to_string(variant_param(v, "SPLITK")) + "/" +
                            std::to_string(variant_param(v, "SCHED")))
                    .second)
        << v.name;
  }
  EXPECT_TRUE(split);
  EXPECT_TRUE(streamk);
  // One output tile, K 16384 (256 k-blocks): split 4 would leave 128 of 132 SMs idle, so the
  // wgmma picks are deep splits. 64x8192x8192 has 64 tiles of 64x128: split 4 gives every SM
  // a unit, so no deeper split is offered.
  for (const auto& v : shape_portfolio(hgemm_task(64, 64, 16384), kHopper, "sm_90a")) {
    if (v.family != "hgemm_wgmma") continue;
    EXPECT_GE(variant_param(v, "SPLITK"), 8) << v.name;
  }
  for (const auto& v : shape_portfolio(hgemm_task(64, 8192, 8192), kHopper, "sm_90a")) {
    if (v.family != "hgemm_wgmma") continue;
    EXPECT_LE(variant_param(v, "SPLITK"), 4) << v.name;
  }
}

}  // namespace
}  // namespace kernelrl
