#include "reward/screen.h"

#include <algorithm>
#include <regex>
#include <sstream>
#include <vector>

namespace kernelrl {

std::string strip_comments_and_strings(const std::string& s) {
  std::string out = s;
  enum { code, line_comment, block_comment, str, chr } st = code;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i], n = i + 1 < s.size() ? s[i + 1] : '\0';
    switch (st) {
      case code:
        if (c == '/' && n == '/') { st = line_comment; out[i] = out[i + 1] = ' '; ++i; }
        else if (c == '/' && n == '*') { st = block_comment; out[i] = out[i + 1] = ' '; ++i; }
        else if (c == '"') st = str;
        else if (c == '\'') st = chr;
        break;
      case line_comment:
        if (c == '\n') st = code; else out[i] = ' ';
        break;
      case block_comment:
        if (c == '*' && n == '/') { st = code; out[i] = out[i + 1] = ' '; ++i; }
        else if (c != '\n') out[i] = ' ';
        break;
      case str:
      case chr:
        if (c == '\\' && n != '\0') { out[i] = ' '; if (n != '\n') out[i + 1] = ' '; ++i; }
        else if ((st == str && c == '"') || (st == chr && c == '\'')) st = code;
        else if (c != '\n') out[i] = ' ';
        break;
    }
  }
  return out;
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
    auto re = [](const char* p) { return std::regex(p, std::regex::ECMAScript | std::regex::optimize); };
    return std::vector<Rule>{
        {"creates_stream", "creates a CUDA stream (all work goes on the given stream)",
         re(R"(\b(cudaStreamCreate\w*|cuStreamCreate\w*)\b)"), false},
        {"creates_event", "creates a CUDA event", re(R"(\b(cudaEventCreate\w*|cuEventCreate\w*)\b)"),
         false},
        {"uses_graph", "uses CUDA graphs or stream capture",
         re(R"(\b(cudaGraph\w*|cuGraph\w*|cudaStreamBeginCapture\w*|cuStreamBeginCapture\w*)\b)"),
         false},
        {"spawns_thread", "spawns threads",
         re(R"(\bstd\s*::\s*(thread|jthread|async)\b|\bpthread_create\b|\bomp\s+parallel\b)"), false},
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
  // #include "cublas_v2.h" is a string literal to the stripper: check include lines raw first.
  static const std::regex kInclude(R"(^\s*#\s*include\s*["<]\s*([^">]+)[">])", std::regex::multiline);
  static const std::regex kForbiddenHeader(
      R"(^(cublas\w*\.h|cublasLt\.h|cudnn\w*\.h|torch/.*|ATen/.*|c10/.*)$)");
  static const std::regex kFileHeader(R"(^(fstream|filesystem|sys/socket\.h|thread|future|pthread\.h)$)");
  for (std::sregex_iterator it(source.begin(), source.end(), kInclude), end; it != end; ++it) {
    std::string h = (*it)[1].str();
    if (hgemm && std::regex_match(h, kForbiddenHeader))
      return {false, "delegates_gemm",
              "includes <" + h + ">: cuBLAS/cuBLASLt/cuDNN/LibTorch are the baselines, not allowed in an HGEMM task"};
    if (std::regex_match(h, kFileHeader))
      return {false, h == "fstream" || h == "filesystem" ? "touches_files"
                     : h == "sys/socket.h"                ? "uses_sockets"
                                                          : "spawns_thread",
              "includes <" + h + ">, which candidates may not use"};
  }
  const std::string code = strip_comments_and_strings(source);
  for (const auto& rule : rules()) {
    if (rule.hgemm_only && !hgemm) continue;
    std::smatch m;
    if (std::regex_search(code, m, rule.pattern)) {
      size_t line = 1 + std::count(code.begin(), code.begin() + m.position(0), '\n');
      std::string tok = m.str(0);
      while (!tok.empty() && (tok.back() == '(' || tok.back() == ' ')) tok.pop_back();
      return {false, rule.name,
              std::string(rule.what) + ": `" + tok + "` at line " + std::to_string(line)};
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
