// CorpusBuildConfig: the `data.build` section, how `kernelrl data build` turns source trees into
// triplets (data/corpus/corpus_builder.h). The rest of `data:` is data/data_config.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"

namespace kernelrl {

// `data.build`: how `kernelrl data build` turns source trees into triplets.
struct CorpusBuildConfig {
  std::vector<std::string> extensions = {".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".inl"};
  std::vector<std::string> kinds = {"kernel", "device_function", "function", "class"};
  int64_t min_chars = 100;           // shorter units are dropped
  int64_t max_chars = 6000;          // longer units are dropped
  int64_t min_lines = 3;             // units with fewer lines are dropped
  double min_code_fraction = 0.5;    // share of non-space characters outside comments
  double max_digit_fraction = 0.35;  // above it a unit is a data table, not code
  double dedup_threshold = 0.8;      // MinHash Jaccard estimate at which a unit is a duplicate
  int64_t minhash_perm = 64;         // MinHash signature length
  int64_t minhash_bands = 16;        // LSH bands (must divide minhash_perm)
  int64_t shingle_tokens = 5;        // tokens per shingle
  int64_t context_top_k = 3;         // BM25 passages per triplet, at most
  int64_t context_tokens = 256;      // context budget in tokens, 1 token ~ 4 characters
  int64_t passage_chars = 800;       // documentation passages are cut to this length
  int64_t max_file_bytes = 4000000;  // larger files are skipped

  void visit(cfg::Visitor& v) {
    v.field("extensions", extensions, "file extensions scanned");
    v.field("kinds", kinds, "unit kinds kept", {"kernel", "device_function", "function", "class"});
    v.field("min_chars", min_chars, "drop shorter units", cfg::at_least(1));
    v.field("max_chars", max_chars, "drop longer units", cfg::at_least(1));
    v.field("min_lines", min_lines, "drop units with fewer lines", cfg::at_least(1));
    v.field("min_code_fraction", min_code_fraction, "non-comment share", cfg::in_closed(0, 1));
    v.field("max_digit_fraction", max_digit_fraction, "digit share of a data table",
            cfg::in_closed(0, 1));
    v.field("dedup_threshold", dedup_threshold, "MinHash Jaccard for near duplicates",
            cfg::in_open_closed(0, 1));
    v.field("minhash_perm", minhash_perm, "MinHash signature length", cfg::at_least(1));
    v.field("minhash_bands", minhash_bands, "LSH bands, dividing minhash_perm", cfg::at_least(1));
    v.field("shingle_tokens", shingle_tokens, "tokens per shingle", cfg::at_least(1));
    v.field("context_top_k", context_top_k, "BM25 passages per triplet", cfg::at_least(1));
    v.field("context_tokens", context_tokens, "context budget (tokens = chars/4)",
            cfg::at_least(1));
    v.field("passage_chars", passage_chars, "documentation passage length", cfg::at_least(40));
    v.field("max_file_bytes", max_file_bytes, "skip larger files", cfg::at_least(1));
  }
};

}  // namespace kernelrl
