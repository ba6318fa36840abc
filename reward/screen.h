// Static screen: rejects, with a named rule, candidate sources that would escape or fool the
// evaluator (streams, events, graphs, threads, processes, files, sockets, the environment,
// device-wide syncs and allocations, delegation to cuBLAS/cuDNN/LibTorch in HGEMM tasks), that
// name a header through a macro, or that lack the entry point. The source is read through
// common/cpp_lexer.h: comments and literal contents do not count, line splices are joined,
// #include lines are read as preprocessor lines, #if 0 groups are skipped. Macros are not
// expanded (a name pasted with ## passes); it is a screen, not a sandbox: the worker's OS
// sandbox and runtime checks catch what text matching cannot.
#pragma once

#include <string>

namespace kernelrl {

struct ScreenResult {
  bool ok = true;
  std::string rule;    // e.g. "creates_stream", "delegates_gemm", "missing_entry_point"
  std::string reason;  // one line naming the offending token
};

// `hgemm` turns on the delegation rule (cuBLAS/cuBLASLt/cuDNN/LibTorch are the baselines).
ScreenResult screen_source(const std::string& source, bool hgemm);

// The source with comments removed and string/char literal contents blanked (same length):
// cpp::blank_comments_and_literals (#if 0 groups kept).
std::string strip_comments_and_strings(const std::string& source);

}  // namespace kernelrl
