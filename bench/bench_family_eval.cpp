// bench_family_eval: the kernel families (data/families.h) through reward/'s Evaluator, the
// instrument that scores RL candidates (screen, nvcc/g++, isolated worker: poisoned outputs,
// guard bands, {0,1} sums, baseline-bounded deviation, interleaved timing against the
// baselines). Writes OUT/family_eval.csv (one row per variant and task) and OUT/family_eval.md
// (pass counts per family, the best variant per family per HGEMM shape against cuBLASLt
// autotuned, the best mma.sync variant at the large shapes as % of cuBLASLt). It does not
// generate or change variants: it samples what the generators offer.
//
// Stages, in this order, each cut off by --time-budget-s (stages and shapes not started in time
// are listed as skipped):
//   1. general: every general task of the suite (its own shapes), the variants written for it;
//   2. hgemm f16: a sample of every HGEMM family with fp16 accumulation on --f16-shape;
//   3. hgemm large: the mma family (split-K 1) with fp32 accumulation on --large-shapes;
//   4. hgemm small: every HGEMM family with fp32 accumulation on --shapes, both layouts (mma:
//      block-raster group 8 and 16-byte copies only, the knobs that matter at large shapes
//      being left to stage 3, unless --small-every-raster).
//   bench_family_eval --out DIR [--backend auto|gpu|host] [--shapes 64x64x64,...] [--all] ...
// CSV and summary are rewritten after every Evaluator call, so a run cut short keeps its rows.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "data/families.h"
#include "data/tasks/task_suite.h"
#include "reward/evaluator.h"
#include "reward/task_json.h"

namespace kernelrl {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string out, backend = "auto", tasks = "configs/tasks/general.yaml", families = "all";
  std::string shapes, large_shapes, f16_shape, layouts = "nn,tn";
  std::string store, cache_dir, timing = "device", l2 = "cold", emit_dir;
  int64_t sample = 0;          // HGEMM fp32 variants per family per layout; 0 = all
  int64_t large_sample = 0;    // mma variants per layout at the large shapes; 0 = all (split-K 1)
  int64_t f16_sample = 3;      // HGEMM fp16-accumulation variants per family per layout
  int64_t general_sample = 0;  // variants per general task; 0 = all
  int64_t emit_top = 4;        // best mma variants per layout at the large shape to emit
  int64_t seeds = 3, max_rounds = 50, compile_jobs = 0;
  double budget_ms = 400, time_budget_s = 210;
  uint64_t seed = 0;
  bool all = false, small_every_raster = false;
};

// One evaluated (variant, task).
struct Row {
  std::string stage;
  KernelVariant v;  // source dropped after evaluation
  TaskSpec task;
  EvalResult r;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

int64_t param(const KernelVariant& v, const char* name) {
  for (const auto& [k, x] : v.params)
    if (k == name) return x;
  return 0;
}

// A seeded sample of `n` (all when n <= 0 or fewer exist), the same for every run with one seed
// and different per (seed, key).
std::vector<KernelVariant> sample(std::vector<KernelVariant> vs, int64_t n, uint64_t seed,
                                  const std::string& key) {
  if (n <= 0 || static_cast<int64_t>(vs.size()) <= n) return vs;
  std::mt19937_64 rng(splitmix64(seed ^ fnv1a(key)));
  std::shuffle(vs.begin(), vs.end(), rng);
  vs.resize(static_cast<size_t>(n));
  std::sort(vs.begin(), vs.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return vs;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '\n') c = ' ';
    q += c;
    if (c == '"') q += '"';
  }
  return q + "\"";
}

std::string fmt(double x, const char* f = "%.2f") {
  if (x != 0 && x < 0.1 && std::string(f) == "%.1f") f = "%.3g";  // host TFLOP/s
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

double tflops(const TaskSpec& t, double us) {
  return t.kind == TaskKind::hgemm && us > 0 ? 2.0 * t.m * t.n * t.k / us * 1e-6 : 0;
}

// Median of a baseline in a result, 0 when absent.
double base_us(const EvalResult& r, const std::string& name) {
  auto it = r.baselines.find(name);
  return it != r.baselines.end() && it->second.valid() ? it->second.median_us : 0;
}
double speedup(const EvalResult& r, const std::string& name) {
  double b = base_us(r, name);
  return r.passed() && b > 0 && r.cand.median_us > 0 ? b / r.cand.median_us : 0;
}

class Bench {
 public:
  Bench(const Options& o, Evaluator& ev, const std::vector<std::string>& baselines)
      : o_(o), ev_(ev), names_(baselines), start_(Clock::now()) {}

  double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // Evaluates `vs` on `task` in one Evaluator call (compiles in parallel), unless the time
  // budget is spent: then records the call as skipped.
  void run(const std::string& stage, const TaskSpec& task, std::vector<KernelVariant> vs) {
    if (vs.empty()) return;
    const std::string what = stage + " " + task.name + " (" + std::to_string(vs.size()) + ")";
    if (elapsed_s() > o_.time_budget_s) {
      skipped_.push_back(what);
      std::printf("[%6.1f s] skipped (time budget): %s\n", elapsed_s(), what.c_str());
      return;
    }
    std::vector<std::string> sources;
    for (const auto& v : vs) sources.push_back(v.source);
    auto t0 = Clock::now();
    std::vector<EvalResult> rs = ev_.evaluate(task, sources);
    int passed = 0;
    for (size_t i = 0; i < vs.size(); ++i) {
      passed += rs[i].passed();
      Row row{stage, std::move(vs[i]), task, std::move(rs[i])};
      if (row.r.passed() && row.v.family == "hgemm_mma")
        sources_[row.v.name] = sources[i];  // kept for --emit-dir
      row.v.source.clear();
      rows_.push_back(std::move(row));
    }
    std::printf("[%6.1f s] %-60s %3d/%zu passed, %.1f s\n", elapsed_s(), what.c_str(), passed,
                rs.size(), std::chrono::duration<double>(Clock::now() - t0).count());
    std::fflush(stdout);
    write();
  }

  void write() const {
    atomic_write(fs::path(o_.out) / "family_eval.csv", csv());
    atomic_write(fs::path(o_.out) / "family_eval.md", summary());
  }

  // The best mma variants per layout at the first large shape, as sources for bench_families.sh.
  void emit(const fs::path& dir) const {
    fs::create_directories(dir);
    std::string manifest;
    int n = 0;
    for (const std::string layout : {"nn", "tn"}) {
      std::vector<const Row*> best = ranked("large", "hgemm_mma", layout, "f32");
      for (size_t i = 0; i < best.size() && static_cast<int64_t>(i) < o_.emit_top; ++i) {
        const Row& row = *best[i];
        auto it = sources_.find(row.v.name);
        if (it == sources_.end()) continue;
        atomic_write(dir / (row.v.name + ".cu"), it->second);
        manifest += "{\"name\": \"" + row.v.name + "\", \"family\": \"hgemm_mma\", \"backend\": " +
                    "\"cuda\", \"op\": \"hgemm\", \"layout\": \"" + layout +
                    "\", \"acc\": \"f32\", \"file\": \"" + row.v.name + ".cu\"}\n";
        ++n;
      }
    }
    atomic_write(dir / "manifest.jsonl", manifest);
    std::printf("emitted %d mma variants to %s\n", n, dir.string().c_str());
  }

  int failures() const {
    int n = 0;
    for (const auto& row : rows_) n += !row.r.passed();
    return n;
  }

 private:
  // Passing rows of a stage/family/layout/acc at the first task they were run on, fastest first.
  std::vector<const Row*> ranked(const std::string& stage, const std::string& family,
                                 const std::string& layout, const std::string& acc) const {
    std::vector<const Row*> out;
    std::string task;
    for (const auto& row : rows_) {
      if (row.stage != stage || row.v.family != family || row.v.layout != layout ||
          row.v.acc != acc || !row.r.passed())
        continue;
      if (task.empty()) task = row.task.name;
      if (row.task.name == task) out.push_back(&row);
    }
    std::sort(out.begin(), out.end(),
              [](const Row* a, const Row* b) { return a->r.cand.median_us < b->r.cand.median_us; });
    return out;
  }

  std::string csv() const {
    std::ostringstream s;
    s << "stage,family,variant,backend,task,shape,layout,acc,status,check,reason,t_cand_us,cv";
    for (const auto& n : names_) s << "," << n << "_us";
    for (const auto& n : names_) s << ",speedup_" << n;
    s << ",tflops,reward,compile_s,eval_s\n";
    for (const auto& row : rows_) {
      const EvalResult& r = row.r;
      const bool hgemm = row.task.kind == TaskKind::hgemm;
      s << row.stage << "," << row.v.family << "," << row.v.name << "," << row.v.backend << ","
        << row.task.name << "," << r.shape << "," << (hgemm ? row.task.layout : "") << ","
        << (hgemm ? row.task.acc : "") << "," << status_name(r.status) << "," << csv_field(r.check)
        << "," << csv_field(r.reason) << ",";
      if (r.cand.valid())
        s << r.cand.median_us << "," << r.cand.cv;
      else
        s << ",";
      for (const auto& n : names_) {
        s << ",";
        if (base_us(r, n) > 0) s << base_us(r, n);
      }
      for (const auto& n : names_) {
        s << ",";
        if (speedup(r, n) > 0) s << speedup(r, n);
      }
      s << ",";
      if (r.passed() && hgemm) s << tflops(row.task, r.cand.median_us);
      s << "," << r.reward << "," << r.metrics.value("compile_s", 0.0) << "," << r.eval_s << "\n";
    }
    return s.str();
  }

  std::string summary() const;

  const Options& o_;
  Evaluator& ev_;
  std::vector<std::string> names_;  // baselines reported in the CSV
  Clock::time_point start_;
  std::vector<Row> rows_;
  std::vector<std::string> skipped_;
  std::map<std::string, std::string> sources_;
};

std::string Bench::summary() const {
  std::ostringstream s;
  const bool gpu = ev_.backend() == "gpu";
  // Reference columns: cuBLASLt autotuned on the GPU, LibTorch on the host backend.
  const std::string ref1 = gpu ? "lt-auto" : "torch", ref2 = gpu ? "lt-auto-max" : "torch";
  s << "# Kernel families through the Evaluator\n\n"
    << "Backend " << ev_.backend() << " on " << ev_.device_name() << "; timing " << o_.timing << ", L2 "
    << o_.l2 << ", " << o_.seeds << " correctness seeds, up to " << o_.max_rounds
    << " interleaved timing rounds (budget " << o_.budget_ms << " ms per candidate); seed "
    << o_.seed << "; " << fmt(elapsed_s(), "%.0f") << " s wall so far. Speedup = baseline median"
    << " / candidate median, both from the same interleaved rounds; TFLOP/s = 2MNK / median.\n\n";

  // ---- pass counts
  std::map<std::string, std::pair<int, int>> per_family;
  std::map<std::string, std::map<std::string, int>> fail_kinds;
  for (const auto& row : rows_) {
    auto& c = per_family[row.v.family + " (" + row.v.backend + ")"];
    ++c.second;
    if (row.r.passed())
      ++c.first;
    else
      ++fail_kinds[row.v.family + " (" + row.v.backend + ")"]
                  [std::string(status_name(row.r.status)) +
                   (row.r.check.empty() ? "" : "/" + row.r.check)];
  }
  s << "## Correctness: passed / evaluated per family\n\n| family | passed | evaluated | failures "
       "|\n|---|---|---|---|\n";
  for (const auto& [f, c] : per_family) {
    std::string fails;
    for (const auto& [k, n] : fail_kinds[f])
      fails += (fails.empty() ? "" : ", ") + k + " " + std::to_string(n);
    s << "| " << f << " | " << c.first << " | " << c.second << " | " << fails << " |\n";
  }

  // ---- HGEMM per shape: best variant per family
  auto shape_table = [&](const std::string& stage, const std::string& title) {
    std::vector<std::string> tasks;  // in run order
    for (const auto& row : rows_)
      if (row.stage == stage && std::find(tasks.begin(), tasks.end(), row.task.name) == tasks.end())
        tasks.push_back(row.task.name);
    if (tasks.empty()) return;
    s << "\n## " << title << "\n\n| shape | layout | acc | " << ref1 << " us";
    if (gpu) s << " | " << ref2 << " us";
    s << " | family | passed | best variant | us | TFLOP/s | x " << ref1;
    if (gpu) s << " | x " << ref2;
    s << " |\n|---|---|---|---|" << (gpu ? "---|" : "") << "---|---|---|---|---|---|"
      << (gpu ? "---|" : "") << "\n";
    std::vector<std::string> wins;
    for (const auto& t : tasks) {
      std::map<std::string, std::pair<const Row*, int>> best;  // family -> (best, passed)
      std::map<std::string, int> total;
      for (const auto& row : rows_) {
        if (row.stage != stage || row.task.name != t) continue;
        ++total[row.v.family];
        if (!row.r.passed()) continue;
        auto& b = best[row.v.family];
        ++b.second;
        if (!b.first || row.r.cand.median_us < b.first->r.cand.median_us) b.first = &row;
      }
      for (const auto& [fam, n] : total) {
        auto it = best.find(fam);
        const Row* b = it == best.end() ? nullptr : it->second.first;
        const Row* any = nullptr;
        for (const auto& row : rows_)
          if (row.stage == stage && row.task.name == t) any = &row;
        const EvalResult& ref = b ? b->r : any->r;
        s << "| " << any->task.m << "x" << any->task.n << "x" << any->task.k << " | "
          << any->task.layout << " | " << any->task.acc << " | " << fmt(base_us(ref, ref1));
        if (gpu) s << " | " << fmt(base_us(ref, ref2));
        s << " | " << fam << " | " << (b ? it->second.second : 0) << "/" << n << " | ";
        if (!b) {
          s << "(none passed) | | | |" << (gpu ? " |" : "") << "\n";
          continue;
        }
        const double s1 = speedup(b->r, ref1), s2 = speedup(b->r, ref2);
        s << "`" << b->v.name << "` | " << fmt(b->r.cand.median_us) << " | "
          << fmt(tflops(b->task, b->r.cand.median_us), "%.1f") << " | " << fmt(s1, "%.3f");
        if (gpu) s << " | " << fmt(s2, "%.3f");
        s << " |\n";
        if (s1 > 1)
          wins.push_back(std::to_string(b->task.m) + "x" + std::to_string(b->task.n) + "x" +
                         std::to_string(b->task.k) + " " + b->task.layout + " " + fam + " " +
                         fmt(s1, "%.2f") + "x " + ref1 +
                         (gpu ? ", " + fmt(s2, "%.2f") + "x " + ref2 : ""));
      }
    }
    s << "\nFaster than " << ref1
      << " (best variant per family): " << (wins.empty() ? std::string("none") : "") << "\n";
    for (const auto& w : wins) s << "- " << w << "\n";
  };
  shape_table("small", "HGEMM, fp32 accumulation: best variant per family per shape");

  // ---- mma at the large shapes
  std::set<std::string> large_tasks;
  for (const auto& row : rows_)
    if (row.stage == "large") large_tasks.insert(row.task.name);
  if (!large_tasks.empty()) {
    s << "\n## mma.sync at the large shapes (fp32 accumulation, split-K 1)\n\n"
      << "% of " << ref1 << " = " << ref1 << " median / candidate median x 100, i.e. the "
      << "candidate's TFLOP/s as a share of cuBLASLt-autotuned TFLOP/s in the same rounds.\n\n"
      << "| shape | layout | rank | variant | us | TFLOP/s | " << ref1 << " TFLOP/s | % of "
      << ref1;
    if (gpu) s << " | % of " << ref2;
    s << " |\n|---|---|---|---|---|---|---|---|" << (gpu ? "---|" : "") << "\n";
    for (const auto& t : large_tasks)
      for (const std::string layout : {"nn", "tn"}) {
        std::vector<const Row*> rk;
        for (const auto& row : rows_)
          if (row.stage == "large" && row.task.name == t && row.task.layout == layout &&
              row.r.passed())
            rk.push_back(&row);
        std::sort(rk.begin(), rk.end(), [](const Row* a, const Row* b) {
          return a->r.cand.median_us < b->r.cand.median_us;
        });
        for (size_t i = 0; i < rk.size() && i < 5; ++i) {
          const Row& b = *rk[i];
          s << "| " << b.task.m << "x" << b.task.n << "x" << b.task.k << " | " << layout << " | "
            << i + 1 << " | `" << b.v.name << "` | " << fmt(b.r.cand.median_us) << " | "
            << fmt(tflops(b.task, b.r.cand.median_us), "%.1f") << " | "
            << fmt(tflops(b.task, base_us(b.r, ref1)), "%.1f") << " | "
            << fmt(100 * speedup(b.r, ref1), "%.1f");
          if (gpu) s << " | " << fmt(100 * speedup(b.r, ref2), "%.1f");
          s << " |\n";
        }
      }
  }
  shape_table("f16", "HGEMM, fp16 accumulation (correctness sample)");

  // ---- general families
  std::map<std::string, std::vector<double>> gen_speedups;
  std::map<std::string, std::pair<double, std::string>> gen_best;
  for (const auto& row : rows_) {
    if (row.stage != "general" || !row.r.passed()) continue;
    double sp = speedup(row.r, "torch");
    gen_speedups[row.v.family].push_back(sp);
    auto& b = gen_best[row.v.family];
    if (sp > b.first) b = {sp, row.v.name + " on " + row.task.name};
  }
  if (!gen_speedups.empty()) {
    s << "\n## General families vs the LibTorch reference op\n\n| family | passed | median x torch"
         " | best x torch | best variant |\n|---|---|---|---|---|\n";
    for (auto& [f, v] : gen_speedups) {
      std::sort(v.begin(), v.end());
      s << "| " << f << " | " << v.size() << " | " << fmt(v[v.size() / 2], "%.2f") << " | "
        << fmt(gen_best[f].first, "%.2f") << " | `" << gen_best[f].second << "` |\n";
    }
  }

  // ---- failures and skipped work
  int shown = 0;
  for (const auto& row : rows_) {
    if (row.r.passed()) continue;
    if (shown == 0) s << "\n## Failures (first 40)\n\n";
    if (++shown > 40) break;
    s << "- `" << row.v.name << "` on " << row.task.name << ": " << status_name(row.r.status)
      << (row.r.check.empty() ? "" : "/" + row.r.check) << ": " << row.r.reason << "\n";
  }
  if (!skipped_.empty()) {
    s << "\n## Skipped (time budget " << o_.time_budget_s << " s)\n\n";
    for (const auto& k : skipped_) s << "- " << k << "\n";
  }
  return s.str();
}

std::vector<TaskSpec> hgemm_tasks(const std::string& shapes,
                                  const std::vector<std::string>& layouts, const std::string& acc) {
  std::vector<TaskSpec> out;
  for (const auto& sh : split_list(shapes)) {
    if (sh == "none") continue;
    int64_t m, n, k;
    parse_shape(sh, m, n, k);
    for (const auto& l : layouts) out.push_back(hgemm_task(m, n, k, l, acc));
  }
  return out;
}

int run(Options o) {
  for (const auto& l : split_list(o.layouts))
    if (l != "nn" && l != "tn") throw UserError("--layouts: \"" + l + "\" is not nn or tn");
  fs::create_directories(o.out);
  fs::path scratch;
  fs::path store = o.store;
  if (store.empty()) {
    scratch = fs::temp_directory_path() / ("kernelrl-family-eval-" + std::to_string(::getpid()));
    fs::create_directories(scratch);
    store = scratch / "results.sqlite";
  }
  RewardConfig cfg;
  cfg.backend = o.backend;
  cfg.baseline = "lt-auto-max";  // timed beside every candidate: lt-auto of both layouts
  cfg.baselines = {"all"};
  cfg.timing = o.timing;
  cfg.l2 = o.l2;
  cfg.seeds = o.seeds;
  cfg.max_rounds = o.max_rounds;
  cfg.min_rounds = std::min<int64_t>(cfg.min_rounds, o.max_rounds);
  cfg.timing_budget_ms = o.budget_ms;
  cfg.cache_dir = o.cache_dir;
  cfg.compile_jobs = o.compile_jobs;
  Evaluator ev(cfg, store);
  const bool gpu = ev.backend() == "gpu";
  const std::string vbackend = gpu ? "cuda" : "host";
  std::printf("backend %s on %s\n", ev.backend().c_str(), ev.device_name().c_str());
  // Shapes not given: the host backend runs its HGEMM on the CPU, so it gets small ones.
  if (o.shapes.empty())
    o.shapes = gpu ? "64x64x64,128x128x128,256x256x256,512x512x512,1024x1024x1024,192x320x448"
                   : "64x64x64,128x128x128,192x320x448";
  if (o.large_shapes.empty() && gpu) o.large_shapes = "4096x4096x4096";
  if (o.f16_shape.empty()) o.f16_shape = gpu ? "192x320x448" : "64x128x192";
  const std::vector<std::string> layouts = split_list(o.layouts);
  std::set<std::string> wanted;
  for (const auto& f : split_list(o.families)) wanted.insert(f);
  auto want = [&](const std::string& f) { return wanted.count("all") || wanted.count(f); };
  const int64_t n_small = o.all ? 0 : o.sample, n_large = o.all ? 0 : o.large_sample;
  const int64_t n_f16 = o.all ? 0 : o.f16_sample, n_general = o.all ? 0 : o.general_sample;

  Bench bench(o, ev, gpu ? report_baseline_names() : std::vector<std::string>{"torch"});
  // HGEMM family variants for a task: those of the task's layout and accumulation.
  std::vector<std::string> hgemm_fams;
  for (const auto& f : kernel_families())
    if (f.kind == TaskKind::hgemm && f.backends.find(vbackend) != std::string::npos && want(f.name) &&
        arch_runs(f.arch, ev.arch()))  // sm_90a-only families skip other devices
      hgemm_fams.push_back(f.name);
  std::map<std::string, std::vector<KernelVariant>> by_family;
  for (const auto& f : hgemm_fams) by_family[f] = hgemm_family_variants(f);
  auto variants = [&](const std::string& fam, const TaskSpec& t, int64_t n,
                      const std::string& stage) {
    std::vector<KernelVariant> vs;
    for (const auto& v : by_family[fam]) {
      if (v.layout != t.layout || v.acc != t.acc) continue;
      if (stage == "large" && param(v, "SPLITK") > 1) continue;
      // Raster group and copy width change L2 and DRAM traffic of large grids only.
      if (stage == "small" && !o.small_every_raster && !o.all && fam == "hgemm_mma" &&
          (param(v, "GROUP") != 8 || param(v, "VEC") != 8))
        continue;
      vs.push_back(v);
    }
    return sample(vs, n, o.seed, fam + "/" + t.layout + "/" + t.acc + "/" + stage);
  };

  // 1. General families on their suite tasks: one Evaluator call per task, so the sources are
  //    compiled first, all together (the pool is parallel within a call).
  std::vector<std::pair<TaskSpec, std::vector<KernelVariant>>> general;
  std::vector<std::string> general_sources;
  for (const auto& t : load_task_suite(o.tasks, gpu ? "gpu" : "host")) {
    std::vector<KernelVariant> vs;
    for (auto& v : variants_for_task(t, vbackend))
      if (want(v.family)) vs.push_back(std::move(v));
    vs = sample(vs, n_general, o.seed, t.name);
    for (const auto& v : vs) general_sources.push_back(v.source);
    if (!vs.empty()) general.emplace_back(t, std::move(vs));
  }
  if (!general_sources.empty()) {
    const int ok = ev.precompile(general_sources);
    std::printf("[%6.1f s] compiled %d/%zu general variants\n", bench.elapsed_s(), ok,
                general_sources.size());
  }
  for (auto& [t, vs] : general) bench.run("general", t, std::move(vs));
  // 2. HGEMM with fp16 accumulation: a correctness sample.
  if (!o.f16_shape.empty())
    for (const auto& t : hgemm_tasks(o.f16_shape, layouts, "f16")) {
      std::vector<KernelVariant> vs;
      for (const auto& f : hgemm_fams)
        for (auto& v : variants(f, t, n_f16, "f16")) vs.push_back(std::move(v));
      bench.run("f16", t, vs);
    }
  // 3. The mma family at the large shapes.
  if (by_family.count("hgemm_mma"))
    for (const auto& t : hgemm_tasks(o.large_shapes, layouts, "f32"))
      bench.run("large", t, variants("hgemm_mma", t, n_large, "large"));
  // 4. HGEMM small shapes, fp32 accumulation, every family.
  for (const auto& t : hgemm_tasks(o.shapes, layouts, "f32")) {
    std::vector<KernelVariant> vs;
    for (const auto& f : hgemm_fams)
      for (auto& v : variants(f, t, n_small, "small")) vs.push_back(std::move(v));
    bench.run("small", t, vs);
  }

  bench.write();
  if (!o.emit_dir.empty()) bench.emit(o.emit_dir);
  std::printf("wrote %s/family_eval.csv and family_eval.md (%.0f s)\n", o.out.c_str(),
              bench.elapsed_s());
  std::error_code ec;
  if (!scratch.empty()) fs::remove_all(scratch, ec);
  return bench.failures() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kernelrl

int main(int argc, char** argv) {
  using namespace kernelrl;
  Options o;
  CLI::App app{"Kernel families through the Evaluator: correctness and speed per family/shape"};
  app.add_option("--out", o.out, "output directory (family_eval.csv, family_eval.md)")->required();
  app.add_option("--backend", o.backend, "auto | gpu | host")
      ->check(CLI::IsMember({"auto", "gpu", "host"}));
  app.add_option("--tasks", o.tasks, "general task suite YAML");
  app.add_option("--families", o.families, "all | comma-separated family names");
  app.add_option("--shapes", o.shapes,
                 "HGEMM shapes MxNxK,... for every family (default: 64^3, 128^3, 256^3, 512^3, "
                 "1024^3, 192x320x448 on the GPU; 64^3, 128^3, 192x320x448 on the host)");
  app.add_option(
      "--large-shapes", o.large_shapes,
      "shapes for the mma family alone (default 4096^3 on the GPU, none on the host); none");
  app.add_option("--f16-shape", o.f16_shape, "shape of the fp16-accumulation sample; none");
  app.add_option("--layouts", o.layouts, "nn,tn | nn | tn");
  app.add_option("--sample", o.sample, "fp32 variants per HGEMM family per layout; 0 = all");
  app.add_option("--large-sample", o.large_sample,
                 "mma variants per layout at large shapes; 0 = all");
  app.add_option("--f16-sample", o.f16_sample, "fp16-accumulation variants per family per layout");
  app.add_option("--general-sample", o.general_sample, "variants per general task; 0 = all");
  app.add_flag("--all", o.all, "every variant everywhere (overrides the sample sizes)");
  app.add_flag("--small-every-raster", o.small_every_raster,
               "small shapes: every mma raster group and copy width (default: group 8, 16 bytes)");
  app.add_option("--seed", o.seed, "sampling seed");
  app.add_option("--time-budget-s", o.time_budget_s,
                 "start no Evaluator call after this many seconds (the rest is listed as skipped)");
  app.add_option("--seeds", o.seeds, "reward.seeds: correctness seeds per candidate");
  app.add_option("--max-rounds", o.max_rounds, "reward.max_rounds: timing rounds, at most");
  app.add_option("--budget-ms", o.budget_ms, "reward.timing_budget_ms per candidate");
  app.add_option("--timing", o.timing, "device | call | server")
      ->check(CLI::IsMember({"device", "call", "server"}));
  app.add_option("--l2", o.l2, "cold | hot")->check(CLI::IsMember({"cold", "hot"}));
  app.add_option("--compile-jobs", o.compile_jobs, "parallel compilers; 0 = cores");
  app.add_option("--store", o.store, "results store (default: a temporary one)");
  app.add_option("--cache-dir", o.cache_dir, "compile cache (default ~/.cache/kernelrl)");
  app.add_option("--emit-dir", o.emit_dir,
                 "write the --emit-top fastest mma variants per layout at the first large shape "
                 "there (.cu + manifest.jsonl, the layout of `kernelrl data synth --emit-dir`)");
  app.add_option("--emit-top", o.emit_top, "variants per layout for --emit-dir");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_family_eval: %s\n", e.what());
    return 2;
  }
}
