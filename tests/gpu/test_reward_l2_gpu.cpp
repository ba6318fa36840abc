// Cold means cold, whatever the candidate does (issue 38; docs/sandbox.md "Cold means cold") and
// what a timed call may overlap (docs/timing.md). The two cold-L2 fixtures (inputs loaded with an
// L2 evict_last policy; the next timing set prefetched by the stride learned at capture) must
// time within the noise of the plain tiled kernel they modify; under the protocol before issue
// 38 (one memset flush, sets at a constant stride replayed in capture order:
// KERNELRL_L2_FLUSH=memset, KERNELRL_TIMING_DIAG=fixed_sets) their gain is printed beside, so
// each run shows the fixtures still bite. The PDL pair: overlap with the call's own kernels is
// timed, overlap with the previous call is not. Skips where no GPU is visible.
// KERNELRL_TEST_CAPTURE=shim runs it with the shim runner, whose capture children also make the
// prefetch fixture learn no stride at all (checked with its PREFETCH_TELL build).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "data/tasks/task_suite.h"
#include "gpu_test_util.h"
#include "reward/evaluator.h"
#include "test_util.h"

namespace kernelrl {
namespace {

std::string fixture(const std::string& name) {
  return testing::read_text(std::string(KERNELRL_SOURCE_DIR) + "/tests/data/kernels/" + name);
}

// Distinct text per run: the store never answers a repeat from an earlier evaluation.
std::string tagged(const std::string& src, int run) {
  return "constexpr int kFixtureRun = " + std::to_string(run) + ";\n" + src;
}

// Environment for the worker this scope's evaluator starts (restored after).
struct Env {
  std::map<std::string, std::string> old;
  Env(std::initializer_list<std::pair<const char*, const char*>> kv) {
    for (const auto& [k, v] : kv) {
      const char* o = std::getenv(k);
      old[k] = o ? o : "";
      ::setenv(k, v, 1);
    }
  }
  ~Env() {
    for (const auto& [k, v] : old) {
      if (v.empty()) ::unsetenv(k.c_str());
      else ::setenv(k.c_str(), v.c_str(), 1);
    }
  }
};

struct ColdTimes {
  double plain = 0, plain_spread = 0, evict_last = 0, prefetch = 0;
};

// plain, evict_last, prefetch, plain again (the spread of the two plain runs is the noise).
ColdTimes cold_times(const testing::ScratchDir& dir, const std::string& label, int64_t n, int run) {
  RewardConfig cfg;
  cfg.backend = "gpu";
  cfg.capture = test_capture();  // KERNELRL_TEST_CAPTURE
  cfg.cache_dir = (dir / "cache").string();
  cfg.call_timeout_s = 3;
  Evaluator ev(cfg, dir / ("results-" + label + ".sqlite"));
  const std::vector<std::string> srcs = {tagged(fixture("gpu_l2_tiled.cu"), run),
                                         tagged(fixture("gpu_l2_evict_last.cu"), run),
                                         tagged(fixture("gpu_l2_prefetch_next.cu"), run),
                                         tagged(fixture("gpu_l2_tiled.cu"), run + 1)};
  auto rs = ev.evaluate(hgemm_task(n, n, n, "nn"), srcs);
  const char* names[] = {"plain", "evict_last", "prefetch_next", "plain again"};
  for (size_t i = 0; i < rs.size(); ++i) {
    std::printf("[l2 %s %lld^3] %-14s %s/%s cand %.3f us (cv %.3f) call %.2f us\n", label.c_str(),
                static_cast<long long>(n), names[i], status_name(rs[i].status), rs[i].check.c_str(),
                rs[i].cand.median_us, rs[i].cand.cv, rs[i].cand.call_median_us);
    EXPECT_EQ(rs[i].status, EvalStatus::ok) << names[i] << ": " << rs[i].reason;
  }
  ColdTimes t;
  t.plain = std::min(rs[0].cand.median_us, rs[3].cand.median_us);
  t.plain_spread = std::abs(rs[0].cand.median_us - rs[3].cand.median_us) / t.plain;
  t.evict_last = rs[1].cand.median_us;
  t.prefetch = rs[2].cand.median_us;
  return t;
}

TEST(RewardL2Gpu, ColdFixturesTimeAsThePlainKernel) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  int run = 0;
  for (int64_t n : {64, 256}) {
    ColdTimes old;
    {
      Env env({{"KERNELRL_L2_FLUSH", "memset"}, {"KERNELRL_TIMING_DIAG", "fixed_sets"}});
      old = cold_times(dir, "old-protocol", n, run += 10);
    }
    const ColdTimes now = cold_times(dir, "v4", n, run += 10);
    std::printf("[l2 summary %lld^3] old protocol: evict_last %+.1f %%, prefetch %+.1f %% vs plain "
                "(noise %.1f %%); v4: evict_last %+.1f %%, prefetch %+.1f %% (noise %.1f %%)\n",
                static_cast<long long>(n), 100 * (old.evict_last / old.plain - 1),
                100 * (old.prefetch / old.plain - 1), 100 * old.plain_spread,
                100 * (now.evict_last / now.plain - 1), 100 * (now.prefetch / now.plain - 1),
                100 * now.plain_spread);
    // Within the noise: 2 % or twice the spread of the plain kernel's two runs.
    const double tol = std::max(0.02, 2 * now.plain_spread);
    EXPECT_GE(now.evict_last, now.plain * (1 - tol)) << "evict_last inputs stay in L2 through the flush at " << n;
    EXPECT_GE(now.prefetch, now.plain * (1 - tol)) << "the next timing set's prefetch reaches it at " << n;
  }
  // Whether the prefetch fixture's host code learned a stride at all: its PREFETCH_TELL build
  // returns non-zero from the first call that saw a previous set's pointers. With the context
  // runner (one process captures every set) it does (so the tell works); with the shim runner each
  // call is captured in a fresh child (docs/sandbox.md, "Cold means cold") and it never does.
  RewardConfig cfg;
  cfg.backend = "gpu";
  cfg.capture = test_capture();
  cfg.cache_dir = (dir / "cache").string();
  cfg.call_timeout_s = 3;
  Evaluator ev(cfg, dir / "results-tell.sqlite");
  auto tell = ev.evaluate(hgemm_task(64, 64, 64, "nn"),
                          {tagged("#define PREFETCH_TELL 1\n" + fixture("gpu_l2_prefetch_next.cu"), run + 10)});
  std::printf("[l2 tell %s] %s/%s %s\n", cfg.capture.c_str(), status_name(tell[0].status), tell[0].check.c_str(),
              tell[0].reason.c_str());
  if (cfg.capture == "shim")
    EXPECT_EQ(tell[0].status, EvalStatus::ok) << "a capture learned the previous set's pointers: " << tell[0].reason;
  else
    EXPECT_EQ(tell[0].check, "nonzero_return") << "the tell did not fire in one process: " << tell[0].reason;
}

TEST(RewardL2Gpu, PdlOverlapsItsOwnKernelsNotThePreviousCall) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  RewardConfig cfg;
  cfg.backend = "gpu";
  cfg.capture = test_capture();  // KERNELRL_TEST_CAPTURE
  cfg.cache_dir = (dir / "cache").string();
  cfg.call_timeout_s = 3;
  Evaluator ev(cfg, dir / "results.sqlite");
  std::vector<std::string> srcs;
  for (int mode = 0; mode < 4; ++mode)
    srcs.push_back("#define PDL_MODE " + std::to_string(mode) + "\n" + fixture("gpu_pdl_pair.cu"));
  auto rs = ev.evaluate(hgemm_task(64, 64, 64, "nn"), srcs);
  std::vector<double> t;
  for (size_t i = 0; i < rs.size(); ++i) {
    std::printf("[pdl mode %zu] %s/%s cand %.3f us (cv %.3f)\n", i, status_name(rs[i].status), rs[i].check.c_str(),
                rs[i].cand.median_us, rs[i].cand.cv);
    ASSERT_EQ(rs[i].status, EvalStatus::ok) << "mode " << i << ": " << rs[i].reason;
    t.push_back(rs[i].cand.median_us);
  }
  // Its own kernels: kernel 2's ~2 us prologue overlaps kernel 1.
  EXPECT_LT(t[1], t[0] - 0.5) << "PDL within a call is not kept in the timed graph";
  // The previous call: kernel 1's prologue is not hidden behind the previous call's kernel 2.
  EXPECT_NEAR(t[2], t[3], std::max(0.03 * t[3], 0.2)) << "a call overlapped the previous call of itself";
}

}  // namespace
}  // namespace kernelrl
