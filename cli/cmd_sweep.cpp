// `kernelrl sweep SWEEP.yaml`: a grid over config keys, one run directory per point.
#include "cli/commands.h"

namespace kernelrl::cli {

void register_sweep(CLI::App& app) {
  struct Opts {
    std::string config;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("sweep", "Run a grid of jobs over config keys");
  sub->add_option("config", o->config, "sweep YAML")->required();
  sub->callback([] { not_built("sweep", "sweeps land with the GRPO trainer"); });
}

}  // namespace kernelrl::cli
