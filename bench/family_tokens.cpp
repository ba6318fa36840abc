// family_tokens: how many tokens a kernel-family variant costs a policy with a bounded context.
// Encodes every variant's code (the completion the policy would write) and its instruction with
// a SentencePiece tokenizer and prints, per family, the variant count and min / median / max
// tokens, as a Markdown table.
//   family_tokens --tokenizer tok.model [--out tokens.md]
//   family_tokens --train-from corpus.jsonl,synth.jsonl --tokenizer tok.model [--vocab-size 8192]
// --train-from trains the tokenizer first the way the pretrain stage does
// (trainer/pretrain_stage.cpp: formatted triplets, every k-th one up to ~8 MB, BPE with byte
// fallback), so the count is the one the quickstart's policy would see.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "data/families.h"
#include "data/task_ops.h"
#include "data/task_suite.h"
#include "data/tokenizer.h"
#include "data/triplet.h"
#include "trainer/pretrain_stage.h"

namespace kernelrl {
namespace {

void train(const std::string& inputs, const std::string& model, int64_t vocab) {
  std::vector<Triplet> all;
  std::stringstream ss(inputs);
  for (std::string p; std::getline(ss, p, ',');)
    for (auto& t : read_triplets(p)) all.push_back(std::move(t));
  if (all.empty()) throw UserError("--train-from: no triplets in " + inputs);
  constexpr size_t kSampleBytes = 8u << 20;  // as stage_tokenizer in trainer/pretrain_stage.cpp
  size_t total = 0;
  for (const auto& t : all) total += t.instruction.size() + t.context.size() + t.code.size() + 32;
  const size_t stride = std::max<size_t>(1, (total + kSampleBytes - 1) / kSampleBytes);
  const std::string text = model + ".corpus.txt";
  {
    std::ofstream out(text);
    for (size_t i = 0; i < all.size(); i += stride) out << format_triplet(all[i]) << "\n\n";
  }
  TokenizerTrainOptions opts;
  opts.vocab_size = vocab;
  Tokenizer::train(text, model, opts);
  std::filesystem::remove(text);
  std::printf("trained %s (vocab %lld) on %zu of %zu triplets\n", model.c_str(),
              static_cast<long long>(vocab), (all.size() + stride - 1) / stride, all.size());
}

// Every variant of `family` (general families: the variants of every op of the suite).
std::vector<KernelVariant> variants_of(const FamilyInfo& f, const std::vector<TaskSpec>& suite) {
  if (f.kind == "hgemm") return hgemm_family_variants(f.name);
  std::vector<KernelVariant> out;
  for (const auto& t : suite) {
    const OpInfo* op = find_op(t.op);
    if (!op || op->category != f.name) continue;
    std::vector<double> params(t.params.begin(),
                               t.params.begin() + std::min(t.params.size(), op->params.size()));
    for (const std::string be : {"cuda", "host"})
      for (auto& v : general_family_variants(f.name, be, t.op, params)) out.push_back(std::move(v));
  }
  return out;
}

int64_t at(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

int main_impl(int argc, char** argv) {
  CLI::App app{"tokens per kernel-family variant"};
  std::string model, train_from, out, suite_path = "configs/tasks/general.yaml";
  int64_t vocab = 8192;
  app.add_option("--tokenizer", model, "SentencePiece model (written when --train-from)")
      ->required();
  app.add_option("--train-from", train_from, "comma-separated triplet JSONL files to train on");
  app.add_option("--vocab-size", vocab, "vocabulary when training (the quickstart's: 8192)");
  app.add_option("--tasks", suite_path, "general task suite (general families' ops)");
  app.add_option("--out", out, "also write the table here");
  CLI11_PARSE(app, argc, argv);
  if (!train_from.empty()) train(train_from, model, vocab);
  Tokenizer tok = Tokenizer::load(model);
  const auto suite = load_task_suite(suite_path);
  std::ostringstream md;
  md << "Tokens per variant (" << model << ", vocab " << tok.vocab_size()
     << "): code = the candidate source, instruction = the task text beside it.\n\n"
     << "| family | arch | variants | code tokens min / median / max | code chars median | "
        "instruction tokens median |\n|---|---|---|---|---|---|\n";
  for (const auto& f : kernel_families()) {
    auto vs = variants_of(f, suite);
    if (vs.empty()) continue;
    std::vector<int64_t> code, chars, ins;
    for (const auto& v : vs) {
      code.push_back(static_cast<int64_t>(tok.encode(v.source).size()));
      chars.push_back(static_cast<int64_t>(v.source.size()));
      ins.push_back(static_cast<int64_t>(tok.encode(v.instruction).size()));
    }
    md << "| " << f.name << " | " << (f.arch.empty() ? "any" : f.arch) << " | " << vs.size()
       << " | " << at(code, 0) << " / " << at(code, 0.5) << " / " << at(code, 1) << " | "
       << at(chars, 0.5) << " | " << at(ins, 0.5) << " |\n";
  }
  std::printf("%s", md.str().c_str());
  if (!out.empty()) atomic_write(out, md.str());
  return 0;
}

}  // namespace
}  // namespace kernelrl

int main(int argc, char** argv) {
  try {
    return kernelrl::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "family_tokens: %s\n", e.what());
    return 1;
  }
}
