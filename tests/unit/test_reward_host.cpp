// The evaluator end to end on the host backend (g++, CPU worker, steady clock): a correct HGEMM
// kernel passes with the Eq. 3 reward and lands in the store; each adversarial fixture under
// tests/data/kernels/ is caught and named; a crashing, aborting or hanging candidate becomes a
// result, its runner is replaced and the worker itself never restarts; a candidate that writes a
// forged result line gets reward_hack / forged_message and its forged baselines never reach the
// store (read back); spare runners, started while a batch compiles, are each taken once and
// leave no scratch directory or log behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <csignal>

#include "data/tasks/task_suite.h"
#include "reward/evaluator.h"
#include "reward/reward_formula.h"
#include "reward/task_json.h"
#include "reward_test_util.h"
#include "test_util.h"

namespace kernelrl {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return testing::read_text(std::string(KERNELRL_SOURCE_DIR) + "/tests/data/kernels/" + name);
}

RewardConfig host_config(const testing::ScratchDir& dir) {
  RewardConfig cfg = testing::fast_host_reward_config(dir);
  cfg.call_timeout_s = 0.5;  // a silent worker is declared hung after 2*0.5+5 s
  cfg.alpha = 0.1;
  cfg.beta = 0.05;
  return cfg;
}

// K = 4096 so that {0,1} sums exceed 2048 (where fp16 accumulation becomes inexact).
TaskSpec host_task() { return hgemm_task(32, 40, 4096, "nn"); }

TEST(RewardHost, CorrectKernelPassesScoresAndIsStored) {
  testing::ScratchDir dir;
  RewardConfig cfg = host_config(dir);
  cfg.l2 = "cold";  // rotation of input sets on the host too
  Evaluator ev(cfg, dir / "results.sqlite");
  auto src = fixture("host_hgemm_ok.cpp");
  const TaskSpec task = hgemm_task(32, 40, 512, "nn");
  auto r = ev.evaluate_one(task, src);
  ASSERT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason << "\n" << r.compile_log;
  EXPECT_EQ(ev.backend(), "host");
  EXPECT_EQ(r.reference, "torch");
  EXPECT_GT(r.cand.median_us, 0);
  EXPECT_GE(r.cand.n, 3);
  EXPECT_LE(r.cand.p10_us, r.cand.median_us);
  EXPECT_LE(r.cand.median_us, r.cand.p90_us);
  ASSERT_TRUE(r.baselines.count("torch"));
  EXPECT_GT(r.t_ref_us, 0);
  EXPECT_NEAR(r.speedup, r.t_ref_us / r.cand.median_us, 1e-9);
  // Eq. 3 with N = 1, recomputed here from the reported numbers.
  double expected = std::min(r.speedup, cfg.speedup_clip) - cfg.alpha * r.max_abs_dev -
                    cfg.beta * src.size() / 1000.0;
  EXPECT_NEAR(r.reward, expected, 1e-9) << r.reward_reason;
  EXPECT_LE(r.max_abs_dev, r.dev_bound);
  EXPECT_GT(r.metrics.value("input_sets", 0), 1);
  // Stored: the row, the exemplar query and the best kernel.
  auto ok = ev.store().successful(task.name);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].hash, r.hash);
  EXPECT_EQ(ok[0].source, src);
  ASSERT_TRUE(ev.store().best(task.name).has_value());
  // The reference baseline is cached per (GPU, driver, shape, layout, mode).
  auto cached = ev.store().baselines({"host", "host", 32, 40, 512, "nn", "device/cold/g20"});
  ASSERT_TRUE(cached.count("torch"));
  EXPECT_GT(cached["torch"].stats.median_us, 0);
  // The same source again hits the compile cache.
  auto again = ev.evaluate_one(task, src);
  EXPECT_TRUE(again.compile_cached);
  EXPECT_EQ(again.status, EvalStatus::ok) << again.reason;
  EXPECT_EQ(ev.store().count_results(), 2);
}

TEST(RewardHost, AdversarialKernelsAreCaughtAndNamedAndTheWorkerRecovers) {
  testing::ScratchDir dir;
  Evaluator ev(host_config(dir), dir / "results.sqlite");
  struct Case {
    const char* file;
    EvalStatus status;
    const char* check;
  };
  const Case cases[] = {
      {"host_fp16_acc.cpp", EvalStatus::wrong_answer, "fp16_accumulation"},
      {"host_crash.cpp", EvalStatus::crash, "signal"},
      {"host_unwritten.cpp", EvalStatus::wrong_answer, "unwritten_output"},
      {"host_write_past.cpp", EvalStatus::wrong_answer, "out_of_bounds_write"},
      {"host_workspace_overrun.cpp", EvalStatus::wrong_answer, "workspace_overrun"},
      {"host_hang.cpp", EvalStatus::hang, "host_timeout"},
      {"host_modify_input.cpp", EvalStatus::wrong_answer, "input_modified"},
      {"host_shrink_k.cpp", EvalStatus::wrong_answer, "integer_sum_mismatch"},
      {"host_abort.cpp", EvalStatus::crash, "abort"},
      {"host_cache_pointer.cpp", EvalStatus::wrong_answer, "cached_by_pointer"},
      {"host_cache_value.cpp", EvalStatus::wrong_answer, "cached_by_value"},
      {"host_nonzero_return.cpp", EvalStatus::launch_error, "nonzero_return"},
      {"host_hgemm_ok.cpp", EvalStatus::ok, ""},  // after all of the above, on a restarted worker
  };
  std::vector<std::string> sources;
  for (const auto& c : cases) sources.push_back(fixture(c.file));
  auto rs = ev.evaluate(host_task(), sources);
  ASSERT_EQ(rs.size(), sources.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(rs[i].status, cases[i].status)
        << cases[i].file << ": got " << status_name(rs[i].status) << " / " << rs[i].check << ": " << rs[i].reason;
    EXPECT_EQ(rs[i].check, cases[i].check) << cases[i].file << ": " << rs[i].reason;
    if (cases[i].status != EvalStatus::ok) {
      EXPECT_EQ(rs[i].reward, ev.config().failed_reward) << cases[i].file;
      EXPECT_NE(rs[i].reward_reason.find(rs[i].check), std::string::npos) << rs[i].reward_reason;
    }
  }
  // The crash, the hang and the abort ended their runners, never the worker.
  EXPECT_EQ(ev.worker_restarts(), 0);
  EXPECT_EQ(ev.store().count_results(), static_cast<int64_t>(cases[0].file ? rs.size() : 0));
}

// Spare runners (reward.spare_runners, Harness::prepare_spares): the workers start them while the
// batch compiles, and a candidate takes one instead of starting its own. With 3 spares for 5
// passing candidates exactly 3 evaluations took one (0 without), every verdict is ok either way,
// and no runner's scratch directory or log is left once the evaluator is gone. (The adversarial
// fixtures above run with the default spares: each hostile candidate takes one.)
TEST(RewardHost, SpareRunnersAreTakenOnceAndLeaveNothingBehind) {
  std::vector<std::string> sources;
  for (int i = 0; i < 5; ++i)  // five distinct sources of one correct kernel
    sources.push_back("// copy " + std::to_string(i) + "\n" + fixture("host_hgemm_ok.cpp"));
  testing::ScratchDir shared;  // one compile cache: the second run compiles nothing
  for (int64_t spares : {0, 3}) {
    testing::ScratchDir dir;
    std::vector<EvalResult> rs;
    {
      RewardConfig cfg = host_config(dir);
      cfg.spare_runners = spares;
      cfg.cache_dir = (shared / "cache").string();
      Evaluator ev(cfg, dir / "results.sqlite");
      rs = ev.evaluate(hgemm_task(32, 40, 512, "nn"), sources);
      EXPECT_EQ(ev.worker_restarts(), 0);
    }
    int took = 0;
    for (const auto& r : rs) {
      EXPECT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason;
      took += r.metrics.value("runner_spare", false) ? 1 : 0;
    }
    EXPECT_EQ(took, spares) << "spares " << spares;
    if (fs::exists(shared / "cache" / "scratch"))
      for (const auto& e : fs::recursive_directory_iterator(shared / "cache" / "scratch"))
        ADD_FAILURE() << "left behind (spares " << spares << "): " << e.path();
  }
}

// A spare that dies while it waits (killed here, as an OOM killer would) is not its candidate's
// fault: the next batch replaces it, and every candidate passes.
TEST(RewardHost, ASpareThatDiedWhileWaitingIsReplacedNotBlamed) {
  std::vector<std::string> sources;
  for (int i = 0; i < 3; ++i) sources.push_back("// copy " + std::to_string(i) + "\n" + fixture("host_hgemm_ok.cpp"));
  testing::ScratchDir dir;
  RewardConfig cfg = host_config(dir);
  cfg.spare_runners = 3;
  Evaluator ev(cfg, dir / "results.sqlite");
  ev.precompile(sources);  // the worker starts 3 spares while these compile
  // This process's grandchildren named kernelrl_candidate_runner (comm is cut at 15 characters).
  auto field = [](const std::string& stat, int n) {  // n-th field after "(comm)"
    std::istringstream in(stat.substr(stat.rfind(')') + 2));
    std::string f;
    for (int i = 0; i <= n; ++i) in >> f;
    return f;
  };
  auto parent_of = [&](pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    return stat.empty() ? pid_t{-1} : static_cast<pid_t>(std::stol(field(stat, 1)));
  };
  int killed = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm(e.path() / "comm");
    std::string c;
    std::getline(comm, c);
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (c == "kernelrl_candid" && parent_of(parent_of(pid)) == ::getpid() && ::kill(pid, SIGKILL) == 0) ++killed;
  }
  EXPECT_EQ(killed, 3);
  const auto rs = ev.evaluate(hgemm_task(32, 40, 512, "nn"), sources);
  int took = 0;
  for (const auto& r : rs) {
    EXPECT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason;
    took += r.metrics.value("runner_spare", false) ? 1 : 0;
  }
  EXPECT_EQ(took, 3);  // new spares, started while the batch compiled
  EXPECT_EQ(ev.worker_restarts(), 0);
}

// The 2026-11-26 attack on the host backend: a candidate that computes nothing and writes a
// result line of the worker's protocol (0.5 us, baselines at 4242 us) to every pipe it holds
// got verdict ok and reward 10. Its runner holds no channel of the evaluator's, and a line that
// is not the answer to the worker's request is itself the verdict. A correct candidate that
// forges too is caught the same way. The store's baselines come only from measurements without
// a candidate: none is the forged 4242 us.
TEST(RewardHost, ForgedResultLinesAreRewardHacksAndNeverReachTheStore) {
  testing::ScratchDir dir;
  Evaluator ev(host_config(dir), dir / "results.sqlite");
  const TaskSpec task = hgemm_task(32, 40, 512, "nn");
  const std::string ok = fixture("host_hgemm_ok.cpp");
  auto rs = ev.evaluate(task, {testing::forging_candidate(ok, /*compute=*/false),
                               testing::forging_candidate(ok, /*compute=*/true), ok});
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(rs[i].status, EvalStatus::reward_hack) << i << ": " << rs[i].check << ": " << rs[i].reason;
    EXPECT_EQ(rs[i].check, "forged_message") << rs[i].reason;
    EXPECT_EQ(rs[i].reward, ev.config().failed_reward);
    EXPECT_EQ(rs[i].speedup, 0);
  }
  ASSERT_EQ(rs[2].status, EvalStatus::ok) << rs[2].check << ": " << rs[2].reason;
  EXPECT_GT(rs[2].t_ref_us, 0);
  EXPECT_NE(rs[2].t_ref_us, 4242);  // the reference it is scored against is a measurement
  int stored = 0;
  ev.store().for_each_baseline([&](const BaselineKey&, const std::string& name, const BaselineRow& row) {
    ++stored;
    EXPECT_NE(row.stats.median_us, 4242) << name << " is the forged time";
    EXPECT_GT(row.stats.median_us, 0) << name;
  });
  EXPECT_GT(stored, 0);
  // The store's successful candidates: the honest one only.
  const auto good = ev.store().successful(task.name);
  ASSERT_EQ(good.size(), 1u);
  EXPECT_EQ(good[0].hash, rs[2].hash);
  EXPECT_EQ(ev.worker_restarts(), 0);
}

TEST(RewardHost, ScreenCompileAndLoadFailuresAreResults) {
  testing::ScratchDir dir;
  Evaluator ev(host_config(dir), dir / "results.sqlite");
  std::vector<std::string> sources = {
      "extern \"C\" int kernelrl_launch(const kernelrl_args* a, void* s) { cudaStream_t t; cudaStreamCreate(&t); return 0; }\n",
      "extern \"C\" int kernelrl_launch(const kernelrl_args* a, void* s) { return missing; }\n",
      // Defined inside a namespace: C++ linkage of a different function, no exported entry.
      "namespace x { int kernelrl_launch(const kernelrl_args* a, int s) { return 0; } }\n",
      "int helper() { return 1; }\n",
  };
  auto rs = ev.evaluate(host_task(), sources);
  EXPECT_EQ(rs[0].status, EvalStatus::screen_rejected);
  EXPECT_EQ(rs[0].check, "creates_stream");
  EXPECT_EQ(rs[1].status, EvalStatus::compile_error);
  EXPECT_NE(rs[1].compile_log.find("missing"), std::string::npos) << rs[1].compile_log;
  EXPECT_EQ(rs[2].status, EvalStatus::load_error) << rs[2].reason;
  EXPECT_EQ(rs[3].status, EvalStatus::screen_rejected);
  EXPECT_EQ(rs[3].check, "missing_entry_point");
  for (const auto& r : rs) EXPECT_EQ(r.reward, -1.0);
}

// A general task (op relu of data/tasks/task_ops.h) through the same pipeline: checked against the
// LibTorch reference with |out - ref| <= atol + rtol*|ref| and timed against it.
TEST(RewardHost, GeneralTaskChecksAgainstTheReferenceOp) {
  testing::ScratchDir dir;
  Evaluator ev(host_config(dir), dir / "results.sqlite");
  TaskSpec t;
  t.name = "relu_host_test";
  t.kind = TaskKind::general;
  t.op = "relu";
  t.inputs = {{"x", {65536}, "f32", "normal"}};
  t.outputs = {{"y", {65536}, "f32", "normal"}};
  t.atol = t.rtol = 1e-5;
  auto rs = ev.evaluate(t, {fixture("host_relu_ok.cpp"), fixture("host_relu_wrong.cpp")});
  if (rs[0].status == EvalStatus::unsupported) GTEST_SKIP() << rs[0].reason;
  EXPECT_EQ(rs[0].status, EvalStatus::ok) << rs[0].check << ": " << rs[0].reason;
  EXPECT_EQ(rs[0].reference, "torch");
  EXPECT_GT(rs[0].t_ref_us, 0);
  EXPECT_EQ(rs[0].max_abs_dev, 0);  // relu is exact
  EXPECT_EQ(rs[1].status, EvalStatus::wrong_answer);
  EXPECT_EQ(rs[1].check, "tolerance_exceeded") << rs[1].reason;
}

}  // namespace
}  // namespace kernelrl
