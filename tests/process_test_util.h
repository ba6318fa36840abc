// Runs started in the background and their ranks, for the tests that kill a rank mid-run
// (tests/e2e/test_distributed.cpp on gloo, tests/gpu/test_distributed_gpu.cpp on NCCL), and the
// two-node torchrun agents both of them start on one host.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "run_test_util.h"
#include "test_util.h"

namespace kernelrl::testing {

namespace fs = std::filesystem;

// A command started in the background (its own process group), output in `log`.
struct Background {
  pid_t pid = -1;
  fs::path log, rc;
  Background(const std::string& cmd, const fs::path& dir, const std::string& name)
      : log(dir / (name + ".log")), rc(dir / (name + ".rc")) {
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      const std::string sh = cmd + " > " + log.string() + " 2>&1; echo $? > " + rc.string() +
                             ".tmp && mv " + rc.string() + ".tmp " + rc.string();
      ::execl("/bin/sh", "sh", "-c", sh.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
  }
  // Waits up to `seconds` for the command to end; returns its exit code, or -1 on timeout.
  int wait(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      if (fs::exists(rc)) {
        ::waitpid(pid, nullptr, 0);
        pid = -1;
        return std::stoi(read_text(rc));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
  ~Background() {
    if (pid > 0) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// The pid of the kernelrl process whose environment has RANK=<rank> and the run dir on its
// command line, or -1.
inline pid_t find_rank(const fs::path& run_dir, int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_text(e.path() / "cmdline"), env = read_text(e.path() / "environ");
    for (auto& c : cmdline) c = c ? c : ' ';
    if (cmdline.find(run_dir.string()) == std::string::npos ||
        cmdline.find("kernelrl train") == std::string::npos)
      continue;
    if (("\0" + env + '\0').find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') !=
        std::string::npos)
      return static_cast<pid_t>(std::stoi(name));
  }
  return -1;
}

// Waits until the run has logged `steps` records of `stage`; false on timeout.
inline bool wait_for_steps(const fs::path& run, size_t steps, double seconds,
                           const std::string& stage = "pretrain") {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    try {
      if (stage_records(run, stage).size() >= steps) return true;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

// A TCP port of the loopback that was free a moment ago (bound to port 0 and released).
inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

// torchrun starts its ranks in sessions of their own, so a Background's process-group kill does
// not reach them: on the way out, SIGKILL to whatever rank of `run` is still there.
struct RankReaper {
  fs::path run;
  int ranks;
  ~RankReaper() {
    for (int r = 0; r < ranks; ++r)
      if (const pid_t pid = find_rank(run, r); pid > 0) ::kill(pid, SIGKILL);
  }
};

// The command of one torchrun agent (`torchrun`: its path) of a 2-node job on this host: one rank
// a node (--nproc-per-node 1), a c10d rendezvous on the loopback (the first agent to bind the
// endpoint hosts its store, the other connects), `env` (VAR=value ...) set for it; `train` is
// kernelrl's train arguments. `timeout --foreground` stays in the Background's process group (its
// kill reaches the agent) and ends a hung agent with SIGTERM, which torchrun passes to its rank.
inline std::string torchrun_node_agent(const std::string& torchrun, int node, int port, const std::string& rdzv_id,
                                       const std::string& env, const std::string& train,
                                       const std::string& rdzv_conf = "") {
  return "cd " + kSrc + " && env " + env + " timeout --foreground -k 10 600 " + torchrun +
         " --nnodes 2 --nproc-per-node 1 --node-rank " + std::to_string(node) +
         " --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:" + std::to_string(port) +
         (rdzv_conf.empty() ? "" : " --rdzv-conf " + rdzv_conf) + " --rdzv-id " + rdzv_id +
         " --max-restarts 0 --monitor-interval 1 --no-python " + kBin + " train " + train;
}

}  // namespace kernelrl::testing
