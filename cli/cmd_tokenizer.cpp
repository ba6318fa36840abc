// `kernelrl tokenizer train`: a SentencePiece BPE tokenizer (byte fallback, the prompt section
// markers as single tokens) from a corpus of JSONL text fields or plain text (model/tokenizer.h).
#include <cstdio>

#include "cli/commands.h"
#include "model/tokenizer.h"

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
  train->add_option("--input", o->input, "corpus JSONL (string fields, or \"text\") or plain text")
      ->required();
  train->add_option("--vocab-size", o->vocab_size, "vocabulary size (at least 300)")
      ->check(CLI::PositiveNumber);
  train->add_option("--out", o->out, "output tokenizer.model")->required();
  train->callback([o] {
    TokenizerTrainOptions opts;
    opts.vocab_size = o->vocab_size;
    Tokenizer tok = Tokenizer::train(o->input, o->out, opts);
    std::printf(
        "wrote %s: vocabulary of %lld pieces (unk %lld, bos %lld, eos %lld, pad %lld; "
        "%zu section markers from id 4)\n",
        o->out.c_str(), (long long)tok.vocab_size(), (long long)tok.unk_id(),
        (long long)tok.bos_id(), (long long)tok.eos_id(), (long long)tok.pad_id(),
        section_markers().size());
  });
}

}  // namespace kernelrl::cli
