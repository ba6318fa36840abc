// The job pipeline: runs the configured stages in order (pretrain -> general_rl -> hgemm_rl),
// each starting from the previous stage's final checkpoint, in one run directory.
// A stage kind whose trainer is not built yet makes the whole job fail before anything is
// written, with a one-line NotAvailableError.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/run_dir.h"
#include "trainer/job_config.h"
#include "trainer/stage_context.h"

namespace kernelrl {

// Runs one stage; returns the directory of its final checkpoint.
using StageRunner = std::function<std::filesystem::path(StageContext&)>;

// The trainer for a stage kind, or an empty function when this build has none yet.
StageRunner stage_runner(const std::string& kind);

struct PipelineOptions {
  std::vector<std::string> only_stages;  // --stages: names or kinds to run; empty = all enabled
  RunDirMode mode = RunDirMode::fresh;
};

// Returns the stages that will run, checking --stages names against the config.
std::vector<const StageConfig*> select_stages(const JobConfig& job,
                                              const std::vector<std::string>& only);

// Runs the job; returns the final checkpoint of the last stage.
std::filesystem::path run_pipeline(const JobConfig& job, const PipelineOptions& options);

}  // namespace kernelrl
