// Near-duplicate detection by MinHash (Broder, "On the resemblance and containment of
// documents", 1997) with LSH banding: a text becomes the set S of hashed k-token shingles; its
// signature holds, for each of P hash functions h_i, min_{s∈S} h_i(s). The share of equal
// signature entries estimates the Jaccard similarity |S∩T| / |S∪T|. Candidates come from B bands
// of R rows (B·R = P) colliding in a bucket; a candidate is a duplicate when its estimated
// Jaccard is >= the threshold.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kernelrl {

// Code tokens: common/cpp_lexer.h's similarity_tokens (identifiers, pp-numbers, punctuators by
// longest match, a literal as its two delimiters without its contents; comments dropped).
std::vector<std::string> code_tokens(const std::string& code);

class MinHashDeduper {
 public:
  MinHashDeduper(int64_t num_perm, int64_t bands, int64_t shingle, double threshold);
  // True when `code` is a near duplicate of an earlier kept text (then it is not kept).
  bool is_duplicate_then_add(const std::string& code);
  std::vector<uint64_t> signature(const std::string& code) const;
  static double estimate_jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);

 private:
  int64_t num_perm_, bands_, rows_, shingle_;
  double threshold_;
  std::vector<uint64_t> seeds_;
  std::vector<std::vector<uint64_t>> kept_;
  std::vector<std::unordered_map<uint64_t, std::vector<int32_t>>> buckets_;
};

}  // namespace kernelrl
