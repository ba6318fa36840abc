#include "reward/family_sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "data/family_portfolio.h"
#include "data/tasks/task_suite.h"
#include "reward/evaluator.h"

namespace kernelrl {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, sep);) out.push_back(x);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

std::string num(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

std::string key_of(int64_t m, int64_t n, int64_t k, const std::string& layout,
                   const std::string& acc) {
  return std::to_string(m) + "," + std::to_string(n) + "," + std::to_string(k) + "," + layout +
         "," + acc;
}

// Visiting order: sorted by M·N·K, then a golden-ratio stride through that list, so every
// prefix of the order spreads over the whole size range.
std::vector<size_t> spread_order(const std::vector<TaskSpec>& tasks, std::vector<size_t> idx) {
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const auto& x = tasks[a];
    const auto& y = tasks[b];
    return std::make_tuple(x.m * x.n * x.k, x.m, x.n, x.k) <
           std::make_tuple(y.m * y.n * y.k, y.m, y.n, y.k);
  });
  const size_t n = idx.size();
  if (n < 3) return idx;
  size_t stride = static_cast<size_t>(std::llround(n * 0.6180339887));
  while (std::gcd(stride, n) != 1) ++stride;
  std::vector<size_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back(idx[(i * stride) % n]);
  return out;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return b;
}

// Summary of every row of the CSV (this run's and resumed ones).
std::string summary(const std::vector<std::string>& header,
                    const std::vector<std::vector<std::string>>& rows,
                    const std::vector<std::string>& baselines,
                    const std::vector<std::string>& families, const std::string& title,
                    size_t grid_size) {
  auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  auto value = [](const std::vector<std::string>& r, size_t c) {
    return c < r.size() && !r[c].empty() ? std::atof(r[c].c_str()) : 0.0;
  };
  std::ostringstream s;
  s << title << "\n\n" << rows.size() << " of " << grid_size << " shapes done";
  int none = 0;
  for (const auto& r : rows) none += value(r, col("passed")) == 0;
  s << "; " << none << " without a passing variant (left out of the means below).\n\n";
  s << "Best family variant per shape against each baseline (speedup = t_baseline / t_best):\n\n"
    << "| baseline | shapes | mean | geomean | median | min | max | wins (> 1) |\n"
    << "|---|---|---|---|---|---|---|---|\n";
  for (const auto& b : baselines) {
    std::vector<double> v;
    for (const auto& r : rows)
      if (double x = value(r, col("speedup_" + b)); x > 0) v.push_back(x);
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size(), lg = 0;
    for (double x : v) lg += std::log(x);
    double med = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    int wins = static_cast<int>(std::count_if(v.begin(), v.end(), [](double x) { return x > 1; }));
    s << "| " << b << " | " << v.size() << " | " << num(mean) << " | "
      << num(std::exp(lg / v.size())) << " | " << num(med) << " | " << num(v.front()) << " | "
      << num(v.back()) << " | " << wins << " |\n";
  }
  const std::string ref = baselines.back();
  s << "\nPer family (best: shapes where its best variant was the fastest passing one; its "
       "speedup: its best variant against "
    << ref << ", over the shapes where it passed):\n\n"
    << "| family | best at | passed at | mean speedup | wins (> 1) |\n|---|---|---|---|---|\n";
  for (const auto& f : families) {
    int best = 0, passed = 0, wins = 0;
    double sum = 0;
    for (const auto& r : rows) {
      best += col("best_family") < r.size() && r[col("best_family")] == f;
      double us = value(r, col(f + "_us")), b = value(r, col(ref + "_us"));
      if (us > 0 && b > 0) {
        ++passed;
        sum += b / us;
        wins += b / us > 1;
      }
    }
    s << "| " << f << " | " << best << " | " << passed << " | "
      << (passed ? num(sum / passed) : "-") << " | " << wins << " |\n";
  }
  s << "\nBy size (log2(M·N·K) bins), against " << ref << ":\n\n"
    << "| log2(MNK) | shapes | mean | min | wins |\n|---|---|---|---|---|\n";
  std::map<int, std::vector<double>> bins;
  for (const auto& r : rows)
    if (double x = value(r, col("speedup_" + ref)); x > 0)
      bins[static_cast<int>(value(r, col("log2_mnk"))) / 3 * 3].push_back(x);
  for (const auto& [lo, v] : bins) {
    double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
    s << "| " << lo << "-" << lo + 2 << " | " << v.size() << " | " << num(mean) << " | "
      << num(*std::min_element(v.begin(), v.end())) << " | "
      << std::count_if(v.begin(), v.end(), [](double x) { return x > 1; }) << " |\n";
  }
  return s.str();
}

// The options' families, checked before anything is built.
std::vector<std::string> sweep_families(const FamilySweepOptions& o) {
  std::vector<std::string> families;
  for (const auto& f : split(o.families, ','))
    if (!f.empty()) families.push_back(f);
  if (families.empty()) throw UserError("--families: name at least one HGEMM kernel family");
  if (o.order != "spread" && o.order != "grid")
    throw UserError("--order: \"" + o.order + "\" (known: spread, grid)");
  if (o.per_family < 0) throw UserError("--per-family: must be >= 0");
  return families;
}

RewardConfig sweep_reward_config(const FamilySweepOptions& o) {
  RewardConfig cfg;
  cfg.backend = o.backend;
  cfg.timing = o.timing;
  cfg.l2 = o.l2;
  cfg.cache_dir = o.cache_dir;
  cfg.baseline = "lt-auto-max";  // the host backend's rules map it to torch
  cfg.baselines = {"lt-auto"};
  cfg.seeds = o.seeds;
  cfg.min_rounds = o.min_rounds;
  cfg.max_rounds = std::max(o.min_rounds, o.max_rounds);
  cfg.timing_budget_ms = o.timing_budget_ms;
  cfg.compile_jobs = o.compile_jobs;
  cfg.compile_timeout_s = o.compile_timeout_s;
  return cfg;
}

// Every family must be an HGEMM family with variants for the evaluator's backend; one whose arch
// the device lacks is only noted (it contributes no variants).
void check_families(const std::vector<std::string>& families, Evaluator& ev) {
  const bool gpu = ev.backend() == "gpu";
  for (const auto& f : families) {
    const FamilyInfo* info = nullptr;
    for (const auto& k : kernel_families())
      if (k.name == f) info = &k;
    if (!info || info->kind != TaskKind::hgemm)
      throw UserError("--families: \"" + f + "\" is not an HGEMM kernel family");
    if (info->backends.find(gpu ? "cuda" : "host") == std::string::npos)
      throw UserError("--families: " + f + " has no " + (gpu ? "CUDA" : "host") +
                      " variants and the evaluator's backend is " + ev.backend());
    if (!arch_runs(info->arch, ev.arch()))
      std::printf("note: %s needs %s, the device is %s: it contributes no variants\n", f.c_str(),
                  info->arch.c_str(), ev.arch().c_str());
  }
}

// The CSV: its columns, and its rows by shape key (this run's and resumed ones).
struct SweepTable {
  std::vector<std::string> header;
  std::string header_line;
  std::map<std::string, std::string> done;  // key -> line
};

SweepTable sweep_table(const std::vector<std::string>& baselines,
                       const std::vector<std::string>& families) {
  SweepTable t;
  t.header = {"M",        "N",      "K",           "layout",       "acc",    "log2_mnk",
              "variants", "passed", "best_family", "best_variant", "best_us"};
  for (const auto& b : baselines) t.header.push_back(b + "_us");
  for (const auto& b : baselines) t.header.push_back("speedup_" + b);
  for (const auto& f : families) {
    t.header.push_back(f + "_us");
    t.header.push_back(f + "_variant");
  }
  t.header.push_back("failures");
  t.header.push_back("eval_s");
  for (const auto& h : t.header) t.header_line += (t.header_line.empty() ? "" : ",") + h;
  return t;
}

// Resume: the rows already in the CSV, which must be this sweep's (same header).
void read_done_rows(const fs::path& out, SweepTable* table) {
  if (!fs::exists(out)) return;
  std::istringstream in(read_file(out, "--out"));
  std::string line;
  std::getline(in, line);
  if (line != table->header_line)
    throw UserError("--out " + out.string() + ": its header is not this sweep's (other " +
                    "families or backend?); pass another --out or remove the file");
  while (std::getline(in, line)) {
    auto f = split(line, ',');
    if (f.size() != table->header.size())
      throw UserError("--out " + out.string() + ": a row with " + std::to_string(f.size()) +
                      " fields, expected " + std::to_string(table->header.size()));
    table->done[f[0] + "," + f[1] + "," + f[2] + "," + f[3] + "," + f[4]] = line;
  }
}

// The grid's shapes not in the table yet (indices into tasks, in visiting order); `grid_keys`
// gets every distinct shape of the grid.
std::vector<size_t> shapes_to_run(const std::vector<TaskSpec>& tasks, const SweepTable& table,
                                  const std::string& order, std::set<std::string>* grid_keys) {
  std::vector<size_t> to_run;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const auto& t = tasks[i];
    const std::string key = key_of(t.m, t.n, t.k, t.layout, t.acc);
    if (!grid_keys->insert(key).second) continue;  // a file grid may repeat a shape
    if (!table.done.count(key)) to_run.push_back(i);
  }
  if (order == "spread") to_run = spread_order(tasks, to_run);
  return to_run;
}

// The report's first line: what was swept, how it was timed, where and when.
std::string sweep_title(const FamilySweepOptions& o, const RewardConfig& cfg, Evaluator& ev) {
  return "# Family grid sweep\n\nGrid " + o.grid + (o.layout.empty() ? "" : " (layout " + o.layout + ")") +
         ", families " + o.families + ", up to " + std::to_string(o.per_family) +
         " variants per family per shape (data/family_portfolio.h, " + std::to_string(o.sms) +
         " SMs), timing " + o.timing + "/" + o.l2 + ", " + std::to_string(o.seeds) + " seeds, rounds " +
         std::to_string(o.min_rounds) + "-" + std::to_string(cfg.max_rounds) + ", reference " +
         cfg.baseline + "; device " + ev.device_name() + " (" + ev.arch() + "), " + utc_now() + ".";
}

// Every variant the remaining shapes will run, compiled once, in parallel, before the first shape.
void precompile_portfolios(Evaluator& ev, const std::vector<TaskSpec>& tasks,
                           const std::vector<size_t>& to_run, const std::vector<std::string>& families,
                           const PortfolioOptions& popt, const std::function<double()>& elapsed) {
  std::map<std::string, std::string> unique;  // name -> source
  for (size_t i : to_run)
    for (auto& v : shape_portfolio(tasks[i], families, ev.arch(), popt))
      unique.emplace(v.name, std::move(v.source));
  if (unique.empty()) return;
  std::vector<std::string> sources;
  for (auto& [name, src] : unique) sources.push_back(src);
  const double t0 = elapsed();
  int ok = ev.precompile(sources);
  std::printf("[%6.1f s] compiled %d of %zu distinct variants in %.1f s\n", elapsed(), ok,
              sources.size(), elapsed() - t0);
  std::fflush(stdout);
}

// One shape's CSV row (without eval_s) and what its progress line reports.
struct ShapeRow {
  std::vector<std::string> fields;
  std::string best_variant;  // "" when no variant passed
  double best_us = 0, ref_us = 0;
  int passed = 0;
  size_t variants = 0;
};

// Evaluates the shape's portfolio; the best variant per family and overall, against the
// baselines of the best variant's own interleaved rounds (any result's when none passed).
ShapeRow evaluate_shape(Evaluator& ev, const TaskSpec& t, const std::vector<std::string>& families,
                        const std::vector<std::string>& baselines, const PortfolioOptions& popt) {
  std::vector<KernelVariant> vs = shape_portfolio(t, families, ev.arch(), popt);
  std::vector<std::string> sources;
  for (const auto& v : vs) sources.push_back(v.source);
  std::vector<EvalResult> rs = sources.empty() ? std::vector<EvalResult>{} : ev.evaluate(t, sources);
  ShapeRow row;
  row.variants = vs.size();
  long best = -1;
  std::map<std::string, long> fam_best;
  std::string failures;
  for (size_t i = 0; i < rs.size(); ++i) {
    if (!rs[i].passed()) {
      failures += (failures.empty() ? "" : ";") + vs[i].name + ":" + status_name(rs[i].status);
      continue;
    }
    ++row.passed;
    if (best < 0 || rs[i].cand.median_us < rs[best].cand.median_us) best = static_cast<long>(i);
    auto fb = fam_best.find(vs[i].family);
    if (fb == fam_best.end() || rs[i].cand.median_us < rs[fb->second].cand.median_us)
      fam_best[vs[i].family] = static_cast<long>(i);
  }
  const EvalResult* br = best >= 0 ? &rs[best] : nullptr;
  if (!br)
    for (const auto& r : rs)
      if (!r.baselines.empty()) br = &r;
  if (best >= 0) {
    row.best_variant = vs[best].name;
    row.best_us = rs[best].cand.median_us;
  }
  auto& f = row.fields;
  f = {std::to_string(t.m),
       std::to_string(t.n),
       std::to_string(t.k),
       t.layout,
       t.acc,
       num(std::log2(static_cast<double>(t.m) * t.n * t.k)),
       std::to_string(vs.size()),
       std::to_string(row.passed),
       best >= 0 ? vs[best].family : "",
       best >= 0 ? vs[best].name : "",
       best >= 0 ? num(rs[best].cand.median_us) : ""};
  std::vector<double> base_us;
  for (const auto& b : baselines) {
    double us = 0;
    if (br)
      if (auto it = br->baselines.find(b); it != br->baselines.end() && it->second.valid())
        us = it->second.median_us;
    base_us.push_back(us);
    f.push_back(us > 0 ? num(us) : "");
  }
  row.ref_us = base_us.back();
  for (double us : base_us) f.push_back(best >= 0 && us > 0 ? num(us / rs[best].cand.median_us) : "");
  for (const auto& fam : families) {
    auto fb = fam_best.find(fam);
    f.push_back(fb != fam_best.end() ? num(rs[fb->second].cand.median_us) : "");
    f.push_back(fb != fam_best.end() ? vs[fb->second].name : "");
  }
  f.push_back(failures);
  return row;
}

}  // namespace

int run_family_sweep(const FamilySweepOptions& o) {
  const auto start = Clock::now();
  const std::function<double()> elapsed = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  const std::vector<std::string> families = sweep_families(o);
  std::vector<TaskSpec> tasks = hgemm_grid(o.grid);
  if (!o.layout.empty())
    for (auto& t : tasks) t = hgemm_task(t.m, t.n, t.k, o.layout, t.acc);

  // Set-up: the evaluator, its baselines, the table (resumed from the CSV).
  const RewardConfig cfg = sweep_reward_config(o);
  const fs::path out = o.out;
  const fs::path store =
      o.store.empty() ? fs::path(out).replace_extension(".sqlite") : fs::path(o.store);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  Evaluator ev(cfg, store);
  const std::vector<std::string> baselines = ev.backend() == "gpu"
                                                 ? std::vector<std::string>{"lt-auto", "lt-auto-max"}
                                                 : std::vector<std::string>{"torch"};
  check_families(families, ev);
  SweepTable table = sweep_table(baselines, families);
  read_done_rows(out, &table);
  std::set<std::string> grid_keys;
  const std::vector<size_t> to_run = shapes_to_run(tasks, table, o.order, &grid_keys);
  const size_t resumed = grid_keys.size() - to_run.size();

  PortfolioOptions popt;
  popt.sms = o.sms;
  popt.per_family = o.per_family;
  const std::string title = sweep_title(o, cfg, ev);
  std::printf("%s\n%zu shapes in the grid, %zu in %s already, %zu to run\n", title.c_str(),
              grid_keys.size(), resumed, out.string().c_str(), to_run.size());
  precompile_portfolios(ev, tasks, to_run, families, popt, elapsed);

  // The CSV in the grid's order and its summary, rewritten after every shape.
  auto write_all = [&] {
    std::string csv = table.header_line + "\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& t : tasks) {
      auto it = table.done.find(key_of(t.m, t.n, t.k, t.layout, t.acc));
      if (it == table.done.end()) continue;
      csv += it->second + "\n";
      rows.push_back(split(it->second, ','));
    }
    atomic_write(out, csv);
    std::string md = summary(table.header, rows, baselines, families, title, grid_keys.size());
    atomic_write(fs::path(out).replace_extension(".md"), md);
    return md;
  };

  // The portfolio: one shape after another, within the time budget.
  size_t evaluated = 0, not_started = 0;
  for (size_t n = 0; n < to_run.size(); ++n) {
    if (o.time_budget_s > 0 && elapsed() >= o.time_budget_s) {
      not_started = to_run.size() - n;
      std::printf(
          "[%6.1f s] time budget (%.0f s) spent: %zu shapes not started (rerun to resume)\n",
          elapsed(), o.time_budget_s, not_started);
      break;
    }
    const TaskSpec& t = tasks[to_run[n]];
    const double t0 = elapsed();
    ShapeRow row = evaluate_shape(ev, t, families, baselines, popt);
    row.fields.push_back(num(elapsed() - t0));
    std::string line;
    for (const auto& x : row.fields) line += (line.empty() ? "" : ",") + x;
    table.done[key_of(t.m, t.n, t.k, t.layout, t.acc)] = line;
    ++evaluated;
    write_all();
    const bool any = !row.best_variant.empty();
    std::printf("[%6.1f s] %zu/%zu %s: %s %s us, x%s %s (%d/%zu passed, %.1f s)\n", elapsed(),
                n + 1, to_run.size(), t.name.c_str(), any ? row.best_variant.c_str() : "none",
                any ? num(row.best_us).c_str() : "-",
                any && row.ref_us > 0 ? num(row.ref_us / row.best_us).c_str() : "-",
                baselines.back().c_str(), row.passed, row.variants, elapsed() - t0);
    std::fflush(stdout);
  }

  // The report.
  std::string md = write_all();
  std::printf(
      "\n%s\n%zu shapes evaluated in this run, %zu resumed from %s, %zu not started -> "
      "%s\n",
      md.c_str(), evaluated, resumed, out.string().c_str(), not_started, out.string().c_str());
  int any = 0;
  for (const auto& [k, line] : table.done) any += split(line, ',')[7] != "0";
  return any > 0 || table.done.empty() ? 0 : 1;
}

}  // namespace kernelrl
