// common/cpp_lexer: token kinds and boundaries on hand-written C++17/CUDA text (expected values
// derived by hand from [lex] of the standard; GCC 12's behaviour where GCC extends it: '$' in
// identifiers, blanks between a splice's backslash and newline), line splices, comments in every
// position, #if 0 groups, unterminated constructs, and the byte-exact round trip on every case
// and on random texts built from the characters that matter.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/cpp_lexer.h"

namespace kernelrl::cpp {
namespace {

using K = TokenKind;

struct Tok {
  K kind;
  std::string text;  // the token's physical text
  bool operator==(const Tok& o) const { return kind == o.kind && text == o.text; }
};

std::ostream& operator<<(std::ostream& os, const Tok& t) {
  return os << kind_name(t.kind) << "[" << t.text << "]";
}

// The tokens that are not blanks (whitespace, newline; comments are kept: they are tested too).
std::vector<Tok> toks(const std::string& s) {
  std::vector<Tok> out;
  for (const auto& t : lex(s))
    if (t.kind != K::whitespace && t.kind != K::newline)
      out.push_back({t.kind, std::string(t.text(s))});
  return out;
}

std::vector<std::string> spellings(const std::string& s) {
  std::vector<std::string> out;
  for (const auto& t : lex(s))
    if (!is_blank(t.kind)) out.push_back(spelling(s, t));
  return out;
}

// Tokens cover the input exactly once, in order, and concatenate to it; lines are right.
void expect_round_trip(const std::string& s, LexOptions o = {}) {
  const auto ts = lex(s, o);
  std::string joined;
  size_t pos = 0;
  int line = 1;
  for (const auto& t : ts) {
    ASSERT_EQ(t.begin, pos) << "gap or overlap in: " << s;
    ASSERT_GT(t.end, t.begin) << "empty token in: " << s;
    ASSERT_LE(t.end, s.size());
    EXPECT_EQ(t.line, line);
    joined += t.text(s);
    for (size_t k = t.begin; k < t.end; ++k) line += s[k] == '\n';
    pos = t.end;
  }
  EXPECT_EQ(joined, s);
  const std::string blanked = blank_comments_and_literals(s, /*drop_inactive=*/true);
  ASSERT_EQ(blanked.size(), s.size());
  EXPECT_EQ(std::count(blanked.begin(), blanked.end(), '\n'), std::count(s.begin(), s.end(), '\n'));
}

TEST(CppLexer, KindsOfOrdinaryCode) {
  const std::string s = "__global__ void k(float* x, int n) { x[threadIdx.x] += 2.5f; }";
  EXPECT_EQ(
      toks(s),
      (std::vector<Tok>{
          {K::identifier, "__global__"}, {K::identifier, "void"},  {K::identifier, "k"},
          {K::punctuator, "("},          {K::identifier, "float"}, {K::punctuator, "*"},
          {K::identifier, "x"},          {K::punctuator, ","},     {K::identifier, "int"},
          {K::identifier, "n"},          {K::punctuator, ")"},     {K::punctuator, "{"},
          {K::identifier, "x"},          {K::punctuator, "["},     {K::identifier, "threadIdx"},
          {K::punctuator, "."},          {K::identifier, "x"},     {K::punctuator, "]"},
          {K::punctuator, "+="},         {K::number, "2.5f"},      {K::punctuator, ";"},
          {K::punctuator, "}"}}));
  expect_round_trip(s);
  // '$' and UTF-8 bytes are identifier characters (GCC); \u names too.
  EXPECT_EQ(toks("a$b \xc3\xa9t\xc3\xa9 x\\u00e9y"),
            (std::vector<Tok>{{K::identifier, "a$b"},
                              {K::identifier, "\xc3\xa9t\xc3\xa9"},
                              {K::identifier, "x\\u00e9y"}}));
}

TEST(CppLexer, NumbersArePpNumbers) {
  // Digit separators, hex, binary, hex floats with p-exponents, suffixes, a leading '.', and
  // the pp-number oddities the standard keeps as one token (0xe+1, 1..2, 1'a).
  EXPECT_EQ(
      spellings("1'000'000 0x1'FF 0b1010'0101 0x1p-3f 1.5e+3L .5 1e-9 12_km 42ull 0xe+1 1..2 1'a"),
      (std::vector<std::string>{"1'000'000", "0x1'FF", "0b1010'0101", "0x1p-3f", "1.5e+3L", ".5",
                                "1e-9", "12_km", "42ull", "0xe+1", "1..2", "1'a"}));
  for (const auto& t : lex("1'000'000 0x1p-3f 1.5e+3L .5")) {
    if (!is_blank(t.kind)) {
      EXPECT_EQ(t.kind, K::number);
    }
  }
  // A separator needs a digit or letter after it; a quote after `=` opens a char literal.
  EXPECT_EQ(toks("x = 1'0; y = 'a';"), (std::vector<Tok>{{K::identifier, "x"},
                                                         {K::punctuator, "="},
                                                         {K::number, "1'0"},
                                                         {K::punctuator, ";"},
                                                         {K::identifier, "y"},
                                                         {K::punctuator, "="},
                                                         {K::char_literal, "'a'"},
                                                         {K::punctuator, ";"}}));
  EXPECT_EQ(spellings("1e+ 2E-x 3p+4 a+1"),
            (std::vector<std::string>{"1e+", "2E-x", "3p+4", "a", "+", "1"}));
  // issue 38: the screen's old stripper took the ' of 1'0 for a char literal.
  EXPECT_EQ(spellings("static int a = 1'0; pthread_create(0); static int b = 2'0;"),
            (std::vector<std::string>{"static", "int", "a", "=", "1'0", ";", "pthread_create", "(",
                                      "0", ")", ";", "static", "int", "b", "=", "2'0", ";"}));
}

TEST(CppLexer, StringAndCharLiteralsWithPrefixes) {
  EXPECT_EQ(toks(R"(u8"a" u"b" U"c" L"d" "e\"f" u8'g' u'h' U'i' L'j' '\'' "x"_s 'y'_c)"),
            (std::vector<Tok>{{K::string_literal, R"(u8"a")"},
                              {K::string_literal, R"(u"b")"},
                              {K::string_literal, R"(U"c")"},
                              {K::string_literal, R"(L"d")"},
                              {K::string_literal, R"("e\"f")"},
                              {K::char_literal, "u8'g'"},
                              {K::char_literal, "u'h'"},
                              {K::char_literal, "U'i'"},
                              {K::char_literal, "L'j'"},
                              {K::char_literal, R"('\'')"},
                              {K::string_literal, R"("x"_s)"},
                              {K::char_literal, "'y'_c"}}));
  // Not prefixes: any other identifier before a quote is an identifier.
  EXPECT_EQ(toks(R"(u16"a" x'b' R'c')"), (std::vector<Tok>{{K::identifier, "u16"},
                                                           {K::string_literal, R"("a")"},
                                                           {K::identifier, "x"},
                                                           {K::char_literal, "'b'"},
                                                           {K::identifier, "R"},
                                                           {K::char_literal, "'c'"}}));
  // A backslash escapes a backslash; the quote after it closes.
  EXPECT_EQ(toks(R"("a\\" b)"),
            (std::vector<Tok>{{K::string_literal, R"("a\\")"}, {K::identifier, "b"}}));
}

TEST(CppLexer, RawStrings) {
  // `)"` inside, custom delimiters, every prefix, newlines inside, an ud-suffix.
  EXPECT_EQ(toks("R\"(\")\" x"),
            (std::vector<Tok>{{K::string_literal, "R\"(\")\""}, {K::identifier, "x"}}));
  EXPECT_EQ(
      toks("R\"xy(a)\" )x\" b)xy\" c"),
      (std::vector<Tok>{{K::string_literal, "R\"xy(a)\" )x\" b)xy\""}, {K::identifier, "c"}}));
  EXPECT_EQ(toks("u8R\"(a)\" uR\"(b)\" UR\"(c)\" LR\"(d)\" R\"(e)\"_s"),
            (std::vector<Tok>{{K::string_literal, "u8R\"(a)\""},
                              {K::string_literal, "uR\"(b)\""},
                              {K::string_literal, "UR\"(c)\""},
                              {K::string_literal, "LR\"(d)\""},
                              {K::string_literal, "R\"(e)\"_s"}}));
  const std::string multi = "R\"--(line1\n// not a comment\n#define NOT\n)--\" y";
  EXPECT_EQ(
      toks(multi),
      (std::vector<Tok>{{K::string_literal, "R\"--(line1\n// not a comment\n#define NOT\n)--\""},
                        {K::identifier, "y"}}));
  EXPECT_EQ(lex(multi).back().line, 4);
  // Splices are reverted inside a raw string: its spelling keeps them.
  const std::string spliced = "R\"(a\\\nb)\"";
  EXPECT_EQ(spellings(spliced), (std::vector<std::string>{spliced}));
  // Not raw: `xR"`, an identifier then a string.
  EXPECT_EQ(toks("xR\"(a)\""),
            (std::vector<Tok>{{K::identifier, "xR"}, {K::string_literal, "\"(a)\""}}));
  for (const auto& s : {multi, spliced}) expect_round_trip(s);
}

TEST(CppLexer, PunctuatorsAreTheLongestMatch) {
  EXPECT_EQ(
      spellings(
          "a->*b ... <<= >>= :: .* -> ++ -- << >> <= >= == != && || += -= *= /= %= &= |= ^= ## #"),
      (std::vector<std::string>{"a",  "->*", "b",  "...", "<<=", ">>=", "::", ".*", "->", "++",
                                "--", "<<",  ">>", "<=",  ">=",  "==",  "!=", "&&", "||", "+=",
                                "-=", "*=",  "/=", "%=",  "&=",  "|=",  "^=", "##", "#"}));
  // C++17 has no <=>; `..` is two dots; `>>=`/`>>` as one token (templates are the parser's).
  EXPECT_EQ(spellings("a<=>b x..y v<w<int>>z"),
            (std::vector<std::string>{"a", "<=", ">", "b", "x", ".", ".", "y", "v", "<", "w", "<",
                                      "int", ">>", "z"}));
  // Digraphs, and their canonical forms; `<::` not followed by : or > is < then ::.
  const std::string d = "<: :> <% %> %: %:%: a<::b> c<:::>";
  std::vector<std::string> canon;
  for (const auto& t : lex(d))
    if (!is_blank(t.kind)) canon.push_back(canonical(d, t));
  EXPECT_EQ(canon, (std::vector<std::string>{"[", "]", "{", "}", "#", "##", "a", "<", "::", "b",
                                             ">", "c", "[", "::", ">"}));
  EXPECT_EQ(canonical_tokens(d), canon);
  // Stray bytes are `other`, one each.
  EXPECT_EQ(
      toks("@`\\x"),
      (std::vector<Tok>{{K::other, "@"}, {K::other, "`"}, {K::other, "\\"}, {K::identifier, "x"}}));
}

TEST(CppLexer, CommentsInEveryPosition) {
  // Between tokens, inside a would-be token, /* // */, // /*, in a preprocessor line.
  EXPECT_EQ(toks("a/**/b /* // */ c // /* d\ne"), (std::vector<Tok>{{K::identifier, "a"},
                                                                    {K::block_comment, "/**/"},
                                                                    {K::identifier, "b"},
                                                                    {K::block_comment, "/* // */"},
                                                                    {K::identifier, "c"},
                                                                    {K::line_comment, "// /* d"},
                                                                    {K::identifier, "e"}}));
  EXPECT_EQ(spellings("std/**/::/**/thread x/* a */y"),
            (std::vector<std::string>{"std", "::", "thread", "x", "y"}));
  // "/*/" does not close; "/**/" does; a // inside a string is not a comment.
  EXPECT_EQ(toks("/*/ x */ y \"// no\" '/*'"), (std::vector<Tok>{{K::block_comment, "/*/ x */"},
                                                                 {K::identifier, "y"},
                                                                 {K::string_literal, "\"// no\""},
                                                                 {K::char_literal, "'/*'"}}));
  // In a directive: a block comment over two lines carries the directive on.
  const std::string dir = "#define A /* one\ntwo */ body // tail\nnext";
  const auto ts = lex(dir);
  std::vector<std::string> on_line, after;
  for (const auto& t : ts)
    if (!is_blank(t.kind)) (t.in_directive ? on_line : after).push_back(spelling(dir, t));
  EXPECT_EQ(on_line, (std::vector<std::string>{"#", "define", "A", "body"}));
  EXPECT_EQ(after, (std::vector<std::string>{"next"}));
  // A comment before '#' still leaves it the first token of its line.
  const std::string c = "/* c */ #include <thread>\nx # y";
  const auto ds = directives(c, lex(c));
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].name, "include");
  for (const auto& s : {dir, c}) expect_round_trip(s);
}

TEST(CppLexer, LineSplicesAnywhere) {
  // In an identifier, a number, a punctuator, a string, a comment's opener and closer, and with
  // blanks between the backslash and the newline (GCC splices those too).
  const std::string s =
      "pthread_cre\\\nate 1'0\\\n00 -\\\n> \"ab\\\ncd\" /\\\n* c *\\\n/ x \\  \n y";
  EXPECT_EQ(spellings(s),
            (std::vector<std::string>{"pthread_create", "1'000", "->", "\"abcd\"", "x", "y"}));
  EXPECT_EQ(toks(s)[0].text, "pthread_cre\\\nate");
  // A // comment continued by a splice swallows the next line.
  EXPECT_EQ(toks("// a \\\n b\nc"),
            (std::vector<Tok>{{K::line_comment, "// a \\\n b"}, {K::identifier, "c"}}));
  // A directive continued by a splice, and the splice's line counted.
  const std::string d = "#define X a \\\n  b\ny";
  const auto ts = lex(d);
  EXPECT_EQ(ts.back().line, 3);
  EXPECT_TRUE(ts[ts.size() - 3].in_directive);  // b
  // A backslash not before a newline is not a splice; one at the end is a stray byte.
  EXPECT_EQ(toks("a \\ b\\"),
            (std::vector<Tok>{
                {K::identifier, "a"}, {K::other, "\\"}, {K::identifier, "b"}, {K::other, "\\"}}));
  // Splices between tokens are whitespace and keep the tokens apart... only as phase 2 says:
  // `a\<nl>b` is one identifier `ab`.
  EXPECT_EQ(spellings("a\\\nb a \\\n b"), (std::vector<std::string>{"ab", "a", "b"}));
  // The escape in "\\<nl>n": the second backslash and the newline are a splice: \n remains.
  EXPECT_EQ(spellings("\"\\\\\nn\""), (std::vector<std::string>{"\"\\n\""}));
  for (const auto& x : {s, d}) expect_round_trip(x);
}

TEST(CppLexer, DirectivesAndHeaderNames) {
  const std::string s =
      "#include <cuda_fp16.h>\n  #  include \"a b.h\"\n%:include <thread>\n#include_next <x>\n"
      "#define LT(a, b) a < b\n#\n#pragma once\nint x = a < b > c;\n";
  const auto ts = lex(s);
  const auto ds = directives(s, ts);
  ASSERT_EQ(ds.size(), 7u);
  std::vector<std::string> names, targets;
  for (const auto& d : ds) {
    names.push_back(d.name);
    bool angled = false;
    const std::string target = include_target(s, ts, d, &angled);
    targets.push_back(target + (angled ? "<>" : ""));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"include", "include", "include", "include_next",
                                             "define", "", "pragma"}));
  EXPECT_EQ(targets,
            (std::vector<std::string>{"cuda_fp16.h<>", "a b.h", "thread<>", "x<>", "", "", ""}));
  // `<` outside an #include is a punctuator, never a header name.
  for (const auto& t : ts) {
    if (t.kind == K::header_name) {
      EXPECT_TRUE(t.in_directive);
    }
  }
  EXPECT_EQ(toks("int x = a < b > c;")[4], (Tok{K::punctuator, "<"}));
  // Grouped: one directive token per line, the same bytes.
  const auto g = lex(s, {/*group_directives=*/true});
  size_t n_dir = 0;
  for (const auto& t : g) n_dir += t.kind == K::directive;
  EXPECT_EQ(n_dir, 7u);
  EXPECT_EQ(g[0].text(s), "#include <cuda_fp16.h>");
  expect_round_trip(s);
  expect_round_trip(s, {/*group_directives=*/true});
}

TEST(CppLexer, IfZeroGroupsAreInactive) {
  auto inactive_text = [](const std::string& s) {
    std::string out;
    for (const auto& [b, e] : inactive_ranges(s, lex(s))) out += "[" + s.substr(b, e - b) + "]";
    return out;
  };
  EXPECT_EQ(inactive_text("a\n#if 0\nb\n#endif\nc\n"), "[b\n]");
  EXPECT_EQ(inactive_text("#if 0\nb\n#else\nc\n#endif\n"), "[b\n]");
  EXPECT_EQ(inactive_text("#if 0\nb\n#elif X\nc\n#else\nd\n#endif\n"), "[b\n]");
  EXPECT_EQ(inactive_text("#if 1\nb\n#elif X\nc\n#else\nd\n#endif\n"), "[c\n][d\n]");
  EXPECT_EQ(inactive_text("#if false\nb\n#endif\n#if true\nc\n#else\nd\n#endif\n"), "[b\n][d\n]");
  // Nested: the inner #if/#else/#endif inside a dead group do not end it.
  EXPECT_EQ(inactive_text("#if 0\n#if 1\nb\n#else\nc\n#endif\nd\n#endif\ne\n"),
            "[#if 1\nb\n#else\nc\n#endif\nd\n]");
  // A dead group inside a live unknown one; an unknown condition is never inactive.
  EXPECT_EQ(inactive_text("#ifdef X\n#if 0\nb\n#endif\nc\n#endif\n"), "[b\n]");
  EXPECT_EQ(inactive_text("#if X\nb\n#else\nc\n#endif\n#if 0 + 0\nd\n#endif\n"), "");
  // Comments and splices on the directive line are blanks; `#if 0` in a comment or a raw
  // string is no directive; #endif in a raw string inside the group does not end it (GCC lexes
  // skipped groups: checked by hand with g++ -E).
  EXPECT_EQ(inactive_text("#if /* c */ 0 // d\nb\n#en\\\ndif\nc\n"), "[b\n]");
  EXPECT_EQ(inactive_text("/*\n#if 0\n*/ a\nR\"(\n#if 0\n)\"\nb\n"), "");
  EXPECT_EQ(inactive_text("#if 0\nR\"(\n#endif\n)\"\n#endif\nc\n"), "[R\"(\n#endif\n)\"\n]");
  // Never closed: nothing is inactive (the compiler rejects the file; nothing is hidden).
  EXPECT_EQ(inactive_text("#if 0\nb\n"), "");
  EXPECT_EQ(inactive_text("#if 1\n#if 0\nb\n#endif\n"), "");
  // Stray #else/#endif are ignored.
  EXPECT_EQ(inactive_text("#endif\n#else\nb\n"), "");
}

TEST(CppLexer, UnterminatedConstructsEndWhereDefined) {
  // A '"' or '\'' literal ends before its newline; the next line lexes normally.
  EXPECT_EQ(toks("\"open\nx 'y\nz"), (std::vector<Tok>{{K::string_literal, "\"open"},
                                                       {K::identifier, "x"},
                                                       {K::char_literal, "'y"},
                                                       {K::identifier, "z"}}));
  // At the end of the input, a literal, a raw string, a block comment, a splice.
  for (const std::string s :
       {"\"abc",  "'",    "\"a\\", "R\"(abc", "R\"x(abc)\"", "/* abc",      "/*",
        "/* a *", "u8\"", "a\\\n", "R\"",     "R\"abc",      "#include <x", "#include \"x",
        "0x1p",   "1'",   "1e+",   "%:%",     "<:",          "\\u12"}) {
    SCOPED_TRACE(s);
    expect_round_trip(s);
  }
  const auto t1 = lex("R\"(abc\nstill");
  ASSERT_EQ(t1.size(), 1u);
  EXPECT_FALSE(t1[0].terminated);
  const auto t2 = lex("/* never\nclosed");
  ASSERT_EQ(t2.size(), 1u);
  EXPECT_FALSE(t2[0].terminated);
  // A malformed raw delimiter (a blank, or over 16 characters) ends before the newline.
  EXPECT_EQ(toks("R\"a b(x)a b\"\ny"),
            (std::vector<Tok>{{K::string_literal, "R\"a b(x)a b\""}, {K::identifier, "y"}}));
  EXPECT_FALSE(lex("R\"a b(x)a b\"\ny")[0].terminated);
  EXPECT_EQ(toks("R\"12345678901234567(x)12345678901234567\"\ny").back(),
            (Tok{K::identifier, "y"}));
  EXPECT_EQ(toks("R\"1234567890123456(x)1234567890123456\"\ny").size(), 2u);  // 16: fine
  // Unterminated literals and comments are not blanked: the compiler rejects them and nothing
  // after them is hidden.
  EXPECT_EQ(blank_comments_and_literals("a = 'x; pthread_create\nb"), "a = 'x; pthread_create\nb");
  EXPECT_EQ(blank_comments_and_literals("/* open pthread_create"), "/* open pthread_create");
  EXPECT_EQ(blank_comments_and_literals("R\"(open pthread_create"), "R\"(open pthread_create");
}

TEST(CppLexer, BlankedTextKeepsLengthLinesAndCode) {
  // Hand-derived: comments blank, literal contents blank, splices behind their token, digraphs
  // canonical, code as written.
  EXPECT_EQ(
      blank_comments_and_literals("a = \"s t\"; // c\nb /* d\ne */ 'x' 1'0 u8R\"y(q)\")y\" <%"),
      "a = \"   \";     \nb     \n     ' ' 1'0 u8R\"y(   )y\" { ");
  EXPECT_EQ(blank_comments_and_literals("pthread_cre\\\nate(x);"), "pthread_create \n(x);");
  EXPECT_EQ(blank_comments_and_literals("a \\\n b"), "a  \n b");
  EXPECT_EQ(blank_comments_and_literals("R\"(\n)\" x"), "R\"(\n)\" x");
  // Inactive groups only on request.
  const std::string s = "#if 0\nbad();\n#endif\ngood();\n";
  EXPECT_EQ(blank_comments_and_literals(s), s);
  EXPECT_EQ(blank_comments_and_literals(s, /*drop_inactive=*/true),
            "#if 0\n      \n#endif\ngood();\n");
}

TEST(CppLexer, SimilarityTokensDropLiteralContentsAndComments) {
  EXPECT_EQ(similarity_tokens("int x = 1'000; // c\nf(\"s\", 'c', R\"d(r)d\", u8\"t\"_s); a->b"),
            (std::vector<std::string>{"int",  "x",    "=", "1'000", ";", "f",     "(",    "\"",
                                      "\"",   ",",    "'", "'",     ",", "R\"d(", ")d\"", ",",
                                      "u8\"", "\"_s", ")", ";",     "a", "->",    "b"}));
}

TEST(CppLexer, RandomTextsRoundTripWithoutReadingOutOfBounds) {
  // Texts drawn from the characters that open, close or continue tokens: every one must lex to
  // tokens covering it exactly (AddressSanitizer builds would also flag an out-of-bounds read).
  const std::string alphabet = "\\\n\"'/*R(u8L)x#ie0f1.+-<:%> \tpd'";
  std::mt19937 rng(38);
  for (int n = 0; n < 4000; ++n) {
    std::string s;
    const size_t len = rng() % 40;
    for (size_t k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    SCOPED_TRACE(s);
    expect_round_trip(s);
    expect_round_trip(s, {/*group_directives=*/true});
    (void)canonical_tokens(s);
    (void)similarity_tokens(s);
    const auto ts = lex(s);
    for (const auto& d : directives(s, ts)) (void)include_target(s, ts, d);
  }
}

}  // namespace
}  // namespace kernelrl::cpp
