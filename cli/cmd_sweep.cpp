// `kernelrl sweep SWEEP.yaml`: a grid over config keys, one run directory per point.
#include <unistd.h>

#include <climits>
#include <cstdio>

#include "cli/commands.h"
#include "common/fs.h"
#include "model/device.h"
#include "trainer/sweep.h"

namespace kernelrl::cli {

void register_sweep(CLI::App& app) {
  struct Opts {
    std::string config;
    std::vector<std::string> overrides;
    bool resume = false;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("sweep", "Run a grid of jobs over config keys");
  sub->add_option("config", o->config, "sweep YAML (base, grid, dir, parallel, metrics)")->required();
  sub->add_option("overrides", o->overrides, "key.path=value overrides of the sweep file");
  sub->add_flag("--resume", o->resume, "resume points whose run directories exist");
  sub->callback([o] {
    fs::path base;
    std::string note;
    SweepConfig sweep = load_sweep(o->config, o->overrides, /*gpu_visible=*/cuda_device_count() > 0, &base, &note);
    if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
    char self[PATH_MAX] = {0};
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    std::string bin = n > 0 ? std::string(self, n) : "kernelrl";
    int failed = run_sweep(sweep, base, bin, o->resume);
    if (failed) exit_code = 1;
  });
}

}  // namespace kernelrl::cli
