// `kernelrl train CONFIG [key.path=value ...]`: runs a job's stages in one run directory.
#include <sstream>

#include "cli/commands.h"
#include "common/error.h"
#include "trainer/pipeline.h"

namespace kernelrl::cli {

void register_train(CLI::App& app) {
  struct Opts {
    std::string config;
    std::vector<std::string> overrides;
    std::string run_dir;
    std::string stages;
    bool resume = false;
    bool overwrite = false;
    bool print_config = false;
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
  sub->add_flag("--print-config", opts->print_config,
                "print the resolved config (with defaults) and exit");
  sub->callback([opts] {
    JobConfig job = load_job_config(opts->config, opts->overrides);
    if (!opts->run_dir.empty()) job.run.dir = opts->run_dir;
    if (opts->print_config) {
      std::fputs(cfg::to_yaml(job).c_str(), stdout);
      return;
    }
    PipelineOptions po;
    po.mode = opts->resume ? RunDirMode::resume
                           : opts->overwrite ? RunDirMode::overwrite : RunDirMode::fresh;
    std::stringstream ss(opts->stages);
    for (std::string s; std::getline(ss, s, ',');)
      if (!s.empty()) po.only_stages.push_back(s);
    run_pipeline(job, po);
  });
}

}  // namespace kernelrl::cli
