// What a stage runs with: the job, its own config, the run directory and the metrics file,
// where it starts from and whether it resumes. The pipeline (trainer/pipeline.h) makes one per
// stage; the stages (trainer/stage_loop.h and the two that run on it) read it.
#pragma once

#include <filesystem>

#include "common/metrics.h"
#include "common/run_dir.h"
#include "trainer/job_config.h"

namespace kernelrl {

struct StageContext {
  const JobConfig& job;
  const StageConfig& stage;
  const RunDir& run_dir;
  MetricsWriter& metrics;
  std::filesystem::path init_checkpoint;  // previous stage's final checkpoint; empty = fresh
  bool resume = false;                    // continue from this stage's newest checkpoint
};

}  // namespace kernelrl
