// DataConfig: corpora, tokenizer and task suites, mirrored 1:1 by the YAML `data:` section.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace kernelrl {

struct DataConfig {
  std::vector<std::string> corpus;  // triplet JSONL files for pretraining
  std::string tokenizer = "";       // SentencePiece model; "" = train one into the run dir
  int64_t tokenizer_vocab_size = 4096;  // vocabulary when the tokenizer is trained here
  std::string general_tasks = "configs/tasks/general.yaml";  // general-kernel task suite
  std::string hgemm_grid = "small";  // HGEMM shapes: full | small | llm | a file of MxNxK lines
  double holdout_fraction = 0.05;   // share of data and tasks held out for evaluation

  void visit(cfg::Visitor& v) {
    v.field("corpus", corpus, "triplet JSONL files for pretraining");
    v.field("tokenizer", tokenizer, "SentencePiece model path; empty = train one");
    v.field("tokenizer_vocab_size", tokenizer_vocab_size, "vocabulary size when training one",
            cfg::at_least(64));
    v.field("general_tasks", general_tasks, "general-kernel task suite file");
    v.field("hgemm_grid", hgemm_grid, "full | small | llm | file of MxNxK lines");
    v.field("holdout_fraction", holdout_fraction, "held-out share", cfg::in_closed_open(0, 1));
  }
};

}  // namespace kernelrl
