// Bucketed contrastive exemplar sampling: bucket assignment, distinct buckets, and the
// sampling frequencies against the closed-form softmax P(b) ∝ exp((mean_b − mean)/τ).
#include <gtest/gtest.h>

#include <set>

#include "rollout/exemplars.h"

namespace kernelrl {
namespace {

// Three clusters of ten candidates at scores 0, 1, 2 (with tiny offsets): three buckets whose
// means are 0, 1, 2 around a global mean of 1, so with τ = 1 the logits are −1, 0, 1.
std::vector<Exemplar> three_clusters() {
  std::vector<Exemplar> pool;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 10; ++i)
      pool.push_back({"c" + std::to_string(c) + "_" + std::to_string(i), "src",
                      c + (i - 4.5) * 1e-3});
  return pool;
}

int cluster_of(const Exemplar& e) { return e.id[1] - '0'; }

TEST(Exemplars, BucketsSplitTheScoreRangeEvenly) {
  auto buckets = score_buckets(three_clusters(), 3);
  ASSERT_EQ(buckets.size(), 3u);
  for (auto& b : buckets) EXPECT_EQ(b.size(), 10u);
  EXPECT_EQ(score_buckets(three_clusters(), 9).size(), 3u);  // empty buckets are dropped
  EXPECT_EQ(score_buckets({{"a", "", 1.0}, {"b", "", 1.0}}, 4).size(), 1u);  // no spread
  EXPECT_TRUE(score_buckets({}, 4).empty());
}

TEST(Exemplars, SingleDrawFollowsCentredSoftmax) {
  auto pool = three_clusters();
  std::mt19937_64 rng(123);
  const int trials = 20000;
  int count[3] = {0, 0, 0};
  for (int t = 0; t < trials; ++t) count[cluster_of(sample_exemplars(pool, 1, 3, 1.0, rng)[0])]++;
  // softmax(−1, 0, 1) = 0.0900, 0.2447, 0.6652 (computed independently); binomial sd ≤ 0.0034,
  // tolerance 0.015 is > 4 sd.
  EXPECT_NEAR(count[0] / double(trials), 0.0900306, 0.015);
  EXPECT_NEAR(count[1] / double(trials), 0.2447285, 0.015);
  EXPECT_NEAR(count[2] / double(trials), 0.6652410, 0.015);
}

TEST(Exemplars, PairsComeFromDistinctBucketsWorstFirst) {
  auto pool = three_clusters();
  std::mt19937_64 rng(7);
  const int trials = 20000;
  int best_included = 0;
  for (int t = 0; t < trials; ++t) {
    auto ex = sample_exemplars(pool, 2, 3, 1.0, rng);
    ASSERT_EQ(ex.size(), 2u);
    ASSERT_NE(cluster_of(ex[0]), cluster_of(ex[1]));
    ASSERT_LT(ex[0].score, ex[1].score);
    best_included += cluster_of(ex[1]) == 2;
  }
  // P(bucket 2 among two draws without replacement) = 0.94661 (closed form, independently).
  EXPECT_NEAR(best_included / double(trials), 0.946615, 0.01);
}

TEST(Exemplars, HighTemperatureIsNearUniformAndSmallPoolsAreTakenWhole) {
  auto pool = three_clusters();
  std::mt19937_64 rng(9);
  int count[3] = {0, 0, 0};
  for (int t = 0; t < 9000; ++t) count[cluster_of(sample_exemplars(pool, 1, 3, 1e6, rng)[0])]++;
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(count[c] / 9000.0, 1.0 / 3, 0.03);
  auto all = sample_exemplars(pool, 5, 3, 1.0, rng);  // asks for more buckets than exist
  EXPECT_EQ(all.size(), 3u);
  std::set<int> clusters;
  for (auto& e : all) clusters.insert(cluster_of(e));
  EXPECT_EQ(clusters.size(), 3u);
}

}  // namespace
}  // namespace kernelrl
