// SeedGrid: a measured family grid as the seed of HGEMM exemplar pools (issue 25). A new task's
// pool is seeded from the family sweep's CSV (`kernelrl bench --families`, e.g.
// docs/data/family_grid_h100.csv: per shape each family's best variant and its device time):
// the variants measured best at the nearest training shape with the same layout and
// accumulation, fastest first. Held-out shapes never lend their rows, so a held-out task's
// prompt shows what the sweep found at a shape the policy trained on, not at the shape itself.
// The seeds are then evaluated here like any candidate: the CSV chooses which variants, its
// times are never used as rewards.
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "data/speed_annotation.h"
#include "data/tasks/task.h"

namespace kernelrl {

class SeedGrid {
 public:
  // Reads `csv` (UserError naming it when unreadable or not a family grid). Rows whose
  // hgemm_split_key is in `heldout_keys` are never used.
  SeedGrid(const std::filesystem::path& csv, const std::set<std::string>& heldout_keys);

  // The sources of up to `n` variants for `task`: those of the nearest usable row (distance
  // Σ |log2 ratio| over M, N and K; ties to the row first in the CSV) of the same layout and
  // accumulation, fastest first. Empty when no row matches layout and accumulation.
  std::vector<std::string> sources(const TaskSpec& task, int64_t n) const;
  // The row sources() draws from, as "MxNxK" ("" when none).
  std::string nearest_shape(const TaskSpec& task) const;

  size_t rows() const { return shapes_.size(); }

 private:
  const MeasuredShape* nearest(const TaskSpec& task) const;
  std::vector<MeasuredShape> shapes_;  // usable rows only, kernels fastest first
};

}  // namespace kernelrl
