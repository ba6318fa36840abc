// Tokenizer: one interface over two kinds of tokenizer file. A SentencePiece tokenizer.model
// (trained here: BPE with byte fallback and the prompt section markers as user-defined
// symbols; or a Llama-2-family one) and a Hugging Face tokenizer.json with byte-level BPE
// (Qwen2/Qwen3, Llama 3, GPT-2 style; model/tokenizer_hf.h). Loads, encodes and decodes;
// trains SentencePiece only. It does not build prompts (rollout/ does) nor batch or pad.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace kernelrl {

// Prompt section markers: single tokens in tokenizers trained here (user-defined symbols), so a
// prompt's sections can be found by id. Prompts (rollout/) and triplets (data/) use these.
inline constexpr const char* kInstructionMarker = "<|instruction|>";
inline constexpr const char* kContextMarker = "<|context|>";
inline constexpr const char* kCodeMarker = "<|code|>";
inline constexpr const char* kAnalysisMarker = "<|analysis|>";
inline constexpr const char* kDesignMarker = "<|design|>";
inline constexpr const char* kEndMarker = "<|end|>";
// All of them, in the order they get ids (right after unk/bos/eos/pad).
const std::vector<std::string>& section_markers();

struct TokenizerTrainOptions {
  int64_t vocab_size = 4096;              // target vocabulary (BPE merges + bytes + specials)
  int64_t max_sentence_chars = 16384;     // paragraphs are cut at line ends to fit this
  int64_t num_threads = 0;                // trainer threads; 0 = the machine's cores (up to 16)
  int64_t input_sentence_size = 2000000;  // sample at most this many paragraphs (0 = all)
};

// What one kind of tokenizer file implements; Tokenizer forwards to it. Ids are int64.
class TokenizerBackend {
 public:
  virtual ~TokenizerBackend() = default;
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;  // no bos/eos
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;   // specials dropped
  virtual std::string id_to_piece(int64_t id) const = 0;
  virtual int64_t piece_to_id(const std::string& piece) const = 0;  // unk_id() when absent
  virtual int64_t vocab_size() const = 0;
  virtual int64_t unk_id() const = 0;  // -1 when the model has none
  virtual int64_t bos_id() const = 0;  // -1 when the model has none
  virtual int64_t eos_id() const = 0;  // -1 when the model has none
  virtual int64_t pad_id() const = 0;
};

class Tokenizer {
 public:
  // Loads a tokenizer file: an HF tokenizer.json (a path ending in .json; its directory's
  // tokenizer_config.json, when present, names eos and pad) or a SentencePiece model. A
  // directory means its tokenizer.json, else its tokenizer.model; a tokenizer.json of a kind
  // not implemented here with a tokenizer.model beside it loads the latter. Throws UserError
  // if missing or not a tokenizer of a kind implemented here.
  static Tokenizer load(const std::filesystem::path& model_path);
  // Loads from the serialized model bytes (the content of a tokenizer.model).
  static Tokenizer from_serialized(const std::string& bytes, const std::string& origin);
  // Loads an HF tokenizer.json from its content and tokenizer_config.json's (may be empty).
  static Tokenizer from_hf_json(const std::string& tokenizer_json, const std::string& config_json,
                                const std::string& origin);
  // The file Tokenizer::load takes in `dir` (tokenizer.json, else tokenizer.model), or empty.
  static std::filesystem::path find_in(const std::filesystem::path& dir);

  // Trains a BPE model with byte fallback, identity normalization (code keeps its whitespace)
  // and section_markers() as user-defined symbols. `input` is JSONL (each line an object whose
  // string fields, or its "text" field when present, are the text) or plain text. Writes
  // `out_model` (and nothing else) atomically; returns the loaded tokenizer.
  static Tokenizer train(const std::filesystem::path& input, const std::filesystem::path& out_model,
                         const TokenizerTrainOptions& options = {});

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<int64_t> encode(const std::string& text, bool add_bos = false,
                              bool add_eos = false) const;
  std::string decode(const std::vector<int64_t>& ids) const;  // special ids are dropped
  std::string id_to_piece(int64_t id) const;
  int64_t piece_to_id(const std::string& piece) const;  // unk_id() when absent

  int64_t vocab_size() const;
  int64_t unk_id() const;
  int64_t bos_id() const;  // -1 when the model has none
  int64_t eos_id() const;  // -1 when the model has none
  // Padding id: the model's pad piece, else eos, else 0 (Llama models define no pad).
  int64_t pad_id() const;
  const std::string& serialized() const { return serialized_; }  // the model file's bytes
  const std::string& origin() const { return origin_; }          // path it came from
  bool is_hf() const { return hf_; }  // an HF tokenizer.json (else SentencePiece)

 private:
  Tokenizer();
  std::unique_ptr<TokenizerBackend> impl_;
  std::string serialized_;
  std::string origin_;
  bool hf_ = false;
};

}  // namespace kernelrl
