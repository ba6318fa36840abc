// The lift pipeline's machinery end to end on the host backend (issue 25), through the kernelrl
// binary: a family sweep of the host HGEMM family over a small grid -> speed-annotated triplets
// of its training shapes (the held-out ones left out) -> pretraining and HGEMM RL on the
// training split -> `lift measure` on the held-out shapes (best of N before and after RL, the
// sweep's best, the best exemplar shown, the best-of-N control at the RL budget, the family
// list, every sample's class) -> the same on off-grid shapes, zero-shot -> `lift proof` -> `lift
// promote` into a catalog whose entries say they came from RL. Asserts on the numbers: RL took updates and its policy's correct rate
// rose on fixed seeds; the held-out shapes were never RL tasks; the measure's rows agree with
// the summary. The recipe is configs/quickstart-cpu.yaml's (demonstrations off, lr 1e-4 after 2
// warmup steps, a fixed probe judging learning) with 6 RL steps instead of 12 and a probe of 2
// samples per training shape: 356-383 s alone on 2 quiet cores with the default host timing, 284 s
// with the coarse timing below (issue 26; the runs that chose the recipe:
// docs/history/2026-11-27-cpu-quickstart-two-seeds-issue25.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>

#include "common/fs.h"
#include "common/metrics.h"
#include "data/corpus/triplet.h"
#include "data/families.h"
#include "data/tasks/hgemm_split.h"
#include "data/tasks/task_suite.h"
#include "test_util.h"
#include "trainer/rl_summary.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using testing::run_command;
using testing::ScratchDir;

using testing::kSrc;
using testing::kBin;

// Two bins of log2(MNK): 2^18-2^20 (7 shapes) and 2^21-2^23 (4); 10 % holds one of each out.
const char* kGrid =
    "64x64x64\n64x64x128\n64x128x64\n128x64x64\n64x128x128\n128x64x128\n128x128x64\n"
    "128x128x128\n128x128x256\n128x256x128\n256x128x128\n";

// The recipe: configs/quickstart-cpu.yaml's, shortened to fit ~5 minutes on 2 cores (issue 26).
// Host timing is coarse (3-10 rounds, 50 ms a contender; configs/debug.yaml's): the test asserts
// no speed, and alone on 2 quiet cores it cut the RL phase 179 s -> 89 s (seeding the pools 57 s
// -> 17 s) and `lift measure` 62 s -> 15 s, with the same fixed-probe result (6 % -> 28 %).
// 300 pretraining steps. 200 were tried (2026-11-27): the test took ~60 CPU-s less, but 1 of 7
// runs failed, its RL collapsing (probe 0 % -> 0 %, compiled 100 % -> 61 %, 2 of 6 steps with
// updates), and two more rose by one or three samples of 18
// (docs/history/2026-11-27-fresh-clone-issue26.md).
constexpr int kPretrainSteps = 300;
constexpr int kRlSteps = 6;
constexpr int kMeasureSamples = 8;

std::string job_yaml(const fs::path& dir) {
  return "run: {name: lift-e2e, seed: 0, device: cpu}\n"
         "model: {preset: tiny, d_model: 128, n_layers: 4, n_heads: 4, n_kv_heads: 2, d_ff: 384,\n"
         "        max_seq_len: 2560}\n"
         "data:\n"
         "  corpus: [" + (dir / "synth.jsonl").string() + ", " + (dir / "annotated.jsonl").string() + "]\n"
         "  corpus_tags: [hgemm]\n"
         "  tokenizer_vocab_size: 2048\n"
         "  hgemm_grid: " + (dir / "grid.txt").string() + "\n"
         "  hgemm_heldout: 0.1\n"
         "reward: {backend: host, alpha: 0.1, beta: 0.01, speedup_clip: 1.0, min_rounds: 3, max_rounds: 10,\n"
         "         timing_budget_ms: 50, store: " + (dir / "results.sqlite").string() +
         ", cache_dir: " + (dir / "cache").string() + "}\n"
         "rollout:\n"
         "  group_size: 8\n"
         "  prompts_per_step: 2\n"
         "  n_exemplars: 1\n"
         "  seed_exemplars: 2\n"
         "  demonstrations: 0\n"
         "  probe_samples: 2\n"
         "  sampling: {max_new_tokens: 1024, temperature: 0.6}\n"
         "trainer:\n"
         "  stages:\n"
         "    - {include: " + kSrc + "/configs/stages/pretrain.yaml, name: pretrain, steps: " + std::to_string(kPretrainSteps) + ",\n"
         "       seq_len: 2048, batch_size: 2, eval_every: " + std::to_string(kPretrainSteps) + ", checkpoint_every: " + std::to_string(kPretrainSteps) + ",\n"
         "       exemplar_context: 1.0, optimizer: {lr: 3.0e-3, warmup_steps: 15}}\n"
         "    - {include: " + kSrc + "/configs/stages/hgemm_rl.yaml, name: hgemm_rl, steps: " + std::to_string(kRlSteps) + ",\n"
         "       batch_size: 8, optimizer: {lr: 1.0e-4, warmup_steps: 2}, grpo: {advantage_norm: none}}\n";
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

TEST(LiftPipeline, SplitAnnotateTrainMeasurePromoteOnTheHostBackend) {
  ScratchDir dir;
  testing::write_text(dir / "grid.txt", kGrid);
  testing::write_text(dir / "job.yaml", job_yaml(dir.path()));
  auto kr = [&](const std::string& args) { return run_command("cd " + kSrc + " && " + kBin + " " + args); };
  // Each phase's wall time, printed: the test's budget is ~5 minutes on 2 cores (issue 26).
  auto t0 = std::chrono::steady_clock::now();
  auto lap = [&](const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    std::printf("[lift e2e] %s: %.1f s\n", phase, std::chrono::duration<double>(now - t0).count());
    std::fflush(stdout);
    t0 = now;
  };

  // 1. The split: one held-out shape per bin, fixed by the hash.
  auto split = kr("lift split " + (dir / "job.yaml").string());
  ASSERT_EQ(split.exit_code, 0) << split.output;
  const auto expected = hgemm_split_part(hgemm_grid((dir / "grid.txt").string()), 0.1, true);
  ASSERT_EQ(expected.size(), 2u);
  for (const auto& t : expected) EXPECT_THAT(split.output, HasSubstr(hgemm_split_key(t)));
  EXPECT_THAT(split.output, HasSubstr("2 of 11 shapes held out"));

  // 2. Data: the host family, a sweep of it over the grid, annotated examples of the 9 training
  //    shapes (each with the family's best variant there: one kernel per shape).
  auto synth = kr("data synth --families hgemm_host --n 231 --out " + (dir / "synth.jsonl").string());
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  auto sweep = kr("bench --families hgemm_host --grid " + (dir / "grid.txt").string() +
                  " --backend host --per-family 0 --max-rounds 10 --timing-budget-ms 50 --out " +
                  (dir / "sweep.csv").string() +
                  " --store " + (dir / "sweep.sqlite").string() + " --cache-dir " + (dir / "cache").string());
  ASSERT_EQ(sweep.exit_code, 0) << sweep.output;
  auto annotate = kr("lift annotate " + (dir / "job.yaml").string() + " --grid-csv " +
                     (dir / "sweep.csv").string() + " --device host --backend host --reference torch --out " +
                     (dir / "annotated.jsonl").string());
  ASSERT_EQ(annotate.exit_code, 0) << annotate.output;
  lap("split, synth, sweep, annotate");
  const auto annotated = read_triplets(dir / "annotated.jsonl");
  ASSERT_EQ(annotated.size(), 9u) << annotate.output;
  std::set<std::string> heldout_names;
  for (const auto& t : expected) heldout_names.insert(t.name);
  for (const auto& t : annotated) {
    EXPECT_THAT(t.instruction, HasSubstr("Target device: host."));
    EXPECT_EQ(t.context.rfind("Rank 1 of the variants measured at this shape on host. 1 measured; device time ", 0), 0u)
        << t.context;
    for (const auto& h : expected) EXPECT_THAT(t.id, ::testing::Not(HasSubstr(hgemm_split_key(h))));
  }

  // 3. Pretraining and HGEMM RL on the training split.
  // Two intra-op threads (CTest gives tests one): the pretraining is most of this test's time.
  // Two intra-op threads (the recipe's runs used them), waiting passively: beside other tests on
  // 2 cores, spinning OpenMP threads doubled this test's wall time (816.7 s against 356-383 s
  // alone, fresh clone, 2026-11-27).
  auto train = run_command("cd " + kSrc + " && OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE " + kBin + " train " +
                           (dir / "job.yaml").string() + " --run-dir " + (dir / "run").string());
  ASSERT_EQ(train.exit_code, 0) << train.output;
  lap("pretrain + RL");
  EXPECT_THAT(train.output, HasSubstr("hgemm_rl: 9 tasks"));  // 11 shapes, 2 held out
  const RlLearning l = rl_learning(dir / "run/metrics.jsonl", "hgemm_rl");
  ASSERT_EQ(l.steps, kRlSteps);
  EXPECT_GT(l.updates, 0);
  // Learning, on the fixed probe (rollout.probe_samples: the 9 training shapes' prompts, 2
  // samples each, the same prompts and sampling seed before the first update and after the
  // last, so the draw of prompts cancels): its correct rate rose. (The run's own verdict asks
  // 10 points, 2 of these 18 samples; runs F1-F4 rose 11->61, 6->28, 28->56, 6->17 %: the last by
  // one sample over that line, so the test asks the rise and prints the verdict.) The reward is
  // not asserted: host times of the LibTorch reference swing 100x with the load of a shared
  // 2-core machine, and with them every speedup.
  ASSERT_EQ(l.probe_rows, 18) << format_rl_learning(l);
  EXPECT_GT(l.probe_correct_after, l.probe_correct_before) << format_rl_learning(l);
  EXPECT_THAT(train.output, HasSubstr("hgemm_rl: fixed probe")) << train.output;
  std::printf("%s", format_rl_learning(l).c_str());
  // No RL candidate was for a held-out shape.
  auto tasks = run_command("sqlite3 " + (dir / "results.sqlite").string() +
                           " 'select distinct task from candidates'");
  if (tasks.exit_code == 0) {
    for (const auto& name : lines(tasks.output)) EXPECT_EQ(heldout_names.count(name), 0u) << name;
    EXPECT_FALSE(lines(tasks.output).empty());
  }

  // 4. The measure on the held-out shapes: best of 8, before and after, in one batch per shape
  //    (of 4, one run of three found no passing after-RL sample at one shape, 2026-11-27).
  //    With the issue 39 controls: best-of-N from the before policy at the after arm's
  //    evaluations (8 + the RL stage's candidates over its 9 training shapes, rounded up: 6
  //    steps x 16 give 8 + 11 = 19 samples) and the host family's whole list at each shape.
  auto measure = kr("lift measure --run-dir " + (dir / "run").string() + " --out " +
                    (dir / "lift").string() + " --samples " + std::to_string(kMeasureSamples) +
                    " --best-of-n -1 --family-list 0");
  ASSERT_EQ(measure.exit_code, 0) << measure.output;
  lap("lift measure");
  // The RL budget the control matched, from the run's metrics (rl.json).
  const auto rl = nlohmann::json::parse(testing::read_text(dir / "lift/rl.json"));
  EXPECT_EQ(rl["steps"], kRlSteps);
  EXPECT_EQ(rl["training_shapes"], 9);
  EXPECT_GE(rl["candidates"].get<int64_t>(), kRlSteps * 16);  // 2 prompts x 8 a step, at least
  const int64_t kBestOfN = kMeasureSamples + (rl["candidates"].get<int64_t>() + 8) / 9;
  EXPECT_EQ(rl["before_samples"], kBestOfN);
  std::vector<nlohmann::json> rows;
  for (const auto& line : lines(testing::read_text(dir / "lift/per_shape.jsonl")))
    rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 2u);
  double mean_after = 0;
  for (const auto& r : rows) {
    SCOPED_TRACE(r.dump());
    EXPECT_EQ(heldout_names.count(r["task"].get<std::string>()), 1u);
    EXPECT_EQ(r["samples"], kMeasureSamples);
    EXPECT_EQ(r["reference"], "torch");
    EXPECT_GT(r["sweep"].get<double>(), 0);     // a host family variant passes at every shape
    EXPECT_GT(r["exemplar"].get<double>(), 0);  // the prompt showed one of them
    EXPECT_GE(r["after_passed"].get<int64_t>(), 1);
    EXPECT_LE(r["after_novel"].get<int64_t>(), r["after_passed"].get<int64_t>());
    EXPECT_GT(r["after"].get<double>(), 0);
    EXPECT_TRUE(fs::exists(dir / "lift" / r["after_kernel"].get<std::string>()));
    EXPECT_EQ(r["split"], "grid");
    EXPECT_EQ(r["prompt_mode"], "exemplars");
    // The controls: best-of-N contains the before arm's samples, so it is at least as fast; the
    // family list holds the sweep's pick (host: the whole list), so it is at least as fast too.
    EXPECT_EQ(r["best_of_n_samples"], kBestOfN);
    EXPECT_GE(r["best_of_n"].get<double>(), r["before"].get<double>());
    EXPECT_GE(r["best_of_n_passed"].get<int64_t>(), r["before_passed"].get<int64_t>());
    EXPECT_GT(r["family_list_variants"].get<int64_t>(), 1);
    EXPECT_GT(r["family_list"].get<double>(), 0);
    EXPECT_EQ(r["after_novel"].get<int64_t>(),
              r["after_new_tuple"].get<int64_t>() + r["after_new_body"].get<int64_t>());
    EXPECT_THAT(std::string("listed new_tuple new_body"), HasSubstr(r["after_class"].get<std::string>()));
    mean_after += r["after"].get<double>() / 2;
  }
  // Every sample's verdict, a line per shape: its "ok" count is the row's pass count, its best
  // speedup the row's best, and the after side carries the code of its passing samples.
  std::map<std::string, nlohmann::json> verdicts;
  for (const auto& line : lines(testing::read_text(dir / "lift/samples.jsonl"))) {
    auto j = nlohmann::json::parse(line);
    verdicts[j["task"].get<std::string>()] = j;
  }
  ASSERT_EQ(verdicts.size(), 2u);
  for (const auto& r : rows) {
    SCOPED_TRACE(r["task"].get<std::string>());
    const auto& v = verdicts.at(r["task"].get<std::string>());
    // The before list holds the best-of-N control's samples, the first 8 being the before arm.
    ASSERT_EQ(v["before"].size(), static_cast<size_t>(kBestOfN));
    ASSERT_EQ(v["after"].size(), static_cast<size_t>(kMeasureSamples));
    for (const std::string side : {"before", "after", "best_of_n"}) {
      const auto& list = v[side == "best_of_n" ? "before" : side];
      const size_t n = side == "before" ? kMeasureSamples : list.size();
      int64_t ok = 0, new_samples = 0;
      double best = 0;
      for (size_t i = 0; i < n; ++i) {
        const auto& x = list[i];
        const bool passed = x["status"] == "ok";
        ok += passed;
        // Every sample has a class: its failure, or listed / new_tuple / new_body when it passed.
        const std::string cls = x["class"].get<std::string>();
        if (passed) EXPECT_THAT(std::string("listed new_tuple new_body"), HasSubstr(cls));
        else EXPECT_EQ(cls, x["status"].get<std::string>());
        new_samples += cls == "new_tuple" || cls == "new_body";
        if (passed) best = std::max(best, x["speedup"].get<double>());
        if (side == "after" && passed) {
          EXPECT_FALSE(x["code"].get<std::string>().empty());
        }
      }
      EXPECT_EQ(ok, r[side + "_passed"].get<int64_t>()) << side;
      EXPECT_NEAR(best, r[side].get<double>(), 1e-9) << side;
      if (side != "best_of_n") {
        EXPECT_EQ(new_samples, r[side + "_novel"].get<int64_t>()) << side;
      }
    }
    EXPECT_EQ(v["family_list"].size(), r["family_list_variants"].get<size_t>());
  }
  auto summary = nlohmann::json::parse(testing::read_text(dir / "lift/summary.json"));
  EXPECT_EQ(summary["shapes"], 2);
  EXPECT_NEAR(summary["mean_after"].get<double>(), mean_after, 1e-9);
  EXPECT_THAT(testing::read_text(dir / "lift/lift.md"), HasSubstr("Targets: lift >= +10 %"));
  EXPECT_EQ(lines(testing::read_text(dir / "lift/curves.csv")).size(), kRlSteps + 1u);  // header + steps
  // Resumable: a second call measures nothing again.
  auto again = kr("lift measure --run-dir " + (dir / "run").string() + " --out " +
                  (dir / "lift").string() + " --samples " + std::to_string(kMeasureSamples) +
                  " --best-of-n -1 --family-list 0");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(lines(testing::read_text(dir / "lift/per_shape.jsonl")).size(), 2u);

  // 4b. Off-grid shapes, zero-shot: two sizes no family handles (not multiples of 64), the
  //     prompt showing seed variants with no score; a shape of the training split is refused.
  testing::write_text(dir / "offgrid.txt", "# off-grid\n100x64x64\n7x128x64\n");
  auto off = kr("lift measure --run-dir " + (dir / "run").string() + " --out " + (dir / "lift-off").string() +
                " --samples 4 --best-of-n 6 --shapes " + (dir / "offgrid.txt").string() +
                " --prompt-mode zero_shot");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  lap("lift measure off-grid zero-shot");
  for (const auto& line : lines(testing::read_text(dir / "lift-off/per_shape.jsonl"))) {
    const auto r = nlohmann::json::parse(line);
    SCOPED_TRACE(line);
    EXPECT_EQ(r["split"], "offgrid");
    EXPECT_EQ(r["prompt_mode"], "zero_shot");
    EXPECT_EQ(r["sweep"].get<double>(), 0);  // every family variant refuses the shape
    EXPECT_GE(r["exemplars_shown"].get<int64_t>(), 1);
    EXPECT_EQ(r["best_of_n_samples"], 6);
  }
  for (const auto& line : lines(testing::read_text(dir / "lift-off/prompts.jsonl")))
    for (const auto& e : nlohmann::json::parse(line)["exemplars"]) EXPECT_EQ(e["score"].get<double>(), -1);
  auto trained = kr("lift measure --run-dir " + (dir / "run").string() + " --out " + (dir / "lift-bad").string() +
                    " --samples 2 --shapes " + (dir / "grid.txt").string());
  EXPECT_NE(trained.exit_code, 0);
  EXPECT_THAT(trained.output, HasSubstr("is a training shape of the run's job"));

  // 4c. The proof over both: pass rates beside speeds, gains, curves, each target marked.
  auto proof = kr("lift proof --lift " + (dir / "lift").string() + " --lift " + (dir / "lift-off").string() +
                  " --resamples 1000 --out " + (dir / "proof").string());
  ASSERT_EQ(proof.exit_code, 0) << proof.output;
  const std::string proof_md = testing::read_text(dir / "proof/proof.md");
  EXPECT_THAT(proof_md, HasSubstr("## grid/exemplars (1 seed)"));
  EXPECT_THAT(proof_md, HasSubstr("## offgrid/zero_shot (1 seed)"));
  EXPECT_THAT(proof_md, HasSubstr("fewer than 3 seeds"));
  EXPECT_EQ(lines(testing::read_text(dir / "proof/per_shape.csv")).size(), 5u);
  EXPECT_THAT(testing::read_text(dir / "proof/curves_k.csv"), HasSubstr("grid/exemplars,0,best_of_n," + std::to_string(16)));

  // 5. Discoveries into the catalog: with a margin of 0.25 every passing after-RL kernel within
  //    4x of the sweep qualifies (the GPU run asks 1.02; 6 RL steps that reward correctness
  //    first do not reliably reach the sweep's fastest variant: a run of 8 steps at 0.5 promoted
  //    none, 2026-11-27); each is re-verified in a fresh store.
  //    With --family-list 0 the fresh evaluation also times the sweep variant's family's whole
  //    list at the shape, and each kernel must beat its fastest by the margin too.
  auto promote = kr("lift promote --run-dir " + (dir / "run").string() + " --lift " +
                    (dir / "lift").string() + " --margin 0.25 --family-list 0 --out " +
                    (dir / "cat.json").string());
  ASSERT_EQ(promote.exit_code, 0) << promote.output;
  const size_t n_host_nn = [] {
    size_t n = 0;
    for (const auto& v : hgemm_family_variants("hgemm_host")) n += v.layout == "nn" && v.acc == "f32";
    return n;
  }();
  EXPECT_THAT(promote.output, HasSubstr("the family list's fastest of " + std::to_string(n_host_nn) + ": hgemm_host_"))
      << promote.output;
  EXPECT_THAT(promote.output, HasSubstr("reached 0.25x the speedup of the sweep's best and of the family list's fastest"))
      << promote.output;
  lap("lift measure again, lift promote");
  EXPECT_TRUE(fs::exists(dir / "lift/verify.sqlite"));
  auto cat = nlohmann::json::parse(testing::read_text(dir / "cat.json"));
  ASSERT_EQ(cat["entries"].size(), 2u) << promote.output;
  for (const auto& e : cat["entries"]) {
    ASSERT_TRUE(e.contains("provenance")) << e.dump();
    EXPECT_EQ(e["provenance"]["kind"], "rl");
    EXPECT_EQ(e["provenance"]["stage"], "hgemm_rl");
    EXPECT_EQ(e["provenance"]["step"], kRlSteps);
    EXPECT_EQ(e["provenance"]["reverified"], true);
  }
  auto show = kr("catalog show " + (dir / "cat.json").string());
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_THAT(show.output, HasSubstr("rl hgemm_rl@" + std::to_string(kRlSteps) + " (reverified)"));
  EXPECT_THAT(show.output, HasSubstr("2 written by an RL policy"));
}

}  // namespace
}  // namespace kernelrl
