#include "reward/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace kernelrl {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<char*> make_argv(const std::vector<std::string>& argv) {
  std::vector<char*> v;
  for (const auto& a : argv) v.push_back(const_cast<char*>(a.c_str()));
  v.push_back(nullptr);
  return v;
}

// environ plus overrides ("NAME=value" replaces NAME).
std::vector<std::string> make_env(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string s = *e;
    bool replaced = false;
    for (const auto& x : extra)
      if (s.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0) replaced = true;
    if (!replaced) env.push_back(s);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

pid_t spawn(const std::vector<std::string>& argv, posix_spawn_file_actions_t* fa,
            const std::vector<std::string>& extra_env) {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  auto args = make_argv(argv);
  auto env_s = make_env(extra_env);
  auto env = make_argv(env_s);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0].c_str(), fa, &attr, args.data(), env.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

void kill_group(pid_t pid) {
  if (pid > 0) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
}

// The quiet-window state: depth of open windows, the stopped time so far, pausable groups.
struct Quiet {
  std::mutex mu;
  std::condition_variable cv;
  int depth = 0;
  Clock::time_point since;
  double paused_s = 0;
  std::set<pid_t> groups;
  double paused_now() {  // under mu
    return paused_s + (depth > 0 ? std::chrono::duration<double>(Clock::now() - since).count() : 0);
  }
};
Quiet& quiet() {
  static Quiet q;
  return q;
}

}  // namespace

void quiet_begin() {
  Quiet& q = quiet();
  std::lock_guard<std::mutex> lock(q.mu);
  if (q.depth++ == 0) {
    q.since = Clock::now();
    for (pid_t g : q.groups) ::kill(-g, SIGSTOP);
  }
}

void quiet_end() {
  Quiet& q = quiet();
  std::lock_guard<std::mutex> lock(q.mu);
  if (q.depth == 0) return;
  if (--q.depth == 0) {
    q.paused_s += std::chrono::duration<double>(Clock::now() - q.since).count();
    for (pid_t g : q.groups) ::kill(-g, SIGCONT);
    q.cv.notify_all();
  }
}

double quiet_seconds_total() {
  Quiet& q = quiet();
  std::lock_guard<std::mutex> lock(q.mu);
  return q.paused_now();
}

std::string describe_wait_status(int status) {
  if (WIFSIGNALED(status)) {
    int s = WTERMSIG(status);
    const char* n = sigabbrev_np(s);
    return "killed by signal " + std::to_string(s) + " (SIG" + (n ? n : "?") + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

RunResult run_process(const std::vector<std::string>& argv, double timeout_s,
                      const std::vector<std::string>& extra_env, bool pausable) {
  RunResult r;
  Quiet& q = quiet();
  std::unique_lock<std::mutex> qlock(q.mu, std::defer_lock);
  double paused_at_start = 0;
  if (pausable) {  // start outside quiet windows, registered before the lock is released
    qlock.lock();
    q.cv.wait(qlock, [&] { return q.depth == 0; });
    paused_at_start = q.paused_now();
  }
  auto t0 = Clock::now();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid;
  try {
    pid = spawn(argv, &fa, extra_env);
  } catch (...) {
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (pausable) {
    q.groups.insert(pid);
    qlock.unlock();
  }
  // Time the child was stopped by quiet windows does not count against its timeout.
  auto stopped_s = [&] {
    if (!pausable) return 0.0;
    std::lock_guard<std::mutex> lock(q.mu);
    return q.paused_now() - paused_at_start;
  };
  char buf[4096];
  bool eof = false;
  while (!eof) {
    double left = timeout_s + stopped_s() - std::chrono::duration<double>(Clock::now() - t0).count();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(std::min(left * 1000, 1000.0)) + 1);
    if (pr > 0) {
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n > 0) {
        if (r.output.size() < (8u << 20)) r.output.append(buf, n);
      } else if (n == 0 || (n < 0 && errno != EINTR)) {
        eof = true;
      }
    }
  }
  ::close(fds[0]);
  int status = 0;
  if (pausable) {
    std::lock_guard<std::mutex> lock(q.mu);
    q.groups.erase(pid);
  }
  if (r.timed_out) kill_group(pid);
  struct rusage ru {};
  while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  r.cpu_seconds = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  if (!r.timed_out) {
    // A grandchild may still hold the pipe; the direct child has ended by now.
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  ::kill(-pid, SIGKILL);  // leftovers of the group (none normally)
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

ChildProcess::~ChildProcess() { kill_and_reap(); }

void ChildProcess::start(const std::vector<std::string>& argv, const std::string& stderr_path,
                         const std::vector<std::string>& extra_env, int pass_fd) {
  kill_and_reap();
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  if (pass_fd >= 0) posix_spawn_file_actions_adddup2(&fa, pass_fd, 3);
  // Descriptors without FD_CLOEXEC (a library's, the parent's own channel) stay behind.
  posix_spawn_file_actions_addclosefrom_np(&fa, pass_fd >= 0 ? 4 : 3);
  try {
    pid_ = spawn(argv, &fa, extra_env);
  } catch (...) {
    posix_spawn_file_actions_destroy(&fa);
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
    throw;
  }
  posix_spawn_file_actions_destroy(&fa);
  ::close(to_child[0]);
  ::close(from_child[1]);
  in_fd_ = to_child[1];
  out_fd_ = from_child[0];
  buffer_.clear();
}

void ChildProcess::write_line(const std::string& line) {
  std::string s = line + "\n";
  size_t off = 0;
  while (off < s.size()) {
    // A dead reader raises SIGPIPE: block it in this thread and swallow the pending one.
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t n = ::write(in_fd_, s.data() + off, s.size() - off);
    int err = errno;
    if (n < 0 && err == EPIPE) {
      timespec zero{0, 0};
      sigtimedwait(&pipe_set, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (n < 0) {
      if (err == EINTR) continue;
      throw std::runtime_error(std::string("worker pipe: ") + std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
}

ChildProcess::ReadStatus ChildProcess::read_line(std::string& line, double timeout_s) {
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return ReadStatus::line;
    }
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) return ReadStatus::timeout;
    pollfd p{out_fd_, POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(std::min(left * 1000, 1000.0)) + 1);
    if (pr < 0 && errno != EINTR) return ReadStatus::eof;
    if (pr > 0) {
      char buf[65536];
      ssize_t n = ::read(out_fd_, buf, sizeof buf);
      if (n == 0) return ReadStatus::eof;
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return ReadStatus::eof;
      }
      buffer_.append(buf, n);
    }
  }
}

int ChildProcess::kill_and_reap() {
  int status = 0;
  if (pid_ > 0) {
    kill_group(pid_);
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  if (in_fd_ >= 0) ::close(in_fd_);
  if (out_fd_ >= 0) ::close(out_fd_);
  in_fd_ = out_fd_ = -1;
  buffer_.clear();
  return status;
}

int ChildProcess::reap(double timeout_s) {
  int status = 0;
  if (pid_ <= 0) return status;
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      ::kill(-pid_, SIGKILL);  // anything it left in its group
      pid_ = -1;
      kill_and_reap();
      return status;
    }
    if (Clock::now() > deadline) return kill_and_reap();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace kernelrl
