// `kernelrl data build|stats|synth`: the triplet corpus and the kernel families.
#include "cli/commands.h"

namespace kernelrl::cli {

void register_data(CLI::App& app) {
  auto* sub = app.add_subcommand("data", "Build and inspect training data");
  sub->require_subcommand(1);
  struct Opts {
    std::vector<std::string> from, docs;
    std::string out, input, families = "all";
    int64_t n = 100;
  };
  auto o = std::make_shared<Opts>();
  auto* build = sub->add_subcommand("build", "CUDA sources -> instruction-context-code triplets");
  build->add_option("--from", o->from, "source tree to scan (repeatable)")->required();
  build->add_option("--docs", o->docs, "documentation folder for retrieval (repeatable)");
  build->add_option("--out", o->out, "output JSONL")->required();
  build->callback([] { not_built("data build", "the corpus builder is not in this build"); });
  auto* stats = sub->add_subcommand("stats", "Counts, histograms and duplicates of a corpus");
  stats->add_option("corpus", o->input, "triplet JSONL")->required();
  stats->callback([] { not_built("data stats", "the corpus builder is not in this build"); });
  auto* synth = sub->add_subcommand("synth", "Write kernel-family variants as triplets");
  synth->add_option("--families", o->families, "all | comma-separated family names");
  synth->add_option("--n", o->n, "variants to write")->check(CLI::PositiveNumber);
  synth->add_option("--out", o->out, "output JSONL")->required();
  synth->callback([] { not_built("data synth", "the kernel families are not in this build"); });
}

}  // namespace kernelrl::cli
