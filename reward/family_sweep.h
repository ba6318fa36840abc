// `kernelrl bench --families F1,F2 --grid G --out grid.csv`: the family grid sweep. For every
// shape of the grid, a pruned per-shape set of family variants (data/family_portfolio.h) goes
// through reward/'s Evaluator (compiled once into the compile cache, in parallel, before the
// first shape; checked; timed in the evaluator's timing mode beside the reference) and one CSV
// row records the best variant per family and overall against the baselines (GPU: lt-auto and
// lt-auto-max; host: torch). Resumable: shapes already in the CSV are skipped; the CSV is
// rewritten (atomically) after every shape. --time-budget-s stops starting new shapes once that
// many seconds have passed since the start (compiles included). Shapes run in a spread order
// (sorted by M·N·K, visited with a golden-ratio stride), so a sweep cut short by its budget
// still covers the grid's size range; the CSV keeps the grid's order. A summary (means, wins,
// per-size bins, per-family) goes to stdout and to the CSV's name with .md.
// It lives in reward/ beside kernel_dir.h (the same shape of program: kernels over an HGEMM
// grid through the Evaluator, into a results store the catalog reads); `kernelrl bench
// --families` (cli/cmd_bench.cpp) only parses the options.
#pragma once

#include <cstdint>
#include <string>

namespace kernelrl {

struct FamilySweepOptions {
  std::string families;        // comma-separated HGEMM family names
  std::string grid = "small";  // full | small | llm | FILE
  std::string layout;          // "" = as the grid says
  std::string out = "family_grid.csv";
  std::string backend = "auto", timing = "device", l2 = "cold", store, cache_dir;
  std::string order = "spread";  // spread | grid
  int per_family = 3;            // variants per family per shape; 0 = every candidate
  int sms = 132;                 // SMs the portfolio's model assumes
  int64_t seeds = 2, min_rounds = 3, max_rounds = 30, compile_jobs = 0;
  double timing_budget_ms = 100;   // reward.timing_budget_ms for each evaluation
  double time_budget_s = 0;        // 0 = no limit
  double compile_timeout_s = 600;  // per variant (CUTLASS sm90 kernels take ~1-2 min of a core)
};

// Runs the sweep; returns the process exit status (0, or 1 when no shape had a passing
// variant). Throws UserError for bad options or a CSV that is not this sweep's.
int run_family_sweep(const FamilySweepOptions& o);

}  // namespace kernelrl
