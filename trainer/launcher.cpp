#include "trainer/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.h"

namespace kernelrl {

namespace {

// A TCP port that was free a moment ago (bound to port 0 and released).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    throw std::runtime_error("--nproc: socket() failed: " + std::string(std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("--nproc: cannot find a free port: " +
                             std::string(std::strerror(errno)));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) {
  g_signal = sig;
}

std::string describe_end(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

int launch_local_ranks(int nproc, const std::vector<std::string>& args, double grace_s) {
  if (nproc < 1) throw UserError("--nproc: expected at least 1, got " + std::to_string(nproc));
  const std::string port = std::to_string(free_port());
  std::vector<pid_t> pids(nproc, -1);
  std::vector<bool> alive(nproc, false);
  const pid_t parent = ::getpid();
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = ::fork();
    if (pid < 0)
      throw std::runtime_error("--nproc: fork failed: " + std::string(std::strerror(errno)));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the ranks end with the launcher
      if (::getppid() != parent) std::_Exit(1);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("GROUP_RANK", "0", 1);  // one node
      ::setenv("GROUP_WORLD_SIZE", "1", 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      for (const char* v :
           {"TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_RUN_ID"})
        ::unsetenv(v);
      // The host's cores shared out (torchrun sets 1): ranks must not oversubscribe them.
      if (!std::getenv("OMP_NUM_THREADS"))
        ::setenv("OMP_NUM_THREADS",
                 std::to_string(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN) / nproc)).c_str(), 1);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "kernelrl: error: --nproc: cannot start rank %d: %s\n", r,
                   std::strerror(errno));
      std::_Exit(127);
    }
    pids[r] = pid;
    alive[r] = true;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
  int exit_code = 0;
  int left = nproc;
  bool stopping = false;
  auto stop_deadline = std::chrono::steady_clock::time_point::max();
  auto signal_all = [&](int sig) {
    for (int r = 0; r < nproc; ++r)
      if (alive[r]) ::kill(pids[r], sig);
  };
  while (left > 0) {
    if (g_signal && !stopping) {  // Ctrl-C / SIGTERM of the launcher: pass it on
      signal_all(g_signal);
      stopping = true;
      exit_code = 128 + g_signal;
      stop_deadline = std::chrono::steady_clock::now() + grace;
    }
    if (stopping && std::chrono::steady_clock::now() > stop_deadline) {
      signal_all(SIGKILL);
      stop_deadline = std::chrono::steady_clock::time_point::max();
    }
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    int r = 0;
    while (r < nproc && pids[r] != pid) ++r;
    if (r == nproc) continue;
    alive[r] = false;
    --left;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && !stopping) {
      exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      std::fprintf(stderr,
                   "kernelrl: error: rank %d of %d (pid %d) %s; stopping the other %d rank(s)%s\n",
                   r, nproc, static_cast<int>(pid), describe_end(status).c_str(), left,
                   WIFSIGNALED(status) ? " (continue the run with --resume)" : "");
      std::fflush(stderr);
      signal_all(SIGTERM);
      stopping = true;
      stop_deadline = std::chrono::steady_clock::now() + grace;
    }
  }
  return exit_code;
}

}  // namespace kernelrl
