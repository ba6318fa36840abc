// `kernelrl bench --kernels DIR --grid full|small|FILE`: per-shape kernels over the HGEMM grid.
#include "cli/commands.h"

namespace kernelrl::cli {

void register_bench(CLI::App& app) {
  struct Opts {
    std::string kernels, grid = "small", out = "results.csv";
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("bench", "Benchmark per-shape kernels over the HGEMM grid");
  sub->add_option("--kernels", o->kernels, "directory of {M}_{N}_{K}.cu kernels")->required();
  sub->add_option("--grid", o->grid, "full | small | FILE of MxNxK lines");
  sub->add_option("--out", o->out, "CSV of speedups per baseline");
  sub->callback([] { not_built("bench", "the kernel evaluator is not in this build"); });
}

}  // namespace kernelrl::cli
