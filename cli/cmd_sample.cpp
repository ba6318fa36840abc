// `kernelrl sample`: completions from a policy checkpoint (and kernels from a run).
#include "cli/commands.h"

namespace kernelrl::cli {

void register_sample(CLI::App& app) {
  struct Opts {
    std::string checkpoint, run_dir, prompt, task, shape, out;
    int64_t n = 4, step = -1;
    bool evaluate = false;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("sample", "Sample completions or kernels from a policy");
  sub->add_option("--checkpoint", o->checkpoint, "policy checkpoint directory");
  sub->add_option("--run-dir", o->run_dir, "run directory (newest checkpoint, or --step)");
  sub->add_option("--step", o->step, "checkpoint step within --run-dir");
  sub->add_option("--prompt", o->prompt, "prompt text");
  sub->add_option("--task", o->task, "task to write a kernel for (hgemm, or a suite task name)");
  sub->add_option("--shape", o->shape, "MxNxK for hgemm");
  sub->add_option("-n", o->n, "completions to sample")->check(CLI::PositiveNumber);
  sub->add_option("--out", o->out, "directory for the sampled kernels");
  sub->add_flag("--evaluate", o->evaluate, "evaluate the sampled kernels");
  sub->callback([] { not_built("sample", "policy sampling lands with the policy model"); });
}

}  // namespace kernelrl::cli
