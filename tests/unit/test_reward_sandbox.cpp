// The worker's OS sandbox on the host backend (reward/worker/sandbox.h): candidates that the
// text screen passes but that write a file (token-pasted fopen, raw openat), open a TCP socket,
// fork or start a thread (token-pasted pthread_create: the host backend's runner allows no
// threads) each get sandbox_violation naming the call, and no file appears outside the worker's
// scratch directory; a candidate writing inside it, one naming its thread through /proc/self (as
// libraries do), and a plain correct one still pass. With
// reward.sandbox: off the same file-writing candidate passes and its file appears, and the
// thread starter's thread runs (the test can fail). Skips where the kernel offers no landlock or
// seccomp.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "data/tasks/task_suite.h"
#include "reward/evaluator.h"
#include "reward/screen.h"
#include "reward_test_util.h"
#include "test_util.h"

namespace kernelrl {
namespace {

namespace fs = std::filesystem;

std::string host_kernel() {
  return testing::read_text(std::string(KERNELRL_SOURCE_DIR) +
                            "/tests/data/kernels/host_hgemm_ok.cpp");
}

RewardConfig sandbox_config(const testing::ScratchDir& dir, const std::string& sandbox) {
  RewardConfig cfg = testing::fast_host_reward_config(dir);
  cfg.sandbox = sandbox;
  return cfg;
}

bool full_sandbox(const std::string& status) {
  return status.rfind("on (landlock ABI ", 0) == 0 &&
         status.find(", seccomp)") != std::string::npos;
}

TEST(RewardSandbox, HostileCandidatesAreNamedAndWriteNothing) {
  testing::ScratchDir dir;
  const fs::path target = dir / "outside";  // not beneath the worker's scratch directory
  fs::create_directories(target);
  Evaluator ev(sandbox_config(dir, "auto"), dir / "results.sqlite");
  if (!full_sandbox(ev.sandbox())) GTEST_SKIP() << "sandbox: " << ev.sandbox();
  struct Case {
    int hostile;  // variant of sandbox_misbehave.h; -1: the plain kernel
    EvalStatus status;
    const char* check;
    const char* in_reason;
  };
  const Case cases[] = {
      {1, EvalStatus::sandbox_violation, "openat", "pasted.txt"},
      {2, EvalStatus::sandbox_violation, "openat", "raw.txt"},
      {3, EvalStatus::sandbox_violation, "socket", "socket(2, 1, 0)"},  // AF_INET, SOCK_STREAM
      {4, EvalStatus::sandbox_violation, "clone", "start a process"},
      {5, EvalStatus::sandbox_violation, "sigsys", "SIGSYS"},
      {7, EvalStatus::sandbox_violation, "mmap", "start a thread"},  // pthread_create's stack
      {0, EvalStatus::ok, "", ""},   // writes in its scratch directory: allowed
      {6, EvalStatus::ok, "", ""},   // names its thread in /proc/self (denied without a verdict)
      {-1, EvalStatus::ok, "", ""},  // on a restarted worker, after all of the above
  };
  std::vector<std::string> sources;
  for (const auto& c : cases) {
    sources.push_back(c.hostile < 0
                          ? host_kernel()
                          : testing::misbehaving_candidate(c.hostile, target, host_kernel()));
    // Otherwise the test would prove nothing about the sandbox.
    ScreenResult s = screen_source(sources.back(), /*hgemm=*/true);
    EXPECT_TRUE(s.ok) << "variant " << c.hostile << " is screened out: " << s.rule << ": "
                      << s.reason;
  }
  auto rs = ev.evaluate(hgemm_task(32, 40, 512, "nn"), sources);
  for (size_t i = 0; i < rs.size(); ++i) {
    const Case& c = cases[i];
    std::printf("[variant %d] %s/%s: %s\n", c.hostile, status_name(rs[i].status),
                rs[i].check.c_str(), rs[i].reason.c_str());
    EXPECT_EQ(rs[i].status, c.status)
        << "variant " << c.hostile << ": " << status_name(rs[i].status) << " / " << rs[i].check
        << ": " << rs[i].reason << "\n"
        << rs[i].compile_log;
    EXPECT_EQ(rs[i].check, c.check) << "variant " << c.hostile << ": " << rs[i].reason;
    EXPECT_NE(rs[i].reason.find(c.in_reason), std::string::npos) << rs[i].reason;
    if (c.status != EvalStatus::ok) {
      EXPECT_EQ(rs[i].reward, ev.config().failed_reward);
    }
  }
  std::string appeared;
  for (const auto& e : fs::directory_iterator(target))
    appeared += " " + e.path().filename().string();
  EXPECT_EQ(appeared, "") << "written outside the scratch directory";
}

TEST(RewardSandbox, OffLetsTheFileWriterPassAndChangesTheFingerprint) {
  testing::ScratchDir dir;
  const fs::path target = dir / "outside";
  fs::create_directories(target);
  Evaluator off(sandbox_config(dir, "off"), dir / "results.sqlite");
  EXPECT_EQ(off.sandbox(), "off (reward.sandbox: off)");
  auto r = off.evaluate_one(hgemm_task(32, 40, 512, "nn"),
                            testing::misbehaving_candidate(1, target, host_kernel()));
  EXPECT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason;
  EXPECT_TRUE(fs::exists(target / "pasted.txt"))
      << "the unsandboxed candidate did not write its file";
  // The screen does not see the pasted pthread_create; without the sandbox its thread runs.
  r = off.evaluate_one(hgemm_task(32, 40, 512, "nn"),
                       testing::misbehaving_candidate(7, target, host_kernel()));
  EXPECT_EQ(r.status, EvalStatus::ok) << r.check << ": " << r.reason;
  EXPECT_TRUE(fs::exists(target / "thread.txt"))
      << "the unsandboxed candidate's thread did not run";
  // A verdict depends on the sandbox: results cached without it do not answer for it.
  Evaluator on(sandbox_config(dir, "auto"), dir / "results.sqlite");
  if (on.sandbox().rfind("off", 0) != 0) {
    EXPECT_NE(on.settings_fingerprint(), off.settings_fingerprint());
  }
}

}  // namespace
}  // namespace kernelrl
