// `kernelrl lift split|annotate|measure|promote`: the lift experiment of issue 25 (trainer/lift.h).
//   split     the train / held-out shapes of a job's HGEMM grid (data.hgemm_heldout)
//   annotate  speed-annotated pretraining triplets from family-sweep CSVs, per-variant CSVs and catalogs
//   measure   per held-out shape, best of N before / after HGEMM RL beside the sweep's best and
//             the best exemplar shown; summary, per-shape table, curves by step (resumable)
//   report    lift.md, summary.json and curves.csv again from a lift directory's rows
//   proof     issue 39's targets over seeds, splits and prompt modes (lift_proof)
//   promote   after-RL kernels that beat the sweep, re-verified in a fresh evaluation, into a
//             catalog with provenance rl
#include <cstdio>
#include <map>
#include <sstream>

#include "catalog/catalog.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "data/tasks/hgemm_split.h"
#include "data/tasks/task_suite.h"
#include "trainer/job_config.h"
#include "trainer/lift.h"

namespace kernelrl::cli {

namespace {

std::vector<LiftShape> read_rows(const fs::path& lift_dir) {
  const fs::path p = lift_dir / "per_shape.jsonl";
  if (!fs::exists(p)) throw UserError("--lift: " + lift_dir.string() + " has no per_shape.jsonl; run `kernelrl lift measure` first");
  std::vector<LiftShape> rows;
  std::istringstream in(read_file(p, "lift table"));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(lift_shape_from_json(nlohmann::json::parse(line)));
  return rows;
}

// lift.md (the table and the summary with the targets), summary.json and curves.csv.
void write_lift_report(const fs::path& run_dir, const fs::path& out, const std::vector<LiftShape>& rows) {
  const LiftSummary s = lift_summary(rows);
  atomic_write(out / "summary.json", to_json(s).dump(2) + "\n");
  atomic_write(out / "lift.md", format_lift(rows, s));
  const JobConfig job = load_job_config(run_dir / "config.yaml", {});
  std::string stage;
  for (const auto& st : job.trainer.stages)
    if (st.kind == "hgemm_rl") stage = st.name;
  if (!stage.empty()) atomic_write(out / "curves.csv", lift_curves_csv(run_dir, stage));
}

}  // namespace

void register_lift(CLI::App& app) {
  auto* lift = app.add_subcommand(
      "lift", "Issue 25's lift experiment: held-out split, speed-annotated data, before/after "
              "measures, discoveries into the catalog");
  lift->require_subcommand(1);

  // ---- split
  struct SplitOpts {
    std::string config;
    std::vector<std::string> set;
    bool train = false;
  };
  auto so = std::make_shared<SplitOpts>();
  auto* split = lift->add_subcommand("split", "List the held-out (or training) HGEMM shapes of a job");
  split->add_option("config", so->config, "job YAML")->required();
  split->add_option("--set", so->set, "key.path=value overrides of the job");
  split->add_flag("--train", so->train, "list the training shapes instead");
  split->callback([so] {
    const JobConfig job = load_job_config(so->config, so->set);
    const auto all = split_hgemm_shapes(hgemm_grid(job.data.hgemm_grid), job.data.hgemm_heldout);
    std::map<int, std::pair<int, int>> bins;  // bin -> (shapes, held out)
    int64_t held = 0;
    for (const auto& t : all) {
      auto& b = bins[hgemm_size_bin(t)];
      ++b.first;
      b.second += t.holdout;
      held += t.holdout;
      if (t.holdout != so->train) std::printf("%s\n", hgemm_split_key(t).c_str());
    }
    std::fprintf(stderr, "%lld of %zu shapes held out (data.hgemm_heldout %.3g); per log2(MNK) bin:",
                 static_cast<long long>(held), all.size(), job.data.hgemm_heldout);
    for (const auto& [bin, c] : bins) std::fprintf(stderr, " %d-%d: %d/%d", 3 * bin, 3 * bin + 2, c.second, c.first);
    std::fprintf(stderr, "\n");
  });

  // ---- annotate
  struct AnnotateOpts {
    std::string config, device, out, backend = "gpu", reference = "lt-auto";
    std::vector<std::string> set, csvs, variant_csvs, catalogs;
  };
  auto ao = std::make_shared<AnnotateOpts>();
  auto* annotate = lift->add_subcommand(
      "annotate", "Speed-annotated pretraining triplets: per measured kernel of each training "
                  "shape, the RL prompt with the device named, its rank and device time, its code");
  annotate->add_option("config", ao->config, "job YAML (data.hgemm_grid and data.hgemm_heldout: held-out shapes are left out)")
      ->required();
  annotate->add_option("--set", ao->set, "key.path=value overrides of the job");
  annotate->add_option("--grid-csv", ao->csvs, "family sweep CSV (`kernelrl bench --families`; repeatable)");
  annotate->add_option("--variants-csv", ao->variant_csvs,
                       "per-variant times CSV: M,N,K,layout,acc,variant,device_us[,<baseline>_us] "
                       "(e.g. docs/data/small_variants_h100.csv; repeatable)");
  annotate->add_option("--catalog", ao->catalogs, "catalog JSON whose entries add measured kernels (repeatable)");
  annotate->add_option("--device", ao->device, "the device the CSVs were measured on (e.g. \"NVIDIA H100 80GB HBM3\")");
  annotate->add_option("--backend", ao->backend, "gpu | host: the prompt's wording")->check(CLI::IsMember({"gpu", "host"}));
  annotate->add_option("--reference", ao->reference, "baseline named in the annotation (lt-auto; torch on host)");
  annotate->add_option("--out", ao->out, "triplet JSONL")->required();
  annotate->callback([ao] {
    if (ao->csvs.empty() && ao->variant_csvs.empty() && ao->catalogs.empty())
      throw UserError("annotate: give --grid-csv, --variants-csv and/or --catalog");
    if ((!ao->csvs.empty() || !ao->variant_csvs.empty()) && ao->device.empty())
      throw UserError("annotate: --device names the machine the CSVs were measured on");
    const JobConfig job = load_job_config(ao->config, ao->set);
    const auto split = split_hgemm_shapes(hgemm_grid(job.data.hgemm_grid), job.data.hgemm_heldout);
    std::map<std::string, bool> heldout;  // task name -> held out
    for (const auto& t : split) heldout[t.name] = t.holdout;
    std::vector<MeasuredShape> shapes;
    for (const auto& csv : ao->csvs)
      for (const auto& s : read_family_grid_csv(csv, ao->device))
        for (const auto& k : s.kernels) add_measured(shapes, s, k);
    for (const auto& csv : ao->variant_csvs)
      for (const auto& s : read_variant_times_csv(csv, ao->device))
        for (const auto& k : s.kernels) add_measured(shapes, s, k);
    for (const auto& path : ao->catalogs) {
      const Catalog c = read_catalog(path);
      for (const auto& e : c.entries) {
        MeasuredShape key;
        key.task = hgemm_task(e.m, e.n, e.k, e.layout, e.acc);
        key.device = e.device;
        key.timing = e.mode;
        for (const auto& [name, t] : e.baselines) key.baselines_us[name] = t.device_us;
        add_measured(shapes, key, {e.kernel_id, "", c.sources.at(e.kernel_id), e.time.device_us, path});
      }
    }
    rank_measured(shapes);
    int64_t left_out = 0, unknown = 0;
    for (auto& s : shapes) {
      auto it = heldout.find(s.task.name);
      s.task.holdout = it == heldout.end() || it->second;  // not in the grid: not a training shape
      left_out += it != heldout.end() && it->second;
      unknown += it == heldout.end();
    }
    const auto triplets = speed_annotated_triplets(shapes, ao->backend, ao->reference);
    write_triplets(ao->out, triplets);
    std::printf("wrote %zu speed-annotated triplets to %s from %zu measured shapes (%lld held out, "
                "%lld not in data.hgemm_grid: left out)\n",
                triplets.size(), ao->out.c_str(), shapes.size(), static_cast<long long>(left_out),
                static_cast<long long>(unknown));
  });

  // ---- measure
  auto mo = std::make_shared<LiftOptions>();
  auto mo_run = std::make_shared<std::string>(), mo_out = std::make_shared<std::string>();
  auto mo_csv = std::make_shared<std::string>();
  auto* measure = lift->add_subcommand(
      "measure", "Best of N samples before and after HGEMM RL on the held-out shapes, beside the "
                 "sweep's best and the best exemplar shown (resumable)");
  measure->add_option("--run-dir", *mo_run, "the run (its job has an hgemm_rl stage and data.hgemm_heldout > 0)")->required();
  measure->add_option("--out", *mo_out, "lift directory")->required();
  measure->add_option("--samples", mo->samples, "best-of-N budget per policy per shape")->check(CLI::PositiveNumber);
  measure->add_option("--seed", mo->seed, "sampling seed (the same for both policies)");
  measure->add_option("--before", mo->before, "checkpoint STAGE or STAGE/step_N before HGEMM RL (default: the stage before it)");
  measure->add_option("--after", mo->after, "checkpoint after it (default: the hgemm_rl stage's newest)");
  measure->add_option("--sweep-csv", *mo_csv, "family sweep CSV naming the sweep's best per shape (default: evaluate the family portfolio here)");
  measure->add_option("--device", mo->device, "device the sweep CSV was measured on (default: the evaluator's)");
  measure->add_option("--shapes", mo->shapes,
                      "heldout (the job's hash-split held-out grid shapes) or a grid file of MxNxK lines "
                      "(e.g. configs/grids/offgrid_llm.txt); none may be a training shape");
  measure->add_option("--split", mo->split, "the rows' split label (default: grid for heldout, offgrid for a file)");
  measure->add_option("--prompt-mode", mo->prompt_mode,
                      "exemplars (seed variants that passed at the shape, with their score there) | zero_shot "
                      "(the seed variants, no score, nothing measured at the shape)")
      ->check(CLI::IsMember({"exemplars", "zero_shot"}));
  measure->add_option("--best-of-n", mo->best_of_n,
                      "the best-of-N control's samples of the before policy per shape, the before arm's "
                      "included; -1 = --samples + the RL stage's evaluations per training shape; 0 = off");
  auto mo_list_csv = std::make_shared<std::string>();
  measure->add_option("--family-list-csv", *mo_list_csv,
                      "family sweep CSV over the measured shapes (bench --families --per-family N): the "
                      "arm times each family's fastest there (--device names its machine)");
  measure->add_option("--family-list", mo->family_list,
                      "the family-list arm: the portfolio's variants per family at each shape (0 = every "
                      "candidate), timed in the shape's batch; -1 = off");
  measure->add_option("--phase", mo->phase,
                      "all | before: only draw the prompts and sample the before policy (prompts.jsonl), "
                      "for a later call to measure with")
      ->check(CLI::IsMember({"all", "before"}));
  measure->add_option("--max-shapes", mo->max_shapes, "held-out shapes to measure at most; 0 = all");
  measure->add_option("--time-budget-s", mo->time_budget_s, "start no shape after this many seconds; 0 = no limit");
  measure->add_option("--set", mo->set, "key.path=value overrides of the run's job (e.g. reward.min_rounds=15)");
  measure->callback([mo, mo_run, mo_out, mo_csv, mo_list_csv] {
    LiftOptions o = *mo;
    o.family_list_csv = *mo_list_csv;
    o.run_dir = *mo_run;
    o.out = *mo_out;
    o.sweep_csv = *mo_csv;
    const auto rows = measure_lift(o);
    if (o.phase == "before") {
      std::printf("prompts and before-policy samples in %s/prompts.jsonl\n", o.out.c_str());
      return;
    }
    write_lift_report(o.run_dir, o.out, rows);
    std::printf("%s", read_file(o.out / "lift.md", "lift report").c_str());
  });

  // ---- report
  struct ReportOpts {
    std::string run, lift;
  };
  auto ro = std::make_shared<ReportOpts>();
  auto* report = lift->add_subcommand(
      "report", "Rewrite a lift directory's lift.md, summary.json and curves.csv from its rows");
  report->add_option("--run-dir", ro->run, "the run the lift measured (for the curves)")->required();
  report->add_option("--lift", ro->lift, "lift directory")->required();
  report->callback([ro] {
    const fs::path out = ro->lift;
    write_lift_report(ro->run, out, read_rows(out));
    std::printf("%s", read_file(out / "lift.md", "lift report").c_str());
  });

  // ---- promote
  auto po = std::make_shared<LiftOptions>();
  struct PromoteOpts {
    std::string run, lift, csv, catalog, out;
    double margin = 1.02;
    int family_list = -1;
  };
  auto pp = std::make_shared<PromoteOpts>();
  auto* promote = lift->add_subcommand(
      "promote", "After-RL kernels that beat the sweep's best at their shape, re-verified in a "
                 "fresh evaluation, into a catalog with provenance rl");
  promote->add_option("--run-dir", pp->run, "the run the lift measured")->required();
  promote->add_option("--lift", pp->lift, "lift directory of `kernelrl lift measure`")->required();
  promote->add_option("--sweep-csv", pp->csv, "the sweep CSV measure used (if any)");
  promote->add_option("--device", po->device, "device the sweep CSV was measured on");
  promote->add_option("--after", po->after, "the after checkpoint measure used (default: as measure)");
  promote->add_option("--margin", pp->margin, "how much faster than the sweep (1.02: 2 %)")->check(CLI::Range(0.01, 10.0));
  promote->add_option("--family-list", pp->family_list,
                      "also time the sweep variant's family at the shape (the portfolio's first N "
                      "variants; 0 = every candidate it offers) and require beating its fastest by the margin")
      ->check(CLI::Range(0, 100000));
  promote->add_option("--catalog", pp->catalog, "catalog to add the discoveries to (default: a new one)");
  promote->add_option("--out", pp->out, "catalog JSON written")->required();
  promote->add_option("--set", po->set, "key.path=value overrides of the run's job, as measure's");
  promote->callback([po, pp] {
    LiftOptions o = *po;
    o.run_dir = pp->run;
    o.out = pp->lift;
    o.sweep_csv = pp->csv;
    const auto found = verify_discoveries(o, read_rows(o.out), pp->margin, pp->family_list);
    CatalogBuilder builder;
    for (const auto& d : found)
      builder.add(d.fresh, (o.out / "verify.sqlite").string(),
                  Provenance{"rl", d.run, d.stage, d.step, /*reverified=*/true});
    builder.add_input((o.out / "verify.sqlite").string());
    Catalog extra = builder.finish();
    Catalog cat = pp->catalog.empty() ? Catalog{} : read_catalog(pp->catalog);
    cat = merge_catalogs(std::move(cat), extra);
    write_catalog(pp->out, cat);
    // discoveries.jsonl: the re-verified tasks, for `lift proof`.
    std::string disc;
    for (const auto& d : found)
      disc += nlohmann::json{{"task", d.fresh.result.task}, {"speedup", d.fresh.result.speedup},
                             {"sweep_speedup", d.sweep_speedup}, {"family_variants", d.family_variants},
                             {"family_best_speedup", d.family_best_speedup}}
                  .dump() + "\n";
    atomic_write(o.out / "discoveries.jsonl", disc);
    for (const auto& d : found)
      if (pp->family_list >= 0)
        std::printf("%s: %.3fx; the family list's fastest of %lld: %s %.3fx\n", d.fresh.result.task.c_str(),
                    d.fresh.result.speedup, static_cast<long long>(d.family_variants),
                    d.family_best_variant.c_str(), d.family_best_speedup);
    std::printf("%zu of the lift's after-RL kernels reached %.2fx the speedup of the sweep's best%s "
                "in a fresh evaluation; catalog %s: %zu entries\n",
                found.size(), pp->margin, pp->family_list >= 0 ? " and of the family list's fastest" : "",
                pp->out.c_str(), cat.entries.size());
  });

  // ---- proof
  struct ProofOpts {
    std::vector<std::string> lifts;
    std::string out;
  };
  auto pf = std::make_shared<ProofOpts>();
  auto pr = std::make_shared<ProofOptions>();
  auto* proof = lift->add_subcommand(
      "proof", "Issue 39's proof from lift directories (seeds x splits x prompt modes): arms with pass "
               "rates and bootstrap intervals, gains over the controls, best-of-k curves, each target "
               "met or missed");
  proof->add_option("--lift", pf->lifts, "lift directory of `kernelrl lift measure` (repeatable)")->required();
  proof->add_option("--out", pf->out, "directory for proof.md, proof.json, curves_k.csv, per_shape.csv")->required();
  proof->add_option("--resamples", pr->resamples, "bootstrap resamples")->check(CLI::Range(int64_t{100}, int64_t{1000000}));
  proof->add_option("--seed", pr->seed, "bootstrap seed");
  proof->add_option("--max-k", pr->max_k, "best-of-k curves for k = 1..max-k")->check(CLI::Range(int64_t{1}, int64_t{1024}));
  proof->callback([pf, pr] {
    ProofOptions o = *pr;
    for (const auto& l : pf->lifts) o.lift_dirs.push_back(l);
    const ProofReport r = lift_proof(o);
    const fs::path out = pf->out;
    fs::create_directories(out);
    atomic_write(out / "proof.json", r.summary.dump(2) + "\n");
    atomic_write(out / "proof.md", r.markdown);
    atomic_write(out / "curves_k.csv", r.curves_csv);
    atomic_write(out / "per_shape.csv", r.per_shape_csv);
    std::printf("%s", r.markdown.c_str());
  });
}

}  // namespace kernelrl::cli
