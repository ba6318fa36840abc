// `kernelrl data build|stats|synth`: the triplet corpus and the kernel families.
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
#include "data/families.h"
#include "data/tasks/task_ops.h"
#include "data/tasks/task_suite.h"

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
}

}  // namespace kernelrl::cli
