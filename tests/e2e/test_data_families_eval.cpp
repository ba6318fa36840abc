// Kernel families through the real evaluator (reward/evaluator.h) on the host backend: one host
// variant of every general family, on its suite task at host sizes, and the host HGEMM family
// for both layouts, must pass every correctness check (fresh inputs, poisoned outputs, guard
// bands, {0,1} sums for HGEMM) and get a reward.
#include <gtest/gtest.h>

#include <set>

#include "data/families.h"
#include "data/tasks/task_ops.h"
#include "data/tasks/task_suite.h"
#include "reward/evaluator.h"
#include "reward_test_util.h"
#include "test_util.h"

namespace kernelrl {
namespace {

TEST(DataFamiliesEval, HostVariantOfEveryFamilyPassesTheEvaluator) {
  testing::ScratchDir dir;
  Evaluator ev(testing::fast_host_reward_config(dir), dir / "results.sqlite");
  auto tasks =
      load_task_suite(std::string(KERNELRL_SOURCE_DIR) + "/configs/tasks/general.yaml", "host");
  std::set<std::string> done;
  for (const auto& t : tasks) {
    const std::string cat = find_op(t.op)->category;
    if (!done.insert(cat).second) continue;
    auto vs = variants_for_task(t, "host");
    ASSERT_FALSE(vs.empty()) << t.name;
    auto r = ev.evaluate_one(t, vs.back().source);
    if (r.status == EvalStatus::unsupported) GTEST_SKIP() << r.reason;
    EXPECT_EQ(r.status, EvalStatus::ok)
        << vs.back().name << " on " << t.name << ": " << r.check << ": " << r.reason << "\n"
        << r.compile_log;
    EXPECT_GT(r.cand.median_us, 0) << t.name;
    if (cat == "elementwise") {
      // Negative control: the same variant computing 1 + f(x) must be caught.
      std::string bad = vs.back().source;
      size_t p = bad.find("y[i] = ");
      ASSERT_NE(p, std::string::npos);
      bad.insert(p + 7, "1.0f + ");
      EXPECT_EQ(ev.evaluate_one(t, bad).status, EvalStatus::wrong_answer);
    }
  }
  EXPECT_EQ(done.size(), 7u);
  for (const std::string layout : {"nn", "tn"}) {
    // K = 4096: {0,1} sums above 2048 catch an fp16 accumulator; the variant accumulates in fp32.
    TaskSpec t = hgemm_task(64, 128, 4096, layout);
    for (const auto& v : hgemm_family_variants("hgemm_host")) {
      if (v.layout != layout || v.acc != "f32" || v.params[0].second != 64) continue;
      auto r = ev.evaluate_one(t, v.source);
      EXPECT_EQ(r.status, EvalStatus::ok) << v.name << ": " << r.check << ": " << r.reason << "\n"
                                          << r.compile_log;
    }
  }
}

}  // namespace
}  // namespace kernelrl
