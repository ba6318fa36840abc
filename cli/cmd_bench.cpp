// `kernelrl bench --kernels DIR --grid full|small|llm|FILE --out results.csv`: evaluates per-shape
// kernels named {M}_{N}_{K}.cu over an HGEMM grid (data/tasks/task_suite.h) against every baseline and writes one CSV row
// per shape (speedup per baseline, like the paper's tables) plus a summary (mean, median, wins).
// Resumable: a shape whose kernel (same content hash) is already in the store is not re-run.
// File naming, resume and evaluation are reward/kernel_dir.h's (shared with `catalog build`).
// With --families instead of --kernels: the family grid sweep (reward/family_sweep.h).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include "cli/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/progress.h"
#include "data/tasks/task_suite.h"
#include "reward/evaluator.h"
#include "reward/family_sweep.h"
#include "reward/kernel_dir.h"

namespace kernelrl::cli {

namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void register_bench(CLI::App& app) {
  struct Opts {
    std::string kernels, grid = "small", out = "results.csv", layout = "nn", backend = "auto";
    std::string store, cache_dir, timing = "device", l2 = "cold";
    bool refresh = false;
  };
  auto o = std::make_shared<Opts>();
  auto fam = std::make_shared<FamilySweepOptions>();
  auto* sub = app.add_subcommand("bench", "Benchmark per-shape kernels over the HGEMM grid");
  auto* kernels_opt =
      sub->add_option("--kernels", o->kernels, "directory of {M}_{N}_{K}.cu kernels");
  auto* families_opt = sub->add_option(
      "--families", fam->families,
      "family sweep instead of --kernels: comma-separated HGEMM families (e.g. "
      "hgemm_wgmma,hgemm_cutlass), a pruned per-shape set of each (data/family_portfolio.h)");
  kernels_opt->excludes(families_opt);
  sub->add_option("--per-family", fam->per_family,
                  "family sweep: variants per family per shape (0 = the family's whole "
                  "candidate list)");
  sub->add_option("--time-budget-s", fam->time_budget_s,
                  "family sweep: start no new shape after this many seconds (0 = no limit)");
  sub->add_option("--order", fam->order, "family sweep: spread (size-spread order) | grid")
      ->check(CLI::IsMember({"spread", "grid"}));
  sub->add_option("--sms", fam->sms, "family sweep: SMs the pruning model assumes")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--seeds", fam->seeds, "family sweep: correctness seeds per variant")
      ->check(CLI::Range(1, 100));
  sub->add_option("--min-rounds", fam->min_rounds, "family sweep: timed rounds, at least")
      ->check(CLI::Range(1, 100000));
  sub->add_option("--max-rounds", fam->max_rounds, "family sweep: timed rounds, at most")
      ->check(CLI::Range(1, 100000));
  sub->add_option("--timing-budget-ms", fam->timing_budget_ms,
                  "family sweep: rounds = clamp(budget / slowest contender, min, max)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--compile-timeout-s", fam->compile_timeout_s,
                  "family sweep: compile timeout per variant")
      ->check(CLI::PositiveNumber);
  sub->add_option("--compile-jobs", fam->compile_jobs,
                  "family sweep: parallel compiles (0 = cores)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--grid", o->grid, "full | small | llm | FILE of `MxNxK [nn|tn] [f32|f16]` lines");
  sub->add_option("--out", o->out, "CSV of speedups per baseline");
  auto* layout_opt = sub->add_option("--layout", o->layout, "nn | tn (default: as the grid says, nn)")
                         ->check(CLI::IsMember({"nn", "tn"}));
  sub->add_option("--timing", o->timing, "device (CUDA-graph replay, default) | call | server")
      ->check(CLI::IsMember({"device", "call", "server"}));
  sub->add_option("--l2", o->l2, "cold | hot")->check(CLI::IsMember({"cold", "hot"}));
  sub->add_option("--backend", o->backend, "auto | gpu | host")->check(CLI::IsMember({"auto", "gpu", "host"}));
  sub->add_option("--store", o->store, "results store (default <kernels>/bench.sqlite; family sweep: the CSV with .sqlite)");
  sub->add_option("--cache-dir", o->cache_dir, "compile cache (default ~/.cache/kernelrl)");
  sub->add_flag("--refresh", o->refresh, "re-run shapes already in the store, re-measure baselines");
  sub->callback([o, fam, layout_opt, families_opt, sub] {
    if (families_opt->count() > 0) {
      fam->grid = o->grid;
      if (layout_opt->count() > 0) fam->layout = o->layout;
      fam->out = sub->get_option("--out")->count() > 0 ? o->out : "family_grid.csv";
      fam->backend = o->backend;
      fam->timing = o->timing;
      fam->l2 = o->l2;
      fam->store = o->store;
      fam->cache_dir = o->cache_dir;
      exit_code = run_family_sweep(*fam);
      return;
    }
    if (o->kernels.empty()) throw UserError("bench: pass --kernels DIR or --families F1,F2");
    if (!fs::is_directory(o->kernels))
      throw UserError("--kernels: " + o->kernels + " is not a directory");
    std::vector<TaskSpec> tasks = hgemm_grid(o->grid);  // full | small | llm | file
    if (layout_opt->count() > 0)
      for (auto& t : tasks) t = hgemm_task(t.m, t.n, t.k, o->layout, t.acc);
    RewardConfig cfg;
    cfg.backend = o->backend;
    cfg.timing = o->timing;
    cfg.l2 = o->l2;
    cfg.cache_dir = o->cache_dir;
    cfg.baselines = {"all"};
    cfg.refresh_baselines = o->refresh;
    fs::path store = o->store.empty() ? fs::path(o->kernels) / "bench.sqlite" : fs::path(o->store);
    Evaluator ev(cfg, store);
    const bool gpu = ev.backend() == "gpu";
    const std::vector<std::string> names =
        gpu ? report_baseline_names() : std::vector<std::string>{"torch"};

    std::ostringstream csv;
    // <timing>_us columns are the mode's times; *_call_us the eager call times measured beside
    // them in device mode (empty otherwise).
    csv << "M,N,K,status,check,t_cand_us,cv,t_cand_call_us";
    for (const auto& n : names) csv << "," << n << "_us";
    for (const auto& n : names) csv << "," << n << "_call_us";
    for (const auto& n : names) csv << ",speedup_" << n;
    csv << ",reward\n";
    std::map<std::string, std::vector<double>> speedups;
    std::map<std::string, int> wins;
    int evaluated = 0, passed = 0, missing = 0, resumed = 0;
    Progress progress("bench", static_cast<int64_t>(tasks.size()));
    DirEvalOptions dir_opts;
    dir_opts.refresh = o->refresh;
    dir_opts.progress = [&](size_t done, size_t, const std::string& status) {
      progress.update(static_cast<int64_t>(done), status);
    };
    for (const DirEvalItem& item : evaluate_kernel_dir(ev, o->kernels, tasks, dir_opts)) {
      csv << item.task.m << "," << item.task.n << "," << item.task.k;
      if (item.file.empty()) {
        ++missing;
        csv << ",missing,,,,";
        for (size_t j = 0; j < 3 * names.size(); ++j) csv << ",";
        csv << "\n";
        continue;
      }
      const EvalResult* r = &item.result;
      resumed += item.resumed;
      ++evaluated;
      csv << "," << status_name(r->status) << "," << r->check << "," << r->cand.median_us << ","
          << r->cand.cv << ",";
      if (r->cand.call_median_us > 0) csv << r->cand.call_median_us;
      for (const auto& b : names) {
        auto it = r->baselines.find(b);
        csv << ",";
        if (it != r->baselines.end() && it->second.valid()) csv << it->second.median_us;
      }
      for (const auto& b : names) {
        auto it = r->baselines.find(b);
        csv << ",";
        if (it != r->baselines.end() && it->second.call_median_us > 0) csv << it->second.call_median_us;
      }
      for (const auto& b : names) {
        auto it = r->baselines.find(b);
        csv << ",";
        if (r->passed() && it != r->baselines.end() && it->second.valid()) {
          double s = it->second.median_us / r->cand.median_us;
          csv << s;
          speedups[b].push_back(s);
          if (s > 1) ++wins[b];
        }
      }
      csv << "," << r->reward << "\n";
      if (r->passed()) ++passed;
    }
    progress.finish();
    // Summary rows: mean and median speedup, and wins (speedup > 1) per baseline.
    std::printf("\n%-18s %10s %10s %8s\n", "baseline", "mean", "median", "wins");
    std::printf("(speedups from %s times)\n", o->timing.c_str());
    std::string mean_row = "mean,,,,,,,", median_row = "median,,,,,,,", wins_row = "wins,,,,,,,";
    for (size_t j = 0; j < 2 * names.size(); ++j) {
      mean_row += ",";
      median_row += ",";
      wins_row += ",";
    }
    for (const auto& b : names) {
      const auto& v = speedups[b];
      double mean = v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
      double med = median_of(v);
      mean_row += "," + std::to_string(mean);
      median_row += "," + std::to_string(med);
      wins_row += "," + std::to_string(wins[b]);
      std::printf("%-18s %9.3fx %9.3fx %5d/%zu\n", b.c_str(), mean, med, wins[b], v.size());
    }
    csv << mean_row << ",\n" << median_row << ",\n" << wins_row << ",\n";
    atomic_write(o->out, csv.str());
    std::printf("\n%d shapes evaluated (%d from the store), %d passed, %d missing kernels -> %s\n",
                evaluated, resumed, passed, missing, o->out.c_str());
  });
}

}  // namespace kernelrl::cli
