// `kernelrl data build|stats|synth|edits`: the triplet corpus, the kernel families, and the
// examples that teach edit completions.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>

#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/config.h"
#include "common/error.h"
#include "common/fs.h"
#include "data/corpus/corpus_builder.h"
#include "data/data_config.h"
#include "data/edit_pairs.h"
#include "data/families.h"
#include "data/tasks/hgemm_split.h"
#include "data/tasks/task_ops.h"
#include "data/tasks/task_suite.h"
#include "rollout/edit_examples.h"
#include "trainer/job_config.h"

namespace kernelrl::cli {

namespace {

// Sources of the variants (each once) and a manifest a standalone checker can drive them with.
void emit_sources(const std::filesystem::path& dir, const std::vector<KernelVariant>& vs,
                  const std::string& suite) {
  const std::vector<TaskSpec> gpu_tasks = load_task_suite(suite, "gpu");
  std::filesystem::create_directories(dir);
  std::vector<TaskSpec> host_tasks;
  std::set<std::string> done;
  std::string manifest;
  for (const auto& v : vs) {
    if (!done.insert(v.name).second) continue;
    std::string file = v.name + (v.backend == "cuda" ? ".cu" : ".cpp");
    atomic_write(dir / file, v.source);
    nlohmann::json j = {{"name", v.name}, {"family", v.family}, {"backend", v.backend},
                        {"op", v.op},     {"layout", v.layout}, {"acc", v.acc},
                        {"file", file}};
    if (v.op != hgemm_op().name) {
      if (host_tasks.empty() && v.backend == "host") host_tasks = load_task_suite(suite, "host");
      const auto& tasks = v.backend == "host" ? host_tasks : gpu_tasks;
      for (const auto& t : tasks) {
        if (t.op != v.op ||
            !std::equal(v.op_params.begin(), v.op_params.end(), t.params.begin(),
                        t.params.begin() + std::min(t.params.size(), v.op_params.size())))
          continue;
        nlohmann::json ins = nlohmann::json::array(), outs = nlohmann::json::array();
        for (const auto& x : t.inputs)
          ins.push_back({{"name", x.name}, {"shape", x.shape}, {"dtype", x.dtype}});
        for (const auto& x : t.outputs)
          outs.push_back({{"name", x.name}, {"shape", x.shape}, {"dtype", x.dtype}});
        j["task"] = {{"name", t.name},
                     {"inputs", ins},
                     {"outputs", outs},
                     {"params", t.params},
                     {"dims", general_task_dims(t)},
                     {"atol", t.atol},
                     {"rtol", t.rtol}};
        break;
      }
    }
    manifest += j.dump() + "\n";
  }
  atomic_write(dir / "manifest.jsonl", manifest);
  std::cout << "wrote " << done.size() << " sources and manifest.jsonl to " << dir.string() << "\n";
}

}  // namespace

void register_data(CLI::App& app) {
  auto* sub = app.add_subcommand("data", "Build and inspect training data");
  sub->require_subcommand(1);
  struct Opts {
    std::vector<std::string> from, docs, set;
    std::string out, input, families = "all", config, tasks = "configs/tasks/general.yaml",
                            emit_dir;
    int64_t n = 100, seed = 0;
    double threshold = 0.8;
  };
  auto o = std::make_shared<Opts>();
  auto* build = sub->add_subcommand("build", "CUDA sources -> instruction-context-code triplets");
  build->add_option("--from", o->from, "source tree to scan (repeatable)")->required();
  build->add_option("--docs", o->docs, "documentation folder for retrieval (repeatable)");
  build->add_option("--out", o->out, "output JSONL")->required();
  build->add_option("--config", o->config, "job YAML whose data.build section is used");
  build->add_option("--set", o->set,
                    "data.build override key=value (repeatable), e.g. min_chars=200");
  build->callback([o] {
    DataConfig data;
    YAML::Node root = o->config.empty() ? YAML::Node(YAML::NodeType::Map)
                                        : cfg::load_yaml_file(o->config)["data"];
    if (!root) root = YAML::Node(YAML::NodeType::Map);
    std::vector<std::string> overrides;
    for (const auto& s : o->set) overrides.push_back("build." + s);
    cfg::apply_overrides(root, overrides);
    cfg::read(root, data);
    std::vector<std::filesystem::path> from(o->from.begin(), o->from.end());
    std::vector<std::filesystem::path> docs(o->docs.begin(), o->docs.end());
    CorpusBuildReport rep = build_corpus(data.build, from, docs, o->out);
    std::cout << rep.summary() << "\nwrote " << o->out << "\n";
  });
  auto* stats = sub->add_subcommand("stats", "Counts, histograms and duplicates of a corpus");
  stats->add_option("corpus", o->input, "triplet JSONL")->required();
  stats->add_option("--threshold", o->threshold, "MinHash Jaccard for near duplicates")
      ->check(CLI::Range(0.01, 1.0));
  stats->callback([o] { std::cout << corpus_stats(o->input, o->threshold).format(); });
  auto* synth = sub->add_subcommand("synth", "Write kernel-family variants as triplets");
  synth->add_option("--families", o->families, "all | comma-separated family names");
  synth->add_option("--n", o->n, "variants to write")->check(CLI::PositiveNumber);
  synth->add_option("--out", o->out, "output JSONL")->required();
  synth->add_option("--tasks", o->tasks,
                    "general task suite whose ops and params the general families use");
  synth->add_option("--seed", o->seed, "sampling seed")->check(CLI::NonNegativeNumber);
  synth->add_option(
      "--emit-dir", o->emit_dir,
      "also write each distinct variant's source there, plus manifest.jsonl (variant, "
      "file and, for general variants, the task: shapes, dims, tolerances)");
  synth->callback([o] {
    std::vector<TaskSpec> tasks = load_task_suite(o->tasks);
    std::vector<KernelVariant> vs =
        sample_variants(o->families, o->n, static_cast<uint64_t>(o->seed), tasks);
    std::vector<Triplet> ts;
    std::map<std::string, int64_t> per_family;
    for (const auto& v : vs) {
      ts.push_back(variant_triplet(v));
      // Repeats (a family with fewer variants than its share) get distinct ids.
      int64_t k = per_family[v.name]++;
      if (k > 0) ts.back().id += "#" + std::to_string(k);
    }
    write_triplets(o->out, ts);
    if (!o->emit_dir.empty()) emit_sources(o->emit_dir, vs, o->tasks);
    std::map<std::string, int64_t> fam;
    for (const auto& v : vs) ++fam[v.family];
    std::cout << "wrote " << ts.size() << " triplets to " << o->out << ":";
    for (const auto& [f, n] : fam) std::cout << " " << f << " " << n;
    std::cout << "\n";
  });

  // ---- edits: triplets that teach rollout.completion: edit (data/edit_pairs.h)
  struct EditOpts {
    std::string config, out, device, backend = "gpu", reference = "lt-auto", kernels_dir = "kernels";
    std::vector<std::string> set, csvs, variant_csvs, param_families;
    int64_t per_shape = 4, param_changes = 0, seed = 0;
  };
  auto eo = std::make_shared<EditOpts>();
  auto* edits = sub->add_subcommand(
      "edits", "Edit-completion triplets: a kernel, its shape, and the SEARCH/REPLACE blocks that turn it "
               "into a faster variant measured there, or into a parameter change that compiles");
  edits->add_option("config", eo->config, "job YAML (data.hgemm_grid and data.hgemm_heldout: held-out shapes are left out)")
      ->required();
  edits->add_option("--set", eo->set, "key.path=value overrides of the job");
  edits->add_option("--grid-csv", eo->csvs, "family sweep CSV (e.g. docs/data/family_grid_small_h100.csv; repeatable)");
  edits->add_option("--variants-csv", eo->variant_csvs,
                    "per-variant times CSV (e.g. docs/data/small_variants_h100.csv; repeatable)");
  edits->add_option("--device", eo->device, "the device the CSVs were measured on");
  edits->add_option("--backend", eo->backend, "gpu | host: the prompt's wording of measured pairs")
      ->check(CLI::IsMember({"gpu", "host"}));
  edits->add_option("--reference", eo->reference, "baseline named in a measured pair's annotation");
  edits->add_option("--per-shape", eo->per_shape, "measured pairs per shape (0 = all)")->check(CLI::NonNegativeNumber);
  edits->add_option("--param-family", eo->param_families,
                    "host HGEMM family whose variants get parameter changes, compile-checked with g++ "
                    "(e.g. hgemm_host; repeatable)");
  edits->add_option("--param-changes", eo->param_changes, "parameter-change pairs per --param-family")
      ->check(CLI::NonNegativeNumber);
  edits->add_option("--kernels-dir", eo->kernels_dir, "the folder holding kernel_abi.h, for the compile check");
  edits->add_option("--seed", eo->seed, "sampling seed")->check(CLI::NonNegativeNumber);
  edits->add_option("--out", eo->out, "output JSONL")->required();
  edits->callback([eo] {
    if (eo->csvs.empty() && eo->variant_csvs.empty() && eo->param_families.empty())
      throw UserError("data edits: give --grid-csv / --variants-csv (measured pairs) and/or --param-family");
    if ((!eo->csvs.empty() || !eo->variant_csvs.empty()) && eo->device.empty())
      throw UserError("data edits: --device names the machine the CSVs were measured on");
    if (!eo->param_families.empty() && eo->param_changes <= 0)
      throw UserError("data edits: --param-family needs --param-changes N > 0");
    const JobConfig job = load_job_config(eo->config, eo->set);
    const std::vector<TaskSpec> split = split_hgemm_shapes(hgemm_grid(job.data.hgemm_grid), job.data.hgemm_heldout);
    std::map<std::string, bool> heldout;  // task name -> held out
    std::vector<TaskSpec> training;
    for (const auto& t : split) {
      heldout[t.name] = t.holdout;
      if (!t.holdout) training.push_back(t);
    }
    std::vector<MeasuredShape> shapes;
    for (const auto& csv : eo->csvs)
      for (const auto& s : read_family_grid_csv(csv, eo->device))
        for (const auto& k : s.kernels) add_measured(shapes, s, k);
    for (const auto& csv : eo->variant_csvs)
      for (const auto& s : read_variant_times_csv(csv, eo->device))
        for (const auto& k : s.kernels) add_measured(shapes, s, k);
    rank_measured(shapes);
    for (auto& s : shapes) {  // a shape not in data.hgemm_grid is no training shape either
      auto it = heldout.find(s.task.name);
      s.task.holdout = it == heldout.end() || it->second;
    }
    std::vector<EditPair> pairs = measured_edit_pairs(shapes, eo->per_shape, static_cast<uint64_t>(eo->seed), eo->reference);
    const size_t measured = pairs.size();
    int64_t dropped = 0;
    for (const auto& family : eo->param_families) {
      int64_t d = 0;
      auto more = param_edit_pairs(family, training, eo->param_changes, static_cast<uint64_t>(eo->seed),
                                   eo->kernels_dir, &d);
      dropped += d;
      pairs.insert(pairs.end(), more.begin(), more.end());
    }
    std::vector<Triplet> ts;
    std::set<std::string> ids;
    for (const auto& p : pairs) {
      const std::string backend = p.kind == "param" ? "host" : eo->backend;
      if (auto t = edit_triplet(p, backend, eo->reference))
        if (ids.insert(t->id).second) ts.push_back(std::move(*t));
    }
    write_triplets(eo->out, ts);
    std::cout << "wrote " << ts.size() << " edit triplets to " << eo->out << ": " << measured
              << " measured pairs from " << shapes.size() << " shapes, " << pairs.size() - measured
              << " parameter changes (" << dropped << " that g++ did not compile left out)\n";
  });
}

}  // namespace kernelrl::cli
