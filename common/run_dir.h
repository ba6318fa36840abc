// A run directory: config.yaml (resolved), metrics.jsonl, checkpoints/, logs/.
// Opening one for a fresh run refuses a non-empty directory unless told to resume or overwrite,
// so a typo in --run-dir never destroys an earlier run.
#pragma once

#include <filesystem>
#include <string>

namespace kernelrl {

enum class RunDirMode { fresh, resume, overwrite };

class RunDir {
 public:
  // Creates or reopens `root`. Throws UserError: fresh + non-empty dir; resume + nothing there.
  static RunDir open(const std::filesystem::path& root, RunDirMode mode);
  // The run directory that another process (rank 0 of a multi-process job) opened; no checks.
  static RunDir attach(const std::filesystem::path& root, bool resumed);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path config_path() const { return root_ / "config.yaml"; }
  std::filesystem::path metrics_path() const { return root_ / "metrics.jsonl"; }
  std::filesystem::path checkpoints_dir() const { return root_ / "checkpoints"; }
  std::filesystem::path logs_dir() const { return root_ / "logs"; }
  bool resumed() const { return resumed_; }

  // Writes the resolved config (atomically).
  void write_config(const std::string& yaml) const;

 private:
  std::filesystem::path root_;
  bool resumed_ = false;
};

}  // namespace kernelrl
