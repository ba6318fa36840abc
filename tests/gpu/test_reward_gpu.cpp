// The evaluator on the GPU: reference kernels pass in device timing (CUDA-graph replays, call
// times beside); each adversarial fixture in tests/data/kernels/gpu_*.cu is caught and named
// (fp16 accumulation, writing past C or the workspace, leaving C partly unwritten, modifying an
// input, caching by value, launching on another stream, shrinking K, skipping the work under
// graph capture, not being capturable, a hang, an illegal address; caching by pointer is moot
// now that each call is captured once) and the worker recovers; the reward-integrity classes
// (a forged result line, work batched or deferred across calls, persisting-L2 state) get named
// verdicts; a CuTe-based candidate compiles with the CUTLASS headers and passes; the same kernel
// timed twice agrees within 2% at the median; a candidate's host code sees its worker's GPU
// alone; the SM clock measured around replays matches a
// kernel of known cycle count; under the OS sandbox (on by default) candidates
// that write a file, open a socket or fork are sandbox_violation and write nothing, while the
// reference kernels pass. Skips where no GPU is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <cstdio>
#include <filesystem>

#include "data/tasks/task_suite.h"
#include "gpu_test_util.h"
#include "reward/evaluator.h"
#include "reward/screen.h"
#include "reward/task_json.h"
#include "reward_test_util.h"
#include "test_util.h"

#ifdef KERNELRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace kernelrl {
namespace {

std::string fixture(const std::string& name) {
  return testing::read_text(std::string(KERNELRL_SOURCE_DIR) + "/tests/data/kernels/" + name);
}

RewardConfig gpu_config(const testing::ScratchDir& dir) {
  RewardConfig cfg;
  cfg.backend = "gpu";
  cfg.capture = test_capture();  // KERNELRL_TEST_CAPTURE
  cfg.cache_dir = (dir / "cache").string();
  cfg.call_timeout_s = 3;
  return cfg;
}

// The general task `relu` on n f32 elements (data/tasks/task_ops.h).
TaskSpec relu_task(const std::string& name, int64_t n) {
  TaskSpec t;
  t.name = name;
  t.kind = TaskKind::general;
  t.op = "relu";
  t.inputs = {{"x", {n}, "f32", "normal"}};
  t.outputs = {{"y", {n}, "f32", "normal"}};
  t.atol = t.rtol = 1e-5;
  return t;
}

void print(const char* what, const EvalResult& r) {
  std::printf("[%s] %s %s/%s cand %.2f us (cv %.3f, n %lld) ref %s %.2f us speedup %.3f reward %.4f dev %.4g<=%.4g  %s\n",
              what, r.task.c_str(), status_name(r.status), r.check.c_str(), r.cand.median_us, r.cand.cv,
              static_cast<long long>(r.cand.n), r.reference.c_str(), r.t_ref_us, r.speedup, r.reward,
              r.max_abs_dev, r.dev_bound, r.reason.c_str());
  for (const auto& [name, t] : r.baselines)
    std::printf("    %-18s %10.2f us (cv %.3f)\n", name.c_str(), t.median_us, t.cv);
}

TEST(RewardGpu, ReferenceKernelsPassWithEveryBaseline) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  RewardConfig cfg = gpu_config(dir);
  cfg.baselines = {"all"};
  Evaluator ev(cfg, dir / "results.sqlite");
  for (const char* layout : {"nn"}) {
    TaskSpec task = hgemm_task(256, 384, 4096, layout);
    auto rs = ev.evaluate(task, {fixture("gpu_hgemm_ref.cu"), fixture("gpu_naive.cu")});
    for (const auto& r : rs) {
      print("pass", r);
      ASSERT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason << "\n" << r.compile_log;
      EXPECT_GT(r.speedup, 0);
      EXPECT_EQ(r.reference, "lt-auto-max");
      EXPECT_LE(r.max_abs_dev, r.dev_bound);
      EXPECT_TRUE(r.metrics.contains("wall_check"));
      EXPECT_EQ(r.cand.timing, "device");
      EXPECT_GT(r.cand.call_median_us, 0);
      EXPECT_GE(r.metrics.value("verified_replays", 0), 1);
    }
    for (const auto& name : report_baseline_names())
      EXPECT_TRUE(rs[0].baselines.count(name) && rs[0].baselines.at(name).valid()) << name;
  }
}

TEST(RewardGpu, AdversarialKernelsAreCaughtAndNamed) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  RewardConfig cfg = gpu_config(dir);
  cfg.stream_gate = true;  // escaped_stream named deterministically by the legacy-stream gate
  Evaluator ev(cfg, dir / "results.sqlite");
  struct Case {
    const char* file;
    EvalStatus status;
    const char* check;
  };
  const Case cases[] = {
      {"gpu_fp16_acc.cu", EvalStatus::wrong_answer, "fp16_accumulation"},
      {"gpu_write_past.cu", EvalStatus::wrong_answer, "out_of_bounds_write"},
      {"gpu_unwritten.cu", EvalStatus::wrong_answer, "unwritten_output"},
      {"gpu_modify_input.cu", EvalStatus::wrong_answer, "input_modified"},
      // Its pointer cache lives in its host code, which runs once per distinct call (each is
      // captured once and replayed in full): it never gets to skip work, and earns its time.
      {"gpu_cache_pointer.cu", EvalStatus::ok, ""},
      {"gpu_cache_value.cu", EvalStatus::wrong_answer, "cached_by_value"},
      // Its launch on the legacy stream runs in the runner, outside the captured work.
      {"gpu_other_stream.cu", EvalStatus::wrong_answer, "unwritten_output"},
      {"gpu_shrink_k.cu", EvalStatus::wrong_answer, "integer_sum_mismatch"},
      {"gpu_hang.cu", EvalStatus::hang, "kernel_timeout"},
      {"gpu_workspace_overrun.cu", EvalStatus::wrong_answer, "workspace_overrun"},
      // Launches nothing while captured, and every call is captured: nothing is written.
      {"gpu_capture_aware.cu", EvalStatus::wrong_answer, "unwritten_output"},
      {"gpu_sync_in_launch.cu", EvalStatus::wrong_answer, "not_capturable"},
      {"gpu_illegal_address.cu", EvalStatus::cuda_error, "illegal_address"},
      {"gpu_naive.cu", EvalStatus::ok, ""},  // on the restarted worker
  };
  std::vector<std::string> sources;
  for (const auto& c : cases) sources.push_back(fixture(c.file));
  auto rs = ev.evaluate(hgemm_task(256, 384, 4096, "nn"), sources);
  for (size_t i = 0; i < rs.size(); ++i) {
    print(cases[i].file, rs[i]);
    EXPECT_EQ(rs[i].status, cases[i].status) << cases[i].file << ": " << rs[i].check << ": " << rs[i].reason;
    EXPECT_EQ(rs[i].check, cases[i].check) << cases[i].file << ": " << rs[i].reason;
  }
  EXPECT_GE(ev.worker_restarts(), 1);
}

// Without the gate (the default) a candidate that launches on the legacy default stream is still
// rejected: by the snapshot comparison, or by replay verification (its kernel is not in the
// graph), or by the wall-clock check.
TEST(RewardGpu, EscapedStreamIsRejectedWithoutTheGate) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  RewardConfig cfg = gpu_config(dir);
  ASSERT_FALSE(cfg.stream_gate);
  Evaluator ev(cfg, dir / "results.sqlite");
  auto rs = ev.evaluate(hgemm_task(256, 384, 4096, "nn"), {fixture("gpu_other_stream.cu"), fixture("gpu_naive.cu")});
  print("other_stream", rs[0]);
  EXPECT_NE(rs[0].status, EvalStatus::ok) << rs[0].reason;
  const std::set<std::string> named = {"escaped_stream", "replay_mismatch", "not_capturable",
                                       "escaped_stream_timing", "unwritten_output"};
  EXPECT_TRUE(named.count(rs[0].check)) << rs[0].check << ": " << rs[0].reason;
  EXPECT_EQ(rs[1].status, EvalStatus::ok) << rs[1].check << ": " << rs[1].reason;  // the control
}

// A worker's evaluations do not drift: the same kernel at 64^3 (where a per-kernel offset of a
// few hundred ns is 10-15 %) timed in the 1st and the 6th evaluation of one worker, and the
// cuBLASLt baseline with it, within 3 %. With reward.stream_gate on, the 6th evaluation is
// ~0.35 us per call slower (docs/benchmarks.md); the gate-on run is printed beside.
TEST(RewardGpu, WorkerEvaluationsDoNotDriftAtSmallShapes) {
  REQUIRE_CUDA();
  for (bool gate : {false, true}) {
    testing::ScratchDir dir;
    RewardConfig cfg = gpu_config(dir);
    cfg.stream_gate = gate;
    Evaluator ev(cfg, dir / "results.sqlite");
    TaskSpec task = hgemm_task(64, 64, 64, "nn");
    std::vector<EvalResult> rs;
    for (int i = 0; i < 6; ++i) rs.push_back(ev.evaluate_one(task, fixture("gpu_hgemm_ref.cu")));
    for (const auto& r : rs) ASSERT_TRUE(r.passed()) << r.reason;
    const double c1 = rs.front().cand.median_us, c6 = rs.back().cand.median_us;
    const double l1 = rs.front().t_ref_us, l6 = rs.back().t_ref_us;  // lt-auto-max
    std::printf("DRIFT gate=%d: candidate %.2f -> %.2f us, lt-auto-max %.2f -> %.2f us\n", gate, c1, c6, l1, l6);
    // Clock or launch cost? Each evaluation's SM clock and its time at the rated clock (a drift
    // that is the clock leaves the rated times still; 2026-11-28 the shim capture runner's 6th
    // evaluation read ~0.35 us a call slower than its 1st here, cause not yet known).
    for (size_t i = 0; i < rs.size(); ++i) {
      const auto ref = rs[i].baselines.find(rs[i].reference);
      std::printf("DRIFT gate=%d eval %zu: candidate %.3f us at %.0f MHz (rated %.3f), %s %.3f us at %.0f MHz (rated %.3f)\n",
                  gate, i + 1, rs[i].cand.median_us, rs[i].cand.clock_mhz, rs[i].cand.rated_median_us,
                  rs[i].reference.c_str(), rs[i].t_ref_us, ref == rs[i].baselines.end() ? 0.0 : ref->second.clock_mhz,
                  ref == rs[i].baselines.end() ? 0.0 : ref->second.rated_median_us);
    }
    if (gate) continue;  // printed for comparison; the offset it causes is documented
    EXPECT_LT(std::fabs(c6 - c1) / c1, 0.03);
    EXPECT_LT(std::fabs(l6 - l1) / l1, 0.03);
  }
}

// The candidate runner sees its worker's GPU alone, as device 0 (its CUDA start-up, once per
// candidate, grows with the GPUs a process sees: bench/gpu_context_init.sh). The worker runs on
// the last GPU, so on a host of several the fixture's host code would otherwise see them all and
// a device other than 0, and leave C unwritten (wrong_answer). On one GPU it passes either way.
TEST(RewardGpu, TheCandidateSeesItsWorkersGpuAlone) {
  REQUIRE_CUDA();
  int gpus = 1;
#ifdef KERNELRL_HAVE_CUDA
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
#endif
  testing::ScratchDir dir;
  Evaluator ev(gpu_config(dir), dir / "results.sqlite", gpus - 1);
  const EvalResult r = ev.evaluate_one(hgemm_task(128, 256, 64, "nn"), fixture("gpu_sees_one_gpu.cu"));
  print("own gpu", r);
  std::printf("OWN_GPU: worker on device %d of %d\n", gpus - 1, gpus);
  EXPECT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason << "\n" << r.compile_log;
}

TEST(RewardGpu, SameKernelTimedTwiceAgreesWithin2Percent) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  RewardConfig cfg = gpu_config(dir);
  cfg.max_rounds = 100;
  cfg.timing_budget_ms = 1000;
  Evaluator ev(cfg, dir / "results.sqlite");
  for (int64_t s : {1024, 2048, 4096}) {
    TaskSpec task = hgemm_task(s, s, s, "nn");
    auto a = ev.evaluate_one(task, fixture("gpu_hgemm_ref.cu"));
    auto b = ev.evaluate_one(task, fixture("gpu_hgemm_ref.cu"));
    print("run1", a);
    print("run2", b);
    ASSERT_TRUE(a.passed() && b.passed()) << a.reason << " / " << b.reason;
    double rel = std::fabs(a.cand.median_us - b.cand.median_us) / a.cand.median_us;
    std::printf("REPEAT %lld^3: %.2f us vs %.2f us (%.2f%%)\n", static_cast<long long>(s),
                a.cand.median_us, b.cand.median_us, 100 * rel);
    EXPECT_LT(rel, 0.02) << s << "^3";
  }
}

// CUTLASS/CuTe for candidates: the evaluator's compile command carries the CUTLASS headers
// (reward.include_dirs: auto = the pinned nvidia-cutlass wheel, or $KERNELRL_CUTLASS_INCLUDE).
TEST(RewardGpu, CuteCandidateCompilesAndPasses) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  RewardConfig cfg = gpu_config(dir);
  cfg.compile_timeout_s = 300;
  Evaluator ev(cfg, dir / "results.sqlite");
  auto r = ev.evaluate_one(hgemm_task(512, 768, 1024, "tn"), fixture("gpu_cute_hgemm_tn.cu"));
  print("cute", r);
  ASSERT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason << "\n" << r.compile_log;
  EXPECT_LE(r.max_abs_dev, r.dev_bound);
}

TEST(RewardGpu, GeneralTaskAgainstTheLibTorchReference) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  Evaluator ev(gpu_config(dir), dir / "results.sqlite");
  auto r = ev.evaluate_one(relu_task("relu_gpu_test", 1 << 22), fixture("gpu_relu.cu"));
  print("relu", r);
  ASSERT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason;
  EXPECT_EQ(r.reference, "torch");
  EXPECT_GT(r.t_ref_us, 0);
}

// The SM clock the evaluator measures around each replay (clock stamps: every SM's cycle counter
// against the global timer) against a kernel whose length is known in cycles: one thread that
// spins 4M cycles (clock64) before a small relu (gpu_relu_spin.cu). Its device time times the
// measured clock is its cycle count, and its time rescaled to the rated clock (cudaDevAttrClockRate)
// is that count at the rated clock, within 2 % (the relu and a kernel boundary add ~0.3 %). With
// reward.clock_basis rated the medians are the rescaled ones.
TEST(RewardGpu, MeasuredClockMatchesACycleCountedKernel) {
  REQUIRE_CUDA();
#ifdef KERNELRL_HAVE_CUDA
  int khz = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), cudaSuccess);
  const double rated_mhz = khz / 1000.0, spin_cycles = 4e6;
  const TaskSpec t = relu_task("relu_spin_gpu_test", 1 << 16);
  for (const std::string basis : {"as_run", "rated"}) {
    testing::ScratchDir dir;
    RewardConfig cfg = gpu_config(dir);
    cfg.clock_basis = basis;
    Evaluator ev(cfg, dir / "results.sqlite");
    auto r = ev.evaluate_one(t, fixture("gpu_relu_spin.cu"));
    print(basis.c_str(), r);
    ASSERT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason;
    std::printf("CLOCK %s: %.0f MHz (rated %.0f), as run %.2f us, rated %.2f us -> %.0f cycles\n",
                basis.c_str(), r.cand.clock_mhz, rated_mhz, r.cand.as_run_median_us,
                r.cand.rated_median_us, r.cand.as_run_median_us * r.cand.clock_mhz);
    ASSERT_GT(r.cand.clock_mhz, 0);
    EXPECT_LE(r.cand.clock_mhz, rated_mhz * 1.02);
    EXPECT_NEAR(r.cand.as_run_median_us * r.cand.clock_mhz / spin_cycles, 1.0, 0.02);
    EXPECT_NEAR(r.cand.rated_median_us * rated_mhz / spin_cycles, 1.0, 0.02);
    EXPECT_DOUBLE_EQ(r.cand.median_us, basis == "rated" ? r.cand.rated_median_us : r.cand.as_run_median_us);
    ASSERT_TRUE(r.baselines.count("torch"));
    EXPECT_GT(r.baselines.at("torch").clock_mhz, 0);  // every contender's replays are stamped
  }
#endif
}

// Reward integrity v3 (docs/sandbox.md), one fixture per class, each a named verdict:
//   - a forged result line on every pipe (the 2026-11-26 attack, with a correct kernel behind
//     it): reward_hack / forged_message, and no forged baseline (4242 us) in the store;
//   - work batched across a replay's calls, the batch naming the other calls' buffers:
//     reward_hack / cross_call_work (a call whose captured work names another call's buffer runs
//     alone, and writes their outputs);
//   - the same deferral done on the device, keyed on the time since the previous call, with
//     nothing for a static check to see: reward_hack / cross_call_work (call-boundary
//     verification);
//   - an L2 set-aside for persisting accesses with an access-policy window on the kernel:
//     reward_hack / device_state;
// and two honest kernels after them pass: the naive one, and one whose parameters carry another
// call's address without using it (a word that only looks like cross-call work: run alone, it
// touches no other call's buffer).
TEST(RewardGpu, RewardHacksGetNamedVerdicts) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  RewardConfig cfg = gpu_config(dir);
  ASSERT_EQ(cfg.seeds, 3);  // gpu_batched_calls.cu is honest for the trials' captures at 3 seeds
  Evaluator ev(cfg, dir / "results.sqlite");
  struct Case {
    std::string what, source;
    EvalStatus status;
    const char* check;
  };
  const std::vector<Case> cases = {
      {"forged line", testing::forging_candidate(fixture("gpu_naive.cu"), /*compute=*/true),
       EvalStatus::reward_hack, "forged_message"},
      {"batched calls", fixture("gpu_batched_calls.cu"), EvalStatus::reward_hack, "cross_call_work"},
      {"deferred calls", fixture("gpu_deferred_calls.cu"), EvalStatus::reward_hack, "cross_call_work"},
      {"persisting L2", fixture("gpu_persisting_l2.cu"), EvalStatus::reward_hack, "device_state"},
      {"peer word", fixture("gpu_peer_word.cu"), EvalStatus::ok, ""},
      {"naive", fixture("gpu_naive.cu"), EvalStatus::ok, ""},
  };
  std::vector<std::string> sources;
  for (const auto& c : cases) sources.push_back(c.source);
  const TaskSpec task = hgemm_task(128, 128, 256, "nn");
  auto rs = ev.evaluate(task, sources);
  for (size_t i = 0; i < rs.size(); ++i) {
    print(cases[i].what.c_str(), rs[i]);
    EXPECT_EQ(rs[i].status, cases[i].status) << cases[i].what << ": " << rs[i].check << ": " << rs[i].reason
                                             << "\n" << rs[i].compile_log;
    EXPECT_EQ(rs[i].check, cases[i].check) << cases[i].what << ": " << rs[i].reason;
  }
  EXPECT_NE(rs[1].reason.find("run alone"), std::string::npos) << rs[1].reason;  // batched: the alone run names it
  const EvalResult& peer = rs[rs.size() - 2];
  EXPECT_GE(peer.metrics.value("peer_words_verified", 0), 1) << peer.metrics.dump();
  ASSERT_TRUE(peer.metrics.contains("peer_words")) << peer.metrics.dump();
  // Among them the previous timing set's A, at its first byte: the fixture's 4th pointer (byte
  // 24). (Set 0's word is the last trial's A, freed: its memory now lies inside some timing set.)
  bool previous_a = false;
  for (const auto& w : peer.metrics["peer_words"])
    previous_a = previous_a || (w.value("offset", -1) == 24 && w.value("into_peer", uint64_t{1}) == 0 &&
                                w.value("peer", std::string()).find(" input 0") != std::string::npos);
  EXPECT_TRUE(previous_a) << peer.metrics["peer_words"].dump();
  EXPECT_FALSE(rs.back().metrics.contains("peer_words")) << rs.back().metrics.dump();
  std::printf("RUNNER start %.3f s, %d captures\n", rs.back().metrics.value("runner_start_s", 0.0),
              rs.back().metrics.value("captures", 0));
  EXPECT_GE(rs.back().metrics.value("captures", 0), 20);
  EXPECT_TRUE(rs.back().metrics.value("boundary_verified", false));
  // The store's baselines: measured without a candidate, none of them forged.
  int stored = 0;
  ev.store().for_each_baseline([&](const BaselineKey& key, const std::string& name, const BaselineRow& row) {
    ++stored;
    EXPECT_NE(row.stats.median_us, 4242) << name << " at " << key.m << "x" << key.n << "x" << key.k;
  });
  EXPECT_GT(stored, 0);
  EXPECT_GT(rs.back().t_ref_us, 0);
  EXPECT_LT(rs.back().t_ref_us, 100);  // cuBLASLt at 128x128x256 on any GPU here: a few us
}

// The sandbox (reward/worker/sandbox.h) is installed after CUDA, cuBLAS(Lt), the L2 flush buffer
// and a warm-up capture: the driver must keep working under it (captures, replays, the gate,
// lazy module loading), and each hostile candidate of tests/data/kernels/sandbox_misbehave.h
// (wrapping gpu_naive.cu) must be named as on the host backend.
TEST(RewardGpu, SandboxNamesHostileCandidatesAndReferencesPass) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  const std::filesystem::path target = dir / "outside";
  std::filesystem::create_directories(target);
  RewardConfig cfg = gpu_config(dir);
  cfg.sandbox = "auto";
  Evaluator ev(cfg, dir / "results.sqlite");
  std::printf("sandbox: %s\n", ev.sandbox().c_str());
  if (ev.sandbox().find("landlock ABI") == std::string::npos || ev.sandbox().find("seccomp)") == std::string::npos)
    GTEST_SKIP() << "sandbox: " << ev.sandbox();
  struct Case {
    int hostile;  // variant of sandbox_misbehave.h; -1: the fixture as it is
    const char* kernel;
    EvalStatus status;
    const char* check;
  };
  const Case cases[] = {
      {1, "gpu_naive.cu", EvalStatus::sandbox_violation, "openat"},  // token-pasted fopen
      {2, "gpu_naive.cu", EvalStatus::sandbox_violation, "openat"},  // raw syscall
      {3, "gpu_naive.cu", EvalStatus::sandbox_violation, "socket"},
      {4, "gpu_naive.cu", EvalStatus::sandbox_violation, "clone"},   // fork
      {5, "gpu_naive.cu", EvalStatus::sandbox_violation, "sigsys"},  // fork with SIGSYS blocked
      {0, "gpu_naive.cu", EvalStatus::ok, ""},                       // writes in its scratch dir
      {-1, "gpu_hgemm_ref.cu", EvalStatus::ok, ""},
      {-1, "gpu_naive.cu", EvalStatus::ok, ""},
  };
  std::vector<std::string> sources;
  for (const auto& c : cases) {
    sources.push_back(c.hostile < 0 ? fixture(c.kernel)
                                    : testing::misbehaving_candidate(c.hostile, target, fixture(c.kernel)));
    EXPECT_TRUE(screen_source(sources.back(), /*hgemm=*/true).ok) << "variant " << c.hostile;
  }
  auto rs = ev.evaluate(hgemm_task(256, 384, 4096, "nn"), sources);
  for (size_t i = 0; i < rs.size(); ++i) {
    print(cases[i].kernel, rs[i]);
    EXPECT_EQ(rs[i].status, cases[i].status) << "variant " << cases[i].hostile << ": " << rs[i].check
                                             << ": " << rs[i].reason << "\n" << rs[i].compile_log;
    EXPECT_EQ(rs[i].check, cases[i].check) << "variant " << cases[i].hostile << ": " << rs[i].reason;
  }
  std::string appeared;
  for (const auto& e : std::filesystem::directory_iterator(target)) appeared += " " + e.path().filename().string();
  EXPECT_EQ(appeared, "") << "written outside the scratch directory";
}

}  // namespace
}  // namespace kernelrl
