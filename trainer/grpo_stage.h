// The RL stages (general_rl, hgemm_rl): contrastive GRPO as CUDA-L1 describes it, on the
// general-kernel suite (LibTorch reference as t_ref) or the HGEMM grid (cuBLAS/cuBLASLt as
// t_ref). One step reads top to bottom (RlStage::train_step): pick prompts -> sample groups ->
// score (trainer/rl_scorer.h: one evaluator batch across tasks, every compile in parallel, then
// timing) -> [DAPO resampling, later turns] -> advantages -> μ clipped updates
// (trainer/grpo_step.h); the stage loop (trainer/stage_loop.h) writes its metrics
// (trainer/rl_metrics.h) and checkpoints. Formulas: trainer/grpo.h and docs/grpo.md.
#pragma once

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "data/tasks/task.h"
#include "trainer/stage_context.h"

namespace kernelrl {

// The training tasks of an RL stage kind on a backend ("gpu" | "host").
std::vector<TaskSpec> rl_stage_tasks(const JobConfig& job, const std::string& kind,
                                     const std::string& backend);

class Evaluator;
class SeedGrid;

// The kernel-family variants that seed an empty exemplar pool (step 0), n of them. With a seed
// grid (rollout.seed_grid, an HGEMM task on a GPU): the variants measured best at the nearest
// training shape, fastest first. Otherwise round-robin over the families that offer the task,
// each family's variants in an order seeded by the task name, so the first prompts show the
// range of families, not one family's first few.
std::vector<std::string> seed_sources(Evaluator& ev, const TaskSpec& task, int64_t n,
                                      const SeedGrid* grid = nullptr);
class ExemplarStore;

// What seeding exemplar pools did: tasks seeded, seeds evaluated (compiled and timed: what
// the evaluator's workers ran), seeds whose results came from the results store, seconds.
// Summed over the ranks.
struct SeedStats {
  int64_t tasks = 0, evaluated = 0, stored = 0;
  double seconds = 0;
};
// Seeds the empty pools of those `tasks` that `seeded` does not list yet with n seeds each
// (seed_sources), and lists them in `seeded`. A seed whose result the results store holds (this
// device, these settings) is not evaluated again. Data parallel: a collective; every rank calls
// it with the same tasks, each evaluates its share, rank 0 writes the pools; the caller's
// barrier makes them visible to every rank.
SeedStats seed_pools(ExemplarStore& pool, Evaluator& ev, const std::vector<const TaskSpec*>& tasks, int64_t n,
                     const SeedGrid* grid, std::set<std::string>& seeded);
// The job's seed grid (rollout.seed_grid), its held-out shapes (data.hgemm_heldout of
// data.hgemm_grid) excluded; null when rollout.seed_grid is "".
std::unique_ptr<SeedGrid> job_seed_grid(const JobConfig& job);

// Runs the stage; returns its final checkpoint directory.
std::filesystem::path run_grpo_stage(StageContext& ctx);

}  // namespace kernelrl
