// Compile pool with a content-hash cache: turns candidate sources into shared objects with nvcc
// (GPU backend: -O3 -std=c++17, arch from the device, sm_90a on Hopper) or g++ (host backend),
// several compiler processes in parallel, each with a timeout. The cache key hashes the source,
// the ABI header, the compiler command, the arch and the toolkit version; failures are cached
// too, with their trimmed log. It does not load or run anything.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace kernelrl {

// 128-bit FNV-1a based content hash as 32 hex chars (not cryptographic; a cache key).
std::string content_hash(const std::string& data);

// Compiler output trimmed for feedback: temp paths removed, at most `max_lines`/`max_chars`.
std::string trim_compiler_log(const std::string& log, const std::string& strip_prefix,
                              size_t max_lines = 40, size_t max_chars = 4000);

struct CompileOutcome {
  std::string hash;
  bool ok = false;
  bool timed_out = false;
  bool cached = false;
  std::filesystem::path so_path;  // valid when ok
  std::string log;                // trimmed compiler output
  double seconds = 0;             // compile wall time (0 when cached)
};

class CompilePool {
 public:
  // backend: "gpu" (nvcc) or "host" (g++); arch e.g. "sm_90a" (ignored by host);
  // include_dirs: extra -I directories for candidates (CUTLASS/CuTe), resolved.
  CompilePool(std::string backend, std::string arch, std::filesystem::path cache_dir, int jobs,
              double timeout_s, std::vector<std::string> include_dirs = {});

  const std::string& backend() const { return backend_; }
  const std::string& toolkit_version() const { return toolkit_version_; }
  // Compiles every source (duplicates once), `jobs` at a time; results in input order.
  // `on_done(i, outcome)` (optional) is called from the pool's threads as each finishes, so a
  // caller can start running candidates while others still compile.
  std::vector<CompileOutcome> compile_all(
      const std::vector<std::string>& sources,
      const std::function<void(size_t, const CompileOutcome&)>& on_done = {});
  CompileOutcome compile(const std::string& source);
  std::string hash_of(const std::string& source) const;
  // The text handed to the compiler: the ABI header include, then the candidate.
  static std::string full_source(const std::string& source);
  const std::filesystem::path& include_dir() const { return include_dir_; }

 private:
  std::vector<std::string> command(const std::filesystem::path& src,
                                   const std::filesystem::path& out) const;
  std::string backend_, arch_;
  std::filesystem::path cache_dir_, include_dir_;
  int jobs_;
  double timeout_s_;
  std::string compiler_, toolkit_version_;
  std::vector<std::string> include_dirs_;
  std::string include_identity_;  // what the extra headers are (e.g. CUTLASS's version), hashed
};

// RewardConfig.include_dirs resolved: "auto" becomes $KERNELRL_CUTLASS_INCLUDE or the CUTLASS
// headers of the nvidia-cutlass wheel in the project's venv (cutlass_library/source/include),
// when found; other entries must exist (UserError naming reward.include_dirs otherwise).
std::vector<std::string> resolve_include_dirs(const std::vector<std::string>& configured);
// CUTLASS's version from <dir>/cutlass/version.h ("" when the dir has none).
std::string cutlass_version(const std::string& include_dir);

// nvcc of the CUDA toolkit: $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc, else "nvcc" in PATH.
std::string find_nvcc();
// Default cache dir: $XDG_CACHE_HOME/kernelrl or ~/.cache/kernelrl (or /tmp/kernelrl-cache).
std::filesystem::path default_cache_dir();

}  // namespace kernelrl
