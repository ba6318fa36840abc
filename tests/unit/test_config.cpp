// Config reading: every error names the full key path; overrides, includes and the writer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/config.h"
#include "test_util.h"
#include "trainer/job_config.h"
#include "trainer/pipeline.h"

namespace kernelrl {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::write_text;

JobConfig parse(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  YAML::Node root = YAML::Load(yaml);
  cfg::apply_overrides(root, overrides);
  JobConfig job;
  cfg::read(root, job);
  return job;
}

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse(yaml, overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Config, DefaultsWhenSectionsAreAbsent) {
  JobConfig job = parse("{}");
  EXPECT_EQ(job.model.preset, "tiny");
  EXPECT_DOUBLE_EQ(job.reward.alpha, 0.1);
  EXPECT_TRUE(job.trainer.stages.empty());
}

TEST(Config, ReadsNestedValuesAndLists) {
  JobConfig job = parse(R"(
run: {name: q, seed: 7}
rollout: {group_size: 16, sampling: {temperature: 0.7, top_k: 50}}
trainer:
  stages:
    - {name: pre, kind: pretrain, steps: 30, optimizer: {lr: 1e-3}}
    - {kind: hgemm_rl, steps: 5}
)");
  EXPECT_EQ(job.run.seed, 7);
  EXPECT_EQ(job.rollout.group_size, 16);
  EXPECT_DOUBLE_EQ(job.rollout.sampling.temperature, 0.7);
  EXPECT_EQ(job.rollout.sampling.top_k, 50);
  ASSERT_EQ(job.trainer.stages.size(), 2u);
  EXPECT_EQ(job.trainer.stages[0].name, "pre");
  EXPECT_DOUBLE_EQ(job.trainer.stages[0].optimizer.lr, 1e-3);
  EXPECT_EQ(job.trainer.stages[1].kind, "hgemm_rl");
  EXPECT_EQ(job.trainer.stages[1].steps, 5);
}

TEST(Config, WrongTypeNamesFullKeyPathAndExpectation) {
  EXPECT_EQ(error_of("rollout: {sampling: {top_p: abc}}"),
            "rollout.sampling.top_p: expected a number in (0, 1], got \"abc\"");
  EXPECT_EQ(error_of("rollout: {group_size: 2.5}"),
            "rollout.group_size: expected an integer >= 1, got \"2.5\"");
  EXPECT_EQ(error_of("model: {tie_embeddings: maybe}"),
            "model.tie_embeddings: expected true or false, got \"maybe\"");
  EXPECT_EQ(error_of("rollout: {sampling: 3}"),
            "rollout.sampling: expected a mapping, got \"3\"");
}

TEST(Config, OutOfRangeNamesKeyAndRange) {
  EXPECT_EQ(error_of("rollout: {sampling: {top_p: 0}}"),
            "rollout.sampling.top_p: expected a number in (0, 1], got \"0\"");
  EXPECT_EQ(error_of("reward: {alpha: -1}"),
            "reward.alpha: expected a number >= 0, got \"-1\"");
}

TEST(Config, BadChoiceListsAllowedValues) {
  EXPECT_EQ(error_of("reward: {timing: turbo}"),
            "reward.timing: expected one of device, call, server, got \"turbo\"");
}

TEST(Config, UnknownKeyNamesPathAndSuggests) {
  std::string e = error_of("rollout: {sampling: {temprature: 0.5}}");
  EXPECT_THAT(e, HasSubstr("rollout.sampling.temprature: unknown key"));
  EXPECT_THAT(e, HasSubstr("did you mean 'temperature'?"));
  EXPECT_THAT(error_of("bogus: 1"), HasSubstr("bogus: unknown key"));
}

TEST(Config, ErrorsInsideListItemsCarryTheIndex) {
  EXPECT_EQ(error_of("trainer: {stages: [{kind: pretrain}, {kind: foo}]}"),
            "trainer.stages[1].kind: expected one of pretrain, general_rl, hgemm_rl, got \"foo\"");
  EXPECT_THAT(error_of("trainer: {stages: [{kind: pretrain, stepz: 3}]}"),
              HasSubstr("trainer.stages[0].stepz: unknown key"));
}

TEST(Config, StagesRefuseTheOtherKindsKeys) {
  EXPECT_EQ(error_of("trainer: {stages: [{kind: pretrain}, {kind: hgemm_rl, seq_len: 512}]}"),
            "trainer.stages[1].seq_len: a pretrain-only key; this stage is an RL stage");
  EXPECT_EQ(error_of("trainer: {stages: [{kind: general_rl, eval_every: 5}]}"),
            "trainer.stages[0].eval_every: a pretrain-only key; this stage is an RL stage");
  EXPECT_EQ(error_of("trainer: {stages: [{kind: pretrain, grpo: {kl_coef: 0.1}}]}"),
            "trainer.stages[0].grpo: an RL-only section; this stage is a pretrain stage");
  // Each kind still reads its own keys.
  JobConfig job = parse(
      "trainer: {stages: [{kind: pretrain, seq_len: 64}, {kind: hgemm_rl, grpo: {kl_coef: 0.1}}]}", {});
  EXPECT_EQ(job.trainer.stages[0].seq_len, 64);
  EXPECT_DOUBLE_EQ(job.trainer.stages[1].grpo.kl_coef, 0.1);
}

TEST(Config, OverridesApplyOnTopAndCreateKeys) {
  JobConfig job = parse("reward: {alpha: 0.5}", {"reward.alpha=0.25", "run.seed=3",
                                                 "rollout.sampling.top_k=8"});
  EXPECT_DOUBLE_EQ(job.reward.alpha, 0.25);
  EXPECT_EQ(job.run.seed, 3);
  EXPECT_EQ(job.rollout.sampling.top_k, 8);
}

TEST(Config, OverridesIndexIntoLists) {
  JobConfig job = parse("trainer: {stages: [{kind: pretrain, steps: 3}]}",
                        {"trainer.stages.0.steps=9"});
  EXPECT_EQ(job.trainer.stages[0].steps, 9);
  EXPECT_THAT(error_of("trainer: {stages: [{kind: pretrain}]}", {"trainer.stages.4.steps=1"}),
              HasSubstr("trainer.stages.4.steps: '4' is not an index"));
}

TEST(Config, OverrideErrors) {
  EXPECT_THAT(error_of("{}", {"foo.bar=1"}), HasSubstr("foo: unknown key"));
  EXPECT_THAT(error_of("{}", {"reward.alpha"}), HasSubstr("expected key.path=value"));
  EXPECT_THAT(error_of("{}", {"reward.alpha="}), HasSubstr("empty value"));
  EXPECT_EQ(error_of("{}", {"reward.alpha=x"}),
            "reward.alpha: expected a number >= 0, got \"x\"");
}

TEST(Config, IncludeMergesBaseUnderTopAndResolvesRelativePaths) {
  ScratchDir dir;
  write_text(dir / "presets/base.yaml", "reward: {alpha: 0.5, beta: 0.1}\nrun: {seed: 1}\n");
  write_text(dir / "presets/stage.yaml", "kind: hgemm_rl\nsteps: 40\n");
  write_text(dir / "job.yaml", R"(include: presets/base.yaml
reward: {beta: 0.2}
trainer:
  stages:
    - {include: presets/stage.yaml, steps: 7}
)");
  JobConfig job;
  cfg::load(dir / "job.yaml", {"run.seed=5"}, job);
  EXPECT_DOUBLE_EQ(job.reward.alpha, 0.5);  // from the include
  EXPECT_DOUBLE_EQ(job.reward.beta, 0.2);   // the including file wins
  EXPECT_EQ(job.run.seed, 5);               // overrides win over both
  ASSERT_EQ(job.trainer.stages.size(), 1u);
  EXPECT_EQ(job.trainer.stages[0].kind, "hgemm_rl");
  EXPECT_EQ(job.trainer.stages[0].steps, 7);
}

TEST(Config, IncludeErrors) {
  ScratchDir dir;
  write_text(dir / "a.yaml", "include: b.yaml\n");
  write_text(dir / "b.yaml", "include: a.yaml\n");
  JobConfig job;
  try {
    cfg::load(dir / "a.yaml", {}, job);
    FAIL() << "cycle not detected";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("include cycle"));
  }
  write_text(dir / "c.yaml", "include: missing.yaml\n");
  try {
    cfg::load(dir / "c.yaml", {}, job);
    FAIL() << "missing include not reported";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("included config"));
    EXPECT_THAT(e.what(), HasSubstr("missing.yaml' not found"));
  }
  write_text(dir / "bad.yaml", "reward: {alpha: [1,\n");
  try {
    cfg::load(dir / "bad.yaml", {}, job);
    FAIL() << "syntax error not reported";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.yaml:"));
    EXPECT_THAT(e.what(), HasSubstr("invalid YAML"));
  }
}

TEST(Config, WriterRoundTripsEveryField) {
  JobConfig job = parse(R"(
run: {name: rt, seed: 11}
reward: {alpha: 0.125, baseline: cublas-tn}
data: {corpus: [a.jsonl, b.jsonl]}
trainer: {stages: [{name: s, kind: general_rl, steps: 3, optimizer: {lr: 2.5e-5}}]}
)");
  std::string yaml = cfg::to_yaml(job);
  EXPECT_THAT(yaml, HasSubstr("# "));  // fields carry their doc comments
  JobConfig back = parse(yaml);
  EXPECT_EQ(cfg::to_yaml(back), yaml);
  EXPECT_EQ(back.run.name, "rt");
  EXPECT_DOUBLE_EQ(back.reward.alpha, 0.125);
  EXPECT_EQ(back.reward.baseline, "cublas-tn");
  EXPECT_EQ(back.data.corpus, (std::vector<std::string>{"a.jsonl", "b.jsonl"}));
  EXPECT_DOUBLE_EQ(back.trainer.stages[0].optimizer.lr, 2.5e-5);
}

TEST(Config, DuplicateStageNamesAreRejected) {
  ScratchDir dir;
  write_text(dir / "j.yaml", "trainer: {stages: [{kind: pretrain}, {kind: pretrain}]}\n");
  try {
    load_job_config(dir / "j.yaml", {});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("trainer.stages[1].name"));
  }
}

// Cross-field rules run at load, for every enabled stage: a bad rollout combination for the
// RL stage after a pretrain stage fails before anything trains.
std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  ScratchDir dir;
  write_text(dir / "j.yaml", yaml);
  try {
    load_job_config(dir / "j.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

const char* kPretrainThenRl = R"(
data: {corpus: [c.jsonl]}
trainer: {stages: [{name: pre, kind: pretrain, steps: 2}, {name: rl, kind: hgemm_rl, steps: 2}]}
)";

TEST(Config, CrossFieldRulesOfALaterRlStageFailAtLoad) {
  EXPECT_EQ(load_error(kPretrainThenRl), "<no error>");
  EXPECT_THAT(load_error(kPretrainThenRl, {"rollout.turns=2", "rollout.demonstrations=1"}),
              HasSubstr("rollout.turns: multi-turn refinement does not combine with"));
  EXPECT_THAT(load_error(kPretrainThenRl, {"rollout.turns=2", "rollout.dynamic_sampling_rounds=1"}),
              HasSubstr("rollout.turns:"));
  EXPECT_THAT(load_error(kPretrainThenRl, {"rollout.demonstrations=1", "rollout.response_format=sections"}),
              HasSubstr("rollout.demonstrations: needs rollout.response_format: code"));
  EXPECT_THAT(load_error(kPretrainThenRl, {"model.prompt_format=chatml", "rollout.response_format=sections"}),
              HasSubstr("rollout.response_format: a chat model.prompt_format (chatml)"));
  EXPECT_THAT(load_error(kPretrainThenRl, {"reward.min_rounds=60", "reward.max_rounds=50"}),
              HasSubstr("reward.min_rounds: 60 is above reward.max_rounds 50"));
  // GRPO settings that would never update or never smooth (issue 39).
  EXPECT_THAT(load_error(kPretrainThenRl, {"rollout.group_size=1"}),
              HasSubstr("rollout.group_size: 1 completion per prompt gives every advantage 0"));
  EXPECT_THAT(load_error(kPretrainThenRl, {"trainer.stages.1.grpo.smoothing_window=5"}),
              HasSubstr("trainer.stages[1].grpo.smoothing_window: 5 never smooths (winsorizing "
                        "starts at 8 rewards); use 0 (off) or >= 8"));
  EXPECT_EQ(load_error(kPretrainThenRl, {"trainer.stages.1.grpo.smoothing_window=0"}),
            "<no error>");
  EXPECT_EQ(load_error(kPretrainThenRl, {"trainer.stages.1.grpo.smoothing_window=8"}),
            "<no error>");
  EXPECT_EQ(load_error(kPretrainThenRl, {"trainer.stages.1.grpo.loss_agg=dr-grpo"}), "<no error>");
  EXPECT_THAT(
      load_error(kPretrainThenRl, {"trainer.stages.1.grpo.loss_agg=dr-grpo",
                                   "trainer.stages.1.grpo.ratio_level=sequence"}),
      HasSubstr(
          "trainer.stages[1].grpo.loss_agg: dr-grpo does not combine with ratio_level: sequence"));
  EXPECT_THAT(load_error(kPretrainThenRl, {"trainer.stages.1.grpo.smoothing_min_std=0"}),
              HasSubstr("trainer.stages[1].grpo.smoothing_min_std: expected a number > 0"));
  // The message names the stage whose rule failed, on one line.
  const std::string e = load_error(kPretrainThenRl, {"rollout.turns=2", "rollout.demonstrations=1"});
  EXPECT_THAT(e, HasSubstr("(stage \"rl\", hgemm_rl)"));
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(Config, CrossFieldRulesOfPretrainStages) {
  EXPECT_THAT(load_error(kPretrainThenRl, {"data.corpus=[]"}),
              HasSubstr("data.corpus: stage \"pre\" (pretrain) needs at least one triplet JSONL file"));
  // A rule that depends on the ranks: checked when the pipeline knows how many there are.
  ScratchDir dir;
  write_text(dir / "j.yaml", kPretrainThenRl);
  JobConfig job = load_job_config(dir / "j.yaml", {"trainer.stages.0.batch_size=6"});
  const std::vector<const StageConfig*> pre = {&job.trainer.stages[0]};
  EXPECT_NO_THROW(check_job_config(job, pre, /*world_size=*/2));
  try {
    check_job_config(job, pre, /*world_size=*/4);
    FAIL() << "6 sequences split over 4 ranks";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("trainer.stages[0].batch_size: 6 sequences per micro-batch do "
                                    "not split over 4 ranks"));
  }
}

TEST(Config, DisabledStagesAreCheckedOnlyWhenPicked) {
  const std::vector<std::string> bad = {"rollout.turns=2", "rollout.demonstrations=1",
                                        "trainer.stages.1.enabled=false"};
  EXPECT_EQ(load_error(kPretrainThenRl, bad), "<no error>");
  ScratchDir dir;
  write_text(dir / "j.yaml", kPretrainThenRl);
  JobConfig job = load_job_config(dir / "j.yaml", bad);
  EXPECT_THROW(check_job_config(job, select_stages(job, {"rl"})), ConfigError);
}

// The pipeline runs the rules over the stages it picked before it opens the run directory: a
// job whose RL stage is misconfigured fails before its pretrain stage trains (whose corpus does
// not even exist here: reaching it would fail differently, with a UserError naming the file).
TEST(Config, PipelineChecksEveryStageBeforeTheFirstRuns) {
  ScratchDir dir;
  write_text(dir / "j.yaml", kPretrainThenRl);
  JobConfig job = load_job_config(dir / "j.yaml", {"trainer.stages.1.enabled=false"});
  job.run.dir = (dir / "run").string();
  job.data.corpus = {(dir / "missing.jsonl").string()};
  job.rollout.turns = 2;
  job.rollout.demonstrations = 1;
  PipelineOptions options;
  options.only_stages = {"pre", "rl"};
  try {
    run_pipeline(job, options);
    FAIL() << "the pipeline ran";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rollout.turns:"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
  // The RL stage's task list is read before the pretrain stage runs too.
  job.rollout.turns = 1;
  job.data.hgemm_grid = (dir / "no_such_grid.txt").string();
  try {
    run_pipeline(job, options);
    FAIL() << "the pipeline ran";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("HGEMM grid \"" + job.data.hgemm_grid + "\""));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
  // And the exemplar seed grid (rollout.seed_grid) of an HGEMM RL stage.
  job.data.hgemm_grid = "small";
  job.rollout.seed_grid = (dir / "no_such_sweep.csv").string();
  try {
    run_pipeline(job, options);
    FAIL() << "the pipeline ran";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rollout.seed_grid: family grid '" + job.rollout.seed_grid + "'"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
}

TEST(Config, ShippedConfigsLoad) {
  for (const char* name : {"quickstart.yaml", "quickstart-cpu.yaml", "debug.yaml", "pipeline.yaml",
                           "hf-policy.yaml", "lift.yaml", "lift-short.yaml", "lift-session.yaml"}) {
    SCOPED_TRACE(name);
    JobConfig job = load_job_config(std::filesystem::path(KERNELRL_SOURCE_DIR) / "configs" / name, {});
    EXPECT_FALSE(job.trainer.stages.empty());
  }
}

}  // namespace
}  // namespace kernelrl
