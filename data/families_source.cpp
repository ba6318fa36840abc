// A variant's source from its kernels/ body: the text a variant carries is the body as its
// Config compiles it, not the whole family. Passes, in order:
//   1. comments, include guards and repeated includes go (kernels/ keeps them: for people);
//   2. what the instance's Config (`using Cfg = ns::Config<args>`, its members evaluated from
//      the arguments) and op (`using Op = ...`) decide is resolved: `if` / `if constexpr` become
//      the branch taken, `c ? x : y` the operand taken, static_asserts that hold go; conditions
//      over `Cfg::NAME`, `Op::NAME`, integer and bool literals, arithmetic, comparisons and
//      ! && ||, a chain of && or || folded where its undecided operands may go unevaluated;
//   3. what nothing names any more goes, until nothing more does: namespace-scope functions,
//      types, aliases and constants, structs a macro makes, function-like macros, local
//      variables of builtin types with side-effect-free initializers, Config and op members;
//      namespaces left empty go, adjacent blocks of one namespace merge, a macro left with one
//      use is expanded there (after which step 2 runs again: the op's struct is now readable);
//   4. trailing blanks and runs of blank lines squeezed.
// The compiler discards the same branches (their conditions are constants) and emits nothing
// for unused declarations, so the kernels compile from either text to the same PTX
// (tests/unit/test_families_compile.cpp checks a sample). Not a C++ parser: a lexer, bracket
// matching and the conventions of kernels/ (a Config struct template whose members mirror its
// parameters, `Cfg` and `Op` for the config and op types in templates). Step 3 depends on the
// instance only through its names, so it runs once per (resolved text, instance without numbers).
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/cpp_lexer.h"
#include "data/families_internal.h"

namespace kernelrl::families {
namespace {

// ---- comments ---------------------------------------------------------------------------------

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// `text` without comments; a line that held only a comment goes, blanks before a comment that
// ended a line go with it. A block comment between two identifier characters becomes a space.
// Comments, literals and splices are common/cpp_lexer.h's.
std::string strip_comments(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool line_had_code = false, line_had_comment = false;
  auto end_line = [&]() {
    while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
    if (line_had_code || !line_had_comment) out += '\n';  // a comment's own line goes
    line_had_code = line_had_comment = false;
  };
  for (const auto& t : cpp::lex(text)) {
    switch (t.kind) {
      case cpp::TokenKind::line_comment:
        line_had_comment = true;
        break;
      case cpp::TokenKind::block_comment: {
        line_had_comment = true;
        // a multi-line block comment: its newlines go, the line ends with it
        if (!out.empty() && ident_char(out.back()) && t.end < text.size() &&
            ident_char(text[t.end]))
          out += ' ';
        break;
      }
      case cpp::TokenKind::string_literal:
      case cpp::TokenKind::char_literal:
        out.append(text, t.begin, t.end - t.begin);
        line_had_code = true;
        break;
      default:  // code, blanks, newlines (a splice's newline ends its physical line too)
        for (size_t k = t.begin; k < t.end; ++k) {
          const char c = text[k];
          if (c == '\n') {
            end_line();
          } else {
            if (c != ' ' && c != '\t') line_had_code = true;
            out += c;
          }
        }
    }
  }
  if (!out.empty() && out.back() != '\n') end_line();
  return out;
}

using Counts = std::unordered_map<std::string, int>;  // identifier -> occurrences

// ---- tokens -------------------------------------------------------------------------------------

enum class Kind { ident, number, literal, punct, directive };

struct Token {
  Kind kind;
  size_t begin, end;  // byte range in the text
  std::string text;   // identifiers, numbers, punctuators; directives: the directive's name
};

// The tokens of `s` (comments and blanks dropped; a preprocessor line is one directive token),
// from common/cpp_lexer.h. Bytes no token kind takes are one-character punctuators.
std::vector<Token> lex(const std::string& s) {
  const auto flat = cpp::lex(s);
  const auto dirs = cpp::directives(s, flat);
  std::vector<Token> out;
  out.reserve(flat.size());
  size_t d = 0;
  for (size_t i = 0; i < flat.size(); ++i) {
    if (d < dirs.size() && i == dirs[d].hash) {
      out.push_back({Kind::directive, dirs[d].begin_byte, dirs[d].end_byte, dirs[d].name});
      i = dirs[d++].end - 1;
      continue;
    }
    const auto& t = flat[i];
    switch (t.kind) {
      case cpp::TokenKind::identifier:
        out.push_back({Kind::ident, t.begin, t.end, cpp::spelling(s, t)});
        break;
      case cpp::TokenKind::number:
        out.push_back({Kind::number, t.begin, t.end, cpp::spelling(s, t)});
        break;
      case cpp::TokenKind::string_literal:
      case cpp::TokenKind::char_literal:
      case cpp::TokenKind::header_name:
        out.push_back({Kind::literal, t.begin, t.end, ""});
        break;
      case cpp::TokenKind::punctuator:
      case cpp::TokenKind::other:
        out.push_back({Kind::punct, t.begin, t.end, cpp::spelling(s, t)});
        break;
      default:
        break;
    }
  }
  return out;
}

bool is(const std::vector<Token>& t, size_t i, const char* text) {
  if (i >= t.size() || t[i].kind == Kind::literal || t[i].kind == Kind::directive) return false;
  const std::string& x = t[i].text;
  return !x.empty() && x[0] == text[0] && x == text;
}

// Index of the token closing the bracket opened at t[i] ( ( [ { ), or t.size().
size_t match(const std::vector<Token>& t, size_t i) {
  int depth = 0;
  for (size_t j = i; j < t.size(); ++j) {
    if (t[j].kind != Kind::punct) continue;
    const std::string& p = t[j].text;
    if (p == "(" || p == "[" || p == "{") ++depth;
    if (p == ")" || p == "]" || p == "}") {
      if (--depth == 0) return j;
    }
  }
  return t.size();
}

// Index past the `template <...>` at t[i] (angle brackets counted outside parentheses).
size_t skip_template_header(const std::vector<Token>& t, size_t i) {
  if (!is(t, i, "template") || !is(t, i + 1, "<")) return i;
  int angle = 0;
  for (size_t j = i + 1; j < t.size(); ++j) {
    if (is(t, j, "(") || is(t, j, "[")) {
      j = match(t, j);
      continue;
    }
    if (is(t, j, "<")) ++angle;
    if (is(t, j, ">")) --angle;
    if (is(t, j, ">>")) angle -= 2;
    if (angle <= 0) return j + 1;
  }
  return t.size();
}

// ---- constant conditions ------------------------------------------------------------------------

// Known constants: "Cfg::NAME" and "Op::NAME" (members of the instance's Config and op types)
// in conditions, bare names (parameters, earlier members) in a member's initializer.
using Env = std::map<std::string, long long>;

std::optional<long long> literal_value(const std::string& x) {
  if (x == "true") return 1;
  if (x == "false") return 0;
  if (x.empty() || !std::isdigit(static_cast<unsigned char>(x[0]))) return std::nullopt;
  std::string digits = x;
  while (!digits.empty() && (digits.back() == 'l' || digits.back() == 'L')) digits.pop_back();
  // (unsigned literals are left unknown: C++ compares them with negative values as unsigned)
  const bool hex = digits.size() > 2 && (digits[1] == 'x' || digits[1] == 'X');
  for (size_t k = hex ? 2 : 0; k < digits.size(); ++k)
    if (!(hex ? std::isxdigit(static_cast<unsigned char>(digits[k]))
              : std::isdigit(static_cast<unsigned char>(digits[k]))))
      return std::nullopt;  // a float, or something else
  try {
    return std::stoll(digits, nullptr,
                      hex ? 16 : (digits.size() > 1 && digits[0] == '0' ? 8 : 10));
  } catch (const std::out_of_range&) {
    return std::nullopt;
  }
}

// Evaluates t[b, e) as an integer constant expression over literals and names: `Cfg::NAME` or
// `Op::NAME` when `qualified` (a condition in a template over Cfg and Op), a bare NAME otherwise
// (a member's initializer). nullopt when any part is unknown.
class Evaluator {
 public:
  Evaluator(const std::vector<Token>& t, size_t b, size_t e, const Env& env, bool qualified)
      : t_(t), i_(b), e_(e), env_(env), qualified_(qualified) {}

  std::optional<long long> run() {
    auto v = logical_or();
    if (!v || i_ != e_) return std::nullopt;
    return v;
  }

 private:
  bool at(const char* p) const { return i_ < e_ && is(t_, i_, p); }

  std::optional<long long> logical_or() {
    auto v = logical_and();
    while (v && at("||")) {
      ++i_;
      auto r = logical_and();
      if (!r) return std::nullopt;
      v = (*v || *r) ? 1 : 0;
    }
    return v;
  }
  std::optional<long long> logical_and() {
    auto v = equality();
    while (v && at("&&")) {
      ++i_;
      auto r = equality();
      if (!r) return std::nullopt;
      v = (*v && *r) ? 1 : 0;
    }
    return v;
  }
  std::optional<long long> equality() {
    auto v = relational();
    while (v && (at("==") || at("!="))) {
      const bool eq = at("==");
      ++i_;
      auto r = relational();
      if (!r) return std::nullopt;
      v = ((*v == *r) == eq) ? 1 : 0;
    }
    return v;
  }
  std::optional<long long> relational() {
    auto v = additive();
    while (v && (at("<") || at(">") || at("<=") || at(">="))) {
      const std::string op = t_[i_++].text;
      auto r = additive();
      if (!r) return std::nullopt;
      v = (op == "<" ? *v < *r : op == ">" ? *v > *r : op == "<=" ? *v <= *r : *v >= *r) ? 1 : 0;
    }
    return v;
  }
  std::optional<long long> additive() {
    auto v = multiplicative();
    while (v && (at("+") || at("-"))) {
      const bool plus = at("+");
      ++i_;
      auto r = multiplicative();
      if (!r) return std::nullopt;
      v = plus ? *v + *r : *v - *r;
    }
    return v;
  }
  std::optional<long long> multiplicative() {
    auto v = unary();
    while (v && (at("*") || at("/") || at("%"))) {
      const std::string op = t_[i_++].text;
      auto r = unary();
      if (!r || (op != "*" && *r == 0)) return std::nullopt;
      v = op == "*" ? *v * *r : op == "/" ? *v / *r : *v % *r;
    }
    return v;
  }
  std::optional<long long> unary() {
    if (at("!")) {
      ++i_;
      auto v = unary();
      return v ? std::optional<long long>(!*v ? 1 : 0) : std::nullopt;
    }
    if (at("-")) {
      ++i_;
      auto v = unary();
      return v ? std::optional<long long>(-*v) : std::nullopt;
    }
    return primary();
  }
  std::optional<long long> primary() {
    if (i_ >= e_) return std::nullopt;
    if (at("(")) {
      const size_t close = match(t_, i_);
      if (close >= e_) return std::nullopt;
      Evaluator inner(t_, i_ + 1, close, env_, qualified_);
      auto v = inner.run();
      i_ = close + 1;
      return v;
    }
    const Token& x = t_[i_];
    if (x.kind == Kind::number || x.text == "true" || x.text == "false") {
      ++i_;
      return literal_value(x.text);
    }
    if (x.kind != Kind::ident) return std::nullopt;
    std::string name = x.text;
    if (qualified_) {
      if ((name != "Cfg" && name != "Op") || !is(t_, i_ + 1, "::") || i_ + 2 >= e_ ||
          t_[i_ + 2].kind != Kind::ident)
        return std::nullopt;
      name += "::" + t_[i_ + 2].text;
      i_ += 3;
    } else {
      ++i_;
    }
    if (i_ < e_ && (at("::") || at("("))) return std::nullopt;  // not a plain name
    auto it = env_.find(name);
    if (it == env_.end()) return std::nullopt;
    return it->second;
  }

  const std::vector<Token>& t_;
  size_t i_, e_;
  const Env& env_;
  bool qualified_;
};

// Top-level operands of t[b, e) split at `op` (&& or ||) outside brackets.
std::vector<std::pair<size_t, size_t>> split_at(const std::vector<Token>& t, size_t b, size_t e,
                                                const char* op) {
  std::vector<std::pair<size_t, size_t>> parts;
  size_t start = b;
  for (size_t j = b; j < e; ++j) {
    if (is(t, j, "(") || is(t, j, "[") || is(t, j, "{")) {
      j = match(t, j);
      continue;
    }
    if (is(t, j, op)) {
      parts.push_back({start, j});
      start = j + 1;
    }
  }
  parts.push_back({start, e});
  return parts;
}

// An operand that can be left unevaluated: no call, assignment or increment.
bool side_effect_free(const std::vector<Token>& t, size_t b, size_t e) {
  for (size_t j = b; j < e; ++j) {
    if (t[j].kind != Kind::punct) continue;
    const std::string& p = t[j].text;
    if (p == "(" && j > b && t[j - 1].kind == Kind::ident) return false;  // a call
    if (p == "=" || p == "++" || p == "--" ||
        (p.size() == 2 && p[1] == '=' && p != "==" && p != "!=" && p != "<=" && p != ">="))
      return false;
  }
  return true;
}

struct Decision {
  enum { unknown, taken, not_taken, reduced } kind = unknown;
  std::string condition;  // `reduced`: what is left of it
};

// A condition partly evaluated: its value, or the text of what is left (`changed` when that is
// less than it was). `pure`: evaluating what is left has no side effect.
struct Partial {
  std::optional<long long> value;
  std::string text;
  bool changed = false, pure = true;
};

// t[b, e) with its known operands folded: a chain of || (or, without one, of &&) keeps the
// operands whose value is unknown, in order, unless a known one decides the chain (and the
// operands before it, evaluated in the original, have no side effect or `constant` says the
// whole condition is a constant expression); a parenthesized operand is folded inside.
Partial fold(const std::string& text, const std::vector<Token>& t, size_t b, size_t e,
             const Env& env, bool constant) {
  Partial r;
  r.text = b < e ? text.substr(t[b].begin, t[e - 1].end - t[b].begin) : "";
  if (auto v = Evaluator(t, b, e, env, /*qualified=*/true).run()) {
    r.value = v;
    r.changed = true;
    return r;
  }
  r.pure = side_effect_free(t, b, e);
  for (size_t j = b; j < e; ++j) {
    if (is(t, j, "(") || is(t, j, "[") || is(t, j, "{")) {
      j = match(t, j);
      continue;
    }
    if (is(t, j, "?") || is(t, j, ",")) return r;
  }
  if (is(t, b, "(") && match(t, b) == e - 1) {
    Partial in = fold(text, t, b + 1, e - 1, env, constant);
    if (in.value || in.changed) {
      r.value = in.value;
      r.text = "(" + in.text + ")";
      r.changed = true;
    }
    return r;
  }
  const char* op = "||";
  auto parts = split_at(t, b, e, op);
  if (parts.size() < 2) {
    op = "&&";
    parts = split_at(t, b, e, op);
  }
  if (parts.size() < 2) return r;
  const bool is_and = std::string(op) == "&&";
  std::vector<Partial> left;
  bool changed = false;
  for (const auto& [pb, pe] : parts) {
    Partial x = fold(text, t, pb, pe, env, constant);
    if (!x.value) {
      changed |= x.changed;
      left.push_back(x);
      continue;
    }
    changed = true;
    if ((*x.value != 0) != is_and) {  // false in an && chain, true in an || chain: decides it
      for (const auto& l : left)
        if (!constant && !l.pure) return r;  // evaluated in the original: it must not matter
      r.value = is_and ? 0 : 1;
      r.changed = true;
      return r;
    }
  }
  if (left.empty()) {  // every operand neutral
    r.value = is_and ? 1 : 0;
    r.changed = true;
    return r;
  }
  if (!changed) return r;
  std::string joined;
  for (const auto& l : left) joined += (joined.empty() ? "" : std::string(" ") + op + " ") + l.text;
  r.text = joined;
  r.changed = true;
  return r;
}

Decision decide(const std::string& text, const std::vector<Token>& t, size_t b, size_t e,
                const Env& env, bool is_constexpr) {
  Decision d;
  const Partial p = fold(text, t, b, e, env, is_constexpr);
  if (p.value) {
    d.kind = *p.value ? Decision::taken : Decision::not_taken;
  } else if (p.changed) {
    d.kind = Decision::reduced;
    d.condition = p.text;
    // `(x)` alone in an if's parentheses: x
    if (d.condition.size() > 2 && d.condition.front() == '(' && d.condition.back() == ')') {
      const auto in = lex(d.condition);
      if (!in.empty() && match(in, 0) == in.size() - 1)
        d.condition = d.condition.substr(1, d.condition.size() - 2);
    }
  }
  return d;
}

// ---- the Config's values ------------------------------------------------------------------------

std::string squeeze(const std::string& s) {
  std::string out;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  return out;
}

// Values of the members of the type an instance names `alias` (Cfg, Op): `using Cfg =
// ns::Name<args>;` in the instance, the body's unique `template <...> struct Name`, its
// parameters bound to the arguments in order, and its `static constexpr` members whose
// initializers evaluate over those (and earlier members), as "Cfg::MEMBER". Empty when the
// instance has no such alias or the body no such unique struct.
// `members` gets the members by their bare names (and the parameters), `body` the token range of
// the struct's braces.
Env type_values(const std::vector<Token>& bt, const std::string& instance, const char* alias,
                Env* members = nullptr, std::pair<size_t, size_t>* body = nullptr) {
  Env env;
  const std::string inst = strip_comments(instance);
  const auto it = lex(inst);
  size_t u = 0;
  while (u + 3 < it.size() && !(is(it, u, "using") && is(it, u + 1, alias) && is(it, u + 2, "=")))
    ++u;
  if (u + 3 >= it.size()) return env;
  size_t lt = u + 3;
  while (lt < it.size() && !is(it, lt, "<") && !is(it, lt, ";")) ++lt;
  if (!is(it, lt, "<") || it[lt - 1].kind != Kind::ident) return env;
  const std::string name = it[lt - 1].text;
  // Arguments: split at commas outside brackets up to the matching '>'.
  std::vector<std::string> args;
  {
    int angle = 1;
    size_t start = lt + 1;
    for (size_t j = lt + 1; j < it.size() && angle > 0; ++j) {
      if (is(it, j, "(") || is(it, j, "[") || is(it, j, "{")) {
        j = match(it, j);
        continue;
      }
      if (is(it, j, "<")) ++angle;
      if (is(it, j, ">")) --angle;
      if ((is(it, j, ",") && angle == 1) || angle == 0) {
        if (j > start)
          args.push_back(squeeze(inst.substr(it[start].begin, it[j - 1].end - it[start].begin)));
        start = j + 1;
      }
    }
  }
  // The struct template in the body.
  size_t found = bt.size(), header = 0;
  int count = 0;
  for (size_t j = 0; j + 1 < bt.size(); ++j)
    if ((is(bt, j, "struct") || is(bt, j, "class")) && is(bt, j + 1, name.c_str()) &&
        (is(bt, j + 2, "{") || is(bt, j + 2, ":"))) {
      // preceded by its template header
      size_t h = j;
      while (h > 0 && !is(bt, h, "template")) --h;
      if (!is(bt, h, "template") || skip_template_header(bt, h) != j) continue;
      found = j;
      header = h;
      ++count;
    }
  if (count != 1) return env;
  std::vector<std::string> params;
  {
    const size_t end = skip_template_header(bt, header) - 1;  // the '>'
    size_t last_ident = 0;
    bool any = false;
    for (size_t j = header + 2; j <= end; ++j) {
      if (is(bt, j, "(") || is(bt, j, "[")) {
        j = match(bt, j);
        continue;
      }
      if (bt[j].kind == Kind::ident) {
        last_ident = j;
        any = true;
      }
      if (is(bt, j, "=")) {  // a default argument: skip to the next comma
        while (j < end && !is(bt, j + 1, ",")) ++j;
      }
      if (is(bt, j, ",") || j == end) {
        if (!any) break;
        params.push_back(bt[last_ident].text);
        any = false;
      }
    }
  }
  if (params.size() != args.size())
    throw std::logic_error("variant source: " + name + " has " + std::to_string(params.size()) +
                           " parameters, the instance gives " + std::to_string(args.size()));
  Env scope;
  for (size_t k = 0; k < params.size(); ++k)
    if (auto v = literal_value(args[k])) scope[params[k]] = *v;
  // Members: `static constexpr T A = expr, B = expr;` at the struct's top level.
  size_t open = found + 2;
  while (open < bt.size() && !is(bt, open, "{")) ++open;
  const size_t close = match(bt, open);
  for (size_t j = open + 1; j < close; ++j) {
    if (is(bt, j, "{") || is(bt, j, "(") || is(bt, j, "[")) {
      j = match(bt, j);
      continue;
    }
    if (!(is(bt, j, "static") && is(bt, j + 1, "constexpr"))) continue;
    size_t semi = j;
    while (semi < close && !is(bt, semi, ";")) {
      if (is(bt, semi, "(") || is(bt, semi, "[") || is(bt, semi, "{")) semi = match(bt, semi);
      ++semi;
    }
    // declarators: NAME = init, split at top-level commas
    size_t k = j + 2;
    while (k < semi && !is(bt, k, "=")) ++k;
    if (k >= semi || bt[k - 1].kind != Kind::ident) {
      j = semi;
      continue;
    }
    std::string member = bt[k - 1].text;
    size_t init = k + 1;
    for (size_t m = init; m <= semi; ++m) {
      if (m < semi && (is(bt, m, "(") || is(bt, m, "[") || is(bt, m, "{"))) {
        m = match(bt, m);
        continue;
      }
      if (m == semi || is(bt, m, ",")) {
        if (auto v = Evaluator(bt, init, m, scope, /*qualified=*/false).run()) {
          scope[member] = *v;
          env[std::string(alias) + "::" + member] = *v;
        }
        // next declarator: NAME =
        if (m + 2 < semi && bt[m + 1].kind == Kind::ident && is(bt, m + 2, "=")) {
          member = bt[m + 1].text;
          init = m + 3;
          m = m + 2;
        } else if (m < semi) {
          break;
        }
      }
    }
    j = semi;
  }
  if (members) *members = scope;
  if (body) *body = {open, close};
  return env;
}

// ---- branches -----------------------------------------------------------------------------------

// Words a declaration never declares.
const std::set<std::string> kKeywords = {
    "if",     "else",     "for",      "while",    "do",       "switch",        "case",
    "return", "break",    "continue", "goto",     "default",  "constexpr",     "const",
    "static", "volatile", "inline",   "typename", "template", "sizeof",        "decltype",
    "true",   "false",    "nullptr",  "this",     "auto",     "static_assert", "asm"};

const std::set<std::string> kNotDeclaring = {
    "return", "case",   "goto",      "else",     "do",       "new",     "delete",
    "throw",  "sizeof", "co_return", "typename", "template", "operator"};

class Specializer {
 public:
  Specializer(const std::string& s, const std::vector<Token>& t, const Env& env)
      : s_(s), t_(t), env_(env) {
    find_ternaries();
  }

  std::string run() {
    std::string out;
    emit(0, t_.size(), out);
    if (!t_.empty()) out.append(s_, t_.back().end, std::string::npos);
    return out;
  }

 private:
  // Appends the text from t[b].begin up to t[e].begin (or the end of t[e-1]), with the decided
  // if-statements in it replaced by their branch.
  void emit(size_t b, size_t e, std::string& out) {
    size_t i = b;
    while (i < e) {
      if (is(t_, i, "if") && try_if(i, e, out)) continue;
      auto q = ternary_.find(i);
      if (q != ternary_.end() && q->second.end <= e) {
        // A decided `cond ? a : b`: the operand taken.
        const Ternary& x = q->second;
        emit(x.b, x.e, out);
        i = x.end;
        if (i < e) out.append(s_, t_[i - 1].end, t_[i].begin - t_[i - 1].end);
        continue;
      }
      out.append(s_, t_[i].begin, t_[i].end - t_[i].begin);
      if (i + 1 < e) out.append(s_, t_[i].end, t_[i + 1].begin - t_[i].end);
      ++i;
    }
  }

  // Past the statement that starts at t[i].
  size_t statement_end(size_t i) const {
    if (i >= t_.size()) return t_.size();
    if (t_[i].kind == Kind::directive) return statement_end(i + 1);  // #pragma unroll + loop
    if (is(t_, i, "{")) return match(t_, i) + 1;
    if (is(t_, i, "if")) {
      size_t j = i + 1;
      if (is(t_, j, "constexpr")) ++j;
      j = statement_end(match(t_, j) + 1);
      if (is(t_, j, "else")) j = statement_end(j + 1);
      return j;
    }
    if (is(t_, i, "for") || is(t_, i, "while") || is(t_, i, "switch"))
      return statement_end(match(t_, i + 1) + 1);
    if (is(t_, i, "do")) {
      size_t j = statement_end(i + 1);  // body, then while (...) ;
      return match(t_, j + 1) + 2;
    }
    size_t j = i;
    while (j < t_.size() && !is(t_, j, ";")) {
      if (is(t_, j, "(") || is(t_, j, "[") || is(t_, j, "{")) j = match(t_, j);
      ++j;
    }
    return j + 1;
  }

  // The statement t[i] starts in a block (not the lone body of a for, if, else or do)?
  bool in_block(size_t i) const {
    if (i == 0) return true;
    const Token& p = t_[i - 1];
    if (p.kind == Kind::directive) return true;
    return is(t_, i - 1, "{") || is(t_, i - 1, "}") || is(t_, i - 1, ";") || is(t_, i - 1, ":");
  }

  // The enclosing block's closing brace for a statement at t[i].
  size_t block_end(size_t i) const {
    int depth = 0;
    for (size_t j = i; j < t_.size(); ++j) {
      if (is(t_, j, "{") || is(t_, j, "(") || is(t_, j, "[")) ++depth;
      if (is(t_, j, "}") || is(t_, j, ")") || is(t_, j, "]")) {
        if (depth == 0) return j;
        --depth;
      }
    }
    return t_.size();
  }
  size_t block_begin(size_t i) const {
    int depth = 0;
    for (size_t j = i; j-- > 0;) {
      if (is(t_, j, "}") || is(t_, j, ")") || is(t_, j, "]")) ++depth;
      if (is(t_, j, "{") || is(t_, j, "(") || is(t_, j, "[")) {
        if (depth == 0) return j;
        --depth;
      }
    }
    return 0;
  }

  // Names a statement list t[b, e) may declare at its own level (a superset: an identifier after
  // a type-like token or a comma, followed by = ; , [ ( { or :).
  std::set<std::string> declared(size_t b, size_t e) const {
    std::set<std::string> out;
    for (size_t j = b; j < e; ++j) {
      if (is(t_, j, "(") || is(t_, j, "[") || is(t_, j, "{")) {
        j = match(t_, j);
        continue;
      }
      if (t_[j].kind != Kind::ident || j == b || kKeywords.count(t_[j].text)) continue;
      const Token& p = t_[j - 1];
      // T x, T* x, T& x, T<...> x, and later declarators after a comma
      const bool pointer = (is(t_, j - 1, "*") || is(t_, j - 1, "&") || is(t_, j - 1, "&&")) &&
                           j >= b + 2 && (t_[j - 2].kind == Kind::ident || is(t_, j - 2, ">"));
      const bool after_type = (p.kind == Kind::ident && !kNotDeclaring.count(p.text)) || pointer ||
                              is(t_, j - 1, ">") || is(t_, j - 1, ",") || is(t_, j - 1, ">>");
      const bool before_init = j + 1 >= e || is(t_, j + 1, "=") || is(t_, j + 1, ";") ||
                               is(t_, j + 1, ",") || is(t_, j + 1, "[") || is(t_, j + 1, "(") ||
                               is(t_, j + 1, "{") || is(t_, j + 1, ":");
      if (after_type && before_init) out.insert(t_[j].text);
    }
    return out;
  }
  std::set<std::string> names(size_t b, size_t e) const {
    std::set<std::string> out;
    for (size_t j = b; j < e; ++j)
      if (t_[j].kind == Kind::ident) out.insert(t_[j].text);
    return out;
  }

  static size_t indent_of_line(const std::string& out) {
    const size_t nl = out.rfind('\n');
    const size_t start = nl == std::string::npos ? 0 : nl + 1;
    size_t k = start;
    while (k < out.size() && out[k] == ' ') ++k;
    return k == out.size() ? k - start : std::string::npos;  // npos: code before it on the line
  }

  // Replaces the if-statement at t[i] when its condition is decided; false leaves it to emit().
  bool try_if(size_t& i, size_t e, std::string& out) {
    const size_t if_tok = i;
    size_t c = i + 1;
    const bool is_constexpr = is(t_, c, "constexpr");
    if (is_constexpr) ++c;
    if (!is(t_, c, "(")) return false;
    const size_t cond_end = match(t_, c);
    const Decision d = decide(s_, t_, c + 1, cond_end, env_, is_constexpr);
    if (d.kind == Decision::unknown) return false;
    const size_t then_b = cond_end + 1, then_e = statement_end(then_b);
    size_t else_b = then_e, end = then_e;
    const bool has_else = is(t_, then_e, "else");
    if (has_else) {
      else_b = then_e + 1;
      end = statement_end(else_b);
    }
    if (end > e) return false;
    if (d.kind == Decision::reduced) {
      out += std::string("if ") + (is_constexpr ? "constexpr " : "") + "(" + d.condition + ")";
      out.append(s_, t_[cond_end].end, t_[then_b].begin - t_[cond_end].end);
      i = then_b;
      return true;
    }
    const bool taken = d.kind == Decision::taken;
    size_t bb = taken ? then_b : else_b, be = taken ? then_e : end;
    if (!taken && !has_else) bb = be = end;  // nothing is left of it
    const size_t indent = indent_of_line(out);
    const bool own_lines = in_block(i) && indent != std::string::npos;
    if (bb == be && !own_lines) return false;  // the lone body of a loop: keep it
    // Names the branch declares must not meet the names around it in its new scope.
    std::set<std::string> around = declared(block_begin(i) + 1, i);
    const std::set<std::string> after = names(end, block_end(end));
    around.insert(after.begin(), after.end());
    auto clashes = [&](size_t from, size_t to) {
      const std::set<std::string> decl = declared(from, to);
      return std::any_of(decl.begin(), decl.end(),
                         [&](const std::string& n) { return around.count(n) > 0; });
    };
    const bool block = bb < be && is(t_, bb, "{") && match(t_, bb) + 1 == be;
    const bool unbrace = block && own_lines && !clashes(bb + 1, be - 1);
    if (bb < be && !block && own_lines && clashes(bb, be)) return false;
    std::string branch;
    size_t first = bb;
    if (unbrace) {
      first = bb + 1;
      if (bb + 1 < be - 1) emit(bb + 1, be - 1, branch);
    } else if (bb < be) {
      emit(bb, be, branch);
    }
    i = end;
    if (!own_lines) {
      out += branch;
      if (end < e) out.append(s_, t_[end - 1].end, t_[end].begin - t_[end - 1].end);
      return true;
    }
    // At the if's indentation: the first line there, the others shifted by as much (directives
    // stay in the first column).
    out.resize(out.size() - indent);
    std::string laid;
    if (!branch.empty()) {
      // Lines after the first move left by as much as the branch was indented under the if.
      auto column = [&](size_t tok) {
        const size_t at = t_[tok].begin;
        const size_t nl = at == 0 ? std::string::npos : s_.rfind('\n', at - 1);
        return at - (nl == std::string::npos ? 0 : nl + 1);
      };
      size_t code = first;  // a directive (#pragma unroll) keeps its first column
      while (code + 1 < t_.size() && t_[code].kind == Kind::directive) ++code;
      const bool own_line = s_.find('\n', t_[cond_end].end) < t_[code].begin;
      const size_t shift =
          own_line && column(code) > column(if_tok) ? column(code) - column(if_tok) : 0;
      size_t p = 0;
      bool first_line = true;
      while (p <= branch.size()) {
        size_t q = branch.find('\n', p);
        if (q == std::string::npos) q = branch.size();
        std::string line = branch.substr(p, q - p);
        p = q + 1;
        const size_t lead = line.find_first_not_of(' ');
        if (first_line && line[0] != '#') {
          line = std::string(indent, ' ') + line;
        } else if (!first_line && lead != std::string::npos && line[lead] != '#') {
          line = line.substr(std::min(lead, shift));
        }
        first_line = false;
        if (!laid.empty()) laid += "\n";
        laid += line;
      }
    }
    if (laid.empty()) {
      // Nothing left: the if's lines go, with the line break after the statement.
      while (!out.empty() && out.back() == ' ') out.pop_back();
      if (end < e) {
        const size_t from = t_[end - 1].end, stop = t_[end].begin;
        const size_t nl = s_.find('\n', from);
        if (nl != std::string::npos && nl < stop)
          out.append(s_, nl + 1, stop - nl - 1);
        else
          out.append(s_, from, stop - from);
      }
      return true;
    }
    out += laid;
    if (end < e) out.append(s_, t_[end - 1].end, t_[end].begin - t_[end - 1].end);
    return true;
  }

  // Conditional expressions whose condition the Config decides: the condition runs back from
  // the `?` to a token of lower precedence (or an opening bracket), the second operand to the
  // matching `:`, the third to a comma, semicolon, closing bracket or an enclosing `:`.
  struct Ternary {
    size_t end;   // past the expression
    size_t b, e;  // the operand taken
  };
  // t[b, e) is one operand: names, literals, member access and brackets, no operator.
  bool primary(size_t b, size_t e) const {
    for (size_t j = b; j < e; ++j) {
      if (is(t_, j, "(") || is(t_, j, "[")) {
        j = match(t_, j);
        continue;
      }
      if (t_[j].kind == Kind::punct && !is(t_, j, "::") && !is(t_, j, ".") && !is(t_, j, "->"))
        return false;
    }
    return true;
  }
  void find_ternaries() {
    static const std::set<std::string> kBefore = {
        "(",  "[",  "{",  ",",   ";",   "}", "=", "+=",     "-=",   "*=",   "/=", "%=",
        "&=", "|=", "^=", "<<=", ">>=", "?", ":", "return", "case", "else", "do"};
    for (size_t q = 0; q < t_.size(); ++q) {
      if (!is(t_, q, "?")) continue;
      size_t c = q;
      while (c > 0) {
        const size_t p = c - 1;
        if (is(t_, p, ")") || is(t_, p, "]")) {
          // back to the matching opener
          int depth = 0;
          size_t k = p + 1;
          while (k-- > 0) {
            if (is(t_, k, ")") || is(t_, k, "]")) ++depth;
            if ((is(t_, k, "(") || is(t_, k, "[")) && --depth == 0) break;
          }
          c = k;
          continue;
        }
        if (t_[p].kind == Kind::directive || kBefore.count(t_[p].text)) break;
        c = p;
      }
      if (c == q) continue;
      auto v = Evaluator(t_, c, q, env_, /*qualified=*/true).run();
      if (!v) continue;
      size_t colon = q + 1;
      int nested = 0;
      for (; colon < t_.size(); ++colon) {
        if (is(t_, colon, "(") || is(t_, colon, "[") || is(t_, colon, "{")) {
          colon = match(t_, colon);
          continue;
        }
        if (is(t_, colon, "?")) ++nested;
        if (is(t_, colon, ":") && nested-- == 0) break;
        if (is(t_, colon, ";")) break;
      }
      if (!is(t_, colon, ":")) continue;
      size_t end = colon + 1;
      nested = 0;
      for (; end < t_.size(); ++end) {
        if (is(t_, end, "(") || is(t_, end, "[") || is(t_, end, "{")) {
          end = match(t_, end);
          continue;
        }
        if (is(t_, end, "?")) ++nested;
        if (is(t_, end, ":") && nested-- == 0) break;
        if (is(t_, end, ",") || is(t_, end, ";") || is(t_, end, ")") || is(t_, end, "]") ||
            is(t_, end, "}"))
          break;
      }
      const size_t b = *v ? q + 1 : colon + 1, e = *v ? colon : end;
      if (b >= e || split_at(t_, b, e, ",").size() > 1) continue;  // a comma operand: leave it
      // A '<' or '>' outside brackets may close a template argument list the expression sits in
      // (`f<X, Cfg::A ? 0 : 1>(...)`): its end is not known, leave it.
      bool angle = false;
      for (size_t k = q + 1; k < end; ++k) {
        if (is(t_, k, "(") || is(t_, k, "[") || is(t_, k, "{")) {
          k = match(t_, k);
          continue;
        }
        angle |= is(t_, k, "<") || is(t_, k, ">") || is(t_, k, ">>") || is(t_, k, "<<");
      }
      if (angle) continue;
      // `(cond ? x : y)` in an expression becomes x, not (x), when x is one operand.
      if (c > 0 && is(t_, c - 1, "(") && is(t_, end, ")") && primary(b, e) &&
          (c < 2 || (t_[c - 2].kind == Kind::punct && !is(t_, c - 2, ")") && !is(t_, c - 2, "]") &&
                     !is(t_, c - 2, ">")))) {
        ternary_[c - 1] = {end + 1, b, e};
        continue;
      }
      ternary_[c] = {end, b, e};
    }
  }

  const std::string& s_;
  const std::vector<Token>& t_;
  const Env& env_;
  std::map<size_t, Ternary> ternary_;  // by the condition's first token
};

// ---- unused declarations ------------------------------------------------------------------------

struct Item {
  size_t b = 0, e = 0;             // tokens [b, e)
  std::vector<std::string> names;  // what it declares (empty: always kept)
  std::vector<size_t> children;    // a namespace's items
  bool is_namespace = false;
  bool removed = false;
  int guard = -1;  // include guard: 0 #ifndef, 1 #define, 2 its #endif
};

const std::set<std::string> kAttributeLike = {"__launch_bounds__", "__align__",  "alignas",
                                              "__attribute__",     "decltype",   "__declspec",
                                              "noexcept",          "__maxnreg__"};

class Pruner {
 public:
  Pruner(const std::string& s, const std::vector<Token>& t, const std::string& instance)
      : s_(s), t_(t) {
    for (const auto& x : lex(strip_comments(instance)))
      if (x.kind == Kind::ident) ++outside_[x.text];
    for (size_t j = 0; j < t_.size(); ++j)
      if (t_[j].kind == Kind::directive && t_[j].text == "define") {
        // function-like macro: #define NAME( with no space before the parenthesis
        const std::string d = s_.substr(t_[j].begin, t_[j].end - t_[j].begin);
        size_t k = d.find("define") + 6;
        while (k < d.size() && d[k] == ' ') ++k;
        size_t n = k;
        while (n < d.size() && ident_char(d[n])) ++n;
        if (n < d.size() && d[n] == '(') fn_macros_.insert(d.substr(k, n - k));
      }
  }

  std::string run() {
    std::vector<size_t> top = parse(0, t_.size());
    mark_guards(top);
    mark_macro_groups(top);
    // An #include the text already made (of another file inlined into it) goes.
    std::set<std::string> included;
    for (size_t k : top) {
      Item& it = items_[k];
      if (it.is_namespace || t_[it.b].kind != Kind::directive || t_[it.b].text != "include")
        continue;
      if (!included.insert(squeeze(s_.substr(t_[it.b].begin, t_[it.b].end - t_[it.b].begin)))
               .second)
        it.removed = true;
    }
    // Remove until nothing changes: an item goes when none of its names is used outside the
    // items that declare it.
    for (bool changed = true; changed;) {
      changed = false;
      Counts uses = outside_;
      std::unordered_map<std::string, std::vector<size_t>> declaring;
      for (size_t k = 0; k < items_.size(); ++k) {
        if (items_[k].removed || items_[k].is_namespace) continue;
        for (const auto& n : items_[k].names) declaring[n].push_back(k);
      }
      for (size_t k = 0; k < items_.size(); ++k) {
        const Item& it = items_[k];
        if (it.removed || it.is_namespace) continue;
        for (const auto& [name, count] : idents(k)) {
          auto d = declaring.find(name);
          if (d != declaring.end() &&
              std::find(d->second.begin(), d->second.end(), k) != d->second.end())
            continue;  // a use inside an item that declares the name does not keep it
          uses[name] += count;
        }
      }
      for (size_t k = 0; k < items_.size(); ++k) {
        Item& it = items_[k];
        if (it.removed || it.is_namespace || it.names.empty()) continue;
        const bool used = std::any_of(it.names.begin(), it.names.end(),
                                      [&](const std::string& n) { return uses[n] > 0; });
        if (!used) {
          it.removed = true;
          changed = true;
        }
      }
      for (size_t k = 0; k < items_.size(); ++k) {
        Item& ns = items_[k];
        if (!ns.is_namespace || ns.removed) continue;
        const bool empty = std::all_of(ns.children.begin(), ns.children.end(),
                                       [&](size_t c) { return items_[c].removed; });
        if (empty) {
          ns.removed = true;
          changed = true;
        }
      }
    }
    expand_single_macros();
    // Emit the text without the removed items (whole lines where an item fills its lines), with
    // the expanded macro invocations, adjacent blocks of one namespace merged, and without
    // [[maybe_unused]] where a declaration is now used (one of a name: not an overload).
    std::vector<Edit> edits;
    merge_namespaces(top, edits);
    {
      Counts declaring;
      for (const Item& it : items_)
        if (!it.removed && !it.is_namespace)
          for (const auto& n : it.names) ++declaring[n];
      for (const Item& it : items_) {
        if (it.removed || it.is_namespace || it.names.size() != 1 || declaring[it.names[0]] != 1)
          continue;
        size_t j = it.b;
        while (j < it.e && is(t_, j, "template")) j = skip_template_header(t_, j);
        if (is(t_, j, "[") && is(t_, j + 1, "[") && is(t_, j + 2, "maybe_unused") &&
            is(t_, j + 3, "]") && is(t_, j + 4, "]"))
          edits.push_back({t_[j].begin, t_[j + 5].begin, ""});
      }
    }
    for (size_t k = 0; k < items_.size(); ++k) {
      const Item& it = items_[k];
      const auto x = expansion_.find(k);
      if (!it.removed && x == expansion_.end()) continue;
      size_t from = t_[it.b].begin, to = t_[it.e - 1].end;
      if (it.removed) {
        size_t ls = from;
        while (ls > 0 && (s_[ls - 1] == ' ' || s_[ls - 1] == '\t')) --ls;
        size_t le = to;
        while (le < s_.size() && (s_[le] == ' ' || s_[le] == '\t')) ++le;
        if ((ls == 0 || s_[ls - 1] == '\n') && (le == s_.size() || s_[le] == '\n')) {
          from = ls;
          to = le < s_.size() ? le + 1 : le;
        }
      }
      edits.push_back({from, to, it.removed ? "" : x->second});
    }
    std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) {
      return a.from < b.from || (a.from == b.from && a.to > b.to);
    });
    std::string out;
    size_t at = 0;
    for (const auto& ed : edits) {
      if (ed.from < at) {  // inside a removed namespace
        at = std::max(at, ed.to);
        continue;
      }
      out.append(s_, at, ed.from - at);
      out += ed.text;
      at = ed.to;
    }
    out.append(s_, at, std::string::npos);
    return out;
  }

 private:
  struct Edit {
    size_t from, to;
    std::string text;
  };

  // Two kept namespace blocks in a row with the same head (`namespace general {`) become one:
  // the first one's closing brace and the second one's head go; then their inner blocks.
  void merge_namespaces(const std::vector<size_t>& level, std::vector<Edit>& edits) {
    std::vector<size_t> kept;
    for (size_t k : level)
      if (!items_[k].removed) kept.push_back(k);
    for (size_t x = 0; x + 1 < kept.size(); ++x) {
      const Item& a = items_[kept[x]];
      const Item& b = items_[kept[x + 1]];
      if (a.is_namespace && b.is_namespace) merge_pair(kept[x], kept[x + 1], edits);
    }
    for (size_t k : kept)
      if (items_[k].is_namespace) merge_namespaces(items_[k].children, edits);
  }
  void merge_pair(size_t ka, size_t kb, std::vector<Edit>& edits) {
    const Item& a = items_[ka];
    const Item& b = items_[kb];
    auto head = [&](const Item& it) {
      std::string h;
      for (size_t j = it.b; j < it.e && !is(t_, j, "{"); ++j) h += t_[j].text + " ";
      return h;
    };
    if (head(a) != head(b)) return;
    const size_t b_open = is(t_, b.b + 1, "{") ? b.b + 1 : b.b + 2;
    edits.push_back({t_[a.e - 1].begin, t_[b_open].end, ""});
    // the last kept child of a and the first kept child of b
    size_t last = items_.size(), first = items_.size();
    for (size_t c : a.children)
      if (!items_[c].removed) last = c;
    for (size_t c : b.children)
      if (!items_[c].removed) {
        first = c;
        break;
      }
    if (last < items_.size() && first < items_.size() && items_[last].is_namespace &&
        items_[first].is_namespace)
      merge_pair(last, first, edits);
  }

  // `#if... #define KRL_X ... #else #define KRL_X ... #endif` at namespace scope (a kernels/
  // macro chosen by the compiler, e.g. KRL_HD): one unit named by its macros.
  void mark_macro_groups(const std::vector<size_t>& level) {
    for (size_t idx = 0; idx < level.size(); ++idx) {
      const Item& it = items_[level[idx]];
      if (it.removed || it.is_namespace || t_[it.b].kind != Kind::directive) continue;
      const std::string& d = t_[it.b].text;
      if (d != "if" && d != "ifdef" && d != "ifndef") continue;
      std::vector<std::string> names;
      size_t end = idx + 1;
      bool ok = true;
      for (; end < level.size(); ++end) {
        const Item& x = items_[level[end]];
        if (x.is_namespace || t_[x.b].kind != Kind::directive) {
          ok = false;
          break;
        }
        const std::string& xd = t_[x.b].text;
        if (xd == "endif") break;
        if (xd == "else" || xd == "elif") continue;
        if (xd != "define") {
          ok = false;
          break;
        }
        const std::string text = s_.substr(t_[x.b].begin, t_[x.b].end - t_[x.b].begin);
        size_t k = text.find("define") + 6;
        while (k < text.size() && text[k] == ' ') ++k;
        size_t n = k;
        while (n < text.size() && ident_char(text[n])) ++n;
        const std::string name = text.substr(k, n - k);
        if (name.rfind("KRL_", 0) != 0 || (n < text.size() && text[n] == '(')) {
          ok = false;
          break;
        }
        names.push_back(name);
      }
      if (!ok || end >= level.size() || names.empty()) continue;
      for (size_t k = idx; k <= end; ++k) items_[level[k]].names = names;
      idx = end;
    }
  }

  // A function-like macro (no # or ## operator, no __VA_ARGS__) that is left with one use, an
  // invocation at namespace scope, is expanded there; its #define and #undef go.
  void expand_single_macros() {
    std::map<std::string, std::vector<size_t>> defs, calls;
    Counts uses;
    for (size_t k = 0; k < items_.size(); ++k) {
      const Item& it = items_[k];
      if (it.removed || it.is_namespace) continue;
      const bool directive = t_[it.b].kind == Kind::directive;
      if (directive)
        for (const auto& n : it.names) defs[n].push_back(k);
      else if (fn_macros_.count(t_[it.b].text) && is(t_, it.b + 1, "("))
        calls[t_[it.b].text].push_back(k);
      for (const auto& [name, count] : idents(k))
        if (fn_macros_.count(name) && !directive) uses[name] += count;
    }
    for (const auto& [name, call] : calls) {
      if (call.size() != 1 || uses[name] != 1 || defs[name].empty()) continue;
      const Item* def = nullptr;
      for (size_t d : defs[name])
        if (t_[items_[d].b].text == "define") def = &items_[d];
      if (!def) continue;
      const std::string d = s_.substr(t_[def->b].begin, t_[def->b].end - t_[def->b].begin);
      const size_t open = d.find('(');
      const size_t close = d.find(')', open);
      if (open == std::string::npos || close == std::string::npos) continue;
      std::vector<std::string> params;
      {
        std::stringstream ps(d.substr(open + 1, close - open - 1));
        for (std::string p; std::getline(ps, p, ',');) params.push_back(squeeze(p));
      }
      std::string body = d.substr(close + 1);
      if (body.find('#') != std::string::npos || body.find("__VA_ARGS__") != std::string::npos)
        continue;
      // The body's lines without their continuations, dedented.
      std::vector<std::string> lines;
      {
        std::stringstream ls(body);
        for (std::string l; std::getline(ls, l);) {
          while (!l.empty() && (l.back() == '\\' || l.back() == ' ' || l.back() == '\t'))
            l.pop_back();
          if (!l.empty() || !lines.empty()) lines.push_back(l);
        }
      }
      size_t dedent = std::string::npos;
      for (const auto& l : lines)
        if (!l.empty()) dedent = std::min(dedent, l.find_first_not_of(' '));
      std::string text;
      for (const auto& l : lines) text += (l.empty() ? l : l.substr(dedent)) + "\n";
      while (!text.empty() && text.back() == '\n') text.pop_back();
      // The invocation's arguments, then the parameters replaced by them.
      const Item& inv = items_[call[0]];
      std::vector<std::string> args;
      {
        const size_t lp = inv.b + 1, rp = match(t_, lp);
        for (const auto& [ab, ae] : split_at(t_, lp + 1, rp, ","))
          args.push_back(ab < ae ? s_.substr(t_[ab].begin, t_[ae - 1].end - t_[ab].begin) : "");
      }
      if (args.size() != params.size()) continue;
      const auto bt = lex(text);
      std::string expanded;
      size_t at = 0;
      for (const auto& tok : bt) {
        if (tok.kind != Kind::ident) continue;
        const auto p = std::find(params.begin(), params.end(), tok.text);
        if (p == params.end()) continue;
        expanded.append(text, at, tok.begin - at);
        expanded += args[p - params.begin()];
        at = tok.end;
      }
      expanded.append(text, at, std::string::npos);
      expansion_[call[0]] = expanded;
      for (size_t k : defs[name]) items_[k].removed = true;
    }
  }

  // The identifiers item k names, with counts (directives' too), computed once.
  const Counts& idents(size_t k) {
    auto cached = idents_.find(k);
    if (cached != idents_.end()) return cached->second;
    Counts& out = idents_[k];
    const Item& it = items_[k];
    for (size_t j = it.b; j < it.e; ++j) {
      if (t_[j].kind == Kind::ident) {
        ++out[t_[j].text];
      } else if (t_[j].kind == Kind::directive) {
        const std::string d = s_.substr(t_[j].begin, t_[j].end - t_[j].begin);
        for (const auto& x : lex(d.substr(1)))
          if (x.kind == Kind::ident) ++out[x.text];
      }
    }
    return out;
  }

  // Items of t[b, e) at one namespace level; returns their indices.
  std::vector<size_t> parse(size_t b, size_t e) {
    std::vector<size_t> level;
    size_t i = b;
    while (i < e) {
      Item it;
      it.b = i;
      if (t_[i].kind == Kind::directive) {
        it.e = i + 1;
        const std::string d = s_.substr(t_[i].begin, t_[i].end - t_[i].begin);
        if (t_[i].text == "define" || t_[i].text == "undef") {
          size_t k = d.find(t_[i].text) + t_[i].text.size();
          while (k < d.size() && d[k] == ' ') ++k;
          size_t n = k;
          while (n < d.size() && ident_char(d[n])) ++n;
          const std::string name = d.substr(k, n - k);
          if (fn_macros_.count(name)) it.names.push_back(name);
        }
        i = it.e;
      } else if (is(t_, i, "namespace") && (is(t_, i + 1, "{") || is(t_, i + 2, "{"))) {
        const size_t open = is(t_, i + 1, "{") ? i + 1 : i + 2;
        const size_t close = match(t_, open);
        it.e = close + 1;
        it.is_namespace = true;
        items_.push_back(it);
        const size_t self = items_.size() - 1;
        std::vector<size_t> kids = parse(open + 1, close);
        items_[self].children = kids;
        level.push_back(self);
        i = close + 1;
        continue;
      } else if (t_[i].kind == Kind::ident && fn_macros_.count(t_[i].text) && is(t_, i + 1, "(")) {
        const size_t close = match(t_, i + 1);
        it.e = close + 1;
        if (is(t_, it.e, ";")) ++it.e;
        if (i + 2 < close && t_[i + 2].kind == Kind::ident) it.names.push_back(t_[i + 2].text);
        i = it.e;
      } else {
        size_t j = i;
        while (j < e) {
          if (is(t_, j, ";")) {
            ++j;
            break;
          }
          if (is(t_, j, "{")) {
            j = match(t_, j) + 1;
            if (is(t_, j, ";")) ++j;
            break;
          }
          if (is(t_, j, "(") || is(t_, j, "[")) j = match(t_, j);
          ++j;
        }
        it.e = std::min(j, e);
        it.names = declared_names(it.b, it.e);
        i = it.e;
      }
      items_.push_back(it);
      level.push_back(items_.size() - 1);
    }
    return level;
  }

  // What a namespace-scope declaration t[b, e) declares; empty for what is always kept.
  std::vector<std::string> declared_names(size_t b, size_t e) const {
    size_t i = b;
    while (i < e && is(t_, i, "template")) i = skip_template_header(t_, i);
    while (i < e && is(t_, i, "[") && is(t_, i + 1, "[")) i = match(t_, i) + 1;
    if (i >= e) return {};
    if (is(t_, i, "static_assert") || is(t_, i, "extern") || is(t_, i, ";")) return {};
    if (is(t_, i, "struct") || is(t_, i, "class") || is(t_, i, "union") || is(t_, i, "enum")) {
      size_t j = i + 1;
      if (is(t_, j, "class") || is(t_, j, "struct")) ++j;
      while (j < e && (kAttributeLike.count(t_[j].text) || is(t_, j, "["))) {
        j = is(t_, j, "[") ? match(t_, j) + 1 : match(t_, j + 1) + 1;
      }
      if (j < e && t_[j].kind == Kind::ident) return {t_[j].text};
      return {};
    }
    if (is(t_, i, "using")) {
      if (is(t_, i + 1, "namespace")) return {};
      if (t_[i + 1].kind == Kind::ident && is(t_, i + 2, "=")) return {t_[i + 1].text};
      size_t j = e;
      while (j > i && t_[j - 1].kind != Kind::ident) --j;
      return j > i + 1 ? std::vector<std::string>{t_[j - 1].text} : std::vector<std::string>{};
    }
    if (is(t_, i, "namespace") && t_[i + 1].kind == Kind::ident && is(t_, i + 2, "="))
      return {t_[i + 1].text};
    if (is(t_, i, "typedef")) return {};
    // A function: the first name followed by '(' before the body or an initializer.
    bool constant = false;
    for (size_t j = i; j < e; ++j) {
      if (is(t_, j, "{") || is(t_, j, "=") || is(t_, j, ";")) break;
      if (is(t_, j, "constexpr") || is(t_, j, "const") || is(t_, j, "__constant__"))
        constant = true;
      if (is(t_, j, "[")) {
        j = match(t_, j);
        continue;
      }
      if (is(t_, j, "(")) {
        if (j > i && t_[j - 1].kind == Kind::ident && !kAttributeLike.count(t_[j - 1].text))
          return {t_[j - 1].text};
        j = match(t_, j);
      }
    }
    // A variable: the name before its initializer; only constants go (no constructor to run).
    if (!constant) return {};
    for (size_t j = i; j < e; ++j)
      if ((is(t_, j, "=") || is(t_, j, "[") || is(t_, j, "{") || is(t_, j, ";")) && j > i &&
          t_[j - 1].kind == Kind::ident)
        return {t_[j - 1].text};
    return {};
  }

  // Include guards of kernels/ files: #ifndef KERNELRL_..._H / _CUH, its #define, its #endif.
  void mark_guards(const std::vector<size_t>& level) {
    std::vector<std::pair<size_t, bool>> open;  // directive item, is a guard
    for (size_t idx = 0; idx < level.size(); ++idx) {
      Item& it = items_[level[idx]];
      if (it.is_namespace || t_[it.b].kind != Kind::directive) continue;
      const std::string& d = t_[it.b].text;
      if (d == "if" || d == "ifdef" || d == "ifndef") {
        bool guard = false;
        if (d == "ifndef" && idx + 1 < level.size()) {
          const std::string text = s_.substr(t_[it.b].begin, t_[it.b].end - t_[it.b].begin);
          const size_t k = text.find("KERNELRL_");
          const Item& next = items_[level[idx + 1]];
          if (k != std::string::npos && !next.is_namespace && t_[next.b].kind == Kind::directive &&
              t_[next.b].text == "define") {
            const std::string macro = squeeze(text.substr(k));
            const std::string def = s_.substr(t_[next.b].begin, t_[next.b].end - t_[next.b].begin);
            const bool named =
                macro.size() > 2 &&
                (macro.compare(macro.size() - 2, 2, "_H") == 0 ||
                 (macro.size() > 4 && macro.compare(macro.size() - 4, 4, "_CUH") == 0));
            if (named && squeeze(def.substr(def.find("define") + 6)) == macro) {
              guard = true;
              it.removed = true;
              items_[level[idx + 1]].removed = true;
            }
          }
        }
        open.push_back({level[idx], guard});
      } else if (d == "endif" && !open.empty()) {
        if (open.back().second) it.removed = true;
        open.pop_back();
      }
    }
    for (size_t k : level)
      if (items_[k].is_namespace) mark_guards(items_[k].children);
  }

  const std::string& s_;
  const std::vector<Token>& t_;
  std::vector<Item> items_;
  Counts outside_;  // uses in the instance
  std::set<std::string> fn_macros_;
  std::map<size_t, std::string> expansion_;  // item -> its macro expansion
  std::map<size_t, Counts> idents_;

 public:
  bool expanded() const { return !expansion_.empty(); }
};

// Trailing blanks off every line, at most one blank line in a row, none at the start or before
// a closing brace's line, one newline at the end.
std::string squeeze_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t p = 0;
  while (p < s.size()) {
    size_t nl = s.find('\n', p);
    if (nl == std::string::npos) nl = s.size();
    std::string l = s.substr(p, nl - p);
    while (!l.empty() && (l.back() == ' ' || l.back() == '\t')) l.pop_back();
    lines.push_back(l);
    p = nl + 1;
  }
  std::string out;
  bool blank = false;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (lines[k].empty()) {
      blank = !out.empty();
      continue;
    }
    const size_t first = lines[k].find_first_not_of(' ');
    const bool closing = lines[k][first] == '}';
    const bool after_open = !out.empty() && out.size() >= 2 && out[out.size() - 2] == '{';
    const size_t prev = out.size() >= 2 ? out.rfind('\n', out.size() - 2) : std::string::npos;
    const bool includes = lines[k].rfind("#include", 0) == 0 &&
                          out.compare(prev == std::string::npos ? 0 : prev + 1, 8, "#include") == 0;
    if (blank && !closing && !after_open && !includes) out += '\n';
    blank = false;
    out += lines[k] + "\n";
  }
  return out;
}

}  // namespace

// Function-local variables of a builtin type (`[const|constexpr] int x = ..., y = ...;`) that
// nothing after them in their block names any more (their uses were in a branch that went; the
// compiler would warn of them): a declarator goes when its initializer has no side effect (a
// constant's never has). Declarations with a '<' (a template argument list may hold a comma)
// are left alone.
std::string drop_unused_locals(std::string text) {
  static const std::set<std::string> kTypes = {"int",     "unsigned", "bool",     "float",
                                               "double",  "size_t",   "int64_t",  "uint32_t",
                                               "int32_t", "uint64_t", "uint16_t", "long"};
  for (bool changed = true; changed;) {
    changed = false;
    const auto t = lex(text);
    // the brace each token sits in (t.size(): none)
    std::vector<size_t> enclosing(t.size(), t.size());
    {
      std::vector<size_t> open;
      for (size_t k = 0; k < t.size(); ++k) {
        if (is(t, k, "}") && !open.empty()) open.pop_back();
        enclosing[k] = open.empty() ? t.size() : open.back();
        if (is(t, k, "{")) open.push_back(k);
      }
    }
    std::vector<std::pair<std::pair<size_t, size_t>, std::string>> edits;  // byte range, text
    for (size_t j = 1; j < t.size(); ++j) {
      if (!(is(t, j - 1, ";") || is(t, j - 1, "{") || is(t, j - 1, "}") ||
            t[j - 1].kind == Kind::directive))
        continue;
      size_t ty = j;
      bool constant = false;
      while (is(t, ty, "const") || is(t, ty, "constexpr")) constant |= is(t, ty++, "constexpr");
      if (ty >= t.size() || t[ty].kind != Kind::ident || !kTypes.count(t[ty].text)) continue;
      // in a block of statements: the enclosing brace follows a function's or a statement's
      // head, `else`, `do` or another statement (not a namespace's or a class's name)
      const size_t open = enclosing[j];
      if (open == t.size() || open == 0 ||
          !(is(t, open - 1, ")") || is(t, open - 1, "else") || is(t, open - 1, "do") ||
            is(t, open - 1, ";") || is(t, open - 1, "{") || is(t, open - 1, "}")))
        continue;
      size_t semi = j;
      bool angle = false;
      while (semi < t.size() && !is(t, semi, ";")) {
        if (is(t, semi, "(") || is(t, semi, "[") || is(t, semi, "{")) semi = match(t, semi);
        if (is(t, semi, "<")) angle = true;
        ++semi;
      }
      if (angle || semi >= t.size()) continue;
      // declarators: `NAME = init` between top-level commas
      size_t start = ty + 1;
      while (start < semi && !(t[start].kind == Kind::ident && is(t, start + 1, "="))) ++start;
      if (start >= semi) continue;
      const size_t block_end = match(t, open);
      std::vector<std::string> kept;
      bool dropped = false, well_formed = true;
      for (const auto& [db, de] : split_at(t, start, semi, ",")) {
        if (db + 1 >= de || t[db].kind != Kind::ident || !is(t, db + 1, "=")) {
          well_formed = false;
          break;
        }
        bool used = !constant && !side_effect_free(t, db + 2, de);
        for (size_t k = de; k < block_end && !used; ++k)  // later declarators too
          used = t[k].kind == Kind::ident && t[k].text == t[db].text;
        if (used)
          kept.push_back(text.substr(t[db].begin, t[de - 1].end - t[db].begin));
        else
          dropped = true;
      }
      if (!well_formed || !dropped) continue;
      size_t from = t[j].begin, to = t[semi].end;
      std::string repl;
      if (kept.empty()) {
        while (from > 0 && text[from - 1] == ' ') --from;
        if (to < text.size() && text[to] == '\n') ++to;
      } else {
        repl = text.substr(t[j].begin, t[start].begin - t[j].begin);
        for (size_t k = 0; k < kept.size(); ++k) repl += (k ? ", " : "") + kept[k];
        repl += ";";
      }
      edits.push_back({{from, to}, repl});
      j = semi;
    }
    for (auto e = edits.rbegin(); e != edits.rend(); ++e)
      text.replace(e->first.first, e->first.second - e->first.first, e->second);
    changed = !edits.empty();
  }
  return text;
}

// Without the static_asserts the instance's Config passes: those in its struct over its members,
// the others over `Cfg::`/`Op::` names (a check that holds is no code of the variant's; one that
// does not hold, or that cannot be told, stays).
std::string drop_passing_asserts(std::string text, const std::string& instance, const Env& env) {
  const auto t = lex(text);
  Env members;
  std::pair<size_t, size_t> config{t.size(), t.size()};
  type_values(t, instance, "Cfg", &members, &config);
  std::vector<std::pair<size_t, size_t>> cuts;  // byte ranges
  for (size_t j = 1; j + 1 < t.size(); ++j) {
    if (!is(t, j, "static_assert") || !is(t, j + 1, "(")) continue;
    if (!(is(t, j - 1, ";") || is(t, j - 1, "{") || is(t, j - 1, "}") ||
          t[j - 1].kind == Kind::directive))
      continue;
    const size_t close = match(t, j + 1);
    if (!is(t, close + 1, ";")) continue;
    const auto parts = split_at(t, j + 2, close, ",");
    const bool in_config = j > config.first && j < config.second;
    const auto v = Evaluator(t, parts[0].first, parts[0].second, in_config ? members : env,
                             /*qualified=*/!in_config)
                       .run();
    if (!v || !*v) continue;
    size_t from = t[j].begin, to = t[close + 1].end;
    while (from > 0 && text[from - 1] == ' ') --from;
    if (to < text.size() && text[to] == '\n') ++to;
    cuts.push_back({from, to});
  }
  for (auto c = cuts.rbegin(); c != cuts.rend(); ++c) text.erase(c->first, c->second - c->first);
  return text;
}

// The struct the instance's `alias` (Cfg, Op) names without its `static constexpr` members that
// nothing names any more (a knob whose branches are resolved), until none is left to remove.
std::string drop_unused_members(std::string text, const std::string& instance, const char* alias) {
  Counts instance_uses;
  for (const auto& x : lex(strip_comments(instance)))
    if (x.kind == Kind::ident) ++instance_uses[x.text];
  const auto it = lex(strip_comments(instance));
  for (bool changed = true; changed;) {
    changed = false;
    const auto t = lex(text);
    // the struct `using Cfg = ns::Name<...>` names (unique in the body)
    size_t u = 0;
    while (u + 3 < it.size() && !(is(it, u, "using") && is(it, u + 1, alias) && is(it, u + 2, "=")))
      ++u;
    if (u + 3 >= it.size()) return text;
    size_t lt = u + 3;
    while (lt < it.size() && !is(it, lt, "<") && !is(it, lt, ";")) ++lt;
    if (!is(it, lt, "<") || it[lt - 1].kind != Kind::ident) return text;
    const std::string name = it[lt - 1].text;
    size_t open = t.size();
    int count = 0;
    for (size_t j = 0; j + 2 < t.size(); ++j)
      if ((is(t, j, "struct") || is(t, j, "class")) && is(t, j + 1, name.c_str()) &&
          is(t, j + 2, "{")) {
        open = j + 2;
        ++count;
      }
    if (count != 1) return text;
    Counts uses = instance_uses;
    for (const auto& x : t)
      if (x.kind == Kind::ident) ++uses[x.text];
    const size_t close = match(t, open);
    std::vector<std::pair<std::pair<size_t, size_t>, std::string>> edits;  // byte range, text
    for (size_t j = open + 1; j < close; ++j) {
      if (is(t, j, "{") || is(t, j, "(") || is(t, j, "[")) {
        j = match(t, j);
        continue;
      }
      if (!(is(t, j, "static") && is(t, j + 1, "constexpr"))) continue;
      size_t semi = j;
      while (semi < close && !is(t, semi, ";")) {
        if (is(t, semi, "(") || is(t, semi, "[") || is(t, semi, "{")) semi = match(t, semi);
        ++semi;
      }
      // declarators `NAME = init` at top-level commas (a '<' may hold a comma: leave those)
      bool angle = false;
      for (size_t k = j + 2; k < semi; ++k) {
        if (is(t, k, "(") || is(t, k, "[") || is(t, k, "{")) {
          k = match(t, k);
          continue;
        }
        angle |= is(t, k, "<");
      }
      size_t start = j + 2;
      while (start < semi && !(t[start].kind == Kind::ident && is(t, start + 1, "="))) ++start;
      if (angle || start >= semi) {
        j = semi;
        continue;
      }
      std::vector<std::string> kept;
      bool dropped = false;
      for (const auto& [db, de] : split_at(t, start, semi, ",")) {
        if (db + 1 >= de || t[db].kind != Kind::ident || !is(t, db + 1, "=")) {
          dropped = false;
          break;
        }
        if (uses[t[db].text] == 1)
          dropped = true;
        else
          kept.push_back(text.substr(t[db].begin, t[de - 1].end - t[db].begin));
      }
      if (dropped) {
        size_t from = t[j].begin, to = t[semi].end;
        std::string repl;
        if (kept.empty()) {
          while (from > 0 && text[from - 1] == ' ') --from;
          if (to < text.size() && text[to] == '\n') ++to;
        } else {
          repl = text.substr(t[j].begin, t[start].begin - t[j].begin);
          for (size_t k = 0; k < kept.size(); ++k) repl += (k ? ", " : "") + kept[k];
          repl += ";";
        }
        edits.push_back({{from, to}, repl});
      }
      j = semi;
    }
    for (auto e = edits.rbegin(); e != edits.rend(); ++e)
      text.replace(e->first.first, e->first.second - e->first.first, e->second);
    changed = !edits.empty();
  }
  return text;
}

namespace {

// The passes after the first branch resolution: unused locals, unused declarations, macro
// expansion (and, after one, the branches the op's struct decides: again), unused members.
// Returns the text and whether it read the instance's numbers (a second resolution did).
std::pair<std::string, bool> finish(std::string text, const std::string& instance) {
  bool numbers = false;
  for (bool again = true; again;) {
    text = drop_unused_locals(std::move(text));
    const auto tokens = lex(text);
    Pruner pruner(text, tokens, instance);
    text = pruner.run();
    again = pruner.expanded();
    if (again) {
      const auto t = lex(text);
      Env env = type_values(t, instance, "Cfg");
      const Env op = type_values(t, instance, "Op");
      env.insert(op.begin(), op.end());
      if (!env.empty()) text = Specializer(text, t, env).run();
      numbers = true;
    }
  }
  text = drop_unused_members(text, instance, "Cfg");
  return {squeeze_lines(drop_unused_members(text, instance, "Op")), numbers};
}

// The instance's tokens without its numbers (and comments): what finish() reads of it when it
// does not resolve branches again.
std::string skeleton(const std::string& instance) {
  std::string out;
  for (const auto& x : lex(strip_comments(instance)))
    out += (x.kind == Kind::number ? std::string("#") : x.text) + " ";
  return out;
}

}  // namespace

std::string variant_body(const std::string& body, const std::string& instance) {
  // A family's variants that decide their branches alike share all that follows the first
  // resolution: it is done once per (resolved text, instance without numbers) and remembered
  // (a family has a few dozen such pairs for hundreds of variants).
  struct Stripped {
    std::string text;
    std::vector<Token> tokens;
  };
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const Stripped>> stripped;  // by body
  static std::unordered_map<std::string, std::string> finished;            // by resolved + skeleton
  std::shared_ptr<const Stripped> in;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = stripped.find(body);
    if (it != stripped.end()) in = it->second;
  }
  if (!in) {
    auto made = std::make_shared<Stripped>();
    made->text = strip_comments(body);
    made->tokens = lex(made->text);
    in = made;
    std::lock_guard<std::mutex> lock(mutex);
    stripped.emplace(body, in);
  }
  Env env = type_values(in->tokens, instance, "Cfg");
  const Env op = type_values(in->tokens, instance, "Op");
  env.insert(op.begin(), op.end());
  std::string resolved =
      env.empty()
          ? in->text
          : drop_passing_asserts(Specializer(in->text, in->tokens, env).run(), instance, env);
  const std::string key = resolved + '\0' + skeleton(instance);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = finished.find(key);
    if (it != finished.end()) return it->second;
  }
  auto [text, numbers] = finish(std::move(resolved), instance);
  if (!numbers) {
    std::lock_guard<std::mutex> lock(mutex);
    finished.emplace(key, text);
  }
  return text;
}

std::string variant_source(const std::string& body, const std::string& instance) {
  return variant_body(body, instance) + instance;
}

}  // namespace kernelrl::families
