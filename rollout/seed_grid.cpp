#include "rollout/seed_grid.h"

#include <cmath>
#include <limits>

#include "data/tasks/hgemm_split.h"

namespace kernelrl {

SeedGrid::SeedGrid(const std::filesystem::path& csv, const std::set<std::string>& heldout_keys) {
  for (auto& s : read_family_grid_csv(csv, ""))
    if (!heldout_keys.count(hgemm_split_key(s.task)) && !s.kernels.empty()) shapes_.push_back(std::move(s));
}

const MeasuredShape* SeedGrid::nearest(const TaskSpec& task) const {
  const MeasuredShape* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  auto lg = [](int64_t a, int64_t b) {
    return std::fabs(std::log2(static_cast<double>(a)) - std::log2(static_cast<double>(b)));
  };
  for (const auto& s : shapes_) {
    if (s.task.layout != task.layout || s.task.acc != task.acc) continue;
    const double d = lg(s.task.m, task.m) + lg(s.task.n, task.n) + lg(s.task.k, task.k);
    if (d < best_d) best_d = d, best = &s;
  }
  return best;
}

std::vector<std::string> SeedGrid::sources(const TaskSpec& task, int64_t n) const {
  std::vector<std::string> out;
  const MeasuredShape* s = nearest(task);
  if (!s) return out;
  for (const auto& k : s->kernels) {
    if (static_cast<int64_t>(out.size()) >= n) break;
    out.push_back(k.source);
  }
  return out;
}

std::string SeedGrid::nearest_shape(const TaskSpec& task) const {
  const MeasuredShape* s = nearest(task);
  return s ? std::to_string(s->task.m) + "x" + std::to_string(s->task.n) + "x" + std::to_string(s->task.k) : "";
}

}  // namespace kernelrl
