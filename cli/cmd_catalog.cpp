// `kernelrl catalog build|show|export`: the best verified HGEMM kernel per (device, shape,
// layout, accumulation) from results stores, RL run directories and kernel directories
// (catalog/catalog.h), printed as a table, exported as a CMake/C++/PyTorch package
// (catalog/export.h). Kernel directories are evaluated with `kernelrl bench`'s machinery
// (reward/kernel_dir.h): {M}_{N}_{K}.cu files at their shape, every other .cu on every shape.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "catalog/catalog.h"
#include "catalog/export.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/progress.h"
#include "data/tasks/task_suite.h"
#include "reward/compile.h"
#include "reward/evaluator.h"
#include "reward/kernel_dir.h"
#include "trainer/job_config.h"

namespace kernelrl::cli {

namespace {

// A --from argument: a store file, a run directory (its reward.store or results.sqlite) or a
// directory holding results.sqlite / bench.sqlite.
fs::path resolve_store(const std::string& from) {
  const fs::path p(from);
  if (fs::is_regular_file(p)) return p;
  if (!fs::is_directory(p)) throw UserError("--from: " + from + " does not exist");
  if (fs::exists(p / "config.yaml")) {
    JobConfig job = load_job_config(p / "config.yaml", {});
    fs::path store = job.reward.store.empty() ? p / "results.sqlite" : fs::path(job.reward.store);
    if (!fs::exists(store))
      throw UserError("--from: run directory " + from + " has no results store yet (" +
                      store.string() + ")");
    return store;
  }
  for (const char* name : {"results.sqlite", "bench.sqlite"})
    if (fs::exists(p / name)) return p / name;
  throw UserError("--from: " + from +
                  " is neither a results store, a run directory, nor a directory "
                  "holding results.sqlite or bench.sqlite");
}

}  // namespace

void register_catalog(CLI::App& app) {
  auto* cat =
      app.add_subcommand("catalog", "The best verified kernel per shape: build, show, export");
  cat->require_subcommand(1);

  struct BuildOpts {
    std::vector<std::string> from, kernels;
    std::string out, grid = "small", layout = "nn", backend = "auto", l2 = "cold", store, cache_dir;
    std::string baselines = "all", reference;
    bool refresh = false;
  };
  auto b = std::make_shared<BuildOpts>();
  auto* build = cat->add_subcommand("build",
                                    "Best verified kernel per (device, shape, layout, "
                                    "accumulation) from stores, runs and kernel dirs");
  build->add_option("--from", b->from,
                    "results store, RL run directory, or directory with a store (repeatable)");
  build->add_option(
      "--kernels", b->kernels,
      "kernel directory evaluated on --grid: {M}_{N}_{K}.cu at its shape, any other .cu on "
      "every shape (.cpp on the host backend; repeatable)");
  build->add_option("--grid", b->grid,
                    "shapes for --kernels: full | small | llm | FILE of `MxNxK [nn|tn] [f32|f16]`");
  auto* layout_opt = build->add_option("--layout", b->layout, "nn | tn: override the grid's layout")
                         ->check(CLI::IsMember({"nn", "tn"}));
  build->add_option("--out", b->out, "catalog file (JSON)")->required();
  build
      ->add_option("--l2", b->l2,
                   "cold | hot: the L2 state whose device times count (and --kernels run with)")
      ->check(CLI::IsMember({"cold", "hot"}));
  build->add_option("--backend", b->backend, "auto | gpu | host (for --kernels)")
      ->check(CLI::IsMember({"auto", "gpu", "host"}));
  build->add_option("--baselines", b->baselines,
                    "baselines timed beside --kernels: all | lt-auto,... (comma-separated)");
  build->add_option(
      "--reference", b->reference,
      "the evaluator's reward reference for --kernels (default lt-auto-max; lt-auto times "
      "only the task's layout: faster)");
  build->add_option("--store", b->store,
                    "results store for --kernels (default <dir>/bench.sqlite, as bench)");
  build->add_option("--cache-dir", b->cache_dir, "compile cache (default ~/.cache/kernelrl)");
  build->add_flag("--refresh", b->refresh,
                  "re-evaluate --kernels even when the store has their results");
  build->callback([b, layout_opt] {
    if (b->from.empty() && b->kernels.empty())
      throw UserError(
          "catalog build: nothing to build from; pass --from RUN_OR_STORE and/or --kernels DIR");
    CatalogBuilder builder(b->l2);
    for (const auto& f : b->from) {
      fs::path store = resolve_store(f);
      builder.add_store(store);
      std::printf("read %s\n", store.string().c_str());
    }
    if (!b->kernels.empty()) {
      std::vector<TaskSpec> tasks = hgemm_grid(b->grid);
      if (layout_opt->count() > 0)
        for (auto& t : tasks) t = hgemm_task(t.m, t.n, t.k, b->layout, t.acc);
      RewardConfig cfg;
      cfg.backend = b->backend;
      cfg.timing = "device";  // the catalog counts device time only
      cfg.l2 = b->l2;
      cfg.cache_dir = b->cache_dir;
      cfg.baselines = split_list(b->baselines);
      const auto& allowed = report_baseline_names();
      for (const auto& name : cfg.baselines)
        if (name != "all" && std::find(allowed.begin(), allowed.end(), name) == allowed.end())
          throw UserError(
              "--baselines: unknown baseline \"" + name +
              "\"; allowed: all, torch, cublas-nn, "
              "cublas-tn, cublas-max, lt-heuristic, lt-heuristic-max, lt-auto, lt-auto-max");
      cfg.baselines.push_back("lt-auto");  // the catalog's ranking baseline on a GPU
      if (!b->reference.empty()) {
        if (std::find(allowed.begin(), allowed.end(), b->reference) == allowed.end())
          throw UserError("--reference: unknown baseline \"" + b->reference + "\"");
        cfg.baseline = b->reference;
      }
      for (const auto& dir : b->kernels) {
        if (!fs::is_directory(dir)) throw UserError("--kernels: " + dir + " is not a directory");
        fs::path store = b->store.empty() ? fs::path(dir) / "bench.sqlite" : fs::path(b->store);
        Evaluator ev(cfg, store);
        const std::string mode = baseline_timing_key(cfg);
        Progress progress("catalog " + dir, static_cast<int64_t>(tasks.size()));
        DirEvalOptions opts;
        opts.general = true;
        opts.refresh = b->refresh;
        opts.progress = [&](size_t done, size_t, const std::string& s) {
          progress.update(static_cast<int64_t>(done), s);
        };
        int passed = 0, evaluated = 0;
        for (const auto& item : evaluate_kernel_dir(ev, dir, tasks, opts)) {
          if (item.file.empty()) continue;
          StoredResult s;
          s.result = item.result;
          s.source = item.source;
          s.backend = ev.backend();
          s.gpu = ev.device_name();
          s.mode = mode;
          s.settings = ev.settings_fingerprint();
          builder.add(s, item.file.string());
          ++evaluated;
          passed += item.result.passed();
        }
        progress.finish();
        builder.add_input(dir + " (grid " + b->grid + ")");
        std::printf("%s: %d kernel/shape pairs evaluated on %s, %d passed (results in %s)\n",
                    dir.c_str(), evaluated, ev.device_name().c_str(), passed,
                    store.string().c_str());
      }
    }
    Catalog c = builder.finish();
    write_catalog(b->out, c);
    int64_t skipped = 0;
    for (const auto& [why, n] : c.skipped) skipped += n;
    std::printf(
        "catalog %s: %zu entries, %zu kernels (%lld evaluations left out; `kernelrl catalog show` "
        "lists why)\n",
        b->out.c_str(), c.entries.size(), c.sources.size(), static_cast<long long>(skipped));
    for (const auto& [device, n] : catalog_devices(c))
      std::printf("  %s: %lld entries\n", device.c_str(), static_cast<long long>(n));
  });

  struct ShowOpts {
    std::string path, device;
  };
  auto sh = std::make_shared<ShowOpts>();
  auto* show = cat->add_subcommand(
      "show", "Print a catalog: shape, layout, kernel, device us, lt-auto us, speedup");
  show->add_option("catalog", sh->path, "catalog file")->required();
  show->add_option("--device", sh->device,
                   "only this device's table: its name, or a part naming one (e.g. H200)");
  show->callback([sh] {
    Catalog c = read_catalog(sh->path);
    const std::string device = sh->device.empty() ? "" : resolve_catalog_device(c, sh->device);
    std::printf("catalog %s, built %s from %zu input(s)\n\n%s", sh->path.c_str(),
                c.created_at.c_str(), c.inputs.size(), format_catalog(c, device).c_str());
  });

  struct ExportOpts {
    std::string catalog;
    ExportOptions o;
  };
  auto x = std::make_shared<ExportOpts>();
  auto* exp = cat->add_subcommand(
      "export", "Write a CMake package: header, shared library, PyTorch operator");
  exp->add_option("catalog", x->catalog, "catalog file")->required();
  exp->add_option("--out", x->o.out, "package directory")->required();
  exp->add_option("--arch", x->o.arch,
                  "SM architecture of the kernels, e.g. sm_90a (default: from the device)");
  exp->add_option("--device", x->o.devices,
                  "a GPU whose table to export (repeatable; default: every GPU of the catalog, "
                  "which must share one architecture); a part of its name will do (H200)");
  exp->add_option("--min-speedup", x->o.min_speedup,
                  "dispatch to a kernel where its speedup over lt-auto exceeds this (default 1)");
  exp->add_flag("--only-winners", x->o.only_winners,
                "compile only the kernels that are dispatched to");
  exp->add_option(
      "--cutlass-include", x->o.cutlass_include,
      "CUTLASS include dir written as the package's default (default: the evaluator's)");
  exp->callback([x] {
    Catalog c = read_catalog(x->catalog);
    for (auto& d : x->o.devices) d = resolve_catalog_device(c, d);
    if (x->o.cutlass_include.empty()) {
      auto dirs = resolve_include_dirs({"auto"});
      if (!dirs.empty()) x->o.cutlass_include = dirs[0];
    }
    ExportSummary s = export_catalog(c, x->o);
    std::string devices;
    for (const auto& d : s.devices) devices += (devices.empty() ? "" : " + ") + d;
    std::printf(
        "exported %s: %d entries for %s, %d dispatch to their kernel, %d kernel module(s) for %s\n",
        x->o.out.c_str(), s.entries, devices.empty() ? "no GPU" : devices.c_str(), s.wins,
        s.kernels, s.arch.c_str());
    if (s.devices.size() > 1)
      for (size_t i = 0; i < s.devices.size(); ++i)
        std::printf("  table %zu: %s, %d entries, %d dispatch to their kernel\n", i,
                    s.devices[i].c_str(), s.device_entries[i], s.device_wins[i]);
    std::printf("  any other GPU: cuBLASLt for every shape (KERNELRL_CATALOG_DEVICE=NAME forces a "
                "table)\n");
    for (const auto& n : s.notes) std::printf("  note: %s\n", n.c_str());
    std::printf(
        "build: cmake -S %s -B %s/build && cmake --build %s/build -j && cmake --install %s/build "
        "--prefix PREFIX\n",
        x->o.out.c_str(), x->o.out.c_str(), x->o.out.c_str(), x->o.out.c_str());
  });
}

}  // namespace kernelrl::cli
