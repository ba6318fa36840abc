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
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
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
  std::string backend = "gpu", sandbox_mode = "auto", scratch;
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

  SandboxStatus sandbox;
  try {
#ifdef KERNELRL_SHIM_RUNNER
    // No driver here, so nothing starts threads, and the candidate's host code gets no GPU.
    sandbox = install_sandbox(sandbox_mode, scratch, proto, /*deny_threads=*/true, /*deny_gpu=*/true);
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
