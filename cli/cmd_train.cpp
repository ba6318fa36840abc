// `kernelrl train CONFIG [key.path=value ...]`: runs a job's stages in one run directory.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "common/error.h"
#include "trainer/distributed.h"
#include "trainer/launcher.h"
#include "trainer/pipeline.h"

namespace kernelrl::cli {

namespace {

// This process's command line without `--nproc N` / `--nproc=N`: what each rank runs.
std::vector<std::string> rank_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

}  // namespace

void register_train(CLI::App& app) {
  struct Opts {
    std::string config;
    std::vector<std::string> overrides;
    std::string run_dir;
    std::string stages;
    bool resume = false;
    bool overwrite = false;
    bool print_config = false;
    int nproc = 1;
  };
  auto opts = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("train", "Run a training job (pretrain -> general_rl -> hgemm_rl)");
  sub->add_option("config", opts->config, "job YAML (configs/quickstart.yaml, ...)")->required();
  sub->add_option("overrides", opts->overrides, "key.path=value overrides applied on top");
  sub->add_option("--run-dir", opts->run_dir, "run directory (default: run.dir or runs/<run.name>)");
  sub->add_option("--stages", opts->stages, "comma-separated stage names or kinds to run");
  auto* resume = sub->add_flag("--resume", opts->resume, "continue the run in a non-empty run dir");
  sub->add_flag("--overwrite", opts->overwrite, "delete the run dir's contents and start over")
      ->excludes(resume);
  sub->add_option("--nproc", opts->nproc,
                  "start N ranks on this host (data-parallel, one per GPU), as torchrun would")
      ->check(CLI::Range(1, 1024));
  sub->add_flag("--print-config", opts->print_config,
                "print the resolved config (with defaults) and exit");
  sub->callback([opts] {
    JobConfig job = load_job_config(opts->config, opts->overrides);
    if (!opts->run_dir.empty()) job.run.dir = opts->run_dir;
    if (opts->print_config) {
      std::fputs(cfg::to_yaml(job).c_str(), stdout);
      return;
    }
    if (opts->nproc > 1) {
      if (const char* r = std::getenv("RANK"))
        throw UserError(std::string("--nproc: this process already is rank ") + r +
                        " of a launched job (torchrun or --nproc); drop --nproc");
      exit_code = launch_local_ranks(opts->nproc, rank_command_line());
      return;
    }
    // Under torchrun (or --nproc) this process is one rank of a data-parallel job.
    dist::Session session(dist::read_launch_env(), job.run.dist, job.run.device);
    PipelineOptions po;
    po.mode = opts->resume ? RunDirMode::resume
                           : opts->overwrite ? RunDirMode::overwrite : RunDirMode::fresh;
    std::stringstream ss(opts->stages);
    for (std::string s; std::getline(ss, s, ',');)
      if (!s.empty()) po.only_stages.push_back(s);
    try {
      run_pipeline(job, po);
    } catch (const std::exception& e) {
      session.report_failure(e.what());
      throw;
    }
  });
}

}  // namespace kernelrl::cli
