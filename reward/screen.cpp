#include "reward/screen.h"

#include "common/cpp_lexer.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>
#include <vector>

namespace kernelrl {

std::string strip_comments_and_strings(const std::string& s) {
  return cpp::blank_comments_and_literals(s);
}

namespace {

struct Rule {
  const char* name;
  const char* what;  // what the rule forbids, for the message
  std::regex pattern;
  bool hgemm_only;
};

const std::vector<Rule>& rules() {
  static const std::vector<Rule> r = [] {
    auto re = [](const char* p) {
      return std::regex(p, std::regex::ECMAScript | std::regex::optimize);
    };
    return std::vector<Rule>{
        {"creates_stream", "creates a CUDA stream (all work goes on the given stream)",
         re(R"(\b(cudaStreamCreate\w*|cuStreamCreate\w*)\b)"), false},
        {"creates_event", "creates a CUDA event",
         re(R"(\b(cudaEventCreate\w*|cuEventCreate\w*)\b)"), false},
        {"uses_graph", "uses CUDA graphs or stream capture",
         re(R"(\b(cudaGraph\w*|cuGraph\w*|cudaStreamBeginCapture\w*|cuStreamBeginCapture\w*)\b)"),
         false},
        {"spawns_thread", "spawns threads",
         re(R"(\bstd\s*::\s*(thread|jthread|async)\b|\b(pthread_create|thrd_create)\b|\bomp\s+parallel\b)"),
         false},
        {"spawns_process", "spawns or replaces processes",
         re(R"(\b(fork|vfork|execl|execlp|execle|execv|execvp|execvpe|posix_spawn\w*|system|popen|clone)\s*\()"),
         false},
        {"touches_files", "touches files or loads libraries",
         re(R"(\b(fopen|freopen|open|openat|creat|unlink|remove|rename|mmap|dlopen|dlsym)\s*\(|\bstd\s*::\s*(i|o)?fstream\b|\bstd\s*::\s*filesystem\b)"),
         false},
        {"uses_sockets", "uses sockets",
         re(R"(\b(socket|connect|bind|listen|accept|sendto|recvfrom)\s*\()"), false},
        {"touches_environment", "reads or changes the environment",
         re(R"(\b(getenv|secure_getenv|setenv|unsetenv|putenv|environ)\b)"), false},
        {"device_sync", "synchronizes the whole device or uses a blocking copy (use the stream)",
         re(R"(\b(cudaDeviceSynchronize|cudaThreadSynchronize|cudaDeviceReset|cudaSetDevice|cuCtxSynchronize|cudaMemcpy|cudaMemset|cudaMemcpy2D|cudaMemcpyToSymbol|cudaMemcpyFromSymbol)\s*\()"),
         false},
        {"allocates_memory", "allocates device or host memory (use args->workspace)",
         re(R"(\b(cudaMalloc\w*|cudaFree\w*|cudaHostAlloc|cudaMallocHost|cuMemAlloc\w*|cuMemFree\w*)\s*\()"),
         false},
        {"delegates_gemm", "calls cuBLAS/cuBLASLt/cuDNN/LibTorch (the baselines) in an HGEMM task",
         re(R"(\b(cublas\w*|cudnn\w*|torch\s*::|at\s*::|c10\s*::)|#\s*include\s*<\s*(cublas|cudnn|torch/|ATen/|c10/))"),
         true},
    };
  }();
  return r;
}

}  // namespace

ScreenResult screen_source(const std::string& source, bool hgemm) {
  ScreenResult res;
  // One lexing: the include lines are read from its preprocessor lines (a quoted header name is
  // no string literal there), the rules run over its text with comments and literal contents
  // blanked and the groups no compiler sees (#if 0) dropped.
  const auto tokens = cpp::lex(source);
  const auto inactive = cpp::inactive_ranges(source, tokens);
  auto live = [&](size_t pos) {
    for (const auto& [b, e] : inactive)
      if (pos >= b && pos < e) return false;
    return true;
  };
  auto line_of = [&](size_t pos) {
    return std::to_string(1 + std::count(source.begin(), source.begin() + pos, '\n'));
  };
  static const std::regex kForbiddenHeader(
      R"(^(cublas\w*\.h|cublasLt\.h|cudnn\w*\.h|torch/.*|ATen/.*|c10/.*)$)");
  static const std::regex kFileHeader(
      R"(^(fstream|filesystem|sys/socket\.h|thread|future|pthread\.h|threads\.h)$)");
  for (const auto& d : cpp::directives(source, tokens)) {
    if (!live(d.begin_byte)) continue;
    if (d.name != "include" && d.name != "include_next" && d.name != "import") continue;
    const std::string h = cpp::include_target(source, tokens, d);
    if (h.empty())
      return {false, "computed_include",
              "an #include without a header name at line " + line_of(d.begin_byte) +
                  " (a macro naming the header): name headers directly"};
    if (hgemm && std::regex_match(h, kForbiddenHeader))
      return {
          false, "delegates_gemm",
          "includes <" + h +
              ">: cuBLAS/cuBLASLt/cuDNN/LibTorch are the baselines, not allowed in an HGEMM task"};
    if (std::regex_match(h, kFileHeader))
      return {false,
              h == "fstream" || h == "filesystem" ? "touches_files"
              : h == "sys/socket.h"               ? "uses_sockets"
                                                  : "spawns_thread",
              "includes <" + h + ">, which candidates may not use"};
  }
  // Macros are not expanded: a name that ## (or a header's pasting macro, glibc's __CONCAT)
  // builds passes; the OS sandbox is what stops it (docs/sandbox.md).
  const std::string code = cpp::blank_comments_and_literals(source, /*drop_inactive=*/true);
  for (const auto& rule : rules()) {
    if (rule.hgemm_only && !hgemm) continue;
    std::smatch m;
    if (std::regex_search(code, m, rule.pattern)) {
      std::string tok = m.str(0);
      while (!tok.empty() &&
             (tok.back() == '(' || std::isspace(static_cast<unsigned char>(tok.back()))))
        tok.pop_back();
      return {false, rule.name,
              std::string(rule.what) + ": `" + tok + "` at line " + line_of(m.position(0))};
    }
  }
  static const std::regex kEntry(R"(\bkernelrl_launch\s*\([^;{)]*\)\s*\{)");
  if (!std::regex_search(code, kEntry))
    return {false, "missing_entry_point",
            "no definition of `int kernelrl_launch(const kernelrl_args* args, void* stream)` "
            "(see kernels/kernel_abi.h)"};
  return res;
}

}  // namespace kernelrl
