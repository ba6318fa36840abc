#include "rollout/exemplars.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kernelrl {

std::vector<std::vector<size_t>> score_buckets(const std::vector<Exemplar>& pool,
                                               int64_t n_buckets) {
  if (pool.empty() || n_buckets < 1) return {};
  auto [lo_it, hi_it] = std::minmax_element(
      pool.begin(), pool.end(), [](const Exemplar& a, const Exemplar& b) { return a.score < b.score; });
  const double lo = lo_it->score, hi = hi_it->score;
  std::vector<std::vector<size_t>> buckets(static_cast<size_t>(n_buckets));
  for (size_t i = 0; i < pool.size(); ++i) {
    size_t b = 0;
    if (hi > lo) {
      b = static_cast<size_t>((pool[i].score - lo) / (hi - lo) * static_cast<double>(n_buckets));
      b = std::min(b, static_cast<size_t>(n_buckets - 1));  // the max lands in the last bucket
    }
    buckets[b].push_back(i);
  }
  std::vector<std::vector<size_t>> out;
  for (auto& b : buckets)
    if (!b.empty()) out.push_back(std::move(b));
  return out;
}

std::vector<Exemplar> sample_exemplars(const std::vector<Exemplar>& pool, int64_t n,
                                       int64_t n_buckets, double temperature,
                                       std::mt19937_64& rng) {
  auto buckets = score_buckets(pool, n_buckets);
  if (buckets.empty() || n <= 0) return {};
  double global_mean = 0;
  for (const auto& e : pool) global_mean += e.score;
  global_mean /= static_cast<double>(pool.size());
  std::vector<double> logits;
  for (const auto& b : buckets) {
    double m = 0;
    for (size_t i : b) m += pool[i].score;
    logits.push_back((m / static_cast<double>(b.size()) - global_mean) / temperature);
  }
  std::vector<size_t> chosen_buckets;
  std::vector<bool> taken(buckets.size(), false);
  const size_t want = std::min(static_cast<size_t>(n), buckets.size());
  while (chosen_buckets.size() < want) {
    // Softmax over the buckets not drawn yet (max-subtracted for stability).
    double mx = -INFINITY;
    for (size_t b = 0; b < buckets.size(); ++b)
      if (!taken[b]) mx = std::max(mx, logits[b]);
    std::vector<double> w(buckets.size(), 0.0);
    for (size_t b = 0; b < buckets.size(); ++b)
      if (!taken[b]) w[b] = std::exp(logits[b] - mx);
    std::discrete_distribution<size_t> pick(w.begin(), w.end());
    size_t b = pick(rng);
    taken[b] = true;
    chosen_buckets.push_back(b);
  }
  std::vector<Exemplar> out;
  for (size_t b : chosen_buckets) {
    std::uniform_int_distribution<size_t> u(0, buckets[b].size() - 1);
    out.push_back(pool[buckets[b][u(rng)]]);
  }
  std::sort(out.begin(), out.end(),
            [](const Exemplar& a, const Exemplar& b) { return a.score < b.score; });
  return out;
}

}  // namespace kernelrl
