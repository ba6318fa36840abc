// Kernels from a trained run: `kernelrl sample --run-dir RUN --task T [--shape MxNxK]`.
// Loads the run's resolved config and a stage checkpoint, builds the same prompt the RL stages
// use (with exemplars from the run's store), samples n completions, writes each parsed kernel
// as a file and, when asked, evaluates them with the run's reward settings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace kernelrl {

struct SampleRunOptions {
  std::filesystem::path run_dir;
  std::string stage;          // stage whose checkpoint to use; empty = the last one that has any
  int64_t step = -1;          // checkpoint step; -1 = newest
  std::string task;           // the HGEMM op's name (hgemm) or a task name of the general suite
  std::string shape;          // MxNxK for hgemm
  std::string layout = "nn";  // hgemm layout
  int64_t n = 16;
  uint64_t seed = 0;
  std::optional<double> temperature, top_p;  // override the run's rollout.sampling
  std::optional<int64_t> top_k, max_new_tokens;
  std::filesystem::path out;  // where the kernels go
  bool evaluate = false;
  std::string device = "auto";
};

// Returns the number of kernels written.
int64_t sample_kernels_from_run(const SampleRunOptions& options);

}  // namespace kernelrl
