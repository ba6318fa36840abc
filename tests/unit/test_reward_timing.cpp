// Evaluator v2 on the host backend: HGEMM and a general task go through the one timing engine
// (reward/worker/timing.h) in device mode (captured replays, verified, with call times beside)
// and in call mode; the results fingerprint covers every reward.* field but the named exempt
// ones, derived from the config struct, and the store misses when a setting changes;
// quiet windows hold pausable compile children and stop their timeout clock.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "data/tasks/task_suite.h"
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
  t.kind = TaskKind::general;
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

// A value of `f` other than its current one, within its bounds and choices.
std::string changed_value(const RewardField& f) {
  auto in = [&](double x) { return f.bounds.contains(x); };
  if (f.type == "bool") return f.value == "true" ? "false" : "true";
  if (f.type == "int" || f.type == "double") {
    const double v = std::stod(f.value);
    for (double x : {v + 1, v * 2, v - 1, v / 2, v + 0.5})
      if (x != v && in(x) && (f.type == "double" || x == std::floor(x))) {
        std::ostringstream s;
        s.precision(17);
        s << x;
        return s.str();
      }
  }
  if (f.type == "string") {
    for (const auto& c : f.choices)
      if ("\"" + c + "\"" != f.value) return c;
    return f.value.substr(1, f.value.size() - 2) + "x";
  }
  if (f.type == "string_list") {
    for (const auto& c : f.choices)
      if (f.value.find("\"" + c + "\"") == std::string::npos) return "[" + c + "]";
    return "[x]";
  }
  if (f.type == "int_list") return f.value == "[1,]" ? "[2]" : "[1]";
  ADD_FAILURE() << "no changed value for reward." << f.key << " (" << f.type << ")";
  return f.value;
}

// The cache key is derived from the config struct: every reward.* field that visit() lists,
// changed alone, changes the fingerprint unless it is listed as exempt (with why); an exempt
// one changes nothing; the exempt list names only real fields. A new knob is in the fingerprint
// without an edit (or is exempted here by name, with a reason).
TEST(RewardTiming, EveryRewardSettingIsInTheFingerprintUnlessExempt) {
  const RewardConfig base;
  const auto fields = reward_fields(base);
  ASSERT_GT(fields.size(), 30u);
  std::set<std::string> keys;
  for (const auto& f : fields) keys.insert(f.key);
  for (const auto& [key, why] : fingerprint_exempt_fields()) {
    EXPECT_TRUE(keys.count(key)) << "exempt reward." << key << " is not a field";
    EXPECT_FALSE(why.empty());
  }
  const std::string base_print = settings_fingerprint(base, "landlock+seccomp");
  std::set<std::string> prints = {base_print};
  for (const auto& f : fields) {
    YAML::Node root = YAML::Load(reward_config_yaml(base));
    root[f.key] = YAML::Load(changed_value(f));
    RewardConfig cfg;
    cfg::read(root, cfg);
    const std::string print = settings_fingerprint(cfg, "landlock+seccomp");
    if (fingerprint_exempt_fields().count(f.key)) {
      EXPECT_EQ(print, base_print) << "exempt reward." << f.key << " changed the fingerprint";
    } else {
      EXPECT_NE(print, base_print) << "reward." << f.key << " is not in the fingerprint";
      EXPECT_TRUE(prints.insert(print).second) << "reward." << f.key << " shares a fingerprint";
    }
  }
  // The sandbox in force counts too.
  EXPECT_NE(settings_fingerprint(base, "off"), base_print);
  // The worker reads back exactly the settings it was sent.
  RewardConfig odd = base;
  odd.min_rounds = 31;
  odd.clock_basis = "rated";
  odd.sanitizer = true;
  EXPECT_EQ(reward_config_yaml(reward_config_from_yaml(reward_config_yaml(odd))), reward_config_yaml(odd));
}

// Through the store: an unchanged configuration finds the stored result; a changed setting
// (the timeouts and the sanitizer too, which the hand-kept list left out) misses it.
TEST(RewardTiming, ChangingARewardSettingMissesTheCache) {
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
      {"call_timeout_s", [](RewardConfig& c) { c.call_timeout_s = 7; }},
      {"sanitizer", [](RewardConfig& c) { c.sanitizer = true; }},
  };
  for (const auto& [name, change] : changes) {
    RewardConfig cfg = base;
    change(cfg);
    Evaluator ev(cfg, dir / "results.sqlite");
    EXPECT_FALSE(ev.cached_result(task, src).has_value()) << "changing reward." << name << " hit the cache";
  }
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
