// The OS sandbox of the evaluation worker, installed once the backend is up and before any
// candidate is loaded: Linux landlock (nothing outside a scratch directory can be written,
// created, removed or renamed; no TCP bind/connect and no signals out of the sandbox where the
// kernel's landlock ABI has them) and a seccomp-bpf filter on every thread (no new processes, on
// request no new threads, no sockets, no ptrace or io_uring, no metadata changes, no writes
// outside the scratch directory).
// A breach is reported on the protocol channel as a `sandbox_violation` result naming the system
// call (and path), and the process exits before the call runs. It does not screen source text
// (reward/screen.h does) and is not used by --run-once (profilers inject their own IPC).
#pragma once

#include <string>

namespace kernelrl::worker {

struct SandboxStatus {
  int landlock_abi = 0;  // landlock ABI in force (0 = none)
  bool seccomp = false;  // the seccomp filter is in force
  // "on (landlock ABI 7, seccomp)" | "off (why)" | "on (seccomp; no landlock: why)" | ...
  std::string summary;
  // What is in force, without versions: "landlock+seccomp" | "landlock" | "seccomp" | "off".
  std::string parts() const;
};

// mode: auto (install what the kernel offers) | on (throw std::runtime_error unless landlock and
// seccomp both install) | off. `scratch`: the one writable directory (must exist; TMPDIR is set
// to it). `report_fd`: where a violation's result line goes. `deny_threads`: starting a thread is
// a violation too (the host backend's runner: nothing in it starts threads once it is up, and
// the screen is otherwise the only guard; a GPU runner's CUDA driver starts its own; the shim
// runner has no driver). `deny_gpu`: no write opens of /dev/nvidia* and, with landlock ABI 5+, no
// ioctl on them (the shim runner: no CUDA context, so no GPU access for the candidate's host code).
// `capture_children` (the shim runner, which captures each call in a fresh child of its own,
// runner_main.cpp): nothing is writable (not the scratch directory either); no shared memory,
// pipes, socket pairs, eventfd/timerfd/epoll/inotify/fanotify objects, System V or POSIX IPC,
// keyrings, MAP_SHARED mappings or process-group changes: the candidate's static constructors
// (which run here, before any address is known) cannot make an object a later child could use to
// pass what an earlier one saw. Process creation without CLONE_THREAD/CLONE_VM is let through (the
// runner forks its capture children; the runner checks that the candidate's load started none).
SandboxStatus install_sandbox(const std::string& mode, const std::string& scratch, int report_fd,
                              bool deny_threads = false, bool deny_gpu = false,
                              bool capture_children = false);

// In a capture child, right after the fork and before any of the candidate's code runs: a second
// seccomp filter that denies starting a process, signals to the runner (`parent`), changing the
// flags, owner or size of a descriptor shared with the runner (fcntl set commands, FIONBIO,
// FIOASYNC), changing another process's priority, affinity or limits, and mincore (page-cache
// residency, a cheap exact channel between children). A signal the child sends itself ends the
// child with exit status kSelfSignalExit + signal (the runner's filter, inherited, cannot tell a
// child's own pid from another process's; runner_main.cpp dies of that signal in its turn).
// No-op when the runner's sandbox is not in force. Throws std::runtime_error on failure.
constexpr int kSelfSignalExit = 160;
void confine_capture_child(int parent);

}  // namespace kernelrl::worker
