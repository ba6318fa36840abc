// Per-step metrics as JSON Lines (`metrics.jsonl`, one object per step, each with "step").
// On resume the file is cut back to the resumed step, so a run killed between a metrics line
// and its checkpoint does not log that step twice. TensorBoard output lives in the trainer.
#pragma once

#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

namespace kernelrl {

class MetricsWriter {
 public:
  // Opens `path` for appending. With `keep_through_step` >= 0, lines with a larger "step" are
  // dropped first (atomically); with -1 the file is started empty. An empty path writes nothing
  // (the ranks other than 0 of a multi-process job).
  MetricsWriter(const std::filesystem::path& path, int64_t keep_through_step);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Writes one line; adds "step" and "time" (Unix seconds) and flushes.
  void write(int64_t step, nlohmann::json record);

  // Drops every record for which `drop` is true (atomic rewrite) and keeps appending: a stage
  // resumed at step s drops its own records after s and those of later stages.
  void drop_if(const std::function<bool(const nlohmann::json&)>& drop);

  // Reads every record of a metrics file (for reports and tests); throws on malformed lines.
  static std::vector<nlohmann::json> read_all(const std::filesystem::path& path);

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace kernelrl
