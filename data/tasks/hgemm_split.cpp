#include "data/tasks/hgemm_split.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/hash.h"

namespace kernelrl {

int hgemm_size_bin(const TaskSpec& task) {
  const double work = static_cast<double>(task.m) * static_cast<double>(task.n) *
                      static_cast<double>(task.k);
  return work > 0 ? static_cast<int>(std::floor(std::log2(work) / 3.0 + 1e-9)) : 0;
}

std::string hgemm_split_key(const TaskSpec& task) {
  return std::to_string(task.m) + "x" + std::to_string(task.n) + "x" + std::to_string(task.k) +
         " " + task.layout + " " + task.acc;
}

std::vector<TaskSpec> split_hgemm_shapes(std::vector<TaskSpec> shapes, double fraction) {
  std::map<int, std::vector<size_t>> bins;
  for (size_t i = 0; i < shapes.size(); ++i) {
    shapes[i].holdout = false;
    bins[hgemm_size_bin(shapes[i])].push_back(i);
  }
  if (fraction <= 0) return shapes;
  for (auto& [bin, members] : bins) {
    const size_t n = members.size();
    size_t k = static_cast<size_t>(std::llround(fraction * static_cast<double>(n)));
    if (n >= 2) k = std::max<size_t>(k, 1);
    k = std::min(k, n - (n >= 2 ? 1 : n));  // a bin keeps at least one training shape
    // splitmix64 over FNV-1a: the keys differ in a few digits, FNV alone orders them by them.
    std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      return splitmix64(fnv1a(hgemm_split_key(shapes[a]))) <
             splitmix64(fnv1a(hgemm_split_key(shapes[b])));
    });
    for (size_t j = 0; j < k; ++j) shapes[members[j]].holdout = true;
  }
  return shapes;
}

std::vector<TaskSpec> hgemm_split_part(const std::vector<TaskSpec>& shapes, double fraction,
                                       bool heldout) {
  std::vector<TaskSpec> out;
  for (auto& t : split_hgemm_shapes(shapes, fraction))
    if (t.holdout == heldout) out.push_back(std::move(t));
  return out;
}

}  // namespace kernelrl
