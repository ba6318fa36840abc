// Child processes for the evaluator: run a command with a timeout and captured output (the
// compile pool), and a long-lived child with pipes (the worker). posix_spawn only: the parent may
// hold a CUDA context, which fork() without exec would corrupt. Every child gets its own process
// group so a timeout kills it and everything it started.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace kernelrl {

struct RunResult {
  int exit_code = -1;     // exit status, or -1 when killed by a signal / timed out
  int signal = 0;         // terminating signal, 0 if none
  bool timed_out = false;
  std::string output;     // stdout and stderr together
  double seconds = 0;
  double cpu_seconds = 0;  // user + system time of the child and the processes it waited for
};

// Runs argv[0] (searched in PATH) with a wall-clock limit; kills the process group on timeout.
// A `pausable` child (the compile pool's) is stopped while a quiet window is open, starts only
// outside one, and its timeout does not count the time it was stopped.
RunResult run_process(const std::vector<std::string>& argv, double timeout_s,
                      const std::vector<std::string>& extra_env = {}, bool pausable = false);

// Quiet windows (timing never shares cores with compilation): between quiet_begin() and
// quiet_end() every pausable child's process group is held with SIGSTOP and no new one starts;
// quiet_end() continues them. Windows nest (several workers may time at once).
void quiet_begin();
void quiet_end();
// Seconds pausable children have spent stopped so far (for tests and metrics).
double quiet_seconds_total();

// A child with its stdin/stdout connected to pipes; stderr goes to `stderr_path`.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // `pass_fd` >= 0 reaches the child as its fd 3; no other descriptor of this process does.
  void start(const std::vector<std::string>& argv, const std::string& stderr_path,
             const std::vector<std::string>& extra_env = {}, int pass_fd = -1);
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  void write_line(const std::string& line);  // throws std::runtime_error if the pipe is broken
  // Reads one '\n'-terminated line; false on EOF or when nothing arrives within timeout_s.
  enum class ReadStatus { line, eof, timeout };
  ReadStatus read_line(std::string& line, double timeout_s);
  // Kills (SIGKILL to the group) if still running and reaps; returns the wait status.
  int kill_and_reap();
  // Reaps after EOF (waits up to `timeout_s`, then kills); returns the wait status.
  int reap(double timeout_s);

 private:
  pid_t pid_ = -1;
  int in_fd_ = -1, out_fd_ = -1;
  std::string buffer_;
};

// "killed by signal 11 (SIGSEGV)" / "exited with status 3".
std::string describe_wait_status(int status);

}  // namespace kernelrl
