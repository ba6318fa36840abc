// Kernel families on the GPU through reward/'s Evaluator (the RL reward's checks: NaN-poisoned
// outputs, guard bands, exact {0,1} sums, deviation bounded by cuBLAS/cuBLASLt on the same
// inputs, fresh buffers per trial): variants of every CUDA family must come back `ok`.
//   HGEMM: tiled, WMMA and mma.sync (the simple and the double-buffered main loop, split-K, both
//   layouts, fp32 and fp16 accumulation) on 192x320x448 (partial 128-wide tiles in M and N) and
//   the new main loop also on 256x384x4096 (integer sums above 2048: fp32 accumulation shows);
//   general: one CUDA variant of every general family on its suite task;
//   hgemm_small (sm_90a): every tile, split-K 1-16 through clusters, PDL on and off, both layouts.
// Negative controls (an mma variant that skips its last k-tile, a hgemm_small variant whose
// cluster reduction drops one block's partial) must be caught. Skips where no GPU is visible.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <set>

#include "data/families.h"
#include "data/tasks/task_ops.h"
#include "data/tasks/task_suite.h"
#include "gpu_test_util.h"
#include "reward/evaluator.h"
#include "test_util.h"

#ifdef KERNELRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace kernelrl {
namespace {

int64_t param(const KernelVariant& v, const char* name) {
  for (const auto& [k, x] : v.params)
    if (k == name) return x;
  return 0;
}

// The first variant of `family` with this layout and accumulation that `pred` accepts.
KernelVariant pick(const std::string& family, const std::string& layout, const std::string& acc,
                   const std::function<bool(const KernelVariant&)>& pred) {
  for (const auto& v : hgemm_family_variants(family))
    if (v.layout == layout && v.acc == acc && pred(v)) return v;
  ADD_FAILURE() << "no " << family << " " << layout << "/" << acc << " variant matches";
  return {};
}

struct Case {
  TaskSpec task;
  KernelVariant v;
};

RewardConfig gpu_config(const testing::ScratchDir& dir) {
  RewardConfig cfg;
  cfg.backend = "gpu";
  cfg.capture = test_capture();  // KERNELRL_TEST_CAPTURE
  cfg.baseline = "cublas-nn";  // no autotuning: this test checks correctness, not speed
  cfg.cache_dir = (dir / "cache").string();
  cfg.seeds = 2;
  cfg.warmup = 1;
  cfg.min_rounds = 3;
  cfg.max_rounds = 5;
  cfg.timing_budget_ms = 20;
  return cfg;
}

TEST(FamiliesGpu, VariantsOfEveryCudaFamilyPassTheEvaluator) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  Evaluator ev(gpu_config(dir), dir / "results.sqlite");
  const TaskSpec partial = hgemm_task(192, 320, 448, "nn"),
                 partial_tn = hgemm_task(192, 320, 448, "tn");
  const TaskSpec deep = hgemm_task(256, 384, 4096, "nn");
  auto any = [](const KernelVariant&) { return true; };
  auto dbuf = [](int bm, int bn, int bk, int split) {
    return [=](const KernelVariant& v) {
      return param(v, "DBUF") == 1 && param(v, "BM") == bm && param(v, "BN") == bn &&
             param(v, "BK") == bk && param(v, "SPLITK") == split && param(v, "GROUP") == 8;
    };
  };
  std::vector<Case> cases = {
      {partial, pick("hgemm_tiled", "nn", "f32", any)},
      {partial_tn, pick("hgemm_wmma", "tn", "f32",
                        [](const KernelVariant& v) { return param(v, "BM") == 128; })},
      // The simple main loop with the shared-memory epilogue (the best of the earlier runs).
      {partial, pick("hgemm_mma", "nn", "f32",
                     [](const KernelVariant& v) {
                       return param(v, "DBUF") == 0 && param(v, "EPI") == 1 &&
                              param(v, "BN") == 256;
                     })},
      // The double-buffered main loop: 8 warps (128x256x32 and 256x128x64), 4 warps, split-K.
      {partial, pick("hgemm_mma", "nn", "f32", dbuf(128, 256, 32, 1))},
      {deep, pick("hgemm_mma", "nn", "f32", dbuf(128, 256, 32, 1))},
      {partial_tn, pick("hgemm_mma", "tn", "f32", dbuf(256, 128, 64, 1))},
      {partial_tn, pick("hgemm_mma", "tn", "f32", dbuf(128, 128, 32, 1))},
      {partial, pick("hgemm_mma", "nn", "f32", dbuf(64, 64, 32, 4))},
      {hgemm_task(192, 320, 448, "tn", "f16"),
       pick("hgemm_mma", "tn", "f16", dbuf(128, 128, 64, 1))},
  };
  // One CUDA variant of every general family, on the first suite task of its category.
  std::set<std::string> categories;
  for (const auto& t :
       load_task_suite(std::string(KERNELRL_SOURCE_DIR) + "/configs/tasks/general.yaml")) {
    if (!categories.insert(find_op(t.op)->category).second) continue;
    auto vs = variants_for_task(t, "cuda");
    ASSERT_FALSE(vs.empty()) << t.name;
    cases.push_back({t, vs[categories.size() % vs.size()]});
  }
  EXPECT_EQ(categories.size(), 7u);

  std::vector<std::string> sources;
  for (const auto& c : cases) sources.push_back(c.v.source);
  EXPECT_EQ(ev.precompile(sources), static_cast<int>(sources.size()));  // all in parallel
  for (const auto& c : cases) {
    EvalResult r = ev.evaluate_one(c.task, c.v.source);
    std::printf("%-92s %-22s %s %.2f us (x%.3f %s)\n", c.v.name.c_str(), c.task.name.c_str(),
                status_name(r.status), r.cand.median_us, r.speedup, r.reference.c_str());
    EXPECT_EQ(r.status, EvalStatus::ok)
        << c.v.name << " on " << c.task.name << ": " << r.check << ": " << r.reason << "\n"
        << r.compile_log;
  }

  // Negative control: the double-buffered mma variant without its last k-tile.
  std::string bad = pick("hgemm_mma", "nn", "f32", dbuf(128, 256, 32, 1)).source;
  const std::string loop = "for (int kt = 0; kt < k_tiles; ++kt) {";
  const size_t dbuf_loop = bad.find(loop, bad.find("void mainloop_dbuf("));
  ASSERT_NE(dbuf_loop, std::string::npos);
  bad.replace(dbuf_loop, loop.size(), "for (int kt = 0; kt < k_tiles - 1; ++kt) {");
  EvalResult r = ev.evaluate_one(deep, bad);
  EXPECT_EQ(r.status, EvalStatus::wrong_answer) << r.check << ": " << r.reason;
}

// hgemm_wgmma (sm_90a only; skipped elsewhere): a sample covering both layouts, 2-CTA clusters,
// split-K, both epilogues and BK 128, on partial tiles in M, N and K (192x320x448: 448 is not a
// multiple of 128) and on a deep K. The deep splits run with fewer k-blocks per split than
// pipeline stages: 32 splits of 2 k-blocks (64x64x4096, one half-empty 128x64 tile), 7 of 1
// (K 448), 16 of 2 with each CTA walking ~8 units so that the stage ring wraps across units
// (512x1024x2048: 16 partials of 2 MiB fit the 32 MiB workspace, 32 do not), and 8 of 8
// (1024x1024x4096: a split 32 cut to the 8 partials of 4 MiB that fit). Negative control: the body
// with its last k-block dropped (producer and consumers alike, so it finishes) must be a wrong
// answer.
TEST(FamiliesGpu, WgmmaSamplePassesTheEvaluatorAndABrokenOneFails) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  Evaluator ev(gpu_config(dir), dir / "results.sqlite");
  if (ev.arch() != "sm_90a") GTEST_SKIP() << "hgemm_wgmma needs sm_90a, device is " << ev.arch();
  auto knobs = [](int bm, int bn, int bk, int cluster, int split, int epi) {
    return [=](const KernelVariant& v) {
      return param(v, "BM") == bm && param(v, "BN") == bn && param(v, "BK") == bk &&
             param(v, "CLUSTER") == cluster && param(v, "SPLITK") == split &&
             param(v, "EPI") == epi;
    };
  };
  const TaskSpec partial = hgemm_task(192, 320, 448, "nn"),
                 partial_tn = hgemm_task(192, 320, 448, "tn");
  const TaskSpec deep = hgemm_task(256, 384, 4096, "nn"),
                 deep_tn = hgemm_task(256, 384, 4096, "tn");
  std::vector<Case> cases = {
      {partial, pick("hgemm_wgmma", "nn", "f32", knobs(128, 256, 64, 1, 1, 1))},
      {partial_tn, pick("hgemm_wgmma", "tn", "f32", knobs(128, 256, 64, 2, 1, 1))},
      {partial, pick("hgemm_wgmma", "nn", "f32", knobs(256, 128, 64, 2, 1, 1))},
      {partial_tn, pick("hgemm_wgmma", "tn", "f32", knobs(256, 128, 64, 1, 1, 0))},
      {partial_tn, pick("hgemm_wgmma", "tn", "f32", knobs(128, 128, 128, 1, 1, 1))},
      {partial, pick("hgemm_wgmma", "nn", "f32", knobs(64, 128, 64, 1, 4, 0))},
      {deep, pick("hgemm_wgmma", "nn", "f32", knobs(128, 128, 64, 2, 4, 0))},
      {deep_tn, pick("hgemm_wgmma", "tn", "f32", knobs(128, 192, 64, 1, 1, 1))},
      {hgemm_task(64, 64, 4096, "nn"),
       pick("hgemm_wgmma", "nn", "f32", knobs(128, 64, 64, 1, 32, 0))},
      {partial_tn, pick("hgemm_wgmma", "tn", "f32", knobs(64, 128, 64, 1, 16, 0))},
      {hgemm_task(512, 1024, 2048, "tn"),
       pick("hgemm_wgmma", "tn", "f32", knobs(64, 128, 64, 1, 32, 0))},
      {hgemm_task(1024, 1024, 4096, "nn"),
       pick("hgemm_wgmma", "nn", "f32", knobs(128, 128, 64, 1, 32, 0))},
  };
  std::vector<std::string> sources;
  for (const auto& c : cases) sources.push_back(c.v.source);
  EXPECT_EQ(ev.precompile(sources), static_cast<int>(sources.size()));
  for (const auto& c : cases) {
    EvalResult r = ev.evaluate_one(c.task, c.v.source);
    std::printf("%-92s %-22s %s %.2f us (x%.3f %s)\n", c.v.name.c_str(), c.task.name.c_str(),
                status_name(r.status), r.cand.median_us, r.speedup, r.reference.c_str());
    EXPECT_EQ(r.status, EvalStatus::ok)
        << c.v.name << " on " << c.task.name << ": " << r.check << ": " << r.reason << "\n"
        << r.compile_log;
  }
  std::string bad = cases[0].v.source;
  const std::string kb = "sch.k_blocks = (K + BK - 1) / BK;";
  ASSERT_NE(bad.find(kb), std::string::npos);
  bad.replace(bad.find(kb), kb.size(), "sch.k_blocks = (K + BK - 1) / BK - 1;");
  EvalResult r = ev.evaluate_one(deep, bad);
  EXPECT_EQ(r.status, EvalStatus::wrong_answer) << r.check << ": " << r.reason;
}

// hgemm_cutlass (sm_90a only; skipped elsewhere): every schedule (cooperative, ping-pong,
// stream-K), clusters 1x1, 2x1 and 1x2, a raster/swizzle variant, both layouts, on partial
// tiles in M and N (192x320x448) and on a deep K where stream-K splits the k range of its few
// tiles (256x384x4096: 6 tiles of 128x128 on 132 SMs). Negative control: a variant that hands
// CUTLASS a K 64 short must be a wrong answer.
TEST(FamiliesGpu, CutlassSamplePassesTheEvaluatorAndABrokenOneFails) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  RewardConfig cfg = gpu_config(dir);
  cfg.compile_timeout_s = 600;  // nvcc takes ~1-2 min of a core per CUTLASS sm90 kernel
  Evaluator ev(cfg, dir / "results.sqlite");
  if (ev.arch() != "sm_90a") GTEST_SKIP() << "hgemm_cutlass needs sm_90a, device is " << ev.arch();
  auto knobs = [](int bm, int bn, int cm, int cn, int sched, int swizzle) {
    return [=](const KernelVariant& v) {
      return param(v, "BM") == bm && param(v, "BN") == bn && param(v, "CM") == cm &&
             param(v, "CN") == cn && param(v, "SCHED") == sched && param(v, "SWIZZLE") == swizzle;
    };
  };
  const TaskSpec partial = hgemm_task(192, 320, 448, "nn"),
                 partial_tn = hgemm_task(192, 320, 448, "tn");
  const TaskSpec deep = hgemm_task(256, 384, 4096, "nn"),
                 deep_tn = hgemm_task(256, 384, 4096, "tn");
  std::vector<Case> cases = {
      {partial, pick("hgemm_cutlass", "nn", "f32", knobs(128, 256, 1, 1, 0, 1))},
      {partial_tn, pick("hgemm_cutlass", "tn", "f32", knobs(128, 128, 2, 1, 0, 1))},
      {partial, pick("hgemm_cutlass", "nn", "f32", knobs(64, 128, 1, 2, 1, 1))},
      {partial_tn, pick("hgemm_cutlass", "tn", "f32", knobs(128, 64, 1, 1, 1, 1))},
      {deep, pick("hgemm_cutlass", "nn", "f32", knobs(128, 128, 1, 1, 2, 1))},
      {deep_tn, pick("hgemm_cutlass", "tn", "f32", knobs(256, 128, 2, 1, 2, 1))},
      {deep_tn, pick("hgemm_cutlass", "tn", "f32", knobs(128, 256, 2, 1, 0, 8))},
  };
  std::vector<std::string> sources;
  for (const auto& c : cases) sources.push_back(c.v.source);
  EXPECT_EQ(ev.precompile(sources), static_cast<int>(sources.size()));
  for (const auto& c : cases) {
    EvalResult r = ev.evaluate_one(c.task, c.v.source);
    std::printf("%-92s %-22s %s %.2f us (x%.3f %s)\n", c.v.name.c_str(), c.task.name.c_str(),
                status_name(r.status), r.cand.median_us, r.speedup, r.reference.c_str());
    EXPECT_EQ(r.status, EvalStatus::ok)
        << c.v.name << " on " << c.task.name << ": " << r.check << ": " << r.reason << "\n"
        << r.compile_log;
  }
  std::string bad = cases[4].v.source;
  const std::string shape = "{int(M), int(N), int(K), 1}";
  ASSERT_NE(bad.find(shape), std::string::npos);
  bad.replace(bad.find(shape), shape.size(), "{int(M), int(N), int(K) - 64, 1}");
  EvalResult r = ev.evaluate_one(deep, bad);
  EXPECT_EQ(r.status, EvalStatus::wrong_answer) << r.check << ": " << r.reason;
}

// hgemm_small (sm_90a only; skipped elsewhere): every tile with and without split-K, splits 2-16
// (one cluster per output tile, reduced through distributed shared memory), PDL on and off, both
// layouts, on partial tiles in M and N (192x320x448: 448 is 7 k-tiles of 64, so a split of 4 or
// 8 leaves ranks with fewer or no k-tiles), a deep K (256x384x4096: integer sums above 2048, where
// fp32 accumulation shows) and one tile split 16 ways (64x64x4096), both epilogues, BK 128.
// Negative control: the cluster reduction without block 0's partial must be a wrong answer.
TEST(FamiliesGpu, SmallSamplePassesTheEvaluatorAndABrokenOneFails) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  Evaluator ev(gpu_config(dir), dir / "results.sqlite");
  if (ev.arch() != "sm_90a") GTEST_SKIP() << "hgemm_small needs sm_90a, device is " << ev.arch();
  auto knobs = [](int bm, int bn, int bk, int split, int pdl, int epi = 1) {
    return [=](const KernelVariant& v) {
      return param(v, "BM") == bm && param(v, "BN") == bn && param(v, "BK") == bk &&
             param(v, "SPLITK") == split && param(v, "PDL") == pdl && param(v, "EPI") == epi;
    };
  };
  const TaskSpec partial = hgemm_task(192, 320, 448, "nn"),
                 partial_tn = hgemm_task(192, 320, 448, "tn");
  const TaskSpec deep = hgemm_task(256, 384, 4096, "nn"),
                 deep_tn = hgemm_task(256, 384, 4096, "tn");
  std::vector<Case> cases = {
      {partial, pick("hgemm_small", "nn", "f32", knobs(32, 32, 64, 1, 1, 0))},
      {partial_tn, pick("hgemm_small", "tn", "f32", knobs(32, 32, 128, 1, 1))},
      {partial, pick("hgemm_small", "nn", "f32", knobs(32, 64, 128, 1, 0))},
      {partial_tn, pick("hgemm_small", "tn", "f32", knobs(32, 64, 64, 2, 0))},
      {partial, pick("hgemm_small", "nn", "f32", knobs(64, 32, 64, 4, 1))},
      {partial_tn, pick("hgemm_small", "tn", "f32", knobs(64, 64, 64, 8, 1))},
      {partial, pick("hgemm_small", "nn", "f32", knobs(64, 64, 64, 1, 0, 0))},
      {partial_tn, pick("hgemm_small", "tn", "f32", knobs(64, 128, 32, 4, 1))},
      {partial, pick("hgemm_small", "nn", "f32", knobs(128, 64, 32, 2, 1))},
      {partial_tn, pick("hgemm_small", "tn", "f32", knobs(128, 128, 32, 1, 1))},
      {deep, pick("hgemm_small", "nn", "f32", knobs(128, 128, 32, 8, 0))},
      {deep_tn, pick("hgemm_small", "tn", "f32", knobs(64, 64, 64, 16, 1))},
      {deep, pick("hgemm_small", "nn", "f32", knobs(32, 32, 64, 16, 1))},
      {hgemm_task(64, 64, 4096, "nn"), pick("hgemm_small", "nn", "f32", knobs(64, 64, 64, 16, 1))},
      {hgemm_task(64, 64, 4096, "tn"), pick("hgemm_small", "tn", "f32", knobs(32, 64, 128, 16, 0))},
  };
  std::vector<std::string> sources;
  for (const auto& c : cases) sources.push_back(c.v.source);
  EXPECT_EQ(ev.precompile(sources), static_cast<int>(sources.size()));
  for (const auto& c : cases) {
    EvalResult r = ev.evaluate_one(c.task, c.v.source);
    std::printf("%-92s %-22s %s %.2f us (x%.3f %s)\n", c.v.name.c_str(), c.task.name.c_str(),
                status_name(r.status), r.cand.median_us, r.speedup, r.reference.c_str());
    EXPECT_EQ(r.status, EvalStatus::ok)
        << c.v.name << " on " << c.task.name << ": " << r.check << ": " << r.reason << "\n"
        << r.compile_log;
  }
  // Block 0 always has k-tiles (a later block may have none when K is short): drop its partial.
  std::string bad = cases[5].v.source;
  const std::string sum = "for (int q = 0; q < S; ++q) {";
  ASSERT_NE(bad.find(sum), std::string::npos);
  bad.replace(bad.find(sum), sum.size(), "for (int q = 1; q < S; ++q) {");
  EvalResult r = ev.evaluate_one(partial_tn, bad);
  EXPECT_EQ(r.status, EvalStatus::wrong_answer) << r.check << ": " << r.reason;
}

}  // namespace
}  // namespace kernelrl
