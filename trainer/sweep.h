// Sweeps: a grid over any config keys of a job, one run directory per point, run one after
// another or one per GPU (as child `kernelrl train` processes, so one failing point does not
// stop the others), then a summary table (CSV + markdown) of each run's final metrics. A point
// may itself be data-parallel: ranks_per_point k runs it as `kernelrl train --nproc k`, and
// per-gpu then gives each running point k GPUs of its own. Where no GPU is visible a sweep may
// name another job (cpu_base) to run instead, as scripts/quickstart.sh does.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/config.h"

namespace kernelrl {

struct SweepConfig {
  std::string base;                    // job YAML, relative to the sweep file
  std::string cpu_base;                // job YAML run instead where no GPU is visible ("" = base)
  std::vector<std::string> overrides;  // key.path=value applied to every point
  YAML::Node grid;                     // key.path -> list of values; the grid is their product
  std::string dir = "runs/sweep";      // points go to <dir>/<point name>
  std::string parallel = "sequential"; // sequential | per-gpu
  int64_t ranks_per_point = 1;         // data-parallel ranks of one point (GPUs under per-gpu)
  std::vector<std::string> metrics = {"reward_mean", "correct_rate", "best_speedup", "eval_loss"};

  void visit(cfg::Visitor& v) {
    v.field("base", base, "job YAML (relative to this file)");
    v.field("cpu_base", cpu_base,
            "job YAML run instead of base where no GPU is visible (relative to this file; empty: base)");
    v.field("overrides", overrides, "key.path=value for every point");
    v.field("grid", grid, "key.path: [values...]; the sweep is their product");
    v.field("dir", dir, "parent of the points' run directories");
    v.field("parallel", parallel, "sequential | per-gpu", {"sequential", "per-gpu"});
    v.field("ranks_per_point", ranks_per_point,
            "data-parallel ranks per point (kernelrl train --nproc); GPUs each under per-gpu",
            cfg::in_closed(1, 1024));
    v.field("metrics", metrics, "final metrics in the summary (per stage)");
  }
};

struct SweepPoint {
  std::string name;                    // e.g. "reward.alpha=0.1,reward.beta=0"
  std::vector<std::string> overrides;  // the grid's key=value pairs of this point
};

// The job the points run: base, or cpu_base when `gpu_visible` is false and the file names one
// (a GPU job's model trained on the CPU, point after point, is a run nobody waits for). On the
// CPU job the sweep runs its points one at a time (`parallel` has no GPUs to spread over) and
// `note` gets the one line that says so; otherwise `note` is left empty.
std::filesystem::path sweep_base(SweepConfig& sweep, const std::filesystem::path& sweep_file,
                                 bool gpu_visible, std::string* note);

// Loads and checks a sweep file (the chosen base exists, grid is key -> non-empty list of
// scalars, every point makes a valid job). `gpu_visible` and `note` as for sweep_base.
SweepConfig load_sweep(const std::filesystem::path& path, const std::vector<std::string>& overrides,
                       bool gpu_visible, std::filesystem::path* base_path, std::string* note);

// The grid's points in row-major order of the keys as written.
std::vector<SweepPoint> sweep_points(const SweepConfig& sweep);

// Runs every point (`kernelrl_bin train base overrides... --run-dir dir/i_name`), resuming
// points that already finished or started when `resume`; writes dir/summary.csv and
// dir/summary.md. Returns the number of failed points.
int run_sweep(const SweepConfig& sweep, const std::filesystem::path& base_path,
              const std::string& kernelrl_bin, bool resume);

}  // namespace kernelrl
