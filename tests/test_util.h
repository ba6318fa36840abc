// Helpers shared by the test folders: scratch directories and running the kernelrl binary.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kernelrl::testing {

// The source tree and the kernelrl binary the tests run (tests/CMakeLists.txt defines both).
// Defined once here rather than in each test file: the unit and e2e files are compiled in
// unity batches, where two files' definitions of one name would clash.
inline const std::string kSrc = KERNELRL_SOURCE_DIR;
inline const std::string kBin = KERNELRL_BIN;

// A fresh directory under the system temp dir, removed when the object dies.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kernelrl-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs a shell command, capturing stdout+stderr and the exit code.
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r{-1, ""};
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Runs the kernelrl binary built next to the tests.
inline CommandResult run_kernelrl(const std::string& args) {
  return run_command(std::string(KERNELRL_BIN) + " " + args);
}

}  // namespace kernelrl::testing
