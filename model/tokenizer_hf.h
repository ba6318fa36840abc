// HfBpeTokenizer: a Hugging Face tokenizer.json with a byte-level BPE model (GPT-2, Llama 3,
// Qwen2/2.5/3, DeepSeek-Coder, StarCoder2 style), behind the TokenizerBackend interface.
// Encodes as the `tokenizers` library's encode(text, add_special_tokens=False) does:
//   1. added tokens are split off (leftmost-longest; lstrip, rstrip and single_word honoured;
//      tokens with normalized=false matched on the raw text, the others after normalizing),
//   2. the rest is normalized (none, NFC or a Sequence of them; NFC through utf8proc),
//   3. pre-tokenized: Split (a PCRE2 regex with Unicode classes, or a literal string; every
//      split behaviour, invert), ByteLevel (GPT-2's byte->char map, its own regex when
//      use_regex, add_prefix_space), Sequence of those,
//   4. each pre-token merged by BPE rank (lowest rank first, leftmost among equals; a word that
//      is itself in the vocabulary is kept whole when ignore_merges).
// Decodes as decode(ids, skip_special_tokens=True): special added tokens dropped, the ByteLevel
// decoder maps characters back to bytes, invalid UTF-8 becomes U+FFFD (maximal subparts, as
// Rust's from_utf8_lossy). bos is the special token the post-processor's template puts first
// (Llama 3's <|begin_of_text|>; none for Qwen); eos and pad come from tokenizer_config.json.
// Not implemented, each a one-line UserError naming the key: other models (WordPiece, Unigram),
// SentencePiece-style tokenizer.json (Metaspace, byte_fallback), other normalizers,
// pre-tokenizers and decoders, BPE dropout, subword prefixes/suffixes.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/tokenizer.h"

namespace kernelrl {

class HfBpeTokenizer final : public TokenizerBackend {
 public:
  // `tokenizer_json`: tokenizer.json's content; `config_json`: tokenizer_config.json's (or
  // empty). `origin` names the file in error messages.
  HfBpeTokenizer(const std::string& tokenizer_json, const std::string& config_json,
                 const std::string& origin);
  ~HfBpeTokenizer() override;

  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string id_to_piece(int64_t id) const override;  // the vocabulary's string ("Ġint")
  int64_t piece_to_id(const std::string& piece) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int64_t unk_id() const override { return unk_id_; }
  int64_t bos_id() const override { return bos_id_; }
  int64_t eos_id() const override { return eos_id_; }
  int64_t pad_id() const override;

  struct AddedToken {
    int64_t id = 0;
    std::string content;
    bool special = false, normalized = false, lstrip = false, rstrip = false, single_word = false;
  };
  // One pre-tokenizer step (Split or ByteLevel); a Sequence is a list of them.
  struct PreTokenizer;

 private:
  // Text between added tokens -> ids (normalize, pre-tokenize, BPE).
  void encode_plain(const std::string& text, std::vector<int64_t>& out) const;
  // Splits `text` on the added tokens of one pass (normalized or not): pieces with the added
  // token's id, or -1 for plain text.
  std::vector<std::pair<std::string, int64_t>> split_added(const std::string& text,
                                                           bool normalized_pass) const;
  std::string normalize(const std::string& text) const;
  // One pre-token (raw bytes) -> BPE ids appended to out.
  void bpe(const std::string& word, std::vector<int64_t>& out) const;

  std::string origin_;
  std::unordered_map<std::string, int64_t> vocab_;  // byte-level strings -> id
  std::vector<std::string> id_to_token_;            // id -> string (vocab and added tokens)
  std::vector<char> is_special_;                    // id -> special added token
  // (left id, right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  std::vector<AddedToken> added_;
  std::vector<std::string> normalizers_;  // applied in order; "NFC" is the only kind
  std::vector<std::unique_ptr<PreTokenizer>> pre_tokenizers_;
  bool ignore_merges_ = false;
  int64_t vocab_size_ = 0, unk_id_ = -1, bos_id_ = -1, eos_id_ = -1, pad_id_ = -1;
  std::vector<size_t> added_by_byte_[256];  // indices into added_ by first byte, longest first
  // Pre-token -> ids, bounded (cleared when full); guarded for concurrent encode calls.
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
  mutable std::mutex cache_mutex_;
};

}  // namespace kernelrl
