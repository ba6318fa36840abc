// The train / held-out split of an HGEMM shape grid (issue 25): a fixed share of the shapes is
// held out of HGEMM RL (and of speed-annotated pretraining) so that before/after measures are
// taken on shapes the policy never trained on. The split is a pure function of the grid and the
// fraction: shapes are binned by size, and within each bin the ones with the lowest hash of their
// key are held out, so every size bin contributes. It selects; it does not evaluate anything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tasks/task.h"

namespace kernelrl {

// Size bin of a shape: floor(log2(M·N·K) / 3), the 3-wide log2 bins of docs/benchmarks.md's
// family-grid tables (2^18–2^20, 2^21–2^23, ...).
int hgemm_size_bin(const TaskSpec& task);

// The key the split hashes: "MxNxK layout acc".
std::string hgemm_split_key(const TaskSpec& task);

// Marks `fraction` of `shapes` as held out (TaskSpec::holdout = true) and clears the flag on the
// rest. Per size bin of n shapes, the k = round(fraction · n) shapes with the lowest
// fnv1a(hgemm_split_key) are held out, at least one where n >= 2 and fraction > 0 (a bin of one
// shape stays in training). fraction 0 holds nothing out. Order of `shapes` is kept.
std::vector<TaskSpec> split_hgemm_shapes(std::vector<TaskSpec> shapes, double fraction);

// The held-out (or training) shapes of split_hgemm_shapes.
std::vector<TaskSpec> hgemm_split_part(const std::vector<TaskSpec>& shapes, double fraction,
                                       bool heldout);

}  // namespace kernelrl
