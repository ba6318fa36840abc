// Edit completions (rollout.completion: edit): SEARCH/REPLACE blocks against a base kernel, in
// aider's notation, parsed, applied, and written from a line diff (the pretraining examples).
// Pure text: no prompt wording (rollout/prompt.h), no evaluation, no tokens.
//
// The format, exactly (a line is its text up to '\n'; CR LF in the completion and the base is
// read as LF first):
//   completion := { other-line } { block { other-line } }
//   block      := "<<<<<<< SEARCH" NL { line } "=======" NL { line } ">>>>>>> REPLACE" (NL | EOF)
// A marker line is the marker alone at the line's start, trailing spaces and tabs allowed. The
// SEARCH text is the lines between the first two markers, each with its '\n'; the REPLACE text
// the lines between the last two (empty: the SEARCH text is deleted).
// Rules:
//   - Blocks apply in order, each to the text the blocks before it left.
//   - A SEARCH text matches whole lines, byte for byte (indentation and trailing spaces
//     included), and must match exactly once in the current text (overlapping matches count).
//   - Text outside blocks is ignored (a chat model's sentences, a fence line): only blocks
//     edit. A stray "=======" or ">>>>>>> REPLACE" line outside a block is malformed.
// Named failures (the verdict of a row whose blocks do not apply; it is scored as a format
// failure without compiling):
//   edit_empty      no block in the completion
//   edit_malformed  a block without its "=======" or ">>>>>>> REPLACE" line, a SEARCH marker
//                   inside a block, a stray divider or REPLACE marker, an empty SEARCH text
//   edit_no_match   a SEARCH text that matches nowhere in the current text
//   edit_ambiguous  a SEARCH text that matches more than once
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kernelrl {

inline constexpr const char* kEditSearchMarker = "<<<<<<< SEARCH";
inline constexpr const char* kEditDividerMarker = "=======";
inline constexpr const char* kEditReplaceMarker = ">>>>>>> REPLACE";

struct EditBlock {
  std::string search;   // whole lines, each ending in '\n'; never empty
  std::string replace;  // whole lines, each ending in '\n'; "" deletes the SEARCH text
};

enum class EditFailure { none, empty, malformed, no_match, ambiguous };
// "edit_empty", "edit_malformed", "edit_no_match", "edit_ambiguous" ("" for none).
const char* edit_failure_name(EditFailure f);

struct EditResult {
  EditFailure failure = EditFailure::none;
  std::string reason;  // one line for the policy and the logs when failure != none
  std::vector<EditBlock> blocks;
  std::string code;    // the edited text when failure == none
  bool ok() const { return failure == EditFailure::none; }
};

// Parses the blocks of a completion (failure: empty or malformed).
EditResult parse_edit_blocks(const std::string& completion);

// Applies `blocks` to `base` in order (failure: no_match or ambiguous, naming the block).
EditResult apply_edit_blocks(const std::string& base, const std::vector<EditBlock>& blocks);

// parse_edit_blocks, then apply_edit_blocks to `base`.
EditResult apply_edit_completion(const std::string& base, const std::string& completion);

// The blocks as text, in the grammar above (what the pretraining edit examples answer).
std::string format_edit_blocks(const std::vector<EditBlock>& blocks);

// Blocks that turn `from` into `to` (a line diff: each changed run of lines becomes one block,
// its SEARCH text grown by context lines, before and after, until it matches once where it is
// applied). apply_edit_blocks(from, result) == to (LF line ends; a missing final '\n' added).
// Empty when the texts are equal.
std::vector<EditBlock> diff_edit_blocks(const std::string& from, const std::string& to);

}  // namespace kernelrl
