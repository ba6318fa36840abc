// `kernelrl tokenizer train`: a SentencePiece BPE tokenizer from a corpus.
#include "cli/commands.h"

namespace kernelrl::cli {

void register_tokenizer(CLI::App& app) {
  auto* sub = app.add_subcommand("tokenizer", "Train or inspect a SentencePiece tokenizer");
  sub->require_subcommand(1);
  struct Opts {
    std::string input, out;
    int64_t vocab_size = 4096;
  };
  auto o = std::make_shared<Opts>();
  auto* train = sub->add_subcommand("train", "Train a BPE tokenizer (byte fallback)");
  train->add_option("--input", o->input, "corpus JSONL or text")->required();
  train->add_option("--vocab-size", o->vocab_size, "vocabulary size")->check(CLI::PositiveNumber);
  train->add_option("--out", o->out, "output tokenizer.model")->required();
  train->callback([] { not_built("tokenizer train", "the tokenizer lands with the policy model"); });
}

}  // namespace kernelrl::cli
