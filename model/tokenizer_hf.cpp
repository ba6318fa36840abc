#include "model/tokenizer_hf.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/error.h"

namespace kernelrl {
namespace {

using json = nlohmann::json;

// ---- UTF-8 -----------------------------------------------------------------------------------

// Decodes the well-formed UTF-8 character at s[i] (Unicode's table 3-7); returns its length,
// or 0 when the bytes there are not a well-formed character.
size_t utf8_char(const std::string& s, size_t i, int32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const size_t n = s.size();
  const unsigned char c = b(i);
  if (c < 0x80) return *cp = c, 1;
  auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return k < n && b(k) >= lo && b(k) <= hi;
  };
  if (c >= 0xC2 && c <= 0xDF) {
    if (!cont(i + 1)) return 0;
    return *cp = ((c & 0x1F) << 6) | (b(i + 1) & 0x3F), 2;
  }
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    if (!cont(i + 1, lo, hi) || !cont(i + 2)) return 0;
    return *cp = ((c & 0x0F) << 12) | ((b(i + 1) & 0x3F) << 6) | (b(i + 2) & 0x3F), 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    if (!cont(i + 1, lo, hi) || !cont(i + 2) || !cont(i + 3)) return 0;
    return *cp = ((c & 0x07) << 18) | ((b(i + 1) & 0x3F) << 12) | ((b(i + 2) & 0x3F) << 6) |
                 (b(i + 3) & 0x3F),
           4;
  }
  return 0;
}

void append_utf8(std::string& out, int32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Bytes -> valid UTF-8, each maximal ill-formed subpart replaced by U+FFFD (what Rust's
// String::from_utf8_lossy and Python's decode(errors="replace") do).
std::string utf8_lossy(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int32_t cp;
    if (size_t len = utf8_char(s, i, &cp)) {
      out.append(s, i, len);
      i += len;
      continue;
    }
    // The maximal subpart: the lead byte plus the continuation bytes that a well-formed
    // character starting with it could have had.
    const auto c = static_cast<unsigned char>(s[i]);
    size_t need = c >= 0xC2 && c <= 0xDF   ? 1
                  : c >= 0xE0 && c <= 0xEF ? 2
                  : c >= 0xF0 && c <= 0xF4 ? 3
                                           : 0;
    size_t k = 1;
    for (; k <= need && i + k < s.size(); ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      unsigned char lo = 0x80, hi = 0xBF;
      if (k == 1) {
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
      }
      if (d < lo || d > hi) break;
    }
    out += "\xEF\xBF\xBD";
    i += k;
  }
  return out;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others
// (controls, space, 0x7F-0xA0, 0xAD) for U+0100, U+0101, ... in byte order. Each as UTF-8.
const std::array<std::string, 256>& byte_chars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      append_utf8(t[b], printable ? b : next++);
    }
    return t;
  }();
  return table;
}

// The inverse: stand-in code point -> byte.
const std::unordered_map<int32_t, unsigned char>& char_bytes() {
  static const std::unordered_map<int32_t, unsigned char> table = [] {
    std::unordered_map<int32_t, unsigned char> m;
    for (int b = 0; b < 256; ++b) {
      int32_t cp = 0;
      utf8_char(byte_chars()[b], 0, &cp);
      m[cp] = static_cast<unsigned char>(b);
    }
    return m;
  }();
  return table;
}

// The character that ends just before byte offset `end` of s: its start offset (and code point
// in *cp), or npos at the start of s or after an ill-formed byte.
size_t char_before(const std::string& s, size_t end, int32_t* cp) {
  for (size_t back = 1; back <= 4 && back <= end; ++back) {
    const size_t i = end - back;
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // continuation byte
    return utf8_char(s, i, cp) == back ? i : std::string::npos;
  }
  return std::string::npos;
}

// Unicode White_Space (what Rust's char::is_whitespace tests).
bool is_white_space(int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Letters and numbers, and '_' (tokenizers' word test for single_word added tokens).
bool is_word_char(int32_t cp) {
  if (cp == '_') return true;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

// ---- regex (PCRE2, JIT) ------------------------------------------------------------------------

pcre2_jit_stack* thread_jit_stack(void*) {
  // One JIT stack per thread, up to 8 MiB: a long whitespace run under \s+(?!\S) recurses deep.
  struct Stack {
    pcre2_jit_stack* s = pcre2_jit_stack_create(64 << 10, 8 << 20, nullptr);
    ~Stack() { pcre2_jit_stack_free(s); }
  };
  thread_local Stack stack;
  return stack.s;
}

class Regex {
 public:
  Regex(const std::string& pattern, bool literal, const std::string& where) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    const uint32_t options =
        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : 0);
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                          &err, &offset, nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw UserError(where + " does not compile as a PCRE2 regex at offset " +
                      std::to_string(offset) + ": " + reinterpret_cast<char*>(msg));
    }
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
    context_ = pcre2_match_context_create(nullptr);
    if (jit_) pcre2_jit_stack_assign(context_, thread_jit_stack, nullptr);
  }
  ~Regex() {
    pcre2_match_context_free(context_);
    pcre2_code_free(code_);
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping leftmost matches [begin, end) of s (empty matches skipped).
  std::vector<std::pair<size_t, size_t>> find_all(const std::string& s) const {
    std::vector<std::pair<size_t, size_t>> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    size_t start = 0;
    while (start <= s.size()) {
      const int rc = pcre2_match(code_, subject, s.size(), start, 0, md, context_);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        pcre2_match_data_free(md);
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        throw std::runtime_error(std::string("tokenizer regex match failed: ") +
                                 reinterpret_cast<char*>(msg));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t b = ov[0], e = ov[1];
      if (e == b) {  // empty: step over one character and search again
        start = b + 1;
        while (start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) ++start;
        continue;
      }
      out.emplace_back(b, e);
      start = e;
    }
    pcre2_match_data_free(md);
    return out;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_context* context_ = nullptr;
  bool jit_ = false;
};

// GPT-2's pre-tokenizer regex (tokenizers' ByteLevel with use_regex).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string();
}

// A token given in tokenizer_config.json: "text" or {"content": "text", ...}; empty if null.
std::string config_token(const json& config, const char* key) {
  if (!config.contains(key)) return {};
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return {};
}

}  // namespace

// ---- pre-tokenizers ----------------------------------------------------------------------------

// One step of the pre-tokenizer: a Split, or one of the parts of a ByteLevel pre-tokenizer
// (prefix space, GPT-2 split, byte map), in tokenizers' order.
struct HfBpeTokenizer::PreTokenizer {
  enum class Kind { kSplit, kPrefixSpace, kByteMap } kind = Kind::kSplit;
  std::unique_ptr<Regex> regex;  // kSplit
  std::string behavior = "Isolated";
  bool invert = false;

  // Splits one piece into pieces (tokenizers' Split with its SplitDelimiterBehavior).
  void split(const std::string& s, std::vector<std::string>& out) const {
    // (begin, end, is_match) covering s.
    struct Span {
      size_t b, e;
      bool match;
    };
    std::vector<Span> spans;
    size_t prev = 0;
    for (auto [b, e] : regex->find_all(s)) {
      if (prev != b) spans.push_back({prev, b, false});
      spans.push_back({b, e, true});
      prev = e;
    }
    if (prev != s.size()) spans.push_back({prev, s.size(), false});
    if (invert)
      for (auto& sp : spans) sp.match = !sp.match;
    std::vector<Span> merged;
    if (behavior == "Isolated") {
      merged = spans;
    } else if (behavior == "Removed") {
      for (const auto& sp : spans)
        if (!sp.match) merged.push_back(sp);
    } else if (behavior == "MergedWithPrevious") {
      bool previous_match = false;
      for (const auto& sp : spans) {
        if (sp.match && !previous_match && !merged.empty())
          merged.back().e = sp.e;
        else
          merged.push_back(sp);
        previous_match = sp.match;
      }
    } else if (behavior == "MergedWithNext") {
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !merged.empty())
          merged.back().b = it->b;
        else
          merged.push_back(*it);
        previous_match = it->match;
      }
      std::reverse(merged.begin(), merged.end());
    } else {  // Contiguous
      bool previous_match = false;
      for (const auto& sp : spans) {
        if (sp.match == previous_match && !merged.empty())
          merged.back().e = sp.e;
        else
          merged.push_back(sp);
        previous_match = sp.match;
      }
    }
    for (const auto& sp : merged)
      if (sp.e > sp.b) out.push_back(s.substr(sp.b, sp.e - sp.b));
  }
};

namespace {

using PreTokenizer = HfBpeTokenizer::PreTokenizer;

void parse_pre_tokenizer(const json& j, const std::string& key, const std::string& origin,
                         std::vector<std::unique_ptr<PreTokenizer>>& out) {
  auto refuse = [&](const std::string& k, const std::string& why) {
    throw UserError(origin + ": \"" + k + "\" " + why);
  };
  const std::string type = type_of(j);
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      refuse(key + ".pretokenizers", "must be a list");
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i)
      parse_pre_tokenizer(j["pretokenizers"][i], key + ".pretokenizers[" + std::to_string(i) + "]",
                          origin, out);
    return;
  }
  auto p = std::make_unique<PreTokenizer>();
  if (type == "Split") {
    const json& pat = j.value("pattern", json());
    const bool literal = pat.is_object() && pat.contains("String") && pat["String"].is_string();
    if (!literal && !(pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string()))
      refuse(key + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
    p->regex = std::make_unique<Regex>(pat[literal ? "String" : "Regex"].get<std::string>(),
                                       literal, origin + ": \"" + key + ".pattern\"");
    p->behavior = j.value("behavior", std::string("Isolated"));
    static const char* kBehaviors[] = {"Isolated", "Removed", "MergedWithPrevious",
                                       "MergedWithNext", "Contiguous"};
    if (std::none_of(std::begin(kBehaviors), std::end(kBehaviors),
                     [&](const char* b) { return p->behavior == b; }))
      refuse(key + ".behavior",
             "is \"" + p->behavior + "\"; not a split behaviour implemented here");
    p->invert = j.value("invert", false);
    out.push_back(std::move(p));
  } else if (type == "ByteLevel") {
    // tokenizers' ByteLevel: prefix space (when asked and absent), GPT-2's split (use_regex),
    // then every byte to its stand-in character.
    if (j.value("add_prefix_space", true)) {
      out.push_back(std::make_unique<PreTokenizer>());
      out.back()->kind = PreTokenizer::Kind::kPrefixSpace;
    }
    if (j.value("use_regex", true)) {
      out.push_back(std::make_unique<PreTokenizer>());
      out.back()->regex = std::make_unique<Regex>(kGpt2Pattern, false, "GPT-2 pattern");
    }
    p->kind = PreTokenizer::Kind::kByteMap;
    out.push_back(std::move(p));
  } else {
    refuse(key + ".type", "is \"" + type +
                              "\"; byte-level BPE needs Split/ByteLevel pre-tokenizers (a "
                              "SentencePiece-style tokenizer.json: use its tokenizer.model)");
  }
}

}  // namespace

// ---- construction ------------------------------------------------------------------------------

HfBpeTokenizer::~HfBpeTokenizer() = default;

HfBpeTokenizer::HfBpeTokenizer(const std::string& tokenizer_json, const std::string& config_json,
                               const std::string& origin)
    : origin_(origin) {
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw UserError(origin + ": \"" + key + "\" " + why);
  };
  json j = json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    throw UserError(origin + " is not a JSON object (not a tokenizer.json?)");
  try {
    // Model.
    if (!j.contains("model") || !j["model"].is_object()) refuse("model", "is missing");
    const json& m = j["model"];
    const std::string model_type = type_of(m).empty() ? "BPE" : type_of(m);
    if (model_type != "BPE")
      refuse("model.type", "is \"" + model_type + "\"; only BPE models are implemented");
    if (m.contains("dropout") && m["dropout"].is_number() && m["dropout"].get<double>() != 0.0)
      refuse("model.dropout",
             "is set; BPE dropout is not implemented (inference tokenizers have none)");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (m.contains(k) && m[k].is_string() && !m[k].get<std::string>().empty())
        refuse(std::string("model.") + k, "is set; not implemented for byte-level BPE");
    if (m.value("byte_fallback", false))
      refuse("model.byte_fallback",
             "is true: a SentencePiece-style tokenizer.json; load its tokenizer.model instead");
    ignore_merges_ = m.value("ignore_merges", false);
    if (!m.contains("vocab") || !m["vocab"].is_object()) refuse("model.vocab", "must be an object");
    int64_t max_id = -1;
    for (const auto& [tok, id] : m["vocab"].items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0)
        refuse("model.vocab", "maps \"" + tok + "\" to " + id.dump() + ", not an id");
      vocab_[tok] = id.get<int64_t>();
      max_id = std::max(max_id, id.get<int64_t>());
    }
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
      auto it = vocab_.find(m["unk_token"].get<std::string>());
      if (it == vocab_.end()) refuse("model.unk_token", "is not in the vocabulary");
      unk_id_ = it->second;
    }
    if (!m.contains("merges") || !m["merges"].is_array()) refuse("model.merges", "must be a list");
    int32_t rank = 0;
    for (const auto& mg : m["merges"]) {
      std::string a, b;
      if (mg.is_string()) {  // "a b" (tokenizers < 0.20)
        const std::string s = mg.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          refuse("model.merges", "entry \"" + s + "\" is not two tokens separated by one space");
        a = s.substr(0, sp), b = s.substr(sp + 1);
      } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
        a = mg[0].get<std::string>(), b = mg[1].get<std::string>();
      } else {
        refuse("model.merges", "entry " + mg.dump() + " is not a pair of tokens");
      }
      auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(a + b);
      if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end())
        refuse("model.merges",
               "entry \"" + a + " " + b + "\" uses or makes a token not in the vocabulary");
      const uint64_t key =
          (static_cast<uint64_t>(ia->second) << 32) | static_cast<uint64_t>(ib->second);
      merges_.emplace(key, std::make_pair(rank++, static_cast<int32_t>(im->second)));  // first wins
    }
    // Added tokens.
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      if (!j["added_tokens"].is_array()) refuse("added_tokens", "must be a list");
      for (const auto& a : j["added_tokens"]) {
        AddedToken t;
        if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
            !a.contains("content") || !a["content"].is_string())
          refuse("added_tokens", "entry " + a.dump() + " needs an integer id and a string content");
        t.id = a["id"].get<int64_t>();
        t.content = a["content"].get<std::string>();
        t.special = a.value("special", false);
        t.normalized = a.value("normalized", !t.special);
        t.lstrip = a.value("lstrip", false);
        t.rstrip = a.value("rstrip", false);
        t.single_word = a.value("single_word", false);
        if (t.id < 0) refuse("added_tokens", "entry \"" + t.content + "\" has a negative id");
        max_id = std::max(max_id, t.id);
        if (!t.content.empty()) added_.push_back(t);
      }
    }
    vocab_size_ = max_id + 1;
    id_to_token_.assign(static_cast<size_t>(vocab_size_), std::string());
    is_special_.assign(static_cast<size_t>(vocab_size_), 0);
    for (const auto& [tok, id] : vocab_) id_to_token_[id] = tok;
    for (const auto& t : added_) {
      id_to_token_[t.id] = t.content;
      is_special_[t.id] = t.special;
    }
    // Normalizer.
    std::vector<std::pair<std::string, json>> norms;
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      if (type_of(j["normalizer"]) == "Sequence") {
        const json& list = j["normalizer"].value("normalizers", json::array());
        for (size_t i = 0; i < list.size(); ++i)
          norms.emplace_back("normalizer.normalizers[" + std::to_string(i) + "]", list[i]);
      } else {
        norms.emplace_back("normalizer", j["normalizer"]);
      }
    }
    for (const auto& [key, n] : norms) {
      if (type_of(n) != "NFC")
        refuse(key + ".type", "is \"" + type_of(n) + "\"; only NFC normalization is implemented");
      normalizers_.push_back("NFC");
    }
    // Pre-tokenizer: must end in the byte-level alphabet.
    if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null())
      refuse("pre_tokenizer", "is null; byte-level BPE needs a ByteLevel pre-tokenizer");
    parse_pre_tokenizer(j["pre_tokenizer"], "pre_tokenizer", origin, pre_tokenizers_);
    if (pre_tokenizers_.empty() || pre_tokenizers_.back()->kind != PreTokenizer::Kind::kByteMap)
      refuse("pre_tokenizer", "must end with a ByteLevel step (byte-level BPE)");
    for (size_t i = 0; i + 1 < pre_tokenizers_.size(); ++i)
      if (pre_tokenizers_[i]->kind == PreTokenizer::Kind::kByteMap)
        refuse("pre_tokenizer", "has a ByteLevel step before its last step (not implemented)");
    // Added tokens by first byte, longest first (for leftmost-longest matching).
    for (size_t i = 0; i < added_.size(); ++i)
      added_by_byte_[static_cast<unsigned char>(added_[i].content[0])].push_back(i);
    for (auto& list : added_by_byte_)
      std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
        return added_[a].content.size() > added_[b].content.size();
      });
    // Decoder: ByteLevel (alone or as the only member of a Sequence).
    const json& dec = j.value("decoder", json());
    const bool byte_level =
        type_of(dec) == "ByteLevel" ||
        (type_of(dec) == "Sequence" && dec.value("decoders", json::array()).size() == 1 &&
         type_of(dec["decoders"][0]) == "ByteLevel");
    if (!byte_level)
      refuse("decoder.type",
             "is \"" + type_of(dec) + "\"; byte-level BPE needs the ByteLevel decoder");
    // Post-processor: the special tokens its template puts before the text are bos.
    std::vector<const json*> procs;
    if (j.contains("post_processor") && !j["post_processor"].is_null()) {
      const json& pp = j["post_processor"];
      if (type_of(pp) == "Sequence")
        for (const auto& p : pp.value("processors", json::array())) procs.push_back(&p);
      else
        procs.push_back(&pp);
    }
    for (const json* p : procs) {
      const std::string t = type_of(*p);
      if (t == "ByteLevel") continue;
      if (t != "TemplateProcessing")
        refuse("post_processor.type",
               "is \"" + t + "\"; only ByteLevel and TemplateProcessing are implemented");
      const json& single = p->value("single", json::array());
      for (const auto& item : single) {
        if (item.contains("Sequence")) break;
        if (!item.contains("SpecialToken")) continue;
        const std::string name = item["SpecialToken"].value("id", std::string());
        const json& specials = p->value("special_tokens", json::object());
        if (!specials.contains(name) || specials[name].value("ids", json::array()).size() != 1)
          refuse("post_processor.special_tokens", "does not give one id for \"" + name + "\"");
        if (bos_id_ >= 0)
          refuse("post_processor.single", "puts more than one token before the text");
        bos_id_ = specials[name]["ids"][0].get<int64_t>();
      }
    }
  } catch (const json::exception& e) {
    throw UserError(origin + ": malformed tokenizer.json (" + e.what() + ")");
  }
  // tokenizer_config.json: eos and pad (and bos when the template adds none but the config
  // asks for it, as slow tokenizers' add_bos_token does).
  if (!config_json.empty()) {
    const std::string where = origin + " (tokenizer_config.json)";
    json c = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
    if (c.is_discarded() || !c.is_object()) throw UserError(where + " is not a JSON object");
    auto id_of = [&](const char* key) -> int64_t {
      const std::string tok = config_token(c, key);
      if (tok.empty()) return -1;
      const int64_t id = piece_to_id(tok);
      if (id < 0 || id == unk_id_)
        throw UserError(where + ": \"" + key + "\" \"" + tok + "\" is not a token of " + origin);
      return id;
    };
    eos_id_ = id_of("eos_token");
    pad_id_ = id_of("pad_token");
    if (bos_id_ < 0 && c.value("add_bos_token", false)) bos_id_ = id_of("bos_token");
  }
}

// ---- encoding ----------------------------------------------------------------------------------

std::string HfBpeTokenizer::normalize(const std::string& text) const {
  std::string s = text;
  for (size_t i = 0; i < normalizers_.size(); ++i) {  // all NFC
    if (std::all_of(s.begin(), s.end(), [](char c) { return (c & 0x80) == 0; }))
      continue;  // ASCII is its own NFC
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                     static_cast<utf8proc_ssize_t>(s.size()), &out,
                     static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n >= 0) s.assign(reinterpret_cast<char*>(out), static_cast<size_t>(n));
    std::free(out);  // on ill-formed UTF-8 (n < 0) the text stays as it is
  }
  return s;
}

std::vector<std::pair<std::string, int64_t>> HfBpeTokenizer::split_added(
    const std::string& text, bool normalized_pass) const {
  // tokenizers' AddedVocabulary::find_matches: leftmost-longest matches of this pass's tokens,
  // single_word ones only between non-word characters, lstrip/rstrip taking the whitespace
  // around them.
  std::vector<std::pair<std::string, int64_t>> out;
  size_t start_offset = 0;  // end of the last emitted piece
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* best = nullptr;
    for (size_t i : added_by_byte_[static_cast<unsigned char>(text[pos])]) {
      const AddedToken& t = added_[i];
      if (t.normalized == normalized_pass && text.compare(pos, t.content.size(), t.content) == 0) {
        best = &t;  // longest first
        break;
      }
    }
    if (!best) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + best->content.size();
    pos = stop;
    if (best->single_word) {
      int32_t before = 0, after = 0;
      const bool has_before = char_before(text, start, &before) != std::string::npos;
      const bool has_after = stop < text.size() && utf8_char(text, stop, &after) > 0;
      if ((has_before && is_word_char(before)) || (has_after && is_word_char(after))) continue;
    }
    if (best->lstrip) {  // swallow the whitespace before it (not what the last piece took)
      int32_t cp = 0;
      size_t s = start;
      for (size_t b; (b = char_before(text, s, &cp)) != std::string::npos && is_white_space(cp);)
        s = b;
      start = std::max(s, start_offset);
    }
    if (best->rstrip) {  // and after it
      int32_t cp = 0;
      for (size_t len;
           stop < text.size() && (len = utf8_char(text, stop, &cp)) > 0 && is_white_space(cp);)
        stop += len;
      pos = stop;
    }
    if (start_offset < start) out.emplace_back(text.substr(start_offset, start - start_offset), -1);
    out.emplace_back(text.substr(start, stop - start), best->id);
    start_offset = stop;
  }
  if (start_offset < text.size()) out.emplace_back(text.substr(start_offset), -1);
  return out;
}

void HfBpeTokenizer::bpe(const std::string& word, std::vector<int64_t>& out) const {
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  // Initial symbols: the word's characters (each a byte's stand-in) as vocabulary ids.
  std::vector<int32_t> sym;
  for (size_t i = 0; i < word.size();) {
    int32_t cp;
    size_t len = utf8_char(word, i, &cp);
    if (!len) len = 1;
    auto it = vocab_.find(word.substr(i, len));
    if (it != vocab_.end())
      sym.push_back(static_cast<int32_t>(it->second));
    else if (unk_id_ >= 0)
      sym.push_back(static_cast<int32_t>(unk_id_));
    i += len;
  }
  // Merge the lowest-ranked adjacent pair (leftmost among equal ranks) until none is left;
  // the same order as tokenizers' priority queue of (rank, position).
  while (sym.size() > 1) {
    int32_t best_rank = INT32_MAX, best_id = -1;
    size_t best_i = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      const uint64_t key =
          (static_cast<uint64_t>(sym[i]) << 32) | static_cast<uint32_t>(sym[i + 1]);
      auto it = merges_.find(key);
      if (it != merges_.end() && it->second.first < best_rank) {
        best_rank = it->second.first, best_id = it->second.second, best_i = i;
      }
    }
    if (best_id < 0) break;
    sym[best_i] = best_id;
    sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(best_i) + 1);
  }
  out.insert(out.end(), sym.begin(), sym.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= 200000) cache_.clear();
  cache_.emplace(word, std::move(sym));
}

void HfBpeTokenizer::encode_plain(const std::string& text, std::vector<int64_t>& out) const {
  std::vector<std::string> pieces = {text};
  for (const auto& p : pre_tokenizers_) {
    std::vector<std::string> next;
    next.reserve(pieces.size());
    for (auto& piece : pieces) {
      if (p->kind == PreTokenizer::Kind::kSplit) {
        p->split(piece, next);
        continue;
      }
      if (p->kind == PreTokenizer::Kind::kPrefixSpace) {
        if (piece.empty() || piece[0] != ' ') piece.insert(0, " ");
        next.push_back(std::move(piece));
        continue;
      }
      std::string mapped;  // the byte-level alphabet: each byte as its stand-in character
      mapped.reserve(piece.size() * 2);
      for (unsigned char c : piece) mapped += byte_chars()[c];
      next.push_back(std::move(mapped));
    }
    pieces = std::move(next);
  }
  for (const auto& w : pieces)
    if (!w.empty()) bpe(w, out);
}

std::vector<int64_t> HfBpeTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> out;
  // 1. Added tokens matched on the raw text; 2. the rest normalized, then the normalized
  // added tokens; 3. what is left goes through the pre-tokenizers and BPE.
  for (const auto& [raw, id] : split_added(text, /*normalized_pass=*/false)) {
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (const auto& [piece, id2] : split_added(normalize(raw), /*normalized_pass=*/true)) {
      if (id2 >= 0)
        out.push_back(id2);
      else
        encode_plain(piece, out);
    }
  }
  return out;
}

// ---- decoding and lookups ----------------------------------------------------------------------

std::string HfBpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  // The ByteLevel decoder: a token whose characters are all byte stand-ins becomes those
  // bytes; any other token (an added token with a space, say) its own UTF-8.
  const auto& char_to_byte = char_bytes();
  std::string bytes;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size_ || is_special_[id]) continue;
    const std::string& tok = id_to_token_[id];
    std::string mapped;
    bool all = true;
    for (size_t i = 0; i < tok.size() && all;) {
      int32_t cp;
      size_t len = utf8_char(tok, i, &cp);
      auto it = len ? char_to_byte.find(cp) : char_to_byte.end();
      if (it == char_to_byte.end()) {
        all = false;
        break;
      }
      mapped.push_back(static_cast<char>(it->second));
      i += len;
    }
    bytes += all ? mapped : tok;
  }
  return utf8_lossy(bytes);
}

std::string HfBpeTokenizer::id_to_piece(int64_t id) const {
  return id >= 0 && id < vocab_size_ ? id_to_token_[id] : std::string();
}

int64_t HfBpeTokenizer::piece_to_id(const std::string& piece) const {
  for (const auto& t : added_)
    if (t.content == piece) return t.id;
  auto it = vocab_.find(piece);
  return it == vocab_.end() ? unk_id_ : it->second;
}

int64_t HfBpeTokenizer::pad_id() const {
  if (pad_id_ >= 0) return pad_id_;
  if (eos_id_ >= 0) return eos_id_;
  return 0;
}

}  // namespace kernelrl
