// Atomic writes survive a crash mid-write; run directories refuse to clobber earlier runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "common/metrics.h"
#include "common/run_dir.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using testing::read_text;
using testing::ScratchDir;
using testing::write_text;

TEST(AtomicWrite, ReplacesContent) {
  ScratchDir dir;
  atomic_write(dir / "f.txt", "one");
  atomic_write(dir / "f.txt", "two");
  EXPECT_EQ(read_text(dir / "f.txt"), "two");
  int temps = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) temps += is_atomic_temp(e.path());
  EXPECT_EQ(temps, 0);
}

// A child process rewrites an 8 MiB file in a loop and is SIGKILLed at varying moments; the
// target must always hold one complete version, never a torn mix, and temp files left behind
// must be recognised and cleaned.
TEST(AtomicWrite, SurvivesKillMidWrite) {
  ScratchDir dir;
  const fs::path target = dir / "state.bin";
  const size_t size = 8 << 20;
  atomic_write(target, std::string(size, 'A'));
  int torn_free_kills = 0;
  for (int trial = 0; trial < 6; ++trial) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0;; ++i) atomic_write(target, std::string(size, i % 2 ? 'B' : 'C'));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + 7 * trial));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::string content = read_text(target);
    ASSERT_EQ(content.size(), size) << "torn file after kill in trial " << trial;
    ASSERT_EQ(content.find_first_not_of(content[0]), std::string::npos)
        << "mixed content after kill in trial " << trial;
    ++torn_free_kills;
  }
  EXPECT_EQ(torn_free_kills, 6);
  // A crash right after creating the temp file: the temp is ignored and cleaned up.
  write_text(dir / "state.bin.tmp.999.0", "partial");
  EXPECT_TRUE(is_atomic_temp(dir / "state.bin.tmp.999.0"));
  EXPECT_GE(remove_stale_temps(dir.path()), 1);
  EXPECT_FALSE(fs::exists(dir / "state.bin.tmp.999.0"));
  EXPECT_EQ(read_text(target).size(), size);
}

TEST(ReadFile, MissingFileIsUserErrorNamingPath) {
  try {
    read_file("/nonexistent/x.yaml", "config file");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "config file '/nonexistent/x.yaml' not found");
  }
}

TEST(RunDir, FreshRefusesNonEmptyDirectory) {
  ScratchDir dir;
  write_text(dir / "run/metrics.jsonl", "{}\n");
  try {
    RunDir::open(dir / "run", RunDirMode::fresh);
    FAIL() << "non-empty run dir accepted";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not empty"));
    EXPECT_THAT(e.what(), HasSubstr("--resume"));
    EXPECT_THAT(e.what(), HasSubstr("--overwrite"));
  }
  EXPECT_EQ(read_text(dir / "run/metrics.jsonl"), "{}\n");  // nothing lost
}

TEST(RunDir, FreshCreatesLayout) {
  ScratchDir dir;
  RunDir rd = RunDir::open(dir / "new", RunDirMode::fresh);
  EXPECT_TRUE(fs::is_directory(rd.checkpoints_dir()));
  EXPECT_TRUE(fs::is_directory(rd.logs_dir()));
  EXPECT_FALSE(rd.resumed());
  rd.write_config("a: 1\n");
  EXPECT_EQ(read_text(rd.config_path()), "a: 1\n");
}

TEST(RunDir, ResumeNeedsAnEarlierRun) {
  ScratchDir dir;
  EXPECT_THROW(RunDir::open(dir / "nothing", RunDirMode::resume), UserError);
  RunDir::open(dir / "r", RunDirMode::fresh).write_config("a: 1\n");
  write_text(dir / "r/checkpoints/step.tmp.1.0", "torn");
  RunDir rd = RunDir::open(dir / "r", RunDirMode::resume);
  EXPECT_TRUE(rd.resumed());
  EXPECT_FALSE(fs::exists(dir / "r/checkpoints/step.tmp.1.0"));  // crash leftovers cleaned
}

TEST(RunDir, OverwriteClearsContents) {
  ScratchDir dir;
  write_text(dir / "r/old.txt", "x");
  RunDir::open(dir / "r", RunDirMode::overwrite);
  EXPECT_FALSE(fs::exists(dir / "r/old.txt"));
}

TEST(Metrics, ResumeCutsBackToTheResumedStep) {
  ScratchDir dir;
  {
    MetricsWriter w(dir / "m.jsonl", -1);
    for (int s = 1; s <= 5; ++s) w.write(s, {{"loss", 1.0 / s}});
  }
  {
    MetricsWriter w(dir / "m.jsonl", 3);
    w.write(4, {{"loss", 0.0}});
  }
  auto recs = MetricsWriter::read_all(dir / "m.jsonl");
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[3]["step"], 4);
  EXPECT_DOUBLE_EQ(recs[3]["loss"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(recs[2]["loss"].get<double>(), 1.0 / 3);
}

}  // namespace
}  // namespace kernelrl
