// Reading a run directory's records in tests: the metrics.jsonl lines of one stage.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/metrics.h"

namespace kernelrl::testing {

// The records of `stage` in run/metrics.jsonl, in file order; none when the file is missing.
inline std::vector<nlohmann::json> stage_records(const std::filesystem::path& run, const std::string& stage) {
  std::vector<nlohmann::json> out;
  if (!std::filesystem::exists(run / "metrics.jsonl")) return out;
  for (auto& r : MetricsWriter::read_all(run / "metrics.jsonl"))
    if (r.value("stage", "") == stage) out.push_back(r);
  return out;
}

}  // namespace kernelrl::testing
