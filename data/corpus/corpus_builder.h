// `kernelrl data build` and `data stats`: source trees -> (instruction, context, code) triplets.
// Pipeline: scan files into units (source_scanner.h) -> filter (length, kind, not code) -> drop
// exact and near duplicates (minhash.h) -> template instruction from doc comment, name,
// signature and detected features (no LLM) -> BM25 context (bm25.h) from the scanned trees' doc
// comments plus text/markdown under --docs -> JSONL (triplet.h). Single-threaded, in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "data/corpus/corpus_config.h"
#include "data/corpus/source_scanner.h"
#include "data/corpus/triplet.h"

namespace kernelrl {

struct CorpusBuildReport {
  int64_t files_scanned = 0, files_skipped = 0, units_found = 0;
  int64_t dropped_kind = 0, dropped_short = 0, dropped_long = 0, dropped_not_code = 0;
  int64_t exact_duplicates = 0, near_duplicates = 0, no_context = 0;
  int64_t doc_passages = 0, written = 0;
  std::map<std::string, int64_t> kinds;  // written triplets per unit kind
  double seconds = 0;
  std::string summary() const;  // multi-line, human readable
};

// Scans `from` trees, retrieves from their doc comments plus text files under `docs`, writes
// `out` (atomically). Throws UserError for a missing input path.
CorpusBuildReport build_corpus(const CorpusBuildConfig& config,
                               const std::vector<std::filesystem::path>& from,
                               const std::vector<std::filesystem::path>& docs,
                               const std::filesystem::path& out);

// The instruction for one unit (deterministic; phrasing varies with a hash of the name).
std::string make_instruction(const SourceUnit& unit, const std::vector<std::string>& features,
                             const std::string& file);

// Documentation passages of a text/markdown file: paragraphs merged up to `passage_chars`.
std::vector<std::string> split_passages(const std::string& text, int64_t passage_chars);

struct CorpusStats {
  int64_t triplets = 0, empty_instruction = 0, empty_context = 0, empty_code = 0;
  int64_t duplicate_ids = 0, exact_duplicate_code = 0, near_duplicate_code = 0;
  std::map<std::string, int64_t> tags;
  // Histograms over character lengths, buckets [0,64), [64,128), ... doubling.
  std::map<int64_t, int64_t> instruction_chars, context_chars, code_chars;
  std::string format() const;
};
CorpusStats corpus_stats(const std::filesystem::path& corpus, double dedup_threshold = 0.8);

}  // namespace kernelrl
