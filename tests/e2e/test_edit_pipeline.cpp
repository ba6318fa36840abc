// rollout.completion: edit end to end on the CPU (host backend), configs/quickstart-cpu-edit.yaml:
// `kernelrl data edits` writes parameter-change triplets of hgemm_host (compile-checked with
// g++), a tiny policy pretrains on them, then HGEMM RL steps where every completion is
// SEARCH/REPLACE blocks against the exemplar the prompt shows. Asserts that blocks applied
// (and those candidates were evaluated), that the rows whose blocks did not apply carry a
// failure name and were never compiled, that the policy updated, and that tokens per
// completion are logged and far below a whole host kernel's (~840). Took 664 s on a 2-core host
// at load ~10 beside four other builds (2026-11-28); on quiet cores it should take ~90 s (the
// pretraining's 100 steps at the CPU quickstart's rate), not measured there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>

#include "common/fs.h"
#include "run_test_util.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using testing::kBin;
using testing::kSrc;
using testing::run_command;
using testing::ScratchDir;
using testing::stage_records;

TEST(EditModePipeline, HostRlAppliesEditsNamesFailuresAndUpdates) {
  ScratchDir dir;
  const std::string edits = (dir / "edits.jsonl").string();
  auto data = run_command("cd " + kSrc + " && " + kBin +
                          " data edits configs/quickstart-cpu-edit.yaml --param-family hgemm_host "
                          "--param-changes 24 --out " + edits);
  ASSERT_EQ(data.exit_code, 0) << data.output;
  EXPECT_THAT(data.output, ::testing::HasSubstr("edit triplets"));
  EXPECT_GE(testing::count_lines(testing::read_text(edits)), 16);

  auto run = run_command("cd " + kSrc + " && " + kBin + " train configs/quickstart-cpu-edit.yaml 'data.corpus=[" +
                         edits + "]' --run-dir " + (dir / "run").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto recs = stage_records(dir / "run", "hgemm_rl");
  ASSERT_EQ(recs.size(), 3u) << run.output;
  int64_t rows = 0, applied = 0, failures = 0, named = 0, updates = 0, evaluated = 0;
  for (const auto& r : recs) {
    rows += r["edit_rows"].get<int64_t>();
    applied += r["edits_applied"].get<int64_t>();
    failures += r["format_failures"].get<int64_t>();
    for (const char* name : {"format_no_code", "edit_empty", "edit_malformed", "edit_no_match", "edit_ambiguous"})
      named += r["format_failure_" + std::string(name)].get<int64_t>();
    updates += r["updates"].get<int64_t>();
    // Rows that parsed (their blocks applied) are the ones compiled: compiled <= format_ok.
    EXPECT_LE(r["compiled_rate"].get<double>(), r["format_ok_rate"].get<double>() + 1e-12);
    evaluated += r["format_ok_rate"].get<double>() > 0;
    // An edit is a few dozen tokens; a whole host kernel is ~840.
    EXPECT_GT(r["tokens_per_completion"].get<double>(), 0);
    EXPECT_LE(r["tokens_per_completion"].get<double>(), 96);
  }
  EXPECT_EQ(rows, 3 * 2 * 4) << "every row of every step is an edit (2 prompts x 4 samples)";
  EXPECT_GT(applied, 0) << run.output;
  EXPECT_EQ(named, failures) << "every format failure carries one of the names";
  EXPECT_EQ(applied + failures, rows);
  EXPECT_GT(evaluated, 0);
  EXPECT_GT(updates, 0) << run.output;
  EXPECT_THAT(run.output, ::testing::HasSubstr("tokens per completion"));
  EXPECT_THAT(run.output, ::testing::HasSubstr("edit mode: blocks applied in"));

  // `lift measure` samples an edit-mode job's policies in edit mode too: the blocks apply to the
  // exemplar its prompt shows (a shape outside the job's grid, 2 samples a side). Parsed as a
  // whole kernel, an edit completion would compile its SEARCH/REPLACE text.
  testing::write_text(dir / "shapes.txt", "128x64x64\n");
  auto lift = run_command("cd " + kSrc + " && " + kBin + " lift measure --run-dir " + (dir / "run").string() +
                          " --out " + (dir / "lift").string() + " --samples 2 --best-of-n 2 --family-list 0 --shapes " +
                          (dir / "shapes.txt").string());
  ASSERT_EQ(lift.exit_code, 0) << lift.output;
  const auto samples = nlohmann::json::parse(testing::read_text(dir / "lift/samples.jsonl"));
  int64_t edited = 0;
  for (const char* side : {"before", "after"})
    for (const auto& v : samples[side]) {
      SCOPED_TRACE(v.dump());
      if (v["status"] == "format") {
        EXPECT_THAT(v.value("failure", ""), ::testing::StartsWith("edit_"));
      } else {
        ++edited;
      }
      if (v.contains("code")) {
        EXPECT_EQ(v["code"].get<std::string>().find("<<<<<<< SEARCH"), std::string::npos);
      }
    }
  std::printf("lift measure in edit mode: %lld of %zu samples applied\n", static_cast<long long>(edited),
              samples["before"].size() + samples["after"].size());
}

}  // namespace
}  // namespace kernelrl
