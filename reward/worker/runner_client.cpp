#include "reward/worker/runner_client.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>

#include "reward/worker/task_kind.h"

namespace kernelrl::worker {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kArenaAlign = 256;
// The arena's address is chosen here and must be free in the runner too, a fresh process with
// its own randomized layout. Below every region x86-64 Linux places by itself: a PIE and its
// brk heap start at 0x5555_5555_4000 plus up to 1 TiB of randomization, shared libraries and
// anonymous mmaps grow down from below the stack (0x7fxx_...). The window used to be
// 0x5000_0000_0000 + 16 TiB, which holds the PIE range: by that geometry (an estimate) about 1
// runner in 1,000 found its own
// executable or heap where the worker's arena sat ("cannot map the shared arena at its address:
// File exists", twice in one clean-clone CI run, 2026-11-27).
constexpr uint64_t kArenaBase = 0x100000000000ull;    // 16 TiB
constexpr uint64_t kArenaWindow = 0x300000000000ull;  // to 64 TiB, below 0x5555_5555_4000
// A request's deadline is the call timeout plus this: the runner must also be scheduled, read
// the request and write its answer (seconds on a loaded 2-core host), and a load runs the
// dynamic loader and the candidate's static initializers.
constexpr double kRequestGraceS = 2, kLoadGraceS = 10;

HostArena* g_arena = nullptr;  // the arena ArenaScope allocates from (one per worker)

void arena_delete(void* p) {
  if (g_arena && p) g_arena->free(p);
}

class ArenaAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* p = g_arena->allocate(std::max<size_t>(n, 1));
    return {p, p, &arena_delete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &arena_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

ArenaAllocator& arena_allocator() {
  static ArenaAllocator a;
  return a;
}

std::string tail_of(const fs::path& log, size_t bytes = 600) {
  std::ifstream in(log, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  in.seekg(size > bytes ? size - bytes : 0);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

// ------------------------------------------------------------------------------ HostArena
HostArena::HostArena(uint64_t bytes) : bytes_((bytes + 4095) & ~uint64_t{4095}) {
  int fd = ::memfd_create("kernelrl-arena", MFD_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);  // never fd 3, where the runner receives it
  ::close(fd);
  if (fd_ < 0 || ::ftruncate(fd_, static_cast<off_t>(bytes_)) != 0)
    throw std::runtime_error(std::string("sizing the host arena: ") + std::strerror(errno));
  std::random_device rd;
  for (int attempt = 0; attempt < 32 && !base_; ++attempt) {
    const uint64_t want = kArenaBase + ((uint64_t{rd()} << 30) % kArenaWindow);
    void* p = ::mmap(reinterpret_cast<void*>(want), bytes_, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED_NOREPLACE, fd_, 0);
    if (p == reinterpret_cast<void*>(want)) base_ = static_cast<uint8_t*>(p);
    else if (p != MAP_FAILED) ::munmap(p, bytes_);
  }
  if (!base_) throw std::runtime_error("cannot place the host arena");
  free_.emplace_back(0, bytes_);
  g_arena = this;
}

HostArena::~HostArena() {
  if (g_arena == this) g_arena = nullptr;
  if (base_) ::munmap(base_, bytes_);
  if (fd_ >= 0) ::close(fd_);
}

void* HostArena::allocate(size_t bytes) {
  const uint64_t need = (bytes + kArenaAlign - 1) & ~(kArenaAlign - 1);
  for (size_t i = 0; i < free_.size(); ++i) {
    auto& [off, size] = free_[i];
    if (size < need) continue;
    const uint64_t at = off;
    off += need;
    size -= need;
    if (size == 0) free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
    used_.emplace_back(at, need);
    return base_ + at;
  }
  throw std::bad_alloc();
}

void HostArena::free(void* p) {
  const uint64_t off = static_cast<uint64_t>(static_cast<uint8_t*>(p) - base_);
  auto it = std::find_if(used_.begin(), used_.end(), [&](const auto& u) { return u.first == off; });
  if (it == used_.end()) return;
  std::pair<uint64_t, uint64_t> block = *it;
  used_.erase(it);
  auto pos = std::lower_bound(free_.begin(), free_.end(), block);
  pos = free_.insert(pos, block);
  // Coalesce with the neighbours.
  if (pos + 1 != free_.end() && pos->first + pos->second == (pos + 1)->first) {
    pos->second += (pos + 1)->second;
    free_.erase(pos + 1);
  }
  if (pos != free_.begin() && (pos - 1)->first + (pos - 1)->second == pos->first) {
    (pos - 1)->second += pos->second;
    free_.erase(pos);
  }
}

bool HostArena::contains(const void* p) const {
  auto* b = static_cast<const uint8_t*>(p);
  return b >= base_ && b < base_ + bytes_;
}

ArenaScope::ArenaScope(HostArena* arena) {
  if (!arena) return;
  previous_ = c10::GetCPUAllocator();
  c10::SetCPUAllocator(&arena_allocator(), /*priority=*/255);
}

ArenaScope::~ArenaScope() {
  if (previous_) c10::SetCPUAllocator(static_cast<c10::Allocator*>(previous_), /*priority=*/255);
}

// ------------------------------------------------------------------------------ Runner
std::string find_runner_binary(const std::string& capture) {
  const bool shim = capture == "shim";
  const char* env = shim ? "KERNELRL_SHIM_RUNNER" : "KERNELRL_CANDIDATE_RUNNER";
  const char* name = shim ? "kernelrl_shim_runner" : "kernelrl_candidate_runner";
  if (const char* e = std::getenv(env); e && *e) return e;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(self.parent_path() / name)) return (self.parent_path() / name).string();
#ifdef KERNELRL_RUNNER_BIN
  if (!shim && fs::exists(KERNELRL_RUNNER_BIN)) return KERNELRL_RUNNER_BIN;
#endif
  throw std::runtime_error(std::string("the candidate runner ") + name + " was not found (build it, or set " + env +
                           ")");
}

nlohmann::json args_json(const kernelrl_args& a) {
  std::vector<uint64_t> ins, outs;
  std::vector<int64_t> dims;
  for (int i = 0; i < a.n_inputs; ++i) ins.push_back(reinterpret_cast<uint64_t>(a.inputs[i]));
  for (int i = 0; i < a.n_outputs; ++i) outs.push_back(reinterpret_cast<uint64_t>(a.outputs[i]));
  for (int i = 0; i < a.n_dims; ++i) dims.push_back(a.dims[i]);
  return {{"inputs", ins},
          {"outputs", outs},
          {"dims", dims},
          {"workspace", reinterpret_cast<uint64_t>(a.workspace)},
          {"workspace_bytes", a.workspace_bytes}};
}

Runner::Runner(RunnerOptions o) : o_(std::move(o)) {}

Runner::~Runner() {
  stop();
  std::error_code ec;
  if (o_.remove_log) fs::remove(o_.log_path, ec);
}

void Runner::stop() {
  exited_ = false;
  ready_ = false;
  if (proc_.running()) {
    ::kill(proc_.pid(), SIGKILL);  // also ends a stopped runner
    proc_.kill_and_reap();
  }
  paused_ = false;
  std::error_code ec;
  if (!o_.scratch.empty()) fs::remove_all(o_.scratch, ec);
}

void Runner::spawn() {
  launch();
  await_ready();
}

void Runner::launch() {
  stop();
  const bool own_gpu = o_.backend == "gpu" && !o_.visible_devices.empty();
  std::vector<std::string> cmd = {find_runner_binary(o_.backend == "gpu" ? o_.capture : "context"), "--backend", o_.backend, "--device",
                                  std::to_string(own_gpu ? 0 : o_.device), "--sandbox", o_.sandbox};
  std::vector<std::string> env;
  if (own_gpu) env.push_back("CUDA_VISIBLE_DEVICES=" + o_.visible_devices);
  if (o_.sandbox != "off") {
    std::error_code ec;
    fs::remove_all(o_.scratch, ec);
    fs::create_directories(o_.scratch);
    cmd.insert(cmd.end(), {"--scratch", fs::absolute(o_.scratch).string()});
  }
  int pass_fd = -1;
  if (o_.backend == "host") {
    if (!o_.arena) throw std::runtime_error("the host runner needs an arena");
    pass_fd = o_.arena->fd();
    cmd.insert(cmd.end(), {"--arena-fd", "3", "--arena-addr", std::to_string(o_.arena->address()),
                           "--arena-bytes", std::to_string(o_.arena->bytes())});
  }
  fs::create_directories(o_.log_path.parent_path());
  proc_.start(cmd, o_.log_path.string(), env, pass_fd);
}

void Runner::await_ready() {
  std::string line;
  if (proc_.read_line(line, 120) != ChildProcess::ReadStatus::line) {
    const int status = proc_.kill_and_reap();
    throw std::runtime_error("the candidate runner did not start (" + describe_wait_status(status) +
                             "): " + tail_of(o_.log_path));
  }
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.value("ready", false)) {
    proc_.kill_and_reap();
    throw std::runtime_error("the candidate runner is not ready: " +
                             (j.is_object() ? j.value("error", std::string("?")) : line));
  }
  ready_sandbox_ = j.value("sandbox", nlohmann::json::object());
  paused_ = false;
  exited_ = false;
  pause();
  ready_ = !exited_;
}

bool Runner::ready() const {
  if (!ready_ || !proc_.running()) return false;
  siginfo_t info{};  // has it exited? (WNOWAIT: asked without reaping it)
  if (::waitid(P_PID, static_cast<id_t>(proc_.pid()), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;
  return info.si_pid == 0;
}

nlohmann::json Runner::probe_sandbox() {
  spawn();
  nlohmann::json out = ready_sandbox_;
  stop();
  return out;
}

void Runner::pause() {
  if (paused_ || !proc_.running()) return;
  // The whole process group: a shim runner's capture child (runner_main.cpp) stops with it.
  ::kill(-proc_.pid(), SIGSTOP);
  ::kill(proc_.pid(), SIGSTOP);
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(proc_.pid(), &status, WUNTRACED);
    if (r < 0 && errno == EINTR) continue;
    break;
  }
  if (WIFSTOPPED(status)) {
    paused_ = true;
    return;
  }
  // It ended on its way to the stop: the status says how.
  last_status_ = status;
  exited_ = true;
}

void Runner::resume() {
  if (!paused_ || !proc_.running()) return;
  ::kill(-proc_.pid(), SIGCONT);
  ::kill(proc_.pid(), SIGCONT);
  paused_ = false;
}

[[noreturn]] void Runner::died(const std::string& during) {
  int status = exited_ ? last_status_ : proc_.reap(5);
  exited_ = false;
  const std::string tail = tail_of(o_.log_path);
  proc_.kill_and_reap();
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
    fail("sigsys",
         "the runner was killed by SIGSYS " + during +
             ": the candidate made a system call the sandbox forbids (with SIGSYS blocked, so it could "
             "not be named)" + (tail.empty() ? "" : ": " + tail),
         "sandbox_violation");
  const bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  fail(aborted ? "abort" : WIFSIGNALED(status) ? "signal" : "exit",
       "the candidate's host code " + describe_wait_status(status) + " " + during +
           (tail.empty() ? "" : ": " + tail),
       "crash");
}

nlohmann::json Runner::request(nlohmann::json req, double timeout_s) {
  const uint64_t id = ids_() >> 11;  // exact in a JSON double too
  req["id"] = id;
  const std::string what = "while " + std::string(req.value("op", "") == "capture" ? "captured" : "called");
  if (exited_ || !proc_.running()) died(what);
  resume();
  try {
    proc_.write_line(req.dump());
  } catch (const std::exception&) {
    died(what);
  }
  std::string line;
  const double grace = req.value("op", "") == "load" ? kLoadGraceS : kRequestGraceS;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s + grace);
  auto left_s = [&] {
    return std::max(0.0, std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count());
  };
  auto st = proc_.read_line(line, left_s());
  // A shim runner's queries (cudart_shim.h) carry the request's id; each is answered from the
  // worker's own context and the runner goes on (the request's deadline holds for all of it).
  while (st == ChildProcess::ReadStatus::line && on_query_) {
    auto q = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!q.is_object() || !q.contains("query") || !q.contains("id") || !q["id"].is_number_unsigned() ||
        q["id"].get<uint64_t>() != id)
      break;
    nlohmann::json answer;
    try {
      answer = on_query_(q["query"]);
    } catch (const std::exception& e) {
      answer = {{"result", 1}, {"error", e.what()}};
    }
    try {
      proc_.write_line(nlohmann::json{{"id", id}, {"answer", answer}}.dump());
    } catch (const std::exception&) {
      died(what);
    }
    st = proc_.read_line(line, left_s());
  }
  pause();
  if (st == ChildProcess::ReadStatus::timeout) {
    stop();
    char why[160];
    std::snprintf(why, sizeof why, "the candidate's host code did not return within %.1f s (%s)", timeout_s + grace,
                  what.c_str());
    fail("host_timeout", why, "hang");
  }
  // A line first, even from a runner that has ended since (its sandbox reports, then exits).
  if (st == ChildProcess::ReadStatus::eof) died(what);
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  // The sandbox's own report (written by its SIGSYS handler) incriminates only the candidate.
  if (j.is_object() && j.contains("result") && j["result"].is_object() &&
      j["result"].value("status", "") == "sandbox_violation") {
    stop();
    fail(j["result"].value("check", "sandbox"), j["result"].value("reason", ""), "sandbox_violation");
  }
  if (!j.is_object() || !j.contains("id") || !j["id"].is_number_unsigned() || j["id"].get<uint64_t>() != id) {
    stop();
    fail("forged_message",
         "the runner's channel carried a line that is not the answer to the worker's request (the "
         "candidate wrote to it): " + line.substr(0, 160),
         "reward_hack");
  }
  if (j.contains("error")) {
    const std::string check = j["error"].is_string() ? j["error"].get<std::string>() : "runner";
    const std::string reason = j.value("reason", "");
    if (check == "load_error" || check == "cudart_unsupported") fail(check, reason, "load_error");
    if (check == "nonzero_return" || check == "launch_failed") fail(check, reason, "launch_error");
    if (check == "device_state") fail(check, reason, "reward_hack");
    if (check == "runner") throw std::runtime_error("candidate runner: " + reason);
    fail(check, reason);  // not_capturable, not_replayable: wrong_answer
  }
  return j;
}

void Runner::start(const std::string& so, double timeout_s, const nlohmann::json& table,
                   std::function<nlohmann::json(const nlohmann::json&)> on_query) {
  if (used_) throw std::logic_error("a candidate runner takes one candidate");
  if (!ready()) spawn();
  ready_ = false;
  used_ = true;
  on_query_ = std::move(on_query);
  nlohmann::json req = {{"op", "load"}, {"so", so}};
  if (!table.is_null()) req["table"] = table;
  request(std::move(req), timeout_s);
}

GraphImage Runner::capture(const kernelrl_args& a, double timeout_s) {
  auto j = request({{"op", "capture"}, {"args", args_json(a)}}, timeout_s);
  try {
    return graph_image_from_json(j.at("graph"));
  } catch (const std::exception& e) {
    stop();
    fail("forged_message", std::string("the runner's description of the captured work is malformed: ") + e.what(),
         "reward_hack");
  }
}

void Runner::call(const std::vector<kernelrl_args>& calls, double timeout_s) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& a : calls) list.push_back(args_json(a));
  auto j = request({{"op", "call"}, {"calls", list}}, timeout_s);
  if (!j.value("done", false)) {
    stop();
    fail("forged_message", "the runner answered a call without saying it was done", "reward_hack");
  }
}

}  // namespace kernelrl::worker
