#include "data/corpus/minhash.h"

#include "common/cpp_lexer.h"
#include "common/hash.h"

#include <limits>
#include <stdexcept>

namespace kernelrl {

std::vector<std::string> code_tokens(const std::string& code) {
  return cpp::similarity_tokens(code);
}

MinHashDeduper::MinHashDeduper(int64_t num_perm, int64_t bands, int64_t shingle, double threshold)
    : num_perm_(num_perm),
      bands_(bands),
      rows_(num_perm / bands),
      shingle_(shingle),
      threshold_(threshold) {
  if (bands <= 0 || num_perm % bands != 0)
    throw std::invalid_argument("MinHash: bands must divide num_perm");
  for (int64_t i = 0; i < num_perm; ++i) seeds_.push_back(splitmix64(0x5eed0000ULL + i));
  buckets_.resize(bands);
}

std::vector<uint64_t> MinHashDeduper::signature(const std::string& code) const {
  std::vector<std::string> tok = code_tokens(code);
  std::vector<uint64_t> sig(num_perm_, std::numeric_limits<uint64_t>::max());
  size_t k = static_cast<size_t>(shingle_);
  size_t count = tok.size() >= k ? tok.size() - k + 1 : (tok.empty() ? 0 : 1);
  for (size_t i = 0; i < count; ++i) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t j = i; j < std::min(tok.size(), i + k); ++j) h = fnv1a(tok[j], h ^ 0x1f);
    for (int64_t p = 0; p < num_perm_; ++p) {
      uint64_t v = splitmix64(h ^ seeds_[p]);
      if (v < sig[p]) sig[p] = v;
    }
  }
  return sig;
}

double MinHashDeduper::estimate_jaccard(const std::vector<uint64_t>& a,
                                        const std::vector<uint64_t>& b) {
  size_t eq = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) eq += a[i] == b[i];
  return a.empty() ? 0.0 : static_cast<double>(eq) / static_cast<double>(a.size());
}

bool MinHashDeduper::is_duplicate_then_add(const std::string& code) {
  std::vector<uint64_t> sig = signature(code);
  std::vector<uint64_t> keys(bands_);
  for (int64_t b = 0; b < bands_; ++b) {
    uint64_t h = 0x7a11ULL + b;
    for (int64_t r = 0; r < rows_; ++r) h = splitmix64(h ^ sig[b * rows_ + r]);
    keys[b] = h;
    auto it = buckets_[b].find(h);
    if (it == buckets_[b].end()) continue;
    for (int32_t other : it->second)
      if (estimate_jaccard(sig, kept_[other]) >= threshold_) return true;
  }
  int32_t id = static_cast<int32_t>(kept_.size());
  kept_.push_back(std::move(sig));
  for (int64_t b = 0; b < bands_; ++b) buckets_[b][keys[b]].push_back(id);
  return false;
}

}  // namespace kernelrl
