// One lexer for C++17/CUDA source text (translation phases 1-3, without macro expansion): every
// byte of the input belongs to exactly one token, so concatenated token texts give the input back.
// Line splices (a backslash, optional blanks as GCC allows, a newline) are removed as phase 2
// says, anywhere (inside identifiers, comments, literals, punctuators), except inside the body of
// a raw string, where the standard reverts them. On top of the tokens: preprocessor lines,
// `#if 0` groups, and the texts the screen, the compile cache and novelty read.
// Not a preprocessor: macros are not expanded, #include is not followed, #if conditions other
// than a literal 0/1/false/true are not evaluated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kernelrl::cpp {

enum class TokenKind : uint8_t {
  whitespace,      // blanks (space, \t, \v, \f, \r) and line splices, never a newline
  newline,         // one '\n' that is not part of a splice, comment body or raw string
  line_comment,    // from // to the end of its logical line (newline excluded)
  block_comment,   // /* ... */
  identifier,      // [A-Za-z_$], bytes >= 0x80 and \u/\U names, then digits too
  number,          // a pp-number: 0x1p-3, 1'000'000, 1.5e+3f, 12_km
  string_literal,  // "..", u8"..", u"..", U"..", L"..", R"d(..)d" with any prefix, ud-suffix
  char_literal,    // '..', u8'..', u'..', U'..', L'..', ud-suffix
  header_name,     // <...> or "..." right after #include / #include_next / #import
  punctuator,      // longest match over C++17's punctuators, digraphs included
  directive,       // with LexOptions::group_directives only: a whole preprocessor line
  other,           // a byte nothing else takes: a stray '\', '@', '`', a control byte
};

const char* kind_name(TokenKind kind);

struct Token {
  TokenKind kind;
  size_t begin = 0, end = 0;  // byte range [begin, end) in the source
  int line = 1;               // 1-based physical line of `begin`
  bool in_directive = false;  // on a preprocessor line, from its '#' to the line's end
  // Literals, block comments and header names: false when the closing delimiter is missing
  // (a '"' or '\'' literal then ends before its line's newline; a block comment or raw string
  // at the end of the input; a raw string whose delimiter is malformed, before the newline).
  bool terminated = true;
  bool has_splice = false;  // the token's text holds a line splice

  std::string_view text(std::string_view src) const { return src.substr(begin, end - begin); }
};

struct LexOptions {
  // Merge each preprocessor line (its '#' to the end of its logical line, newline excluded; a
  // block comment inside it may carry it over physical lines) into one `directive` token.
  bool group_directives = false;
};

std::vector<Token> lex(std::string_view src, LexOptions options = {});

// Whitespace, newlines and comments: what phase 3 turns into spaces.
bool is_blank(TokenKind kind);
inline bool is_literal(TokenKind k) {
  return k == TokenKind::string_literal || k == TokenKind::char_literal;
}

// Length of the line splice starting at src[i] (backslash, blanks, newline), 0 when none.
size_t splice_length(std::string_view src, size_t i);

// The token's text with its line splices removed (a raw string's body keeps them, as the
// standard says), i.e. what phase 3 sees.
std::string spelling(std::string_view src, const Token& token);
// The spelling with digraphs replaced by what they stand for (<: [, :> ], <% {, %> }, %: #,
// %:%: ##): two spellings of one token compare equal.
std::string canonical(std::string_view src, const Token& token);

// ---- preprocessor lines ----------------------------------------------------------------------

struct Directive {
  std::string name;       // canonical spelling of the identifier after '#'; "" for a null one
  size_t hash = 0;        // index of the '#' (or %:) token
  size_t end = 0;         // index past the line's last token (its newline, or the end)
  size_t name_index = 0;  // index of the name token (== end when there is none)
  size_t begin_byte = 0, end_byte = 0;
};

// The preprocessor lines of a flat token stream (lex() without group_directives), in order.
std::vector<Directive> directives(std::string_view src, const std::vector<Token>& tokens);

// Byte ranges [begin, end) that no compiler compiles: the groups of `#if 0` / `#if false` up to
// their `#elif`, `#else` or `#endif`, and the `#elif`/`#else` groups after `#if 1`/`#if true`
// (nested conditionals inside them included). A range runs from the start of the line after the
// directive to the start of the directive that ends it. A conditional without its #endif gives
// no range (the compiler rejects it; nothing is hidden by a guess).
std::vector<std::pair<size_t, size_t>> inactive_ranges(std::string_view src,
                                                       const std::vector<Token>& tokens);

// The target of an #include-like directive (`include`, `include_next`, `import`): the header
// name without its delimiters and whether it was <...>; "" when the line names none.
std::string include_target(std::string_view src, const std::vector<Token>& tokens,
                           const Directive& d, bool* angled = nullptr);

// ---- texts for the users ---------------------------------------------------------------------

// Same length as `src`, same line of every token: comments become blanks (their newlines kept),
// literal contents become blanks (prefix, quotes, raw delimiters and ud-suffix kept), splices
// are moved behind the token they were in (its spelling first, then a blank per removed byte,
// the splice's newline last) and digraphs become their canonical punctuator. Unterminated
// literals and comments are left as written: the compiler rejects them, and a text the lexer
// cannot close must not blank what follows. With `drop_inactive`, the bytes of
// inactive_ranges() become blanks too (newlines kept).
std::string blank_comments_and_literals(std::string_view src, bool drop_inactive = false);

// The canonical spellings of the tokens phase 3 leaves (no blanks, no comments), in order.
std::vector<std::string> canonical_tokens(std::string_view src);

// Tokens for similarity (MinHash shingles, novelty): canonical tokens, a literal as two tokens
// (its prefix and opening delimiter, its closing delimiter and suffix: contents do not count),
// comments not at all.
std::vector<std::string> similarity_tokens(std::string_view src);

}  // namespace kernelrl::cpp
