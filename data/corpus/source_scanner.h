// Splits C++/CUDA source text into units (kernels, device functions, host functions, classes,
// templates) with a scanner that respects comments, string and character literals (raw strings
// included), preprocessor lines (all from common/cpp_lexer.h) and brace nesting. Namespaces and extern "C" blocks are entered;
// class bodies yield the class and its member functions. Not a parser: no macro expansion, and a
// file whose braces do not balance (braces split across #if branches) stops at that point.
#pragma once

#include <string>
#include <vector>

namespace kernelrl {

struct SourceUnit {
  std::string kind;       // kernel | device_function | function | class
  std::string name;       // qualified: ns::Class::method (namespaces included)
  std::string signature;  // the text before the body, comments dropped, whitespace squeezed
  std::string doc;        // the comment block right before the unit, markers stripped
  std::string code;       // the unit's source text from its signature to its closing brace
  bool is_template = false;
  int line = 0;  // 1-based line of the signature's start
};

std::vector<SourceUnit> scan_source(const std::string& text);

// Comment markers (//, /* */, leading *, ///, //!) removed; doxygen commands kept as words.
std::string clean_comment(const std::string& raw);

// Features of CUDA code found by pattern: shared_memory, tensor_core_mma, wgmma, ldmatrix,
// cp_async, tma, warp_shuffle, warp_vote, atomics, inline_ptx, syncthreads, half_precision,
// bfloat16, fp8, vector_types, cooperative_groups, texture, launch_bounds, loops.
std::vector<std::string> detect_features(const std::string& code);

// Lower-case words of a text for retrieval and shingling: runs of [A-Za-z0-9], identifiers also
// split at '_' and camelCase boundaries.
std::vector<std::string> words_of(const std::string& text);

}  // namespace kernelrl
