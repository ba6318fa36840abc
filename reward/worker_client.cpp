#include "reward/worker_client.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <fstream>
#include <stdexcept>

#include "common/error.h"

namespace kernelrl {

namespace fs = std::filesystem;

std::string find_worker_binary() {
  if (const char* e = std::getenv("KERNELRL_EVAL_WORKER"); e && *e) return e;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = self.parent_path(); !dir.empty() && dir != dir.root_path();
         dir = dir.parent_path()) {
      for (fs::path p : {dir / "kernelrl_eval_worker", dir / "reward" / "kernelrl_eval_worker"})
        if (fs::exists(p)) return p.string();
    }
  }
#ifdef KERNELRL_WORKER_BIN
  if (fs::exists(KERNELRL_WORKER_BIN)) return KERNELRL_WORKER_BIN;
#endif
  throw NotAvailableError(
      "reward: the worker executable kernelrl_eval_worker was not found (build the "
      "kernelrl_eval_worker target or set KERNELRL_EVAL_WORKER)");
}

WorkerClient::WorkerClient(std::string backend, int device, double silence_s, fs::path log_dir)
    : backend_(std::move(backend)), device_(device), silence_s_(silence_s),
      log_dir_(std::move(log_dir)) {}

WorkerClient::~WorkerClient() { stop(); }

void WorkerClient::stop() {
  if (proc_.running()) {
    try {
      proc_.write_line(R"({"op":"exit"})");
      proc_.reap(5);
    } catch (...) {
    }
    proc_.kill_and_reap();
  }
  started_ = false;
  std::error_code ec;
  if (!scratch_dir_.empty()) fs::remove_all(scratch_dir_, ec);
}

std::string WorkerClient::stderr_tail(size_t bytes) const {
  std::ifstream in(log_path_, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(in.tellg());
  in.seekg(size > bytes ? size - bytes : 0);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

void WorkerClient::start() {
  fs::create_directories(log_dir_);
  log_path_ = log_dir_ / ("worker-" + std::to_string(device_) + "-" + std::to_string(::getpid()) + ".log");
  std::vector<std::string> cmd = {find_worker_binary(), "--backend", backend_, "--device",
                                  std::to_string(device_), "--sandbox", sandbox_};
  if (capture_ != "context") cmd.insert(cmd.end(), {"--capture", capture_});
  if (sandbox_ != "off") {  // a fresh scratch directory for every start
    std::error_code ec;
    fs::remove_all(scratch_dir_, ec);
    fs::create_directories(scratch_dir_);
    cmd.insert(cmd.end(), {"--scratch", fs::absolute(scratch_dir_).string()});
  }
  proc_.start(cmd, log_path_.string());
  std::string line;
  // LibTorch and a CUDA context take seconds to come up.
  auto st = proc_.read_line(line, 180);
  if (st != ChildProcess::ReadStatus::line) {
    int status = proc_.kill_and_reap();
    throw std::runtime_error("reward: the evaluation worker did not start (" +
                             describe_wait_status(status) + "): " + stderr_tail());
  }
  auto j = nlohmann::json::parse(line);
  if (!j.value("ready", false)) {
    proc_.kill_and_reap();
    throw NotAvailableError("reward: evaluation worker: " + j.value("error", std::string("not ready")));
  }
  info_.backend = j.value("backend", "");
  info_.device = j.value("device", "");
  info_.driver = j.value("driver", "");
  info_.arch = j.value("arch", "");
  info_.cc = j.value("cc", "");
  info_.device_count = j.value("device_count", 0);
  info_.l2_bytes = j.value("l2_bytes", size_t{0});
  if (j.contains("sandbox")) {
    info_.sandbox = j["sandbox"].value("summary", "off");
    info_.sandbox_parts = j["sandbox"].value("parts", "off");
  }
  started_ = true;
}

const WorkerInfo& WorkerClient::info() {
  if (!started_ || !proc_.running()) start();
  return info_;
}

nlohmann::json WorkerClient::evaluate(const nlohmann::json& request) {
  if (!started_ || !proc_.running()) {
    if (started_) ++restarts_;
    start();
  }
  try {
    proc_.write_line(request.dump());
  } catch (const std::exception&) {
    // Died between requests: restart once and resend.
    proc_.kill_and_reap();
    ++restarts_;
    start();
    proc_.write_line(request.dump());
  }
  std::string line;
  // The worker brackets its timing with quiet:begin/quiet:end ticks; the window closes on every
  // way out of here (result, crash, hang), so compile jobs never stay stopped.
  struct QuietScope {
    bool open = false;
    ~QuietScope() {
      if (open) quiet_end();
    }
  } quiet_scope;
  for (;;) {
    auto st = proc_.read_line(line, silence_s_);
    if (st == ChildProcess::ReadStatus::timeout) {
      proc_.kill_and_reap();
      started_ = true;  // restart before the next request
      return {{"status", "hang"},
              {"check", "timeout"},
              {"reason", "no progress from the candidate for " + std::to_string(static_cast<int>(silence_s_)) +
                             " s: killed the worker"}};
    }
    if (st == ChildProcess::ReadStatus::eof) {
      int status = proc_.reap(10);
      std::string tail = stderr_tail(600);
      bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
      // The sandbox's filter kills with SIGSYS when its handler cannot run (the candidate blocked
      // SIGSYS, or the call came from a thread that blocks it): the call did not run either way.
      if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
        return {{"status", "sandbox_violation"},
                {"check", "sigsys"},
                {"reason", "the worker was killed by SIGSYS: the candidate made a system call the "
                           "sandbox forbids (with SIGSYS blocked, so it could not be named)" +
                               (tail.empty() ? std::string() : ": " + tail)}};
      return {{"status", "crash"},
              {"check", aborted ? "abort" : WIFSIGNALED(status) ? "signal" : "exit"},
              {"reason", "the worker " + describe_wait_status(status) + " while running the candidate" +
                             (tail.empty() ? "" : ": " + tail)}};
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (...) {
      continue;  // not ours
    }
    if (j.contains("tick")) {
      const std::string tick = j["tick"].is_string() ? j["tick"].get<std::string>() : "";
      if (tick == "quiet:begin" && quiet_ && !quiet_scope.open) {
        quiet_begin();
        quiet_scope.open = true;
      } else if (tick == "quiet:end" && quiet_scope.open) {
        quiet_end();
        quiet_scope.open = false;
      }
      continue;
    }
    if (j.contains("result")) {
      // A fatal error or a tainted worker: it exits by itself after this answer.
      if (j.value("fatal", false) || j.value("exiting", false)) proc_.reap(30);
      return j["result"];
    }
  }
}

}  // namespace kernelrl
