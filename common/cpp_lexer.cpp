#include "common/cpp_lexer.h"

#include <algorithm>
#include <array>

namespace kernelrl::cpp {
namespace {

bool blank_char(char c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}
bool digit(char c) {
  return c >= '0' && c <= '9';
}
bool hex_digit(char c) {
  return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
// GCC accepts '$' and UTF-8 (bytes >= 0x80) in identifiers.
bool ident_start(char c) {
  return alpha(c) || c == '_' || c == '$' || static_cast<unsigned char>(c) >= 0x80;
}
bool ident_char(char c) {
  return ident_start(c) || digit(c);
}

// Punctuators by length, C++17 ([lex.operators]); `<=>` is C++20 and lexes as `<=` `>` here.
const char* const kPunct4[] = {"%:%:"};
const char* const kPunct3[] = {"<<=", ">>=", "...", "->*"};
const char* const kPunct2[] = {
    "::", ".*", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=",
    "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##", "<:", ":>", "<%", "%>", "%:"};
const char kPunct1[] = "{}[]#()<>%:;.?*+-/^&|~!=,";

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s), n_(s.size()) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    out.reserve(n_ / 3 + 1);
    size_t i = 0;
    int line = 1;
    bool line_start = true;    // no token but blanks and comments on this line yet
    bool in_dir = false;       // on a preprocessor line
    int dir_tokens = 0;        // significant tokens on this preprocessor line so far
    bool header_next = false;  // the next token may be a header name
    while (i < n_) {
      Token t{};
      t.begin = i;
      t.line = line;
      t.in_directive = in_dir;
      const char c = s_[i];
      if (c == '\n') {
        t.kind = TokenKind::newline;
        t.end = i + 1;
        t.in_directive = false;
        in_dir = false;
        header_next = false;
        line_start = true;
      } else if (blank_char(c) || splice_length(s_, i)) {
        size_t j = i;
        for (;;) {
          if (j < n_ && blank_char(s_[j])) {
            ++j;
          } else if (size_t k = splice_length(s_, j)) {
            j += k;
            t.has_splice = true;
          } else {
            break;
          }
        }
        t.kind = TokenKind::whitespace;
        t.end = j;
      } else {
        lex_token(i, t, header_next);
        if (!is_blank(t.kind)) {
          if (line_start && t.kind == TokenKind::punctuator && is_hash(t)) {
            in_dir = true;
            dir_tokens = 0;
            t.in_directive = true;
          } else if (in_dir) {
            ++dir_tokens;
            header_next = false;
            if (dir_tokens == 1 && t.kind == TokenKind::identifier) {
              const std::string name = spelling(s_, t);
              header_next = name == "include" || name == "include_next" || name == "import";
            }
          }
          line_start = false;
        }
      }
      for (size_t k = t.begin; k < t.end; ++k) line += s_[k] == '\n';
      i = t.end;
      out.push_back(t);
    }
    return out;
  }

 private:
  // Position of the next logical character at or after physical position p (splices skipped).
  size_t skip(size_t p) const {
    while (p < n_) {
      const size_t k = splice_length(s_, p);
      if (!k) break;
      p += k;
    }
    return p;
  }
  size_t next(size_t p) const { return skip(p + 1); }
  char at(size_t p) const { return p < n_ ? s_[p] : '\0'; }

  bool is_hash(const Token& t) const {
    const std::string sp = spelling(s_, t);
    return sp == "#" || sp == "%:";
  }

  // Consumes logical characters from p while `pred` holds; returns the physical end of the last
  // consumed one (the first unconsumed logical position's splices stay outside the token).
  template <class Pred>
  size_t consume_while(size_t p, size_t end, Pred pred) const {
    while (p < n_ && pred(s_[p])) {
      end = p + 1;
      p = next(p);
    }
    return end;
  }

  // A universal character name \uXXXX / \UXXXXXXXX at p (physically contiguous): its length.
  size_t ucn_length(size_t p) const {
    if (p + 1 >= n_ || s_[p] != '\\' || (s_[p + 1] != 'u' && s_[p + 1] != 'U')) return 0;
    const size_t len = s_[p + 1] == 'u' ? 6 : 10;
    if (p + len > n_) return 0;
    for (size_t k = p + 2; k < p + len; ++k)
      if (!hex_digit(s_[k])) return 0;
    return len;
  }

  // An identifier (or ud-suffix) from logical position p; returns the physical end.
  size_t identifier_end(size_t p) const {
    size_t end = p;
    while (p < n_) {
      if (ident_char(s_[p])) {
        end = p + 1;
      } else if (size_t u = ucn_length(p)) {
        end = p + u - 1 + 1;
        p = p + u - 1;
      } else {
        break;
      }
      p = next(p);
    }
    return end;
  }

  size_t ud_suffix_end(size_t end) const {
    const size_t p = skip(end);
    if (p < n_ && (ident_start(s_[p]) || ucn_length(p))) return identifier_end(p);
    return end;
  }

  // A '...' or "..." literal whose opening quote is at logical position q.
  void quoted(size_t q, Token& t) const {
    const char quote = s_[q];
    t.kind = quote == '"' ? TokenKind::string_literal : TokenKind::char_literal;
    size_t p = next(q);
    for (;;) {
      if (p >= n_ || s_[p] == '\n') {  // unterminated: ends before the newline
        t.terminated = false;
        t.end = std::min(p, n_);
        return;
      }
      if (s_[p] == '\\') {
        p = next(p);
        if (p < n_ && s_[p] != '\n') p = next(p);
        continue;
      }
      if (s_[p] == quote) {
        t.end = ud_suffix_end(p + 1);
        return;
      }
      p = next(p);
    }
  }

  // A raw string whose opening quote is at physical position q (the prefix ended with R).
  void raw(size_t q, Token& t) const {
    t.kind = TokenKind::string_literal;
    size_t p = q + 1;  // phases 1-2 are reverted inside: physical characters from here
    while (p < n_ && p - (q + 1) <= 16 && s_[p] != '(' && s_[p] != ')' && s_[p] != '\\' &&
           s_[p] != '"' && !blank_char(s_[p]) && s_[p] != '\n')
      ++p;
    if (p >= n_ || s_[p] != '(' || p - (q + 1) > 16) {  // malformed delimiter
      t.terminated = false;
      const size_t nl = s_.find('\n', q);
      t.end = nl == std::string_view::npos ? n_ : nl;
      return;
    }
    std::string close = ")";
    close.append(s_.substr(q + 1, p - (q + 1)));
    close += '"';
    const size_t e = s_.find(close, p + 1);
    if (e == std::string_view::npos) {
      t.terminated = false;
      t.end = n_;
      return;
    }
    t.end = ud_suffix_end(e + close.size());
  }

  void lex_token(size_t i, Token& t, bool header_next) const {
    const char c = s_[i];
    const size_t p1 = next(i);
    const char c1 = at(p1);
    if (c == '/' && c1 == '/') {
      t.kind = TokenKind::line_comment;
      size_t p = p1, end = p1 + 1;
      for (p = next(p1); p < n_ && s_[p] != '\n'; p = next(p)) end = p + 1;
      t.end = end;
    } else if (c == '/' && c1 == '*') {
      t.kind = TokenKind::block_comment;
      size_t p = next(p1);
      for (;;) {
        if (p >= n_) {
          t.terminated = false;
          t.end = n_;
          break;
        }
        if (s_[p] == '*') {
          const size_t p2 = next(p);
          if (p2 < n_ && s_[p2] == '/') {
            t.end = p2 + 1;
            break;
          }
        }
        p = next(p);
      }
    } else if (header_next && (c == '<' || c == '"')) {
      const char close = c == '<' ? '>' : '"';
      size_t p = p1;
      while (p < n_ && s_[p] != close && s_[p] != '\n') p = next(p);
      if (p < n_ && s_[p] == close) {
        t.kind = TokenKind::header_name;
        t.end = p + 1;
      } else if (c == '"') {
        quoted(i, t);
      } else {
        t.kind = TokenKind::punctuator;
        t.end = i + 1;
      }
    } else if (ident_start(c) || ucn_length(i)) {
      const size_t end = identifier_end(i);
      const size_t q = skip(end);
      if (q < n_ && (s_[q] == '"' || s_[q] == '\'')) {
        Token id{};
        id.begin = i;
        id.end = end;
        const std::string prefix = spelling(s_, id);
        const bool plain = prefix == "u8" || prefix == "u" || prefix == "U" || prefix == "L";
        const bool rawp =
            prefix == "R" || prefix == "u8R" || prefix == "uR" || prefix == "UR" || prefix == "LR";
        if (rawp && s_[q] == '"') return raw(q, t);
        if (plain) return quoted(q, t);
      }
      t.kind = TokenKind::identifier;
      t.end = end;
    } else if (digit(c) || (c == '.' && digit(c1))) {
      t.kind = TokenKind::number;
      size_t p = i, end = i + 1;
      for (;;) {  // p: a logical character that belongs to the number
        const char x = s_[p];
        end = p + 1;
        size_t nx = next(p);
        if ((x == 'e' || x == 'E' || x == 'p' || x == 'P') && nx < n_ &&
            (s_[nx] == '+' || s_[nx] == '-')) {
          end = nx + 1;
          nx = next(nx);
        }
        p = nx;
        if (p >= n_) break;
        if (ident_char(s_[p]) || s_[p] == '.') continue;
        if (s_[p] == '\'') {  // a digit separator: ' then a digit or nondigit
          const size_t after = next(p);
          if (after < n_ && ident_char(s_[after])) {
            p = after;
            continue;
          }
        }
        break;
      }
      t.end = end;
    } else if (c == '"' || c == '\'') {
      quoted(i, t);
    } else if (std::find(std::begin(kPunct1), std::end(kPunct1) - 1, c) != std::end(kPunct1) - 1) {
      t.kind = TokenKind::punctuator;
      // Up to four logical characters and where each ends.
      std::array<char, 4> ch{};
      std::array<size_t, 4> ends{};
      size_t p = i;
      int have = 0;
      for (; have < 4 && p < n_; ++have) {
        ch[have] = s_[p];
        ends[have] = p + 1;
        p = next(p);
      }
      auto matches = [&](const char* q, int len) {
        if (len > have) return false;
        for (int k = 0; k < len; ++k)
          if (ch[k] != q[k]) return false;
        return true;
      };
      int len = 1;
      // [lex.pptoken]/3: `<::` not followed by : or > is `<` then `::`.
      const bool less_colons = have >= 3 && ch[0] == '<' && ch[1] == ':' && ch[2] == ':' &&
                               !(have >= 4 && (ch[3] == ':' || ch[3] == '>'));
      if (!less_colons) {
        for (const char* q : kPunct4)
          if (len == 1 && matches(q, 4)) len = 4;
        for (const char* q : kPunct3)
          if (len == 1 && matches(q, 3)) len = 3;
        for (const char* q : kPunct2)
          if (len == 1 && matches(q, 2)) len = 2;
      }
      t.end = ends[len - 1];
    } else {
      t.kind = TokenKind::other;
      t.end = i + 1;
    }
  }

  std::string_view s_;
  size_t n_;
};

}  // namespace

const char* kind_name(TokenKind kind) {
  switch (kind) {
    case TokenKind::whitespace:
      return "whitespace";
    case TokenKind::newline:
      return "newline";
    case TokenKind::line_comment:
      return "line_comment";
    case TokenKind::block_comment:
      return "block_comment";
    case TokenKind::identifier:
      return "identifier";
    case TokenKind::number:
      return "number";
    case TokenKind::string_literal:
      return "string_literal";
    case TokenKind::char_literal:
      return "char_literal";
    case TokenKind::header_name:
      return "header_name";
    case TokenKind::punctuator:
      return "punctuator";
    case TokenKind::directive:
      return "directive";
    case TokenKind::other:
      return "other";
  }
  return "?";
}

bool is_blank(TokenKind k) {
  return k == TokenKind::whitespace || k == TokenKind::newline || k == TokenKind::line_comment ||
         k == TokenKind::block_comment;
}

size_t splice_length(std::string_view s, size_t i) {
  if (i >= s.size() || s[i] != '\\') return 0;
  size_t j = i + 1;
  while (j < s.size() && blank_char(s[j])) ++j;
  return j < s.size() && s[j] == '\n' ? j + 1 - i : 0;
}

std::vector<Token> lex(std::string_view src, LexOptions options) {
  std::vector<Token> flat = Lexer(src).run();
  for (auto& t : flat)
    for (size_t k = t.begin; k < t.end && !t.has_splice; ++k)
      if (src[k] == '\\' && splice_length(src, k)) t.has_splice = true;
  if (!options.group_directives) return flat;
  std::vector<Token> out;
  out.reserve(flat.size());
  for (size_t i = 0; i < flat.size();) {
    if (!flat[i].in_directive) {
      out.push_back(flat[i++]);
      continue;
    }
    Token d = flat[i];
    d.kind = TokenKind::directive;
    d.terminated = true;
    for (; i < flat.size() && flat[i].in_directive; ++i) {
      d.end = flat[i].end;
      d.has_splice = d.has_splice || flat[i].has_splice;
    }
    out.push_back(d);
  }
  return out;
}

namespace {

// The spelling and, for raw strings, where the physical body starts in the token.
std::string spell(std::string_view src, const Token& t) {
  std::string out;
  out.reserve(t.end - t.begin);
  size_t raw_body = t.end;
  if (t.kind == TokenKind::string_literal) {
    const size_t q = src.find('"', t.begin);
    if (q < t.end && q > t.begin) {
      // A raw string's prefix ends with R: its body is physical from the quote on.
      size_t k = q;
      while (k > t.begin && (src[k - 1] == '\n' || blank_char(src[k - 1]) || src[k - 1] == '\\'))
        --k;
      if (k > t.begin && src[k - 1] == 'R') raw_body = q;
    }
  }
  for (size_t k = t.begin; k < t.end;) {
    if (k < raw_body) {
      if (size_t len = splice_length(src, k)) {
        k += len;
        continue;
      }
    }
    out += src[k++];
  }
  return out;
}

}  // namespace

std::string spelling(std::string_view src, const Token& t) {
  if (!t.has_splice && t.kind != TokenKind::whitespace) return std::string(t.text(src));
  return spell(src, t);
}

std::string canonical(std::string_view src, const Token& t) {
  std::string sp = spelling(src, t);
  if (t.kind != TokenKind::punctuator) return sp;
  if (sp == "<:") return "[";
  if (sp == ":>") return "]";
  if (sp == "<%") return "{";
  if (sp == "%>") return "}";
  if (sp == "%:") return "#";
  if (sp == "%:%:") return "##";
  return sp;
}

std::vector<Directive> directives(std::string_view src, const std::vector<Token>& t) {
  std::vector<Directive> out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].in_directive || t[i].kind != TokenKind::punctuator) continue;
    if (i > 0 && t[i - 1].in_directive) continue;  // not the line's '#'
    Directive d;
    d.hash = i;
    size_t j = i + 1;
    while (j < t.size() && t[j].in_directive) ++j;
    d.end = j;
    d.name_index = j;
    for (size_t k = i + 1; k < j; ++k)
      if (!is_blank(t[k].kind)) {
        if (t[k].kind == TokenKind::identifier) {
          d.name = spelling(src, t[k]);
          d.name_index = k;
        }
        break;
      }
    d.begin_byte = t[i].begin;
    d.end_byte = t[j - 1].end;
    out.push_back(std::move(d));
    i = j - 1;
  }
  return out;
}

namespace {

// The condition of #if/#elif d when it is one literal: 0 false, 1 true, -1 anything else.
int literal_condition(std::string_view src, const std::vector<Token>& t, const Directive& d) {
  std::vector<std::string> words;
  for (size_t k = d.name_index + 1; k < d.end; ++k)
    if (!is_blank(t[k].kind)) words.push_back(spelling(src, t[k]));
  if (words.size() != 1) return -1;
  if (words[0] == "0" || words[0] == "false") return 0;
  if (words[0] == "1" || words[0] == "true") return 1;
  return -1;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> inactive_ranges(std::string_view src,
                                                       const std::vector<Token>& t) {
  struct Open {
    bool in_dead = false;         // opened inside a dead group: nothing of it is evaluated
    bool taken_for_sure = false;  // an earlier group's condition was a literal true
    bool dead = false;            // the current group is dead
    size_t dead_from = 0;         // where the current dead group's text starts
  };
  std::vector<Open> open;
  std::vector<std::pair<size_t, size_t>> out, pending;  // pending: the open outermost conditional's
  auto line_after = [&](const Directive& d) {
    return d.end < t.size() ? t[d.end].end : src.size();  // past the newline
  };
  auto any_dead = [&] { return !open.empty() && (open.back().in_dead || open.back().dead); };
  auto set_group = [&](Open& o, const Directive& d, int condition) {
    // condition: 0 false, 1 true, -1 unknown; an #else is true unless a group was taken for sure
    o.dead = o.taken_for_sure || condition == 0;
    if (condition == 1) o.taken_for_sure = true;
    o.dead_from = line_after(d);
  };
  for (const auto& d : directives(src, t)) {
    const std::string& n = d.name;
    if (n == "if" || n == "ifdef" || n == "ifndef") {
      Open o;
      o.in_dead = any_dead();
      if (!o.in_dead) set_group(o, d, n == "if" ? literal_condition(src, t, d) : -1);
      open.push_back(o);
      continue;
    }
    const bool branch = n == "elif" || n == "else" || n == "elifdef" || n == "elifndef";
    if ((!branch && n != "endif") || open.empty()) continue;  // a stray one: a compile error
    Open& o = open.back();
    if (o.in_dead) {
      if (n == "endif") open.pop_back();
      continue;
    }
    if (o.dead) pending.push_back({o.dead_from, d.begin_byte});
    if (branch) {
      const int condition = n == "else"   ? (o.taken_for_sure ? 0 : -1)
                            : n == "elif" ? literal_condition(src, t, d)
                                          : -1;
      set_group(o, d, condition);
    } else {
      open.pop_back();
      if (open.empty()) {
        out.insert(out.end(), pending.begin(), pending.end());
        pending.clear();
      }
    }
  }
  // A conditional never closed keeps its ranges in `pending`: dropped.
  std::sort(out.begin(), out.end());
  std::vector<std::pair<size_t, size_t>> merged;
  for (const auto& r : out) {
    if (r.first >= r.second) continue;
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  return merged;
}

std::string include_target(std::string_view src, const std::vector<Token>& t, const Directive& d,
                           bool* angled) {
  if (d.name != "include" && d.name != "include_next" && d.name != "import") return "";
  for (size_t k = d.name_index + 1; k < d.end; ++k) {
    if (is_blank(t[k].kind)) continue;
    if (t[k].kind != TokenKind::header_name) return "";
    const std::string sp = spelling(src, t[k]);
    if (angled) *angled = sp[0] == '<';
    return sp.substr(1, sp.size() - 2);
  }
  return "";
}

namespace {

// A literal's spelling with its contents blanked: prefix, quotes, raw delimiters and suffix kept.
std::string blank_literal(const std::string& sp, TokenKind kind) {
  const char quote = kind == TokenKind::string_literal ? '"' : '\'';
  const size_t open = sp.find(quote);
  if (open == std::string::npos) return sp;
  size_t body = open + 1, close;
  std::string out = sp;
  if (open > 0 && sp[open - 1] == 'R' && kind == TokenKind::string_literal) {
    const size_t paren = sp.find('(', open);
    const std::string delim = ")" + sp.substr(open + 1, paren - open - 1) + "\"";
    close = sp.rfind(delim);
    body = paren + 1;
  } else {
    close = sp.rfind(quote);
  }
  if (close == std::string::npos || close < body) return sp;
  for (size_t k = body; k < close; ++k)
    if (out[k] != '\n') out[k] = ' ';
  return out;
}

// `form` (what the token becomes) padded to the token's physical length: blanks, then the
// newlines the physical text had beyond those in `form`.
void append_padded(std::string& out, std::string_view phys, const std::string& form) {
  out += form;
  const size_t nl_phys = static_cast<size_t>(std::count(phys.begin(), phys.end(), '\n'));
  const size_t nl_form = static_cast<size_t>(std::count(form.begin(), form.end(), '\n'));
  const size_t extra_nl = nl_phys - std::min(nl_phys, nl_form);
  const size_t pad = phys.size() - std::min(phys.size(), form.size());
  out.append(pad - std::min(pad, extra_nl), ' ');
  out.append(std::min(pad, extra_nl), '\n');
}

}  // namespace

std::string blank_comments_and_literals(std::string_view src, bool drop_inactive) {
  const auto tokens = lex(src);
  std::string out;
  out.reserve(src.size());
  for (const auto& t : tokens) {
    const std::string_view phys = t.text(src);
    switch (t.kind) {
      case TokenKind::whitespace:
      case TokenKind::newline:
        for (char c : phys) out += c == '\n' ? '\n' : (c == '\\' ? ' ' : c);
        break;
      case TokenKind::line_comment:
      case TokenKind::block_comment:
        if (!t.terminated) {
          out += phys;
          break;
        }
        for (char c : phys) out += c == '\n' ? '\n' : ' ';
        break;
      case TokenKind::string_literal:
      case TokenKind::char_literal:
        if (!t.terminated) {
          out += phys;
          break;
        }
        append_padded(out, phys, blank_literal(spelling(src, t), t.kind));
        break;
      default:
        if (!t.has_splice && phys.size() <= 1) {
          out += phys;
          break;
        }
        append_padded(out, phys, canonical(src, t));
    }
  }
  if (drop_inactive)
    for (const auto& [b, e] : inactive_ranges(src, tokens))
      for (size_t k = b; k < e && k < out.size(); ++k)
        if (out[k] != '\n') out[k] = ' ';
  return out;
}

std::vector<std::string> canonical_tokens(std::string_view src) {
  std::vector<std::string> out;
  for (const auto& t : lex(src))
    if (!is_blank(t.kind)) out.push_back(canonical(src, t));
  return out;
}

std::vector<std::string> similarity_tokens(std::string_view src) {
  std::vector<std::string> out;
  for (const auto& t : lex(src)) {
    if (is_blank(t.kind)) continue;
    if (!is_literal(t.kind) || !t.terminated) {
      out.push_back(canonical(src, t));
      continue;
    }
    const std::string sp = spelling(src, t);
    const char quote = t.kind == TokenKind::string_literal ? '"' : '\'';
    const size_t open = sp.find(quote);
    size_t body = open + 1;
    std::string close_delim(1, quote);
    if (open > 0 && sp[open - 1] == 'R' && t.kind == TokenKind::string_literal) {
      const size_t paren = sp.find('(', open);
      body = paren + 1;
      close_delim = ")" + sp.substr(open + 1, paren - open - 1) + "\"";
    }
    const size_t close = sp.rfind(close_delim);
    out.push_back(sp.substr(0, body));
    out.push_back(sp.substr(close));
  }
  return out;
}

}  // namespace kernelrl::cpp
