#include "trainer/sample_run.h"

#include <cstdio>
#include <random>

#include "common/error.h"
#include "common/fs.h"
#include "data/tasks/task_ops.h"
#include "data/tasks/task_suite.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "reward/evaluator.h"
#include "reward/task_json.h"
#include "rollout/exemplar_store.h"
#include "rollout/group_sampler.h"
#include "trainer/job_config.h"
#include "trainer/train_utils.h"

namespace kernelrl {
namespace {

TaskSpec resolve_task(const JobConfig& job, const SampleRunOptions& o, const std::string& backend) {
  if (const OpInfo* op = find_op(o.task); op && op->kind == TaskKind::hgemm) {
    int64_t m, n, k;
    parse_shape(o.shape, m, n, k);
    return hgemm_task(m, n, k, o.layout);
  }
  for (auto& t : load_task_suite(job.data.general_tasks, backend))
    if (t.name == o.task) return t;
  throw UserError("--task: no task \"" + o.task + "\" in " + job.data.general_tasks +
                  " (use hgemm with --shape, or a task name of that suite)");
}

}  // namespace

int64_t sample_kernels_from_run(const SampleRunOptions& o) {
  const fs::path config_path = o.run_dir / "config.yaml";
  if (!fs::exists(config_path))
    throw UserError("--run-dir: '" + o.run_dir.string() + "' holds no config.yaml (not a run directory)");
  JobConfig job = load_job_config(config_path, {});
  if (o.out.empty()) throw UserError("sample: --out DIR is required with --run-dir");

  // The checkpoint: the named stage, else the last stage (in config order) that has one.
  fs::path ckpt_dir;
  std::string stage = o.stage;
  for (auto it = job.trainer.stages.rbegin(); it != job.trainer.stages.rend() && stage.empty(); ++it)
    if (latest_stage_checkpoint(o.run_dir / "checkpoints", it->name)) stage = it->name;
  if (stage.empty()) throw UserError("--run-dir: '" + o.run_dir.string() + "' has no checkpoints yet");
  if (o.step >= 0) {
    ckpt_dir = o.run_dir / "checkpoints" / stage / ("step_" + std::to_string(o.step));
    if (!fs::exists(ckpt_dir / "checkpoint.json"))
      throw UserError("--step: no checkpoint '" + ckpt_dir.string() + "'");
  } else {
    auto latest = latest_stage_checkpoint(o.run_dir / "checkpoints", stage);
    if (!latest) throw UserError("--stage: stage \"" + stage + "\" has no checkpoint in this run");
    ckpt_dir = *latest;
  }
  const torch::Device device = resolve_device(o.device);
  Checkpoint ck = load_checkpoint(ckpt_dir, device);
  if (!ck.tokenizer_path) throw UserError("checkpoint '" + ckpt_dir.string() + "' carries no tokenizer");
  Tokenizer tok = Tokenizer::load(*ck.tokenizer_path);

  const fs::path store_path =
      job.reward.store.empty() ? o.run_dir / "results.sqlite" : fs::path(job.reward.store);
  std::unique_ptr<Evaluator> evaluator;
  std::string backend = device.is_cuda() ? "gpu" : "host";
  if (o.evaluate) {
    evaluator = std::make_unique<Evaluator>(job.reward, store_path);
    backend = evaluator->backend();
  }
  TaskSpec task = resolve_task(job, o, backend);

  PromptParts parts;
  parts.response_format = job.rollout.response_format;
  parts.completion = job.rollout.completion;  // edit: blocks against the best exemplar shown
  parts.backend = backend;
  if (fs::exists(store_path)) {
    ExemplarStore pool(store_path, stage);
    std::mt19937_64 rng(o.seed);
    parts.exemplars = sample_exemplars(pool.pool(task.name, INT64_MAX), job.rollout.n_exemplars,
                                       job.rollout.n_buckets, job.rollout.exemplar_temperature, rng);
  }
  SamplingConfig sampling = job.rollout.sampling;
  if (o.temperature) sampling.temperature = *o.temperature;
  if (o.top_p) sampling.top_p = *o.top_p;
  if (o.top_k) sampling.top_k = *o.top_k;
  if (o.max_new_tokens) sampling.max_new_tokens = *o.max_new_tokens;
  PromptGroup group = make_prompt_group(task, parts, tok, ck.shape.max_seq_len, sampling.max_new_tokens);
  ck.model->eval();
  auto rollouts = sample_groups(ck.model, tok, {group}, o.n, sampling, job.rollout.response_format, o.seed);

  fs::create_directories(o.out);
  std::vector<std::string> sources;
  std::vector<fs::path> files;
  const std::string ext = backend == "gpu" ? ".cu" : ".cpp";
  for (size_t i = 0; i < rollouts.size(); ++i) {
    const auto& r = rollouts[i];
    const std::string stem = task.name + "_" + std::to_string(i);
    atomic_write(o.out / (stem + ".response.txt"), r.text);
    if (!r.parsed.ok) {
      std::printf("%-40s %s\n", stem.c_str(), r.parsed.reason.c_str());
      continue;
    }
    files.push_back(o.out / (stem + ext));
    atomic_write(files.back(), r.parsed.code);
    sources.push_back(r.parsed.code);
  }
  std::printf("wrote %zu kernels for %s to %s (checkpoint %s)\n", sources.size(), task.name.c_str(),
              o.out.string().c_str(), ckpt_dir.string().c_str());
  if (evaluator && !sources.empty()) {
    auto results = evaluator->evaluate(task, sources);
    nlohmann::json verdicts = nlohmann::json::array();
    std::printf("%-48s %-14s %10s %9s  %s\n", "kernel", "status", "reward", "speedup", "reason");
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      std::printf("%-48s %-14s %10.4f %8.3fx  %s\n", files[i].filename().c_str(), status_name(r.status),
                  r.reward, r.speedup, r.reason.c_str());
      auto j = to_json(r);
      j["file"] = files[i].string();
      verdicts.push_back(j);
    }
    atomic_write(o.out / "verdicts.json", verdicts.dump(2));
  }
  return static_cast<int64_t>(sources.size());
}

}  // namespace kernelrl
