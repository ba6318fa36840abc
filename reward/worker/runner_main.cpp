// kernelrl_candidate_runner: the only process that ever runs a candidate's host code (reward
// integrity, docs/sandbox.md). The worker starts a fresh one for every candidate, inside the OS
// sandbox, and trusts nothing it says: on a GPU it only captures the candidate's calls into CUDA
// graphs and describes them (graph_image.h); the worker rebuilds, runs, checks and times them
// itself. On the host backend it runs the calls on buffers the worker shares with it (an arena
// mapped at the same address in both) while the worker times the round trip and checks every
// output. It never holds the evaluator's channel, never measures anything and is stopped
// (SIGSTOP) whenever the worker is not waiting on it.
//
//   kernelrl_candidate_runner --backend gpu|host [--device N] [--sandbox auto|on|off --scratch DIR]
//                             [--arena-fd FD --arena-addr ADDR --arena-bytes N]
// One JSON request per stdin line, one answer per request on a private copy of stdout (fd 1
// itself goes to stderr, the runner's log):
//   {"op":"load","so":PATH}                 -> {"loaded":true}
//   {"op":"capture","id":ID,"args":ARGS}    -> {"id":ID,"graph":IMAGE}         (gpu)
//   {"op":"call","id":ID,"calls":[ARGS..]}  -> {"id":ID,"done":true}           (host)
//   {"op":"exit"}
// A failure answers {"id":ID,"error":CHECK,"reason":WHY}. ARGS: {"inputs":[addr..],
// "outputs":[addr..],"dims":[..],"workspace":addr,"workspace_bytes":n}.
//
// Built twice. kernelrl_candidate_runner (reward.capture: context) creates a CUDA context and
// captures with the real runtime. kernelrl_shim_runner (reward.capture: shim, KERNELRL_SHIM_RUNNER)
// links cudart_shim.h's libcudart.so.13 instead: no CUDA context, no GPU (the sandbox denies
// /dev/nvidia* and threads); its load request carries the worker's table
// ({"op":"load","so":PATH,"table":TABLE}), and while it captures it may ask the worker what the
// table cannot answer: {"id":ID,"query":Q} -> {"id":ID,"answer":A} (occupancy, TMA descriptors).
//
// Capture children (the shim runner, on unless --capture-children off; docs/sandbox.md, "Cold
// means cold"): the runner loads the candidate once (its static constructors run here, before any
// address is known), then captures every request in a fresh child of its own (fork; no CUDA
// context here, so fork is safe) that handles exactly that one request and exits. The runner
// never parses a request after the load and runs none of the candidate's code again (every signal
// blocked, _Fork runs no atfork handlers); it relays the worker's lines to the current child over a
// pipe made before the load, and a line that is no query answer waits for the child to end: no
// child learns another's request, and nothing a child changed (its copy-on-write memory) outlives
// it. The sandbox (capture_children) denies every object two processes could share.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "reward/kernel_abi.h"
#include "reward/worker/graph_image.h"
#include "reward/worker/sandbox.h"

#ifdef KERNELRL_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>

#include "reward/worker/graph_cuda.h"
#endif
#ifdef KERNELRL_SHIM_RUNNER
#include <elf.h>

#include <fstream>
#include <set>

#include "reward/worker/cudart_shim.h"
#endif

using namespace kernelrl::worker;

namespace {

using LaunchFn = int (*)(const kernelrl_args*, void*);
FILE* g_out = nullptr;  // the channel to the worker

void send(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(s.data(), 1, s.size(), g_out);
  std::fflush(g_out);
}

kernelrl_args args_from_json(const nlohmann::json& j) {
  kernelrl_args a{};
  auto ins = j.at("inputs").get<std::vector<uint64_t>>();
  auto outs = j.at("outputs").get<std::vector<uint64_t>>();
  auto dims = j.at("dims").get<std::vector<int64_t>>();
  if (ins.size() > 8 || outs.size() > 4 || dims.size() > 8) throw std::runtime_error("too many arguments");
  for (size_t i = 0; i < ins.size(); ++i) a.inputs[i] = reinterpret_cast<const void*>(ins[i]);
  for (size_t i = 0; i < outs.size(); ++i) a.outputs[i] = reinterpret_cast<void*>(outs[i]);
  for (size_t i = 0; i < dims.size(); ++i) a.dims[i] = dims[i];
  a.n_inputs = static_cast<int>(ins.size());
  a.n_outputs = static_cast<int>(outs.size());
  a.n_dims = static_cast<int>(dims.size());
  a.workspace = reinterpret_cast<void*>(j.at("workspace").get<uint64_t>());
  a.workspace_bytes = j.at("workspace_bytes").get<size_t>();
  return a;
}

nlohmann::json failure(const nlohmann::json& id, const std::string& check, const std::string& why) {
  return {{"id", id}, {"error", check}, {"reason", why}};
}

#ifdef KERNELRL_SHIM_RUNNER
// The CUDA runtime symbols the candidate's library needs that the shim does not export (read from
// its dynamic symbol table before it is loaded, so none of its code has run).
std::vector<std::string> unsupported_cudart(const std::string& so) {
  std::ifstream in(so, std::ios::binary);
  std::string b((std::istreambuf_iterator<char>(in)), {});
  auto fits = [&](uint64_t off, uint64_t n) { return off <= b.size() && n <= b.size() - off; };
  if (!fits(0, sizeof(Elf64_Ehdr))) throw std::runtime_error("not an ELF file");
  Elf64_Ehdr eh;
  std::memcpy(&eh, b.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
    throw std::runtime_error("not a 64-bit ELF file");
  if (!fits(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr))) throw std::runtime_error("bad section table");
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), b.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
  const std::set<std::string> have(kernelrl::worker::shim::exported_symbols().begin(),
                                   kernelrl::worker::shim::exported_symbols().end());
  std::set<std::string> missing;
  for (const auto& s : sh) {
    if (s.sh_type != SHT_DYNSYM || s.sh_link >= sh.size()) continue;
    const auto& str = sh[s.sh_link];
    if (!fits(s.sh_offset, s.sh_size) || !fits(str.sh_offset, str.sh_size)) throw std::runtime_error("bad symbol table");
    for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= s.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, b.data() + s.sh_offset + off, sizeof sym);
      if (sym.st_shndx != SHN_UNDEF || sym.st_name >= str.sh_size) continue;
      const char* name = b.data() + str.sh_offset + sym.st_name;
      const std::string n(name, strnlen(name, str.sh_size - sym.st_name));
      if ((n.rfind("cuda", 0) == 0 || n.rfind("__cuda", 0) == 0) && !have.count(n)) missing.insert(n);
    }
  }
  return {missing.begin(), missing.end()};
}

// A question the table cannot answer, asked of the worker mid-capture on the channel.
nlohmann::json g_request_id;
nlohmann::json ask_worker(const nlohmann::json& q) {
  send({{"id", g_request_id}, {"query", q}});
  std::string line;
  if (!std::getline(std::cin, line)) throw std::runtime_error("the worker went away");
  auto a = nlohmann::json::parse(line);
  if (a.value("id", nlohmann::json()) != g_request_id || !a.contains("answer"))
    throw std::runtime_error("the worker did not answer the query");
  return a.at("answer");
}

nlohmann::json capture(LaunchFn fn, const nlohmann::json& req) {
  namespace shim = kernelrl::worker::shim;
  const auto& id = req.at("id");
  g_request_id = id;
  kernelrl_args a = args_from_json(req.at("args"));
  shim::begin_capture();
  const int rc = fn(&a, shim::capture_stream());
  shim::Captured c = shim::end_capture(rc);
  if (!c.check.empty()) return failure(id, c.check, c.reason);
  return {{"id", id}, {"graph", to_json(c.graph)}};
}
#endif

#ifdef KERNELRL_SHIM_RUNNER
// ---- capture children
// A child's exit status says what it did; any other status is a crash the runner repeats
// (die_like). Not 0: a candidate that calls exit(0) mid-capture must read as today's exit.
constexpr int kChildDone = 77;       // the child answered its request: fork the next
constexpr int kChildEndRunner = 78;  // the worker said exit (or went away): the runner ends
constexpr int kViolationExit = 3;   // the sandbox's report was written (sandbox.cpp)

struct Relay {
  int proto = -1;               // the channel to the worker (answers, queries: the child's own)
  int to_child = -1;            // the write end of the relay pipe (made before the load)
  int child_in = -1;            // its read end: each child's stdin
  struct stat in_st {}, proto_st {}, relay_st {};  // identity of the kept descriptors
};

// A buffer outside the heap: what the worker sent during one child's life (its request, the
// answers to its queries) is unmapped before the next fork, so no child inherits another's bytes.
struct Bytes {
  char* p = nullptr;
  size_t n = 0, cap = 0;
  void reserve(size_t want) {
    if (want <= cap) return;
    size_t c = cap ? cap : 1 << 16;
    while (c < want) c *= 2;
    void* q = p ? mremap(p, cap, c, MREMAP_MAYMOVE) : mmap(nullptr, c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) _exit(1);
    p = static_cast<char*>(q), cap = c;
  }
  void drop_front(size_t k) {  // keep what follows the first k bytes, zero the rest
    std::memmove(p, p + k, n - k);
    n -= k;
    std::memset(p + n, 0, cap - n);
  }
  void release() {
    if (p) {
      std::memset(p, 0, cap);
      munmap(p, cap);
    }
    p = nullptr, n = cap = 0;
  }
};

bool write_all(int fd, const char* p, size_t n) {
  while (n) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= static_cast<size_t>(w);
  }
  return true;
}

bool same_file(int fd, const struct stat& was) {
  struct stat now {};
  return ::fstat(fd, &now) == 0 && now.st_dev == was.st_dev && now.st_ino == was.st_ino;
}

// The sandbox's verdict line (as its SIGSYS handler writes it), then the runner ends.
[[noreturn]] void violation(const std::string& check, const std::string& why) {
  send({{"result", {{"status", "sandbox_violation"}, {"check", check}, {"reason", why}}}, {"fatal", true}});
  _exit(kViolationExit);
}

// The runner dies as its child did, so that the worker's verdict is the one a runner that
// crashed itself gets (Runner::died): the same signal, or the same exit status.
[[noreturn]] void die_like(int status) {
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  if (!sig && code > kSelfSignalExit && code <= kSelfSignalExit + 64) sig = code - kSelfSignalExit;
  if (sig == SIGSYS)  // the sandbox forbids resetting SIGSYS: blocked, that trap kills with SIGSYS
    ::signal(SIGSYS, SIG_DFL);
  if (sig) {
    std::fflush(nullptr);
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    ::kill(::getpid(), sig);
    if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) ::kill(::getpid(), SIGKILL);
    ::signal(SIGABRT, SIG_DFL);
    ::kill(::getpid(), SIGABRT);  // an ignorable signal the child's disposition made fatal
  }
  _exit(code);
}

void on_sigchld(int) {}

// Runs in the child: one request read from the relay, handled, and the child ends.
[[noreturn]] void child_main(LaunchFn fn, const Relay& r, pid_t parent, const sigset_t& mask,
                             const struct sigaction& chld) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(1);
  // Signals as the load left them (the sandbox's SIGSYS handler must run from here on; a fork
  // leaves nothing pending).
  ::sigaction(SIGCHLD, &chld, nullptr);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  ::dup2(r.child_in, 0);
  ::close(r.child_in);
  ::close(r.to_child);
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);  // its own: no shared log offset
  if (null >= 0) {
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::close(null);
  }
  try {
    confine_capture_child(static_cast<int>(parent));
  } catch (const std::exception& e) {
    send(failure(nullptr, "runner", e.what()));
    _exit(1);
  }
  std::string line;
  while (line.empty())
    if (!std::getline(std::cin, line)) _exit(kChildEndRunner);
  nlohmann::json req, id;
  try {
    req = nlohmann::json::parse(line);
    id = req.value("id", nlohmann::json());
  } catch (const std::exception& e) {
    send({{"error", "runner"}, {"reason", std::string("bad request: ") + e.what()}});
    _exit(kChildDone);
  }
  const std::string op = req.value("op", "");
  if (op == "exit") _exit(kChildEndRunner);
  try {
    send(op == "capture" ? capture(fn, req) : failure(id, "runner", "unknown op " + op + " after the load"));
  } catch (const std::exception& e) {
    send(failure(id, "runner", e.what()));
  }
  std::fflush(nullptr);
  _exit(kChildDone);
}

// After a successful load (answered here, `id`): the runner only forks, relays and reaps.
[[noreturn]] void serve_in_children(LaunchFn fn, Relay& r, const nlohmann::json& id) {
  // Children the candidate's load started would hold the worker's pipe: refuse (they die with
  // the runner's process group, Runner::stop).
  siginfo_t info{};
  auto has_children = [&] {
    return ::waitid(P_ALL, 0, &info, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) == 0;
  };
  if (has_children())
    violation("clone", "the candidate tried to start a process (its static initializers started process " +
                           std::to_string(info.si_pid) + "), denied by the evaluator's sandbox");
  if (!same_file(0, r.in_st) || !same_file(r.proto, r.proto_st) || !same_file(r.child_in, r.relay_st) ||
      !same_file(r.to_child, r.relay_st))
    violation("dup2", "the candidate tried to replace the runner's channel at load, denied by the evaluator's sandbox");
  // Nothing else is inherited: a descriptor the load opened (a file offset is shared state).
  for (int fd = 3; fd < 1024; ++fd)
    if (fd != r.proto && fd != r.to_child && fd != r.child_in) ::close(fd);
  ::syscall(SYS_close_range, 1024u, ~0u, 0u);
  for (int fd : {0, r.proto, r.child_in, r.to_child}) ::fcntl(fd, F_SETFL, 0);  // blocking, as before
  // None of the candidate's code runs here again: every signal stays blocked (a handler its
  // static initializers installed never runs), SIGCHLD only wakes ppoll below.
  sigset_t all, before, wait_mask;
  sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, &before);
  struct sigaction chld_before {}, mine {};
  mine.sa_handler = on_sigchld;
  sigemptyset(&mine.sa_mask);
  ::sigaction(SIGCHLD, &mine, &chld_before);
  send({{"id", id}, {"loaded", true}});
  sigfillset(&wait_mask);
  sigdelset(&wait_mask, SIGCHLD);
  const pid_t self = ::getpid();
  Bytes in;  // bytes from the worker not yet given to a child
  for (;;) {
    // The next request: wait for the worker's first bytes, then fork the child that reads it.
    if (in.n == 0) {
      in.reserve(4096);
      ssize_t k;
      while ((k = ::read(0, in.p, in.cap)) < 0 && errno == EINTR) {
      }
      if (k <= 0) _exit(0);  // the worker went away
      in.n = static_cast<size_t>(k);
    }
    if (has_children()) _exit(1);  // cannot happen: each child is reaped before the next
    const pid_t pid = ::_Fork();
    if (pid < 0) {
      send(failure(nullptr, "runner", std::string("fork: ") + std::strerror(errno)));
      _exit(1);
    }
    if (pid == 0) {
      in.release();
      child_main(fn, r, self, before, chld_before);
    }
    // Relay: the first line (its request) and then only answers to its queries; any other line
    // is the next request and waits until this child has ended.
    size_t given = 0;   // bytes of `in` already written to this child
    int lines = 0;      // whole lines given
    bool eof = false;
    int status = 0;
    for (;;) {
      // Give whole lines while they are this child's.
      for (;;) {
        char* nl = static_cast<char*>(std::memchr(in.p + given, '\n', in.n - given));
        if (!nl) break;
        const bool answer = in.n - given >= 10 && std::memcmp(in.p + given, "{\"answer\":", 10) == 0;
        if (lines > 0 && !answer) break;
        const size_t len = static_cast<size_t>(nl - (in.p + given)) + 1;
        if (!write_all(r.to_child, in.p + given, len)) break;
        given += len;
        ++lines;
      }
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      pollfd p{0, static_cast<short>(eof ? 0 : POLLIN), 0};
      const int rc = ::ppoll(&p, 1, nullptr, &wait_mask);
      if (rc > 0 && (p.revents & (POLLIN | POLLHUP))) {
        in.reserve(in.n + 4096);
        const ssize_t k = ::read(0, in.p + in.n, in.cap - in.n);
        if (k > 0) in.n += static_cast<size_t>(k);
        else if (k == 0) eof = true;
      }
    }
    // What the child left unread in the relay pipe (the worker's bytes) goes with it.
    int left = 0;
    while (::ioctl(r.child_in, FIONREAD, &left) == 0 && left > 0) {
      char sink[4096];
      if (::read(r.child_in, sink, std::min<size_t>(sizeof sink, static_cast<size_t>(left))) <= 0) break;
      std::memset(sink, 0, sizeof sink);
    }
    in.drop_front(given);
    if (in.n == 0) in.release();
    if (WIFEXITED(status) && WEXITSTATUS(status) == kChildDone) {
      if (eof && in.n == 0) _exit(0);
      continue;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == kChildEndRunner) {
      std::fflush(nullptr);
      _exit(0);
    }
    die_like(status);
  }
}
#endif

#ifdef KERNELRL_HAVE_CUDA
cudaStream_t g_stream = nullptr;
// The context's L2 set-aside for persisting accesses before the candidate was loaded (the
// driver's default need not be 0: 9,830,400 bytes on the H100s seen on 2026-11-26).
size_t g_persisting_default = 0;

// One call captured (global mode: a sync, an allocation or work on another stream invalidates
// it) and described.
nlohmann::json capture(LaunchFn fn, const nlohmann::json& req) {
  const auto& id = req.at("id");
  kernelrl_args a = args_from_json(req.at("args"));
  cudaGetLastError();
  if (cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal) != cudaSuccess)
    return failure(id, "runner", "cannot begin a capture");
  const int rc = fn(&a, g_stream);
  const cudaError_t launch = cudaGetLastError();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(g_stream, &graph);
  cudaGetLastError();
  struct Destroy {
    cudaGraph_t g;
    ~Destroy() {
      if (g) cudaGraphDestroy(g);
    }
  } destroy{graph};
  // An invalidated capture first: the launch that broke it (on another stream, a sync) usually
  // makes the call return an error too.
  if (end != cudaSuccess || !graph)
    return failure(id, "not_capturable",
                   std::string("the call could not be captured into a CUDA graph (") + cudaGetErrorName(end) +
                       ": " + cudaGetErrorString(end) +
                       "): candidates must be capturable (no sync, allocation or other stream inside "
                       "kernelrl_launch)");
  if (rc != 0) return failure(id, "nonzero_return", "kernelrl_launch returned " + std::to_string(rc));
  if (launch != cudaSuccess)
    return failure(id, "launch_failed", std::string("launch failed: ") + cudaGetErrorName(launch) + " (" +
                                            cudaGetErrorString(launch) + ")");
  size_t persisting = 0;
  if (cudaDeviceGetLimit(&persisting, cudaLimitPersistingL2CacheSize) == cudaSuccess &&
      persisting != g_persisting_default)
    return failure(id, "device_state",
                   "the candidate changed the L2 set-aside for persisting accesses "
                   "(cudaLimitPersistingL2CacheSize) from " + std::to_string(g_persisting_default) + " to " +
                       std::to_string(persisting) + " bytes: persisting lines survive the cold-L2 flush");
  try {
    return {{"id", id}, {"graph", to_json(describe_graph(reinterpret_cast<CUgraph>(graph)))}};
  } catch (const NotReplayable& e) {
    return failure(id, e.check, e.what());
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "gpu", sandbox_mode = "auto", scratch, capture_children = "on";
  int device = 0, arena_fd = -1;
  uint64_t arena_addr = 0, arena_bytes = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kernelrl_candidate_runner: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend") backend = next();
    else if (a == "--device") device = std::stoi(next());
    else if (a == "--sandbox") sandbox_mode = next();
    else if (a == "--scratch") scratch = next();
    else if (a == "--capture-children") capture_children = next();  // shim: on | off (tests, bench)
    else if (a == "--arena-fd") arena_fd = std::stoi(next());
    else if (a == "--arena-addr") arena_addr = std::stoull(next(), nullptr, 0);
    else if (a == "--arena-bytes") arena_bytes = std::stoull(next(), nullptr, 0);
    else {
      std::fprintf(stderr, "kernelrl_candidate_runner: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  // The runner dies with its worker (a stopped runner would otherwise keep its CUDA context).
  const pid_t parent = getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;  // the worker is already gone
  // Nothing inherited but the pipes, the log and the arena (the worker spawns with closefrom
  // too; this holds if it ever did not).
  ::syscall(SYS_close_range, static_cast<unsigned>(std::max(3, arena_fd + 1)), ~0u, 0u);
  int proto = dup(1);
  dup2(2, 1);
  fcntl(proto, F_SETFD, FD_CLOEXEC);
  g_out = fdopen(proto, "w");

  try {
    if (backend == "host") {
      if (arena_fd < 0 || !arena_addr || !arena_bytes) throw std::runtime_error("the host backend needs --arena-*");
      void* p = mmap(reinterpret_cast<void*>(arena_addr), arena_bytes, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED_NOREPLACE, arena_fd, 0);
      if (p != reinterpret_cast<void*>(arena_addr))
        throw std::runtime_error(std::string("cannot map the shared arena at its address: ") + std::strerror(errno));
      ::close(arena_fd);  // the mapping stays; the candidate cannot resize what it cannot name
    } else {
#if defined(KERNELRL_SHIM_RUNNER)
      (void)device;  // no CUDA context: the worker's table answers for its device
#elif defined(KERNELRL_HAVE_CUDA)
      if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess ||
          cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess)
        throw std::runtime_error("no CUDA context on device " + std::to_string(device));
      if (cudaDeviceGetLimit(&g_persisting_default, cudaLimitPersistingL2CacheSize) != cudaSuccess)
        g_persisting_default = 0;
      cudaGetLastError();
#else
      throw std::runtime_error("this build has no CUDA");
#endif
    }
  } catch (const std::exception& e) {
    send({{"ready", false}, {"error", e.what()}});
    return 1;
  }

#ifdef KERNELRL_SHIM_RUNNER
  const bool children = backend != "host" && capture_children != "off";
  if (capture_children != "on" && capture_children != "off") {
    send({{"ready", false}, {"error", "--capture-children takes on or off, not " + capture_children}});
    return 1;
  }
  Relay relay;
  if (children) {  // made before the sandbox denies pipes; its identity is checked after the load
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      send({{"ready", false}, {"error", std::string("pipe: ") + std::strerror(errno)}});
      return 1;
    }
    relay.proto = proto, relay.child_in = p[0], relay.to_child = p[1];
    ::fcntl(p[0], F_SETFD, 0);  // each child's stdin once dup2'd
    ::fstat(0, &relay.in_st);
    ::fstat(proto, &relay.proto_st);
    ::fstat(p[0], &relay.relay_st);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // a grandchild of the load is still the runner's to see
  }
#endif
  SandboxStatus sandbox;
  try {
#ifdef KERNELRL_SHIM_RUNNER
    // No driver here, so nothing starts threads, and the candidate's host code gets no GPU.
    sandbox = install_sandbox(sandbox_mode, scratch, proto, /*deny_threads=*/true, /*deny_gpu=*/true,
                              /*capture_children=*/children);
#else
    sandbox = install_sandbox(sandbox_mode, scratch, proto, /*deny_threads=*/backend == "host");
#endif
  } catch (const std::exception& e) {
    send({{"ready", false}, {"error", e.what()}});
    return 1;
  }
  send({{"ready", true},
        {"sandbox", {{"summary", sandbox.summary}, {"parts", sandbox.parts()}}},
        {"pid", static_cast<int>(getpid())}});

  LaunchFn fn = nullptr;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::json req;
    try {
      req = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      send({{"error", "runner"}, {"reason", std::string("bad request: ") + e.what()}});
      continue;
    }
    const std::string op = req.value("op", "");
    const nlohmann::json id = req.value("id", nlohmann::json());
    if (op == "exit") break;
    try {
      if (op == "load") {
#ifdef KERNELRL_SHIM_RUNNER
        g_request_id = id;
        kernelrl::worker::shim::set_table(req.at("table"));
        kernelrl::worker::shim::set_query(ask_worker);
        if (auto missing = unsupported_cudart(req.at("so").get<std::string>()); !missing.empty()) {
          std::string list;
          for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
          send(failure(id, "cudart_unsupported",
                       "the candidate needs CUDA runtime functions the evaluator's capture does not provide: " +
                           list));
          continue;
        }
#endif
        void* h = dlopen(req.at("so").get<std::string>().c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) {
          const char* e = dlerror();
          send(failure(id, "load_error", std::string("dlopen failed: ") + (e ? e : "?")));
          continue;
        }
        fn = reinterpret_cast<LaunchFn>(dlsym(h, "kernelrl_launch"));
        if (!fn) {
          send(failure(id, "load_error",
                       "no symbol kernelrl_launch with C linkage (declare it extern \"C\" or include kernel_abi.h)"));
          continue;
        }
#ifdef KERNELRL_SHIM_RUNNER
        if (children) serve_in_children(fn, relay, id);
#endif
        send({{"id", id}, {"loaded", true}});
      } else if (!fn) {
        send(failure(id, "runner", "no candidate loaded"));
      } else if (op == "call" && backend == "host") {
        int rc = 0;
        for (const auto& j : req.at("calls")) {
          kernelrl_args a = args_from_json(j);
          if ((rc = fn(&a, nullptr)) != 0) break;
        }
        send(rc ? failure(id, "nonzero_return", "kernelrl_launch returned " + std::to_string(rc))
                : nlohmann::json{{"id", id}, {"done", true}});
#if defined(KERNELRL_HAVE_CUDA) || defined(KERNELRL_SHIM_RUNNER)
      } else if (op == "capture" && backend != "host") {
        send(capture(fn, req));
#endif
      } else {
        send(failure(id, "runner", "unknown op " + op));
      }
    } catch (const std::exception& e) {
      send(failure(id, "runner", e.what()));
    }
  }
  std::fflush(nullptr);
  _exit(0);  // the candidate's static destructors do not run
}
