// Contrastive exemplar selection (CUDA-L1 §2.4.3): bucket a task's successful candidates by
// score, draw N distinct buckets with a softmax over bucket-mean scores centred on the global
// mean, then one candidate per bucket. Pure selection over a pool; where the pool comes from
// (the results store, the kernel families) is the caller's business.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kernelrl {

struct Exemplar {
  std::string id;      // content hash or family variant name
  std::string source;  // the kernel's code
  double score = 0;    // measured score (speedup over t_ref, or the reward)
};

// Equal-width score buckets over [min, max] of the pool; returns the non-empty ones, each a
// list of indices into `pool`, ordered by score.
std::vector<std::vector<size_t>> score_buckets(const std::vector<Exemplar>& pool,
                                               int64_t n_buckets);

// Draws min(n, non-empty buckets) distinct buckets without replacement with
//   P(b) ∝ exp((mean_b − mean_all) / τ)
// and one candidate uniformly from each; returned in increasing score (worst first, so the
// prompt reads as progress towards the best).
std::vector<Exemplar> sample_exemplars(const std::vector<Exemplar>& pool, int64_t n,
                                       int64_t n_buckets, double temperature, std::mt19937_64& rng);

}  // namespace kernelrl
