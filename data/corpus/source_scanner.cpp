#include "data/corpus/source_scanner.h"

#include "common/cpp_lexer.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace kernelrl {
namespace {

constexpr size_t npos = std::string::npos;

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

std::string squeeze(std::string_view t) {
  std::string out;
  bool sp = false;
  for (char c : t) {
    if (space(c)) {
      sp = !out.empty();
    } else {
      if (sp) out += ' ';
      sp = false;
      out += c;
    }
  }
  return out;
}

bool all_caps_macro(const std::string& w) {
  if (w.size() < 2) return false;
  bool upper = false;
  for (char c : w) {
    if (std::islower(static_cast<unsigned char>(c))) return false;
    if (std::isupper(static_cast<unsigned char>(c))) upper = true;
  }
  return upper;
}

// Blanks (keeping newlines and offsets) the #else/#elif branches of preprocessor conditionals,
// so only the first branch counts for brace nesting: `#if A / if (x) { / #else / if (y) { /
// #endif` then opens one scope, not two. Preprocessor lines are common/cpp_lexer.h's (a `#else`
// in a comment or a raw string is none).
std::string mask_else_branches(const std::string& text) {
  std::string out = text;
  std::vector<bool> in_else;  // per open conditional: inside a later branch
  size_t from = 0;            // start of the text since the last preprocessor line
  auto blank_to = [&](size_t to) {
    if (std::find(in_else.begin(), in_else.end(), true) != in_else.end())
      for (size_t k = from; k < to; ++k)
        if (out[k] != '\n') out[k] = ' ';
  };
  for (const auto& d : cpp::directives(text, cpp::lex(text))) {
    blank_to(d.begin_byte);
    const std::string& word = d.name;
    if (word == "if" || word == "ifdef" || word == "ifndef") {
      in_else.push_back(false);
    } else if ((word == "else" || word == "elif" || word == "elifdef" || word == "elifndef") &&
               !in_else.empty()) {
      in_else.back() = true;
    } else if (word == "endif" && !in_else.empty()) {
      in_else.pop_back();
    }
    from = d.end_byte;
  }
  blank_to(text.size());
  return out;
}

class Scanner {
 public:
  Scanner(const std::string& s, const std::string& orig, std::vector<SourceUnit>& out)
      : s_(s), orig_(orig), out_(out), tokens_(cpp::lex(s)) {
    for (size_t i = 0; i < s_.size(); ++i)
      if (s_[i] == '\n') newlines_.push_back(i);
    starts_.reserve(tokens_.size());
    for (const auto& t : tokens_) starts_.push_back(t.begin);
    for (const auto& d : cpp::directives(s_, tokens_))
      directives_.push_back({d.begin_byte, d.end_byte});
  }

  void scan_scope(size_t b, size_t e, const std::string& prefix, bool in_class, int depth) {
    size_t hdr = npos;
    int paren = 0;
    std::vector<std::pair<size_t, size_t>> comments;  // [begin, end) since the last boundary
    auto reset = [&] {
      hdr = npos;
      paren = 0;
      comments.clear();
    };
    size_t i = b;
    while (i < e) {
      char c = s_[i];
      if (comment_at(i)) {
        size_t j = skip_comment(i, e);
        comments.push_back({i, j});
        i = j;
        continue;
      }
      if (directive_at(i)) {
        i = skip_preproc(i, e);
        continue;
      }
      if (space(c)) {
        ++i;
        continue;
      }
      if (hdr == npos) hdr = i;
      if (literal_at(i)) {
        i = skip_literal(i, e);
        continue;
      }
      if (c == '(') {
        ++paren;
      } else if (c == ')') {
        paren = std::max(0, paren - 1);
      } else if (c == ';' && paren == 0) {
        reset();
      } else if (c == ':' && paren == 0 && in_class && !(i + 1 < e && s_[i + 1] == ':') &&
                 !(i > b && s_[i - 1] == ':')) {
        std::string h = squeeze(code_text(hdr, i));
        if (h == "public" || h == "private" || h == "protected") {
          reset();
          ++i;
          continue;
        }
      } else if (c == '{') {
        size_t j = match_brace(i, e);
        if (j == npos) return;  // unbalanced (braces split across #if branches): give up here
        if (paren > 0) {
          i = j + 1;
          continue;
        }
        size_t nx = next_code(j + 1, e);
        std::string h = code_text(hdr, i);
        // Constructor initializer list `: a_{x}, b_{y} {`: the braces are part of the header.
        if (nx < e && (s_[nx] == ',' || s_[nx] == '{') && h.find(')') != npos) {
          i = j + 1;
          continue;
        }
        handle(hdr, i, j, comments, prefix, depth);
        reset();
        i = j + 1;
        continue;
      }
      ++i;
    }
  }

 private:
  bool line_start(size_t i) const {
    while (i > 0) {
      char c = s_[i - 1];
      if (c == '\n') return true;
      if (c != ' ' && c != '\t') return false;
      --i;
    }
    return true;
  }

  // The token of s_ that holds byte i.
  const cpp::Token& token_at(size_t i) const {
    return tokens_[std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin() - 1];
  }
  // A comment starts at i.
  bool comment_at(size_t i) const {
    const auto& t = token_at(i);
    return t.begin == i &&
           (t.kind == cpp::TokenKind::line_comment || t.kind == cpp::TokenKind::block_comment);
  }
  // Byte i is inside a string or character literal.
  bool literal_at(size_t i) const { return cpp::is_literal(token_at(i).kind); }
  // A preprocessor line starts at i (its '#').
  bool directive_at(size_t i) const {
    auto it =
        std::lower_bound(directives_.begin(), directives_.end(), std::make_pair(i, size_t{0}));
    return it != directives_.end() && it->first == i;
  }

  size_t skip_comment(size_t i, size_t e) const { return std::min(token_at(i).end, e); }
  // Past the preprocessor line starting at i (to its newline; a block comment may carry it on).
  size_t skip_preproc(size_t i, size_t e) const {
    auto it =
        std::lower_bound(directives_.begin(), directives_.end(), std::make_pair(i, size_t{0}));
    return std::min(it->second, e);
  }
  size_t skip_literal(size_t i, size_t e) const { return std::min(token_at(i).end, e); }

  size_t match_brace(size_t i, size_t e) const {
    int depth = 0;
    while (i < e) {
      char c = s_[i];
      if (comment_at(i)) {
        i = skip_comment(i, e);
        continue;
      }
      if (directive_at(i)) {
        i = skip_preproc(i, e);
        continue;
      }
      if (literal_at(i)) {
        i = skip_literal(i, e);
        continue;
      }
      if (c == '{') ++depth;
      if (c == '}' && --depth == 0) return i;
      ++i;
    }
    return npos;
  }

  size_t next_code(size_t i, size_t e) const {
    while (i < e) {
      char c = s_[i];
      if (space(c)) {
        ++i;
      } else if (comment_at(i)) {
        i = skip_comment(i, e);
      } else if (directive_at(i)) {
        i = skip_preproc(i, e);
      } else {
        return i;
      }
    }
    return e;
  }

  // Source text of [b, e) without comments and preprocessor lines.
  std::string code_text(size_t b, size_t e) const {
    std::string out;
    size_t i = b;
    while (i < e) {
      char c = s_[i];
      if (comment_at(i)) {
        i = skip_comment(i, e);
        out += ' ';
        continue;
      }
      if (directive_at(i)) {
        i = skip_preproc(i, e);
        continue;
      }
      if (literal_at(i)) {
        size_t j = skip_literal(i, e);
        out.append(s_, i, j - i);
        i = j;
        continue;
      }
      out += c;
      ++i;
    }
    return out;
  }

  // Where the unit's own text starts inside its header [hdr, brace): after the last blank line or
  // full-line comment (what precedes it is a stray macro such as _LIBCUDACXX_BEGIN_NAMESPACE_STD).
  size_t code_start(size_t hdr, size_t brace) const {
    size_t start = hdr, i = hdr;
    bool pending = false;
    int newlines = 0;
    while (i < brace) {
      char c = s_[i];
      if (c == '\n') {
        if (++newlines >= 2) pending = true;
        ++i;
        continue;
      }
      if (space(c)) {
        ++i;
        continue;
      }
      if (comment_at(i)) {
        if (line_start(i)) pending = true;
        i = skip_comment(i, brace);
        continue;
      }
      if (directive_at(i)) {
        i = skip_preproc(i, brace);
        continue;
      }
      if (pending) start = i;
      pending = false;
      newlines = 0;
      if (literal_at(i)) {
        i = skip_literal(i, brace);
        continue;
      }
      ++i;
    }
    return start;
  }

  int line_of(size_t pos) const {
    return static_cast<int>(std::upper_bound(newlines_.begin(), newlines_.end(), pos) -
                            newlines_.begin()) +
           1;
  }

  // The comment block right before `cs` (only whitespace between its comments and cs).
  std::string doc_before(size_t cs, const std::vector<std::pair<size_t, size_t>>& comments) {
    std::string doc;
    size_t pos = cs;
    for (auto it = comments.rbegin(); it != comments.rend(); ++it) {
      if (it->second > pos) continue;
      // One block: only whitespace with at most one line break between its comments (and
      // before the unit), each comment starting its own line (not trailing a `}`).
      bool gap_ok = line_start(it->first);
      int newlines = 0;
      for (size_t k = it->second; k < pos && gap_ok; ++k) {
        if (!space(s_[k])) gap_ok = false;
        if (s_[k] == '\n' && ++newlines > (doc.empty() ? 2 : 1)) gap_ok = false;
      }
      if (!gap_ok) break;
      doc = s_.substr(it->first, it->second - it->first) + "\n" + doc;
      pos = it->first;
    }
    return clean_comment(doc);
  }

  static std::string strip_templates(std::string r, bool& is_template) {
    for (;;) {
      size_t k = r.find_first_not_of(" \t\r\n");
      if (k == npos || r.compare(k, 8, "template") != 0 ||
          (k + 8 < r.size() && ident_char(r[k + 8])))
        return k == npos ? std::string() : r.substr(k);
      size_t open = r.find('<', k + 8);
      if (open == npos) return r.substr(k);
      int angle = 0, paren = 0;
      size_t i = open;
      for (; i < r.size(); ++i) {
        char c = r[i];
        if (c == '(') ++paren;
        if (c == ')') --paren;
        if (paren > 0) continue;
        if (c == '<') ++angle;
        if (c == '>' && --angle == 0) break;
      }
      if (i >= r.size()) return r.substr(k);
      is_template = true;
      r = r.substr(i + 1);
    }
  }

  static std::vector<std::string> tokens_of(const std::string& r, size_t limit) {
    std::vector<std::string> t;
    size_t i = 0;
    while (i < r.size() && i < limit) {
      if (ident_char(r[i])) {
        size_t j = i;
        while (j < r.size() && ident_char(r[j])) ++j;
        t.push_back(r.substr(i, j - i));
        i = j;
      } else if (!space(r[i])) {
        t.push_back(std::string(1, r[i]));
        ++i;
      } else {
        ++i;
      }
    }
    return t;
  }

  static bool is_attribute_call(const std::string& w) {
    return w == "__attribute__" || w == "__declspec" || w == "alignas" || w == "__align__" ||
           w == "decltype" || w == "noexcept" || w == "__launch_bounds__" || w == "requires" ||
           w == "sizeof" || w == "static_assert" || all_caps_macro(w);
  }

  void handle(size_t hdr, size_t brace, size_t close,
              const std::vector<std::pair<size_t, size_t>>& comments, const std::string& prefix,
              int depth) {
    size_t cs = code_start(hdr, brace);
    std::string h = code_text(cs, brace);
    bool is_template = false;
    std::string r = strip_templates(h, is_template);
    std::vector<std::string> toks = tokens_of(r, 400);
    if (toks.empty()) return;
    // `namespace x {`, `inline namespace`, and macro-prefixed `EXPORT_MACRO namespace x {`.
    size_t k0 = toks.size();
    for (size_t k = 0; k < std::min<size_t>(toks.size(), 3); ++k) {
      if (toks[k] == "(" || toks[k] == "=") break;
      if (toks[k] == "namespace") {
        k0 = k;
        break;
      }
    }
    if (k0 < toks.size()) {
      std::string ns;
      for (size_t k = k0 + 1; k < toks.size() && toks[k] != "{"; ++k) {
        if (toks[k] == "[") break;
        ns += toks[k];
      }
      if (depth < 64)
        scan_scope(brace + 1, close, prefix + (ns.empty() ? "" : ns + "::"), false, depth + 1);
      return;
    }
    if (toks[0] == "extern" && toks.size() >= 2 && toks[1].size() > 0 && toks[1][0] == '"') {
      if (depth < 64) scan_scope(brace + 1, close, prefix, false, depth + 1);
      return;
    }
    size_t paren = r.find('(');
    std::string pre = r.substr(0, paren);
    if (pre.find('=') != npos && pre.find("operator") == npos) return;  // initializer
    std::vector<std::string> pt = tokens_of(pre, pre.size());
    for (const auto& w : pt)
      if (w == "enum" || w == "typedef" || w == "using" || w == "asm" || w == "concept") return;

    SourceUnit u;
    u.is_template = is_template;
    u.signature = squeeze(h);
    if (u.signature.size() > 400) u.signature = u.signature.substr(0, 400) + " ...";
    u.code = orig_.substr(cs, close + 1 - cs);
    u.line = line_of(cs);
    u.doc = doc_before(cs, comments);

    // Class: class/struct/union among the first tokens, with no call before it.
    int kw = -1;
    for (size_t k = 0; k < std::min<size_t>(pt.size(), 4); ++k) {
      if (pt[k] == "(") break;
      if (pt[k] == "class" || pt[k] == "struct" || pt[k] == "union") {
        kw = static_cast<int>(k);
        break;
      }
    }
    if (kw >= 0) {
      std::vector<std::string> all = tokens_of(r, r.size());
      std::string name;
      int par = 0;
      for (size_t k = kw + 1; k < all.size(); ++k) {
        const std::string& w = all[k];
        if (w == "(") ++par;
        if (w == ")") --par;
        if (par > 0 || w == ")") continue;
        if (w == "<" || w == "{" || w == "final") break;
        if (w == ":" && !(k + 1 < all.size() && all[k + 1] == ":") && !(k > 0 && all[k - 1] == ":"))
          break;
        if (ident_char(w[0]) && !std::isdigit(static_cast<unsigned char>(w[0])) &&
            !(k + 1 < all.size() && all[k + 1] == "(") && w != "alignas")
          name = w;
      }
      if (name.empty()) name = "anonymous";
      u.kind = "class";
      u.name = prefix + name;
      out_.push_back(u);
      if (depth < 64) scan_scope(brace + 1, close, prefix + name + "::", true, depth + 1);
      return;
    }
    if (paren == npos) return;
    // Function: the name is the identifier before the first '(' that is not an attribute or a
    // macro call (__attribute__((..)), _CCCL_REQUIRES(..)).
    std::string name;
    size_t p = paren;
    while (p != npos) {
      size_t q = p;
      while (q > 0 && space(r[q - 1])) --q;
      size_t a = q;
      while (a > 0 && ident_char(r[a - 1])) --a;
      std::string w = r.substr(a, q - a);
      size_t op = r.rfind("operator", q);
      if (op != npos && op < p && q - op <= 40 && (op == 0 || !ident_char(r[op - 1]))) {
        name = squeeze(r.substr(op, p - op));
        // operator() : the name's parens are the first group, the parameters the second.
        if (name == "operator") name = "operator()";
        break;
      }
      if (!w.empty() && !is_attribute_call(w) && !std::isdigit(static_cast<unsigned char>(w[0]))) {
        name = w;
        break;
      }
      // Skip this group and look for the next '('.
      int d = 0;
      size_t k = p;
      for (; k < r.size(); ++k) {
        if (r[k] == '(') ++d;
        if (r[k] == ')' && --d == 0) break;
      }
      p = k < r.size() ? r.find('(', k + 1) : npos;
    }
    static const char* kControl[] = {"if", "for", "while", "switch", "return", "catch", "do"};
    if (name.empty()) return;
    for (const char* c : kControl)
      if (name == c) return;
    std::string head = r.substr(0, p == npos ? paren : p);
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (head.find("__global__") != npos) {
      u.kind = "kernel";
    } else if (lower.find("device") != npos || head.find("_DECL__") != npos ||
               head.find("QUALIFIERS") != npos) {
      u.kind = "device_function";
    } else {
      u.kind = "function";
    }
    u.name = prefix + name;
    out_.push_back(u);
  }

  const std::string& s_;     // the text with #else branches blanked: structure
  const std::string& orig_;  // the text as written: unit code
  std::vector<SourceUnit>& out_;
  std::vector<size_t> newlines_;
  std::vector<cpp::Token> tokens_;                     // of s_
  std::vector<size_t> starts_;                         // tokens_[k].begin
  std::vector<std::pair<size_t, size_t>> directives_;  // preprocessor lines' [begin, end)
};

bool contains(const std::string& s, const char* what) {
  return s.find(what) != npos;
}

}  // namespace

std::vector<SourceUnit> scan_source(const std::string& text) {
  std::vector<SourceUnit> out;
  const std::string masked = mask_else_branches(text);
  Scanner sc(masked, text, out);
  sc.scan_scope(0, text.size(), "", false, 0);
  return out;
}

std::string clean_comment(const std::string& raw) {
  std::string out;
  size_t i = 0;
  while (i <= raw.size()) {
    size_t j = raw.find('\n', i);
    if (j == npos) j = raw.size();
    std::string line = raw.substr(i, j - i);
    i = j + 1;
    size_t a = line.find_first_not_of(" \t\r");
    if (a == npos) {
      if (!out.empty() && out.back() != '\n') out += '\n';
      continue;
    }
    line = line.substr(a);
    for (const char* m : {"///<", "//!<", "///", "//!", "//", "/**<", "/**", "/*!", "/*"}) {
      if (line.rfind(m, 0) == 0) {
        line = line.substr(std::string(m).size());
        break;
      }
    }
    size_t end = line.rfind("*/");
    if (end != npos) line = line.substr(0, end);
    size_t b = line.find_first_not_of(" \t*");
    line = b == npos ? "" : line.substr(b);
    while (!line.empty() && space(line.back())) line.pop_back();
    if (line.empty()) continue;
    for (const char* cmd : {"\\brief ", "@brief ", "\\details ", "@details "})
      if (line.rfind(cmd, 0) == 0) line = line.substr(std::string(cmd).size());
    if (!out.empty() && out.back() != '\n') out += ' ';
    out += line;
  }
  while (!out.empty() && space(out.back())) out.pop_back();
  return out;
}

std::vector<std::string> detect_features(const std::string& c) {
  std::vector<std::string> f;
  auto add = [&](bool cond, const char* name) {
    if (cond) f.push_back(name);
  };
  add(contains(c, "__shared__"), "shared_memory");
  add(contains(c, "mma.sync") || contains(c, "wmma::") || contains(c, "mma_sync") ||
          contains(c, "__hmma"),
      "tensor_core_mma");
  add(contains(c, "wgmma"), "wgmma");
  add(contains(c, "ldmatrix") || contains(c, "stmatrix"), "ldmatrix");
  add(contains(c, "cp.async") || contains(c, "memcpy_async") ||
          contains(c, "__pipeline_memcpy_async"),
      "cp_async");
  add(contains(c, "cp.async.bulk") || contains(c, "cp.reduce.async.bulk") ||
          contains(c, "tensormap"),
      "tma");
  add(contains(c, "mbarrier"), "mbarrier");
  add(contains(c, "__shfl") || contains(c, "shfl.sync"), "warp_shuffle");
  add(contains(c, "__ballot") || contains(c, "__any_sync") || contains(c, "__all_sync") ||
          contains(c, "vote.sync") || contains(c, "__match_"),
      "warp_vote");
  add(contains(c, "__reduce_") || contains(c, "redux.sync"), "warp_reduce");
  add(contains(c, "atomic") || contains(c, "atom.") || contains(c, "red.global"), "atomics");
  add(contains(c, "asm(") || contains(c, "asm volatile") || contains(c, "asm (") ||
          contains(c, "__asm__"),
      "inline_ptx");
  add(contains(c, "__syncthreads") || contains(c, "bar.sync") || contains(c, "__syncwarp") ||
          contains(c, ".sync()"),
      "synchronization");
  add(contains(c, "__half") || contains(c, "half2") || contains(c, ".f16"), "half_precision");
  add(contains(c, "bfloat16") || contains(c, ".bf16"), "bfloat16");
  add(contains(c, "fp8") || contains(c, "e4m3") || contains(c, "e5m2"), "fp8");
  add(contains(c, "float4") || contains(c, "int4") || contains(c, "float2") ||
          contains(c, "uint4") || contains(c, ".v4.") || contains(c, ".v2."),
      "vector_types");
  add(contains(c, "cooperative_groups") || contains(c, "cg::") || contains(c, "thread_block"),
      "cooperative_groups");
  add(contains(c, "tex1D") || contains(c, "tex2D") || contains(c, "tex3D") ||
          contains(c, "surf2D") || contains(c, "texture<"),
      "texture");
  add(contains(c, "__launch_bounds__"), "launch_bounds");
  add(contains(c, "threadIdx") || contains(c, "blockIdx") || contains(c, "%tid") ||
          contains(c, "%ctaid"),
      "thread_indexing");
  add(contains(c, "for (") || contains(c, "for(") || contains(c, "while (") ||
          contains(c, "while("),
      "loops");
  add(contains(c, "__ldg") || contains(c, "ld.global.nc") || contains(c, "__ldcs") ||
          contains(c, "__stcs"),
      "cache_hints");
  add(contains(c, "constexpr"), "constexpr");
  return f;
}

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> w;
  size_t i = 0, n = text.size();
  while (i < n) {
    if (!std::isalnum(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && ident_char(text[j])) ++j;
    // The identifier [i, j): emit it whole and split at '_' and lower->Upper boundaries.
    std::string whole;
    std::vector<std::string> parts;
    std::string cur;
    for (size_t k = i; k < j; ++k) {
      char c = text[k];
      bool boundary = c == '_' || (k > i && std::isupper(static_cast<unsigned char>(c)) &&
                                   std::islower(static_cast<unsigned char>(text[k - 1])));
      if (boundary && !cur.empty()) {
        parts.push_back(cur);
        cur.clear();
      }
      if (c != '_') cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (c != '_' || (!whole.empty() && k + 1 < j))
        whole += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (!cur.empty()) parts.push_back(cur);
    while (!whole.empty() && whole.back() == '_') whole.pop_back();
    if (!whole.empty()) w.push_back(whole);
    if (parts.size() > 1)
      for (auto& p : parts)
        if (p.size() >= 2) w.push_back(p);
    i = j;
  }
  return w;
}

}  // namespace kernelrl
