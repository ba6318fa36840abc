// The worker's timing engine on the host backend (reward/worker/timing.h): the successive-halving
// screen that cuBLASLt autotuning uses, against hand-worked cases and against contenders whose
// cost is known (busy loops of fixed length), and the plan switch that leaves out eager calls.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "reward/eval_result.h"
#include "reward/worker/backend.h"
#include "reward/worker/timing.h"

namespace kernelrl::worker {
namespace {

void spin_us(double us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

TEST(WorkerTiming, ScreenKeepsTheFastestAndThoseWithinTheMargin) {
  // Fastest 10; within 5 %: 10.4 and 10.5; 10.6 is out; 0 and NaN were not timed.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> med = {12.0, 10.4, 0.0, 10.0, 10.6, nan, 10.5, 30.0};
  EXPECT_EQ(screen_survivors(med, 0.05, 1, 6), (std::vector<size_t>{3, 1, 6}));
  // At least min_keep, fastest first, even beyond the margin.
  EXPECT_EQ(screen_survivors(med, 0.05, 5, 6), (std::vector<size_t>{3, 1, 6, 4, 0}));
  // At most max_keep, even inside the margin.
  EXPECT_EQ(screen_survivors(med, 0.50, 1, 2), (std::vector<size_t>{3, 1}));
  // Nothing timed: nothing kept; fewer timed than min_keep: all of them.
  EXPECT_TRUE(screen_survivors({0.0, nan}, 0.05, 3, 6).empty());
  EXPECT_EQ(screen_survivors({5.0, 0.0, 4.0}, 0.05, 3, 6), (std::vector<size_t>{2, 0}));
}

TEST(WorkerTiming, AShortPassThenTheScreenFindsTheFastestContender) {
  // Four contenders of known cost on the host backend, in device mode (the host backend replays
  // the captured calls): after a 3-round pass (a median that one preempted replay on a loaded
  // host does not move), the screen keeps the 150 µs one alone.
  auto be = make_host_backend();
  std::vector<Contender> cs;
  for (double us : {900.0, 150.0, 600.0, 1200.0})
    cs.push_back({std::to_string(static_cast<int>(us)), [us](size_t) { spin_us(us); }, {}});
  TimingPlan p;
  p.mode = "device";
  p.graph_calls = 20;
  p.min_rounds = p.max_rounds = 3;
  p.warmup = 1;
  p.candidate_first = false;
  p.call_times = false;
  std::mt19937_64 rng(7);
  TimingOutcome out = time_contenders(*be, cs, p, {}, rng, [](const std::string&) {});
  ASSERT_EQ(out.times.size(), 4u);
  std::vector<double> med;
  for (const auto& t : out.times) {
    ASSERT_EQ(t.samples_us.size(), 3u) << t.name;
    EXPECT_TRUE(t.call_us.empty()) << t.name << ": eager calls timed with call_times off";
    med.push_back(timing_stats(t.samples_us).median_us);  // the median the autotune ranks by
    // Per call, at least the spin (a replay is 20 calls, divided by 20).
    EXPECT_GE(med.back(), std::stod(t.name) * 0.999) << t.name;
  }
  EXPECT_EQ(screen_survivors(med, 0.05, 1, 6), (std::vector<size_t>{1}));

  // With call_times on (the default), each round also times one eager call per contender.
  p.call_times = true;
  out = time_contenders(*be, cs, p, {}, rng, [](const std::string&) {});
  for (const auto& t : out.times) EXPECT_EQ(t.call_us.size(), 3u) << t.name;
}

}  // namespace
}  // namespace kernelrl::worker
