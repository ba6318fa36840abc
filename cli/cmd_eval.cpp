// `kernelrl eval KERNEL.cu --shape MxNxK`: verdict, times and speedups of one kernel.
#include "cli/commands.h"

namespace kernelrl::cli {

void register_eval(CLI::App& app) {
  struct Opts {
    std::string kernel, shape, layout = "nn", mode = "offline", baselines = "all", json;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("eval", "Evaluate one candidate kernel against the baselines");
  sub->add_option("kernel", o->kernel, "candidate .cu file")->required();
  sub->add_option("--shape", o->shape, "MxNxK")->required();
  sub->add_option("--layout", o->layout, "nn | tn")->check(CLI::IsMember({"nn", "tn"}));
  sub->add_option("--mode", o->mode, "offline | server")->check(CLI::IsMember({"offline", "server"}));
  sub->add_option("--baselines", o->baselines, "all | lt-auto | ... (comma-separated)");
  sub->add_option("--json", o->json, "also write the result as JSON");
  sub->callback([] { not_built("eval", "the kernel evaluator is not in this build"); });
}

}  // namespace kernelrl::cli
