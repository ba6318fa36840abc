#include "data/corpus/bm25.h"

#include <algorithm>
#include <cmath>

#include "data/corpus/source_scanner.h"

namespace kernelrl {

int64_t Bm25Index::add(const std::string& text) {
  int32_t doc = static_cast<int32_t>(doc_len_.size());
  std::vector<std::string> words = words_of(text);
  std::unordered_map<int32_t, int32_t> tf;
  for (const auto& w : words) {
    auto [it, inserted] = vocab_.try_emplace(w, static_cast<int32_t>(postings_.size()));
    if (inserted) postings_.emplace_back();
    ++tf[it->second];
  }
  for (auto [term, count] : tf) postings_[term].push_back({doc, count});
  doc_len_.push_back(static_cast<int32_t>(words.size()));
  return doc;
}

void Bm25Index::finalize() {
  double total = 0;
  for (int32_t l : doc_len_) total += l;
  avgdl_ = doc_len_.empty() ? 1 : std::max(1.0, total / doc_len_.size());
  scratch_.assign(doc_len_.size(), 0.0);
}

std::vector<Bm25Index::Hit> Bm25Index::search(const std::string& query, int64_t k, int64_t exclude,
                                              double max_df_fraction) const {
  std::vector<std::string> words = words_of(query);
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  const double n = static_cast<double>(doc_len_.size());
  if (scratch_.size() != doc_len_.size()) scratch_.assign(doc_len_.size(), 0.0);
  touched_.clear();
  for (const auto& w : words) {
    auto it = vocab_.find(w);
    if (it == vocab_.end()) continue;
    const auto& plist = postings_[it->second];
    double df = static_cast<double>(plist.size());
    if (n >= 100 && df > max_df_fraction * n) continue;  // stop word (in a real corpus)
    double idf = std::log(1.0 + (n - df + 0.5) / (df + 0.5));
    for (const Posting& p : plist) {
      double tf = p.tf;
      double norm = k1_ * (1.0 - b_ + b_ * doc_len_[p.doc] / avgdl_);
      if (scratch_[p.doc] == 0.0) touched_.push_back(p.doc);
      scratch_[p.doc] += idf * tf * (k1_ + 1.0) / (tf + norm);
    }
  }
  std::vector<Hit> hits;
  hits.reserve(touched_.size());
  for (int32_t d : touched_) {
    if (d != exclude && scratch_[d] > 0) hits.push_back({d, scratch_[d]});
    scratch_[d] = 0.0;
  }
  size_t top = std::min<size_t>(hits.size(), static_cast<size_t>(std::max<int64_t>(k, 0)));
  std::partial_sort(hits.begin(), hits.begin() + top, hits.end(), [](const Hit& a, const Hit& b) {
    return a.score != b.score ? a.score > b.score : a.doc < b.doc;
  });
  hits.resize(top);
  return hits;
}

}  // namespace kernelrl
