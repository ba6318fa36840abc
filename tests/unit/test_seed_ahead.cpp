// Exemplar pools off the RL step's critical path (issue 40): seed_pools (trainer/grpo_stage.h)
// fills a task's empty pool once, from the results store where it holds the seeds' results, and
// never considers a task twice; evaluation GPUs apart (reward.gpus) are placed per rank and
// checked with one-line errors. The evaluations are counted by the evaluator's own counter of
// worker requests (Evaluator::worker_evaluations), which the seeding code does not touch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "common/error.h"
#include "data/tasks/task_suite.h"
#include "reward/evaluator.h"
#include "rollout/exemplar_store.h"
#include "reward_test_util.h"
#include "test_util.h"
#include "trainer/grpo_stage.h"

namespace kernelrl {
namespace {

std::vector<std::string> ids(ExemplarStore& store, const std::string& task) {
  std::vector<std::string> out;
  for (const Exemplar& e : store.pool(task, /*step=*/0)) out.push_back(e.id);
  std::sort(out.begin(), out.end());
  return out;
}

// Stage A seeds two empty pools (4 worker evaluations: 2 seeds x 2 tasks) and lists the tasks;
// asked again for the same tasks (a step that meets them) it evaluates nothing. A second stage
// on the same results store, with a fresh evaluator (a fresh process), fills its empty pools
// with the same exemplars from the stored results: no worker request. Stage A again (a resumed
// run) finds its pools stored: nothing to seed.
TEST(SeedAhead, PoolsComeFromTheStoreAndATaskIsSeededOnce) {
  testing::ScratchDir dir;
  const RewardConfig cfg = testing::fast_host_reward_config(dir);
  const auto db = dir / "results.sqlite";
  // Shapes of configs/grids/host.txt (the host variants' tiles divide them).
  const std::vector<TaskSpec> specs = {hgemm_task(64, 64, 64, "nn"), hgemm_task(64, 128, 64, "nn")};
  std::vector<const TaskSpec*> tasks = {&specs[0], &specs[1]};
  {
    Evaluator ev(cfg, db);
    ExemplarStore a(db, "stage_a");
    std::set<std::string> seeded;
    const SeedStats s = seed_pools(a, ev, tasks, /*n=*/2, nullptr, seeded);
    EXPECT_EQ(s.tasks, 2);
    EXPECT_EQ(s.evaluated, 4);
    EXPECT_EQ(s.stored, 0);
    EXPECT_EQ(ev.worker_evaluations(), 4);  // the evaluator's own count
    EXPECT_GT(a.size(specs[0].name), 0);
    EXPECT_GT(a.size(specs[1].name), 0);
    EXPECT_EQ(seeded.size(), 2u);
    const SeedStats again = seed_pools(a, ev, tasks, 2, nullptr, seeded);
    EXPECT_EQ(again.tasks, 0);
    EXPECT_EQ(again.evaluated, 0);
    EXPECT_EQ(ev.worker_evaluations(), 4);
  }
  {
    Evaluator ev(cfg, db);
    ExemplarStore a(db, "stage_a"), b(db, "stage_b");
    std::set<std::string> seeded;
    const SeedStats s = seed_pools(b, ev, tasks, 2, nullptr, seeded);
    EXPECT_EQ(s.tasks, 2);
    EXPECT_EQ(s.evaluated, 0);
    EXPECT_EQ(s.stored, 4);
    EXPECT_EQ(ev.worker_evaluations(), 0);
    for (const TaskSpec& t : specs) {
      EXPECT_FALSE(ids(b, t.name).empty());
      EXPECT_EQ(ids(b, t.name), ids(a, t.name)) << t.name;
    }
    std::set<std::string> resumed;
    const SeedStats r = seed_pools(a, ev, tasks, 2, nullptr, resumed);
    EXPECT_EQ(r.tasks, 0);
    EXPECT_EQ(ev.worker_evaluations(), 0);
  }
}

// reward.gpus: each rank of the host gets a contiguous block of the list; the policy ranks' GPUs,
// GPUs not on the host, duplicates, fewer GPUs than ranks and reward.workers beside it are
// refused with one line naming the key.
TEST(EvaluationGpus, SplitPerRankAndRefusedWithOneLine) {
  RewardConfig c;
  EXPECT_TRUE(evaluation_gpus(c, 0, 1, 4, true).empty());  // []: each rank's own GPU
  c.gpus = {1, 2, 3};
  EXPECT_EQ(evaluation_gpus(c, 0, 1, 4, true), (std::vector<int>{1, 2, 3}));
  c.gpus = {2, 3, 4, 5, 6, 7};
  EXPECT_EQ(evaluation_gpus(c, 0, 2, 8, true), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(evaluation_gpus(c, 1, 2, 8, true), (std::vector<int>{5, 6, 7}));
  c.gpus = {5, 6};  // the host backend: numbers name the workers, no range
  EXPECT_EQ(evaluation_gpus(c, 1, 2, 0, false), (std::vector<int>{6}));
  auto refused = [](RewardConfig bad, int local_ranks, int devices, const std::string& what) {
    try {
      evaluation_gpus(bad, 0, local_ranks, devices, true);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_THAT(m, ::testing::HasSubstr(what));
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  };
  RewardConfig out;
  out.gpus = {1, 4};
  refused(out, 1, 4, "reward.gpus: GPU 4 is not on this host (4 GPUs: 0-3)");
  RewardConfig overlap;
  overlap.gpus = {1, 2};
  refused(overlap, 2, 4, "reward.gpus: GPU 1 is policy rank 1's");
  RewardConfig twice;
  twice.gpus = {2, 2};
  refused(twice, 1, 4, "reward.gpus: GPU 2 is listed twice");
  RewardConfig few;
  few.gpus = {3};
  refused(few, 2, 4, "reward.gpus: 1 GPU(s) for 2 ranks");
  RewardConfig both;
  both.gpus = {1};
  both.workers = 2;
  refused(both, 1, 4, "reward.workers: 2 beside reward.gpus");
}

// An evaluator given reward.gpus starts one worker per listed number (host backend: the
// numbers name the processes) and spreads a batch over them.
TEST(EvaluationGpus, HostEvaluatorStartsTheListedWorkers) {
  testing::ScratchDir dir;
  RewardConfig cfg = testing::fast_host_reward_config(dir);
  Evaluator ev(cfg, dir / "results.sqlite", std::vector<int>{5, 7});
  EXPECT_EQ(ev.worker_devices(), (std::vector<int>{5, 7}));
  Evaluator plain(cfg, dir / "results2.sqlite");
  EXPECT_EQ(plain.worker_devices(), (std::vector<int>{0}));
}

}  // namespace
}  // namespace kernelrl
