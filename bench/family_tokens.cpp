// family_tokens: how long a kernel-family variant is for a policy with a bounded context, and
// (with --baseline) against the variants of another commit. Per family: the variant count,
// median and max code characters, code tokens (SentencePiece, or characters / 4 as a stated
// proxy without --tokenizer) and how many variants fit the quickstart's two budgets:
//   completion: code tokens <= rollout.sampling.max_new_tokens (the policy writes it);
//   exemplar:   the RL prompt with the variant as its one exemplar (rollout/prompt.h
//               build_prompt, HGEMM at 4096^3 or the variant's suite task) <= model.max_seq_len
//               - max_new_tokens (the prompt shows it).
// Variants are counted once per distinct source (general families: every op of the suite, both
// backends). Writes a Markdown table.
//   family_tokens [--tokenizer tok.model] [--baseline old_synth.jsonl] [--out tokens.md]
//   family_tokens --train-from corpus.jsonl,synth.jsonl --tokenizer tok.model [--vocab-size 8192]
// --train-from trains the tokenizer first the way the pretrain stage does
// (trainer/pretrain_stage.cpp: formatted triplets, every k-th one up to ~8 MB, BPE with byte
// fallback), so the count is the one the quickstart's policy would see. --baseline reads family
// triplets (`kernelrl data synth --families all` of another commit: code, and the family in
// `source` as "family:<name>") as the "before" columns.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "data/corpus/triplet.h"
#include "data/families.h"
#include "data/tasks/task_ops.h"
#include "data/tasks/task_suite.h"
#include "model/tokenizer.h"
#include "rollout/prompt.h"
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

// A variant's source and the task whose prompt would show it as an exemplar.
struct Sample {
  std::string name;
  std::string source;
  TaskSpec task;
  std::string backend;  // cuda | host
};

// Every distinct variant of `f` (general families: the variants of every op of the suite).
std::vector<Sample> variants_of(const FamilyInfo& f, const std::vector<TaskSpec>& suite) {
  std::vector<Sample> out;
  std::set<std::string> seen;
  auto add = [&](const KernelVariant& v, const TaskSpec& t) {
    if (seen.insert(v.source).second) out.push_back({v.name, v.source, t, v.backend});
  };
  if (f.kind == TaskKind::hgemm) {
    for (const auto& v : hgemm_family_variants(f.name))
      add(v, hgemm_task(4096, 4096, 4096, v.layout, v.acc));
    return out;
  }
  for (const auto& t : suite) {
    const OpInfo* op = find_op(t.op);
    if (!op || op->category != f.name) continue;
    std::vector<double> params(t.params.begin(),
                               t.params.begin() + std::min(t.params.size(), op->params.size()));
    for (const std::string be : {"cuda", "host"})
      for (const auto& v : general_family_variants(f.name, be, t.op, params)) add(v, t);
  }
  return out;
}

int64_t at(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

std::string ratio(int64_t after, int64_t before) {
  if (before <= 0) return "—";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(after) / static_cast<double>(before));
  return buf;
}

int main_impl(int argc, char** argv) {
  CLI::App app{"characters and tokens per kernel-family variant"};
  std::string model, train_from, out, csv, baseline, suite_path = "configs/tasks/general.yaml";
  int64_t vocab = 8192, max_seq_len = 4608, max_new_tokens = 2176;
  app.add_option("--tokenizer", model,
                 "SentencePiece model (written when --train-from); without it tokens are "
                 "characters / 4");
  app.add_option("--train-from", train_from, "comma-separated triplet JSONL files to train on");
  app.add_option("--vocab-size", vocab, "vocabulary when training (the quickstart's: 8192)");
  app.add_option("--tasks", suite_path, "general task suite (general families' ops)");
  app.add_option("--baseline", baseline,
                 "family triplets of another commit (kernelrl data synth) for the before columns");
  app.add_option("--max-seq-len", max_seq_len, "model.max_seq_len (the quickstart's: 4608)");
  app.add_option("--max-new-tokens", max_new_tokens,
                 "rollout.sampling.max_new_tokens (the quickstart's: 2176)");
  app.add_option("--out", out, "also write the table here");
  app.add_option("--csv", csv, "one row per variant: family, name, chars, tokens, prompt tokens");
  CLI11_PARSE(app, argc, argv);
  if (!train_from.empty()) {
    if (model.empty()) throw UserError("--train-from needs --tokenizer (where to write it)");
    train(train_from, model, vocab);
  }
  std::optional<Tokenizer> tok;
  if (!model.empty()) tok = Tokenizer::load(model);
  auto tokens = [&](const std::string& s) {
    return tok ? static_cast<int64_t>(tok->encode(s).size())
               : static_cast<int64_t>((s.size() + 3) / 4);
  };
  // The before columns: distinct code per family.
  std::map<std::string, std::vector<std::string>> before;
  if (!baseline.empty()) {
    std::map<std::string, std::set<std::string>> seen;
    for (const auto& t : read_triplets(baseline)) {
      if (t.source.rfind("family:", 0) != 0) continue;
      const std::string fam = t.source.substr(7);
      if (seen[fam].insert(t.code).second) before[fam].push_back(t.code);
    }
    if (before.empty()) throw UserError("--baseline: no family triplets in " + baseline);
  }
  const auto suite = load_task_suite(suite_path);
  const int64_t prompt_budget = max_seq_len - max_new_tokens;
  std::ostringstream md;
  md << "Per family variant (distinct sources): code = the candidate source; tokens = "
     << (tok ? "SentencePiece (" + model + ", vocab " + std::to_string(tok->vocab_size()) + ")"
             : std::string("characters / 4 (a proxy: no tokenizer given)"))
     << "; completion = code tokens <= " << max_new_tokens
     << " (max_new_tokens); exemplar = the RL prompt with it as its one exemplar <= "
     << prompt_budget << " (max_seq_len " << max_seq_len << " - max_new_tokens)"
     << (baseline.empty() ? "" : "; before = " + baseline) << ".\n\n";
  if (!baseline.empty())
    md << "| family | variants before / after | code chars median before | after | after / "
          "before | code chars max after | code tokens median before | after | max after | "
          "fit as completion | fit as exemplar |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  else
    md << "| family | variants | code chars median | code chars max | code tokens min / median / "
          "max | fit as completion | fit as exemplar |\n|---|---|---|---|---|---|---|\n";
  std::ostringstream rows;
  rows << "family,variant,code_chars,code_tokens,prompt_tokens\n";
  for (const auto& f : kernel_families()) {
    const auto vs = variants_of(f, suite);
    if (vs.empty()) continue;
    std::vector<int64_t> code, chars, old_code, old_chars;
    int64_t completion = 0, exemplar = 0;
    for (const auto& v : vs) {
      code.push_back(tokens(v.source));
      chars.push_back(static_cast<int64_t>(v.source.size()));
      completion += code.back() <= max_new_tokens;
      PromptParts parts;
      parts.backend = v.backend == "host" ? "host" : "gpu";
      parts.exemplars = {Exemplar{"v", v.source, 1.0}};
      const int64_t prompt = tokens(build_prompt(v.task, parts));
      exemplar += prompt <= prompt_budget;
      rows << f.name << "," << v.name << "," << chars.back() << "," << code.back() << "," << prompt
           << "\n";
    }
    for (const auto& s : before[f.name]) {
      old_code.push_back(tokens(s));
      old_chars.push_back(static_cast<int64_t>(s.size()));
    }
    const std::string n = std::to_string(vs.size());
    const std::string fit_c = std::to_string(completion) + " / " + n;
    const std::string fit_e = std::to_string(exemplar) + " / " + n;
    if (!baseline.empty()) {
      md << "| " << f.name << " | " << (old_chars.empty() ? "—" : std::to_string(old_chars.size()))
         << " / " << n << " | " << (old_chars.empty() ? "—" : std::to_string(at(old_chars, 0.5)))
         << " | " << at(chars, 0.5) << " | " << ratio(at(chars, 0.5), at(old_chars, 0.5)) << " | "
         << at(chars, 1) << " | " << (old_code.empty() ? "—" : std::to_string(at(old_code, 0.5)))
         << " | " << at(code, 0.5) << " | " << at(code, 1) << " | " << fit_c << " | " << fit_e
         << " |\n";
    } else {
      md << "| " << f.name << " | " << n << " | " << at(chars, 0.5) << " | " << at(chars, 1)
         << " | " << at(code, 0) << " / " << at(code, 0.5) << " / " << at(code, 1) << " | " << fit_c
         << " | " << fit_e << " |\n";
    }
  }
  std::printf("%s", md.str().c_str());
  if (!out.empty()) atomic_write(out, md.str());
  if (!csv.empty()) atomic_write(csv, rows.str());
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
