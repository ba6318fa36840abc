#include "reward/compile.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "common/cpp_lexer.h"
#include "common/error.h"
#include "common/fs.h"
#include "reward/kernel_abi_text.h"  // generated: kKernelAbiText, the text of kernels/kernel_abi.h
#include "reward/subprocess.h"

namespace kernelrl {

std::string content_hash(const std::string& data) {
  // Two independent 64-bit FNV-1a streams (different offset bases), mixed at the end.
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (unsigned char c : data) {
    h1 = (h1 ^ c) * 0x100000001b3ull;
    h2 = (h2 ^ (c + 0x9e)) * 0x100000001b3ull;
  }
  auto mix = [](uint64_t x) {  // splitmix64 finalizer
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(mix(h1)),
                static_cast<unsigned long long>(mix(h2 ^ h1)));
  return buf;
}

std::string trim_compiler_log(const std::string& log, const std::string& strip_prefix,
                              size_t max_lines, size_t max_chars) {
  std::istringstream in(log);
  std::string line, out;
  size_t lines = 0, total = 0;
  while (std::getline(in, line)) {
    ++total;
    if (!strip_prefix.empty())
      for (size_t p; (p = line.find(strip_prefix)) != std::string::npos;)
        line.erase(p, strip_prefix.size());
    if (lines < max_lines && out.size() + line.size() + 1 <= max_chars) {
      out += line + "\n";
      ++lines;
    }
  }
  if (total > lines) out += "[... " + std::to_string(total - lines) + " more lines]\n";
  return out;
}

std::string normalize_source(const std::string& src) {
  // Written from common/cpp_lexer's tokens; the text is byte for byte what the hand-written
  // scanner before it produced (cache keys stay valid). Left to the exact key: __LINE__ (a
  // comment's newlines move to its line's end, which would renumber that one line), raw strings
  // (kept out when keys were first made), unterminated literals and comments.
  const auto tokens = cpp::lex(src);
  for (const auto& t : tokens) {
    if (cpp::is_literal(t.kind) && !t.terminated) return "";
    if (t.kind == cpp::TokenKind::block_comment && !t.terminated) return "";
    if (t.kind == cpp::TokenKind::string_literal) {  // a raw string: its prefix ends with R
      const size_t q = t.text(src).find('"');
      if (q > 0 && q != std::string_view::npos && src[t.begin + q - 1] == 'R') return "";
    }
    if (t.kind == cpp::TokenKind::identifier) {
      const std::string name = cpp::spelling(src, t);
      if (name == "__LINE__" || name == "__builtin_LINE") return "";
    }
  }
  std::string out;
  out.reserve(src.size());
  size_t pending_newlines = 0;  // newlines of comments on this line, written at its end
  bool blank = false;           // a run of blanks (or a comment) is waiting to become one space
  bool line_start = true;       // nothing but blanks written on this line yet
  auto flush_blank = [&] {
    if (blank) out += ' ';
    blank = false;
  };
  // Writes [b, e) with each line splice as "\\\n" (blanks after its backslash dropped), the
  // pending comment newlines after it.
  auto write_spliced = [&](size_t b, size_t e) {
    for (size_t k = b; k < e;) {
      if (const size_t len = cpp::splice_length(src, k)) {
        flush_blank();
        out += "\\\n";
        out.append(pending_newlines, '\n');
        pending_newlines = 0;
        line_start = false;  // leading blanks of the continued line stay one space
        k += len;
      } else {
        out += src[k++];
      }
    }
  };
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto& t = tokens[i];
    const std::string_view text = t.text(src);
    switch (t.kind) {
      case cpp::TokenKind::newline:  // blanks before a newline are dropped
        blank = false;
        out += '\n';
        out.append(pending_newlines, '\n');
        pending_newlines = 0;
        line_start = true;
        continue;
      case cpp::TokenKind::whitespace:
        for (size_t k = t.begin; k < t.end;) {
          if (const size_t len = cpp::splice_length(src, k)) {
            write_spliced(k, k + len);
            k += len;
          } else {
            blank = true;
            ++k;
          }
        }
        continue;
      case cpp::TokenKind::line_comment:  // one space; its splices' newlines at the line's end
        pending_newlines += static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
        blank = !line_start;
        continue;
      case cpp::TokenKind::block_comment:
        pending_newlines += static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
        blank = true;
        continue;
      default:
        break;
    }
    if (line_start &&
        text == "#") {  // an #include line is written as is (a header name may hold blanks)
      const size_t j = src.find_first_not_of(" \t\v\f\r", t.end);
      if (j != std::string::npos && src.compare(j, 7, "include") == 0) {
        size_t eol = src.find('\n', t.begin);
        if (eol == std::string::npos) eol = src.size();
        const std::string_view line(src.data() + t.begin, eol - t.begin);
        if (line.find("/*") != std::string_view::npos) return "";  // not modelled
        out.append(line);
        line_start = false;
        while (i + 1 < tokens.size() && tokens[i + 1].begin < eol) {
          if (tokens[i + 1].end > eol) return "";  // a token running past the line: not modelled
          ++i;
        }
        continue;
      }
    }
    if (!line_start) flush_blank();
    blank = false;
    if (cpp::is_literal(t.kind)) {
      out.append(text);  // a literal, as written
      line_start = false;
      continue;
    }
    line_start = false;
    write_spliced(t.begin, t.end);
  }
  out.append(pending_newlines, '\n');
  return out;
}

int host_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

fs::path default_host_slots_dir() {
  return fs::temp_directory_path() / ("kernelrl-compile-slots-" + std::to_string(::getuid()));
}

HostSlots::HostSlots(fs::path dir, int slots) : dir_(std::move(dir)), slots_(std::max(0, slots)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) slots_ = 0;
}

HostSlots::Held& HostSlots::Held::operator=(Held&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

HostSlots::Held::~Held() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor drops the flock
}

HostSlots::Held HostSlots::try_acquire() {
  if (slots_ <= 0) return {};
  // Start at a per-thread place so that waiting threads do not all probe slot 0 first.
  static std::atomic<unsigned> rotor{0};
  unsigned start = rotor++ + static_cast<unsigned>(::getpid());
  for (int t = 0; t < slots_; ++t) {
    int s = static_cast<int>((start + t) % static_cast<unsigned>(slots_));
    fs::path p = dir_ / ("slot-" + std::to_string(s));
    int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return Held(fd);
    ::close(fd);
  }
  return {};
}

HostSlots::Held HostSlots::acquire() {
  if (slots_ <= 0) return {};
  for (;;) {
    Held h = try_acquire();
    if (h.held()) return h;
    // Compiles last 0.3-40 s: polling every 20 ms costs nothing that shows.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string find_nvcc() {
  if (const char* h = std::getenv("CUDA_HOME")) {
    fs::path p = fs::path(h) / "bin" / "nvcc";
    if (fs::exists(p)) return p.string();
  }
  if (fs::exists("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return "nvcc";
}

fs::path default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "kernelrl";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "kernelrl";
  return "/tmp/kernelrl-cache";
}

std::string CompilePool::full_source(const std::string& source) {
  return "#include \"kernel_abi.h\"\n#line 1 \"candidate\"\n" + source;
}

std::string cutlass_version(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "cutlass" / "version.h");
  if (!in) return "";
  std::string text((std::istreambuf_iterator<char>(in)), {}), v;
  for (const char* key : {"CUTLASS_MAJOR", "CUTLASS_MINOR", "CUTLASS_PATCH"}) {
    std::smatch m;
    if (std::regex_search(text, m, std::regex(std::string("#define\\s+") + key + "\\s+(\\d+)")))
      v += (v.empty() ? "" : ".") + m[1].str();
  }
  return v.empty() ? "unknown" : v;
}

std::vector<std::string> resolve_include_dirs(const std::vector<std::string>& configured) {
  std::vector<std::string> out;
  for (const auto& d : configured) {
    if (d.empty()) continue;
    if (d != "auto") {
      if (!fs::is_directory(d))
        throw UserError("reward.include_dirs: \"" + d + "\" is not a directory");
      out.push_back(fs::absolute(d).string());
      continue;
    }
    if (const char* e = std::getenv("KERNELRL_CUTLASS_INCLUDE"); e && *e && fs::is_directory(e)) {
      out.push_back(fs::absolute(e).string());
      continue;
    }
#ifdef KERNELRL_VENV_DIR
    // The project's venv, where scripts/setup.sh installs the pinned nvidia-cutlass wheel.
    fs::path venv = KERNELRL_VENV_DIR;
    std::error_code ec;
    for (const auto& lib : fs::directory_iterator(venv / "lib", ec)) {
      fs::path inc = lib.path() / "site-packages" / "cutlass_library" / "source" / "include";
      if (fs::is_directory(inc / "cute")) {
        out.push_back(inc.string());
        break;
      }
    }
#endif
  }
  return out;
}

CompilePool::CompilePool(std::string backend, std::string arch, fs::path cache_dir, int jobs,
                         double timeout_s, std::vector<std::string> include_dirs, int host_slots,
                         fs::path host_slots_dir)
    : backend_(std::move(backend)), arch_(std::move(arch)), cache_dir_(std::move(cache_dir)),
      jobs_(jobs > 0 ? jobs : host_cpus()), timeout_s_(timeout_s),
      include_dirs_(std::move(include_dirs)),
      host_slots_(std::move(host_slots_dir), host_slots < 0 ? 0 : host_slots > 0 ? host_slots : host_cpus()) {
  for (const auto& d : include_dirs_) {
    std::string v = cutlass_version(d);
    include_identity_ += (v.empty() ? "dir" : "cutlass-" + v) + ";";
  }
  compiler_ = backend_ == "gpu" ? find_nvcc() : "g++";
  RunResult v = run_process({compiler_, "--version"}, 60);
  if (v.exit_code != 0)
    throw NotAvailableError("reward: cannot run the compiler `" + compiler_ + " --version`" +
                            (backend_ == "gpu" ? " (install the CUDA toolkit or use backend: host)"
                                               : ""));
  // nvcc: the "Cuda compilation tools, release X, VX" line; g++: the first line.
  std::istringstream in(v.output);
  for (std::string line; std::getline(in, line);) {
    if (toolkit_version_.empty() || line.find("release") != std::string::npos)
      toolkit_version_ = line;
  }
  std::error_code ec;
  fs::create_directories(cache_dir_ / "locks", ec);
  if (ec) throw UserError("reward.cache_dir: cannot create " + cache_dir_.string() + ": " + ec.message());
  // The ABI header, under the names a candidate may include it by.
  include_dir_ = cache_dir_ / ("include-" + content_hash(kKernelAbiText).substr(0, 12));
  fs::create_directories(include_dir_ / "reward");
  for (fs::path p : {include_dir_ / "kernel_abi.h", include_dir_ / "reward" / "kernel_abi.h"})
    if (!fs::exists(p)) atomic_write(p, kKernelAbiText);
}

std::vector<std::string> CompilePool::command(const fs::path& src, const fs::path& out) const {
  if (backend_ == "gpu") {
    std::string a = arch_.substr(3);  // "sm_90a" -> "90a"
    // --expt-relaxed-constexpr: CuTe/CUTLASS call constexpr host functions from device code.
    // -DNDEBUG: a release build, as CUTLASS's own; with device asserts compiled in, ptxas
    // serializes every wgmma of a CuTe mainloop (warning C7510) and the kernel is slow.
    std::vector<std::string> cmd = {compiler_, "-O3", "-DNDEBUG", "-std=c++17", "-shared", "-Xcompiler", "-fPIC",
                                    "-lineinfo", "-cudart", "shared", "--expt-relaxed-constexpr",
                                    "-gencode", "arch=compute_" + a + ",code=sm_" + a, "-I",
                                    include_dir_.string()};
    for (const auto& d : include_dirs_) cmd.insert(cmd.end(), {"-I", d});
    cmd.insert(cmd.end(), {"-o", out.string(), src.string()});
    return cmd;
  }
  std::vector<std::string> cmd = {compiler_, "-O2", "-DNDEBUG", "-std=c++17", "-shared", "-fPIC", "-x", "c++",
                                  "-I", include_dir_.string()};
  for (const auto& d : include_dirs_) cmd.insert(cmd.end(), {"-I", d});
  cmd.insert(cmd.end(), {"-o", out.string(), src.string()});
  return cmd;
}

std::string CompilePool::key_of(const std::string& text) const {
  std::string key = text;
  key += '\0';
  key += kKernelAbiText;
  for (const auto& a : command("SRC", "OUT")) {
    if (a.rfind(include_dir_.string(), 0) == 0) continue;  // cache location is not content
    if (std::find(include_dirs_.begin(), include_dirs_.end(), a) != include_dirs_.end()) continue;
    key += '\0' + a;
  }
  key += '\0' + include_identity_;  // the extra headers by version, not by where they sit
  key += '\0' + arch_ + '\0' + toolkit_version_;
  return content_hash(key);
}

std::string CompilePool::hash_of(const std::string& source) const {
  return key_of(full_source(source));
}

std::string CompilePool::compile_key(const std::string& source) const {
  std::string n = normalize_source(full_source(source));
  if (n.empty()) return hash_of(source);
  return key_of("normalized-v1\n" + n);
}

bool CompilePool::lookup(CompileOutcome& r) const {
  fs::path so = cache_dir_ / (r.key + ".so");
  fs::path fail = cache_dir_ / (r.key + ".fail");
  if (fs::exists(so)) {
    r.ok = r.cached = true;
    r.so_path = so;
    std::ifstream in(cache_dir_ / (r.key + ".log"));
    r.log.assign(std::istreambuf_iterator<char>(in), {});
    return true;
  }
  if (fs::exists(fail)) {
    r.cached = true;
    std::ifstream in(fail);
    std::string first;
    std::getline(in, first);
    r.timed_out = first == "timeout";
    r.log.assign(std::istreambuf_iterator<char>(in), {});
    return true;
  }
  return false;
}

namespace {

// An exclusive flock on `path` for this scope: another process compiling the same key holds
// it, and this one waits for its result instead of compiling the source a second time.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0)
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// Sources that include CUTLASS or CuTe take ~30x the CPU of a plain kernel (37 s against 1.2 s
// for the families' samples on one core, docs/benchmarks.md): they start first.
bool includes_cutlass(const std::string& source) {
  static const std::regex re(R"(#\s*include\s*[<"](cutlass|cute)/)");
  return std::regex_search(source, re);
}

}  // namespace

CompileOutcome CompilePool::compile(const std::string& source) {
  CompileOutcome r;
  r.hash = hash_of(source);
  r.key = compile_key(source);
  if (lookup(r)) return r;
  FileLock in_flight(cache_dir_ / "locks" / r.key);
  if (lookup(r)) return r;  // another process compiled it while this one waited
  fs::path so = cache_dir_ / (r.key + ".so");
  fs::path fail = cache_dir_ / (r.key + ".fail");
  fs::path logf = cache_dir_ / (r.key + ".log");
  // Private temp dir per compile; the .so is renamed into the cache only when complete.
  fs::path tmp = cache_dir_ / ("tmp-" + r.key + "-" + std::to_string(::getpid()) + "-" +
                               std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  fs::create_directories(tmp);
  fs::path src = tmp / (backend_ == "gpu" ? "candidate.cu" : "candidate.cpp");
  {
    std::ofstream out(src);
    out << full_source(source);
  }
  fs::path out_so = tmp / "candidate.so";
  RunResult rr;
  {
    HostSlots::Held slot = host_slots_.acquire();
    rr = run_process(command(src, out_so), timeout_s_, {}, /*pausable=*/true);
  }
  r.seconds = rr.seconds;
  r.cpu_seconds = rr.cpu_seconds;
  r.log = trim_compiler_log(rr.output, tmp.string() + "/");
  if (rr.timed_out) {
    r.timed_out = true;
    r.log = "compiler timed out after " + std::to_string(static_cast<int>(timeout_s_)) + " s\n" + r.log;
    atomic_write(fail, "timeout\n" + r.log);
  } else if (rr.exit_code == 0 && fs::exists(out_so)) {
    atomic_write(logf, r.log);
    fs::rename(out_so, so);  // atomic within one filesystem
    r.ok = true;
    r.so_path = so;
  } else {
    atomic_write(fail, "error\n" + r.log);
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return r;
}

std::vector<CompileOutcome> CompilePool::compile_all(
    const std::vector<std::string>& sources,
    const std::function<void(size_t, const CompileOutcome&)>& on_done) {
  std::vector<CompileOutcome> out(sources.size());
  // One compile per distinct key; the rest copy its outcome (with their own exact hash).
  std::map<std::string, size_t> first;
  std::vector<size_t> pending;
  std::vector<std::string> keys(sources.size()), hashes(sources.size());
  std::map<size_t, std::vector<size_t>> dups;  // first index -> later duplicates
  for (size_t i = 0; i < sources.size(); ++i) {
    hashes[i] = hash_of(sources[i]);
    keys[i] = compile_key(sources[i]);
    if (first.emplace(keys[i], i).second) pending.push_back(i);
    else dups[first[keys[i]]].push_back(i);
  }
  std::stable_partition(pending.begin(), pending.end(),
                        [&](size_t i) { return includes_cutlass(sources[i]); });
  auto copy_of = [&](size_t from, size_t to) {
    CompileOutcome c = out[from];
    c.hash = hashes[to];
    c.cached = true;
    c.seconds = c.cpu_seconds = 0;
    return c;
  };
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t t; (t = next++) < pending.size();) {
      size_t i = pending[t];
      try {
        out[i] = compile(sources[i]);
      } catch (const std::exception& e) {
        out[i].hash = hashes[i];
        out[i].key = keys[i];
        out[i].log = std::string("internal compile error: ") + e.what();
      }
      if (on_done) {
        on_done(i, out[i]);
        auto it = dups.find(i);  // read-only: threads share the map
        if (it != dups.end())
          for (size_t d : it->second) on_done(d, copy_of(i, d));
      }
    }
  };
  int n = std::min<int>(jobs_, static_cast<int>(pending.size()));
  std::vector<std::thread> threads;
  for (int i = 1; i < n; ++i) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < sources.size(); ++i)
    if (first[keys[i]] != i) out[i] = copy_of(first[keys[i]], i);
  return out;
}

}  // namespace kernelrl
