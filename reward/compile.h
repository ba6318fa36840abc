// Compile pool with a content-hash cache: turns candidate sources into shared objects with nvcc
// (GPU backend: -O3 -std=c++17, one arch from the device, sm_90a on Hopper, SASS only) or g++
// (host backend), several compiler processes in parallel, each with a timeout. The cache key
// hashes the source with comments and runs of blanks removed (normalize_source: what the
// compiler cannot see), the ABI header, the compiler command, the arch and the toolkit version;
// failures are cached too, with their trimmed log. Compilers of every process of this user on
// the host share the host's cores (HostSlots: the ranks of a job, a sweep's points, parallel
// tests), and a source that another process is compiling is waited for, not compiled twice.
// It does not load or run anything.
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

// The source as the compiler's tokens see it: comments removed (a comment that spans lines
// leaves its newlines at the end of its line), every run of blanks outside literals made one
// space (none at a line's start or end); string and character literals and #include lines are
// kept as written. Line numbers (and so diagnostics) stay what they were. Tokens come from
// common/cpp_lexer.h; the text is byte for byte what the scanner before it wrote (checked on
// every source of the repository), so cache entries stay valid. "" for what it leaves to the
// exact key (raw strings, __LINE__, an unterminated literal or comment, a comment opened on an
// #include line): such a source is keyed by its exact text.
std::string normalize_source(const std::string& source);

// A host-wide cap on compilers running at once, over every process of this user: `slots` lock
// files in `dir`, one flock'ed per running compiler (the kernel drops a dead holder's lock).
class HostSlots {
 public:
  HostSlots(std::filesystem::path dir, int slots);
  class Held {
   public:
    Held() = default;
    explicit Held(int fd) : fd_(fd) {}
    Held(Held&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Held& operator=(Held&& o) noexcept;
    ~Held();
    bool held() const { return fd_ >= 0; }

   private:
    int fd_ = -1;
  };
  Held acquire();      // blocks until a slot is free; an unheld Held when slots are off
  Held try_acquire();  // a free slot now, or an unheld Held
  int slots() const { return slots_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  int slots_;  // 0 = off (the directory could not be made)
};
// CPUs this process may run on (its affinity mask), at least 1.
int host_cpus();
// $TMPDIR/kernelrl-compile-slots-<uid>: the slot files every process of this user shares.
std::filesystem::path default_host_slots_dir();

struct CompileOutcome {
  std::string hash;  // hash_of(source): the exact text's identity (results are stored under it)
  std::string key;   // compile_key(source): the cache entry (the normalized text's key)
  bool ok = false;
  bool timed_out = false;
  bool cached = false;
  std::filesystem::path so_path;  // valid when ok
  std::string log;                // trimmed compiler output
  double seconds = 0;             // compile wall time (0 when cached)
  double cpu_seconds = 0;         // the compiler's CPU time, its subprocesses included
};

class CompilePool {
 public:
  // backend: "gpu" (nvcc) or "host" (g++); arch e.g. "sm_90a" (ignored by host);
  // jobs: this pool's compilers at once (0 = host_cpus()); every pool of the host together runs
  // at most host_slots compilers (0 = host_cpus(), -1 = no host-wide cap);
  // include_dirs: extra -I directories for candidates (CUTLASS/CuTe), resolved.
  CompilePool(std::string backend, std::string arch, std::filesystem::path cache_dir, int jobs,
              double timeout_s, std::vector<std::string> include_dirs = {},
              int host_slots = 0, std::filesystem::path host_slots_dir = default_host_slots_dir());

  const std::string& backend() const { return backend_; }
  const std::string& toolkit_version() const { return toolkit_version_; }
  // Compiles every source (sources with one compile key once), `jobs` at a time, the ones that
  // include CUTLASS/CuTe first (they take ~30x longer: the batch's tail is then short ones);
  // results in input order. `on_done(i, outcome)` (optional) is called from the pool's threads
  // as each finishes, so a caller can start running candidates while others still compile.
  std::vector<CompileOutcome> compile_all(
      const std::vector<std::string>& sources,
      const std::function<void(size_t, const CompileOutcome&)>& on_done = {});
  CompileOutcome compile(const std::string& source);
  // The exact source's identity (the results store's key; unchanged by normalization).
  std::string hash_of(const std::string& source) const;
  // The cache entry a source compiles into: sources that normalize alike share it.
  std::string compile_key(const std::string& source) const;
  // The text handed to the compiler: the ABI header include, then the candidate.
  static std::string full_source(const std::string& source);
  const std::filesystem::path& include_dir() const { return include_dir_; }

 private:
  std::vector<std::string> command(const std::filesystem::path& src,
                                   const std::filesystem::path& out) const;
  std::string key_of(const std::string& text) const;  // text + ABI + command + toolchain
  bool lookup(CompileOutcome& r) const;               // fills r from the cache entry r.key
  std::string backend_, arch_;
  std::filesystem::path cache_dir_, include_dir_;
  int jobs_;
  double timeout_s_;
  std::string compiler_, toolkit_version_;
  std::vector<std::string> include_dirs_;
  std::string include_identity_;  // what the extra headers are (e.g. CUTLASS's version), hashed
  HostSlots host_slots_;
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
