#include "model/tokenizer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "model/tokenizer_hf.h"

namespace kernelrl {
namespace {

// Feeds in-memory lines to the SentencePiece trainer (no temp corpus file).
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& lines) : lines_(lines) {}
  bool done() const override { return i_ >= lines_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return lines_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& lines_;
  size_t i_ = 0;
};

void split_lines(const std::string& text, std::vector<std::string>& out) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
}

// Training sentences: blank-line-separated paragraphs, so pieces can learn newlines and the
// indentation after them ("{\n▁▁▁▁for"); a paragraph over max_chars is cut at line ends.
void split_paragraphs(const std::string& text, size_t max_chars, std::vector<std::string>& out) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    std::string para = text.substr(start, end - start);
    while (para.size() > max_chars) {
      size_t cut = para.rfind('\n', max_chars);
      if (cut == std::string::npos || cut == 0)
        break;  // one over-long line: SentencePiece skips it
      out.push_back(para.substr(0, cut));
      para.erase(0, cut + 1);
    }
    if (para.find_first_not_of(" \t\n") != std::string::npos) out.push_back(std::move(para));
    start = end + 2;
  }
}

// A JSON object's text: its "text" field if it has one, else every string field in order.
void collect_text(const nlohmann::json& j, size_t max_chars, std::vector<std::string>& out) {
  if (j.is_string()) {
    split_paragraphs(j.get<std::string>(), max_chars, out);
  } else if (j.is_object()) {
    if (j.contains("text") && j["text"].is_string()) {
      split_paragraphs(j["text"].get<std::string>(), max_chars, out);
      return;
    }
    for (const auto& [key, value] : j.items()) collect_text(value, max_chars, out);
  } else if (j.is_array()) {
    for (const auto& value : j) collect_text(value, max_chars, out);
  }
}

// JSONL when the first line is a JSON object (then every line must be one), else plain text;
// either way the sentences are paragraphs (split_paragraphs).
std::vector<std::string> read_corpus_sentences(const fs::path& input, size_t max_chars) {
  const std::string content = read_file(input, "tokenizer corpus");
  std::vector<std::string> raw;
  split_lines(content, raw);
  std::vector<std::string> sentences;
  bool jsonl = !raw.empty() && !raw.front().empty() && raw.front()[0] == '{';
  if (jsonl) {
    for (size_t i = 0; i < raw.size(); ++i) {
      auto j = nlohmann::json::parse(raw[i], nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        throw UserError("tokenizer corpus " + input.string() + ": line " + std::to_string(i + 1) +
                        " is not a JSON object (JSONL input needs one object per line)");
      }
      collect_text(j, max_chars, sentences);
    }
  } else {
    split_paragraphs(content, max_chars, sentences);
  }
  if (sentences.empty())
    throw UserError("tokenizer corpus " + input.string() + " has no text to train on");
  return sentences;
}

// A SentencePiece model (tokenizer.model).
class SentencePieceBackend final : public TokenizerBackend {
 public:
  SentencePieceBackend(const std::string& bytes, const std::string& origin) {
    auto status = sp_.LoadFromSerializedProto(bytes);
    if (!status.ok()) {
      throw UserError("cannot load tokenizer " + origin + ": " + status.ToString() +
                      " (expected a SentencePiece .model file or an HF tokenizer.json)");
    }
  }
  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int> ids;
    auto status = sp_.Encode(text, &ids);
    if (!status.ok()) throw std::runtime_error("tokenizer encode failed: " + status.ToString());
    return std::vector<int64_t>(ids.begin(), ids.end());
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::vector<int> v;
    v.reserve(ids.size());
    const int64_t n = vocab_size();
    for (int64_t id : ids) {
      if (id < 0 || id >= n) continue;  // padding beyond the vocabulary (model vocab may be larger)
      v.push_back(static_cast<int>(id));
    }
    std::string text;
    auto status = sp_.Decode(v, &text);
    if (!status.ok()) throw std::runtime_error("tokenizer decode failed: " + status.ToString());
    return text;
  }
  std::string id_to_piece(int64_t id) const override { return sp_.IdToPiece(static_cast<int>(id)); }
  int64_t piece_to_id(const std::string& piece) const override { return sp_.PieceToId(piece); }
  int64_t vocab_size() const override { return sp_.GetPieceSize(); }
  int64_t unk_id() const override { return sp_.unk_id(); }
  int64_t bos_id() const override { return sp_.bos_id(); }
  int64_t eos_id() const override { return sp_.eos_id(); }
  int64_t pad_id() const override {
    if (sp_.pad_id() >= 0) return sp_.pad_id();
    if (sp_.eos_id() >= 0) return sp_.eos_id();
    return 0;
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

const std::vector<std::string>& section_markers() {
  static const std::vector<std::string> markers = {kInstructionMarker, kContextMarker, kCodeMarker,
                                                   kAnalysisMarker,    kDesignMarker,  kEndMarker};
  return markers;
}

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_serialized(const std::string& bytes, const std::string& origin) {
  Tokenizer t;
  t.impl_ = std::make_unique<SentencePieceBackend>(bytes, origin);
  t.serialized_ = bytes;
  t.origin_ = origin;
  return t;
}

Tokenizer Tokenizer::from_hf_json(const std::string& tokenizer_json, const std::string& config_json,
                                  const std::string& origin) {
  Tokenizer t;
  t.impl_ = std::make_unique<HfBpeTokenizer>(tokenizer_json, config_json, origin);
  t.serialized_ = tokenizer_json;
  t.origin_ = origin;
  t.hf_ = true;
  return t;
}

fs::path Tokenizer::find_in(const fs::path& dir) {
  for (const char* name : {"tokenizer.json", "tokenizer.model"})
    if (fs::is_regular_file(dir / name)) return dir / name;
  return {};
}

Tokenizer Tokenizer::load(const fs::path& model_path) {
  fs::path path = model_path;
  if (fs::is_directory(path)) {
    path = find_in(model_path);
    if (path.empty())
      throw UserError("tokenizer directory " + model_path.string() +
                      " has neither tokenizer.json nor tokenizer.model");
  }
  if (!fs::is_regular_file(path)) throw UserError("tokenizer model not found: " + path.string());
  if (path.extension() == ".json") {
    const fs::path config = path.parent_path() / "tokenizer_config.json";
    const fs::path sentencepiece = path.parent_path() / "tokenizer.model";
    try {
      return from_hf_json(
          read_file(path, "tokenizer.json"),
          fs::is_regular_file(config) ? read_file(config, "tokenizer_config.json") : std::string(),
          path.string());
    } catch (const UserError& e) {
      // Llama-2-style checkpoints ship both files; their tokenizer.json is SentencePiece-style
      // (not implemented here) and their tokenizer.model the same tokenizer.
      if (!fs::is_regular_file(sentencepiece)) throw;
      KRL_LOG(info) << e.what() << "; using " << sentencepiece.string() << " beside it";
      return from_serialized(read_file(sentencepiece, "tokenizer model"), sentencepiece.string());
    }
  }
  return from_serialized(read_file(path, "tokenizer model"), path.string());
}

Tokenizer Tokenizer::train(const fs::path& input, const fs::path& out_model,
                           const TokenizerTrainOptions& options) {
  if (options.vocab_size < 300) {
    throw UserError(
        "tokenizer vocab_size must be at least 300 (256 byte pieces, specials and "
        "markers), got " +
        std::to_string(options.vocab_size));
  }
  const std::vector<std::string> lines =
      read_corpus_sentences(input, static_cast<size_t>(options.max_sentence_chars));
  const int64_t threads =
      options.num_threads > 0
          ? options.num_threads
          : std::clamp<int64_t>(static_cast<int64_t>(std::thread::hardware_concurrency()), 1, 16);
  std::string markers;
  for (const auto& m : section_markers()) markers += (markers.empty() ? "" : ",") + m;
  // Ids: unk 0, bos 1, eos 2, pad 3, then the markers, then bytes and merges. Identity
  // normalization and kept whitespace: code's indentation and blank-space runs are content.
  // Pieces may cross spaces, newlines and letter/punctuation boundaries ("▁+=▁BK)▁{\n"): on
  // the kernel families this packs ~2.8x more code per token than SentencePiece's default
  // word-bounded pieces (an mma.sync HGEMM: 5,423 -> 1,963 tokens at 8,192 pieces), which is
  // what lets an exemplar and a whole kernel share one context.
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},  // no invented leading space: text starts as written
      {"split_digits", "true"},
      {"split_by_whitespace", "false"},
      {"split_by_unicode_script", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"max_sentence_length", std::to_string(options.max_sentence_chars)},
      {"input_sentence_size", std::to_string(options.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
      {"hard_vocab_limit", "false"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "3"},
      {"user_defined_symbols", markers},
  };
  LineIterator it(lines);
  std::string proto;
  // SentencePiece's trainer logs hundreds of lines to stderr; keep them only at --log-level debug.
  const bool quiet = log::level() > log::Level::debug;
  int saved_stderr = -1;
  if (quiet) {
    std::fflush(stderr);
    saved_stderr = ::dup(STDERR_FILENO);
    int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, STDERR_FILENO), ::close(devnull);
  }
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &proto);
  if (saved_stderr >= 0) {
    std::fflush(stderr);
    ::dup2(saved_stderr, STDERR_FILENO);
    ::close(saved_stderr);
  }
  if (!status.ok()) {
    throw UserError("tokenizer training on " + input.string() + " failed: " + status.ToString());
  }
  atomic_write(out_model, proto);
  return from_serialized(proto, out_model.string());
}

std::vector<int64_t> Tokenizer::encode(const std::string& text, bool add_bos, bool add_eos) const {
  std::vector<int64_t> ids = impl_->encode(text);
  std::vector<int64_t> out;
  out.reserve(ids.size() + 2);
  if (add_bos && bos_id() >= 0) out.push_back(bos_id());
  out.insert(out.end(), ids.begin(), ids.end());
  if (add_eos && eos_id() >= 0) out.push_back(eos_id());
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  return impl_->decode(ids);
}
std::string Tokenizer::id_to_piece(int64_t id) const {
  return impl_->id_to_piece(id);
}
int64_t Tokenizer::piece_to_id(const std::string& piece) const {
  return impl_->piece_to_id(piece);
}
int64_t Tokenizer::vocab_size() const {
  return impl_->vocab_size();
}
int64_t Tokenizer::unk_id() const {
  return impl_->unk_id();
}
int64_t Tokenizer::bos_id() const {
  return impl_->bos_id();
}
int64_t Tokenizer::eos_id() const {
  return impl_->eos_id();
}
int64_t Tokenizer::pad_id() const {
  return impl_->pad_id();
}

}  // namespace kernelrl
