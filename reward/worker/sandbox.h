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
SandboxStatus install_sandbox(const std::string& mode, const std::string& scratch, int report_fd,
                              bool deny_threads = false, bool deny_gpu = false);

}  // namespace kernelrl::worker
