// Evaluator v2 on the host backend: HGEMM and a general task go through the one timing engine
// (reward/worker/timing.h) in device mode (captured replays, verified, with call times beside)
// and in call mode; the results store's cache key misses when any reward setting changes;
// quiet windows hold pausable compile children and stop their timeout clock.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "data/task_suite.h"
#include "reward/evaluator.h"
#include "reward/subprocess.h"
#include "reward_test_util.h"
#include "test_util.h"

namespace kernelrl {
namespace {

std::string fixture(const std::string& name) {
  return testing::read_text(std::string(KERNELRL_SOURCE_DIR) + "/tests/data/kernels/" + name);
}

TaskSpec relu_task() {
  TaskSpec t;
  t.name = "relu_timing_test";
  t.kind = "general";
  t.op = "relu";
  t.inputs = {{"x", {4096}, "f32", "normal"}};
  t.outputs = {{"y", {4096}, "f32", "normal"}};
  t.atol = t.rtol = 1e-5;
  return t;
}

// Both kinds, the same engine: the result's timing metadata is the engine's, not a kind's.
TEST(RewardTiming, HgemmAndGeneralShareTheDeviceTimingEngine) {
  testing::ScratchDir dir;
  RewardConfig cfg = testing::fast_host_reward_config(dir);
  ASSERT_EQ(cfg.timing, "device");  // the default
  Evaluator ev(cfg, dir / "results.sqlite");
  const std::vector<std::pair<TaskSpec, std::string>> cases = {
      {hgemm_task(24, 40, 64, "nn"), fixture("host_hgemm_ok.cpp")},
      {relu_task(), fixture("host_relu_ok.cpp")}};
  for (const auto& [task, src] : cases) {
    EvalResult r = ev.evaluate_one(task, src);
    ASSERT_EQ(r.status, EvalStatus::ok) << task.name << ": " << r.check << ": " << r.reason;
    EXPECT_EQ(r.cand.timing, "device") << task.name;
    EXPECT_GT(r.cand.call_median_us, 0) << task.name;  // eager calls timed in the same rounds
    EXPECT_EQ(r.metrics.at("timing"), "device") << task.name;
    EXPECT_EQ(r.metrics.at("graph_calls"), 20) << task.name;
    EXPECT_GE(r.metrics.at("verified_replays").get<int>(), 1) << task.name;
    ASSERT_TRUE(r.baselines.count("torch")) << task.name;
    EXPECT_EQ(r.baselines.at("torch").timing, "device") << task.name;
    EXPECT_GT(r.baselines.at("torch").call_median_us, 0) << task.name;
  }
}

TEST(RewardTiming, CallModeTimesEagerCallsOnly) {
  testing::ScratchDir dir;
  RewardConfig cfg = testing::fast_host_reward_config(dir);
  cfg.timing = "call";
  Evaluator ev(cfg, dir / "results.sqlite");
  EvalResult r = ev.evaluate_one(relu_task(), fixture("host_relu_ok.cpp"));
  ASSERT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason;
  EXPECT_EQ(r.cand.timing, "call");
  EXPECT_EQ(r.cand.call_median_us, 0);  // no second measurement in call mode
  EXPECT_EQ(r.metrics.at("graph_calls"), 0);
}

// The cache key: an unchanged configuration finds the stored result; changing any setting that
// determines a verdict, a time or a reward misses it.
TEST(RewardTiming, ChangingAnyRewardSettingMissesTheCache) {
  testing::ScratchDir dir;
  RewardConfig base = testing::fast_host_reward_config(dir);
  const TaskSpec task = hgemm_task(24, 40, 64, "nn");
  const std::string src = fixture("host_hgemm_ok.cpp");
  {
    Evaluator ev(base, dir / "results.sqlite");
    ASSERT_EQ(ev.evaluate_one(task, src).status, EvalStatus::ok);
    ASSERT_TRUE(ev.cached_result(task, src).has_value()) << "the same settings must hit";
  }
  const std::vector<std::pair<std::string, std::function<void(RewardConfig&)>>> changes = {
      {"timing", [](RewardConfig& c) { c.timing = "call"; }},
      {"l2", [](RewardConfig& c) { c.l2 = "cold"; }},
      {"graph_calls", [](RewardConfig& c) { c.graph_calls = 40; }},
      {"baseline", [](RewardConfig& c) { c.baseline = "cublas-max"; }},
      {"alpha", [](RewardConfig& c) { c.alpha = 0.5; }},
      {"beta", [](RewardConfig& c) { c.beta = 0.01; }},
      {"length_measure", [](RewardConfig& c) { c.length_measure = "klines"; }},
      {"speedup_clip", [](RewardConfig& c) { c.speedup_clip = 3; }},
      {"failed_reward", [](RewardConfig& c) { c.failed_reward = -2; }},
      {"seeds", [](RewardConfig& c) { c.seeds = 5; }},
      {"deviation_slack", [](RewardConfig& c) { c.deviation_slack = 4; }},
      {"max_rounds", [](RewardConfig& c) { c.max_rounds = 7; }},
      {"timing_budget_ms", [](RewardConfig& c) { c.timing_budget_ms = 50; }},
      {"clock_basis", [](RewardConfig& c) { c.clock_basis = "rated"; }},
  };
  std::set<std::string> prints;
  for (const auto& [name, change] : changes) {
    RewardConfig cfg = base;
    change(cfg);
    Evaluator ev(cfg, dir / "results.sqlite");
    EXPECT_FALSE(ev.cached_result(task, src).has_value()) << "changing reward." << name << " hit the cache";
    prints.insert(ev.settings_fingerprint());
  }
  EXPECT_EQ(prints.size(), changes.size()) << "two settings share a fingerprint";
  Evaluator same(base, dir / "results.sqlite");
  EXPECT_TRUE(same.cached_result(task, src).has_value());
}

// A pausable child is stopped while a quiet window is open; the time it spent stopped does not
// count against its timeout.
TEST(RewardQuiet, QuietWindowStopsPausableChildrenAndTheirTimeout) {
  // The child prints a nanosecond timestamp every 50 ms for about 0.6 s of its own running.
  RunResult r;
  std::thread child([&] {
    r = run_process({"sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do date +%s%N; sleep 0.05; done"},
                    1.5, {}, true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  double before = quiet_seconds_total();
  quiet_begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  quiet_end();
  child.join();
  EXPECT_NEAR(quiet_seconds_total() - before, 1.5, 0.3);
  EXPECT_FALSE(r.timed_out) << "stopped time counted against the 1.5 s timeout";
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // While stopped it printed nothing: the largest gap between its timestamps spans the window.
  std::istringstream in(r.output);
  std::vector<long long> stamps;
  for (long long t; in >> t;) stamps.push_back(t);
  ASSERT_EQ(stamps.size(), 12u) << r.output;
  long long gap = 0;
  for (size_t i = 1; i < stamps.size(); ++i) gap = std::max(gap, stamps[i] - stamps[i - 1]);
  EXPECT_GT(gap / 1e9, 1.2) << "the child kept running inside the quiet window";
}

TEST(RewardQuiet, NoPausableChildStartsInsideAWindow) {
  quiet_begin();
  auto t0 = std::chrono::steady_clock::now();
  RunResult r;
  std::thread child([&] { r = run_process({"true"}, 5, {}, true); });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  quiet_end();
  child.join();
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 0.4);
  EXPECT_EQ(r.exit_code, 0);
  // A non-pausable child (the worker) is never held.
  quiet_begin();
  RunResult w = run_process({"true"}, 5);
  quiet_end();
  EXPECT_EQ(w.exit_code, 0);
  EXPECT_LT(w.seconds, 2.0);
}

}  // namespace
}  // namespace kernelrl
