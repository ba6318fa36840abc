// DataConfig: corpora, tokenizer and task suites, mirrored 1:1 by the YAML `data:` section
// (`data.build`, the corpus builder's settings, is data/corpus/corpus_config.h).
#pragma once

#include <string>
#include <vector>

#include "common/config.h"
#include "data/corpus/corpus_config.h"

namespace kernelrl {

struct DataConfig {
  std::vector<std::string> corpus;      // triplet JSONL files for pretraining
  std::vector<std::string> corpus_tags; // keep only triplets carrying every one of these tags
                                        // (e.g. [host]: the host backend's family kernels); [] = all
  std::string tokenizer = "";           // SentencePiece model; "" = train one into the run dir
  int64_t tokenizer_vocab_size = 4096;  // vocabulary when the tokenizer is trained here
  std::string general_tasks = "configs/tasks/general.yaml";  // general-kernel task suite
  std::string hgemm_grid = "small";  // HGEMM shapes: full | small | llm | a file of MxNxK lines
  double holdout_fraction = 0.05;    // share of data and tasks held out for evaluation
  // Share of the HGEMM grid held out of hgemm_rl and of speed-annotated pretraining, per size
  // bin by a hash of the shape (data/tasks/hgemm_split.h); the lift measures run on it. 0 = none.
  double hgemm_heldout = 0.0;
  CorpusBuildConfig build;           // `kernelrl data build` settings

  void visit(cfg::Visitor& v) {
    v.field("corpus", corpus, "triplet JSONL files for pretraining");
    v.field("corpus_tags", corpus_tags,
            "keep only triplets carrying every one of these tags (e.g. [host]); [] = all");
    v.field("tokenizer", tokenizer, "SentencePiece model path; empty = train one");
    v.field("tokenizer_vocab_size", tokenizer_vocab_size, "vocabulary size when training one",
            cfg::at_least(64));
    v.field("general_tasks", general_tasks, "general-kernel task suite file");
    v.field("hgemm_grid", hgemm_grid, "full | small | llm | file of MxNxK lines");
    v.field("holdout_fraction", holdout_fraction, "held-out share", cfg::in_closed_open(0, 1));
    v.field("hgemm_heldout", hgemm_heldout,
            "share of the HGEMM grid held out of hgemm_rl, per size bin by hash; 0 = none",
            cfg::in_closed_open(0, 1));
    v.section("build", build, "corpus building (kernelrl data build)");
  }
};

}  // namespace kernelrl
