// BM25 retrieval over short text passages (Robertson & Zaragoza, "The Probabilistic Relevance
// Framework: BM25 and Beyond", 2009, Eq. 3.15 without the query-term weight):
//   score(q, d) = Σ_{t∈q} idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl)),
//   idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5)).
// Words come from words_of() (lower case, identifiers split). An in-memory inverted index; no
// persistence.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kernelrl {

class Bm25Index {
 public:
  explicit Bm25Index(double k1 = 1.2, double b = 0.75) : k1_(k1), b_(b) {}
  // Adds a passage; returns its index.
  int64_t add(const std::string& text);
  // Call after the last add() and before search().
  void finalize();
  struct Hit {
    int64_t doc;
    double score;
  };
  // Top `k` passages by score (> 0), best first; `exclude` (a passage index or -1) is skipped.
  // Query words whose document frequency exceeds `max_df_fraction`·N are ignored (stop words)
  // once the index holds at least 100 passages.
  std::vector<Hit> search(const std::string& query, int64_t k, int64_t exclude = -1,
                          double max_df_fraction = 0.25) const;
  int64_t size() const { return static_cast<int64_t>(doc_len_.size()); }

 private:
  struct Posting {
    int32_t doc;
    int32_t tf;
  };
  double k1_, b_;
  double avgdl_ = 0;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::vector<Posting>> postings_;
  std::vector<int32_t> doc_len_;
  mutable std::vector<double> scratch_;
  mutable std::vector<int32_t> touched_;
};

}  // namespace kernelrl
