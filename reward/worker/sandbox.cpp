// Landlock confines the file system (the enforcement); a seccomp filter on every thread turns
// forbidden calls into SIGSYS, and its handler names the breach (the verdict):
//   - process creation, sockets, ptrace/process_vm_*, signals to other processes, io_uring,
//     metadata changes, changes to the sandbox: trapped, reported, the process exits;
//   - calls that create, write, remove or rename files (open with write flags, unlink, ...):
//     trapped, re-issued by the handler with a marker in an unused argument register (the
//     filter lets marked calls through), so that landlock decides; EACCES/EPERM means the call
//     aimed outside the scratch directory: reported, the process exits, nothing was written.
// Landlock restricts only the thread that enforces it (before ABI 8), so threads that were
// running before the sandbox (the CUDA driver's, LibTorch's pools) confine themselves in the
// handler before their first re-issued call. A candidate that learns the marker gets past the
// filter's naming, not past landlock. clone3 fails with ENOSYS (glibc falls back to clone, whose
// flags the filter can read). With `deny_threads` (the host backend's runner, which runs the
// candidate on its one thread and starts none itself) clone is trapped with CLONE_THREAD too,
// and so is an mmap with MAP_STACK: glibc's pthread_create maps the new thread's stack so, with
// signals still open, while it blocks every signal (SIGSYS too) around the clone itself, where a
// trap can only kill the process (the worker's `sigsys` verdict, unnamed).
// With `capture_children` (the shim runner, runner_main.cpp) nothing is writable at all, process
// creation without CLONE_THREAD/CLONE_VM is let through (the runner forks a child per capture),
// and every kernel object that two processes could share to pass data is denied before the
// candidate loads (kCaptureRules); each child adds confine_capture_child's filter on top.
#include "reward/worker/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace kernelrl::worker {

std::string SandboxStatus::parts() const {
  if (landlock_abi > 0 && seccomp) return "landlock+seccomp";
  if (landlock_abi > 0) return "landlock";
  return seccomp ? "seccomp" : "off";
}

namespace {

// Landlock ABI 3-6 names, missing from Debian 12's (Linux 6.1) headers; values are kernel ABI.
constexpr uint64_t kFsTruncate = 1ULL << 14;        // ABI 3
constexpr uint64_t kNetBindTcp = 1ULL << 0;         // ABI 4
constexpr uint64_t kNetConnectTcp = 1ULL << 1;      // ABI 4
constexpr uint64_t kFsIoctlDev = 1ULL << 15;        // ABI 5
constexpr uint64_t kScopeAbstractUnix = 1ULL << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ULL << 1;        // ABI 6
struct RulesetAttr {  // landlock_ruleset_attr as of ABI 6; older kernels accept it zero-extended
  uint64_t handled_access_fs, handled_access_net, scoped;
};

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

// Confines this thread: writes only beneath `scratch` and to harmless device nodes, and to the
// GPU's (/dev/nvidia*) unless `deny_gpu` (the shim runner, which has no CUDA context: its
// candidate's host code gets no GPU at all). Returns the ruleset (kept open so that other
// threads can confine themselves later).
// `scratch_writable` false (capture_children): no directory is writable at all.
int enforce_landlock(int abi, const std::string& scratch, bool deny_gpu, bool scratch_writable) {
  uint64_t fs =
      LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
      LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
      LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
      LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;  // reading stays free everywhere
  if (abi >= 2) fs |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) fs |= kFsTruncate;
  if (abi >= 5) fs |= kFsIoctlDev;  // e.g. TIOCSTI on a newly opened /dev/tty
  RulesetAttr attr{fs, abi >= 4 ? kNetBindTcp | kNetConnectTcp : 0,
                   abi >= 6 ? kScopeAbstractUnix | kScopeSignal : 0};
  const int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
  if (ruleset < 0) fail("landlock_create_ruleset");
  auto allow = [&](const std::string& path, uint64_t rights) {
    const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return;  // e.g. no /dev/nvidia* on a host-only machine
    landlock_path_beneath_attr rule{rights & fs, fd};
    const long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    close(fd);
    if (rc != 0) fail("landlock_add_rule " + path);
  };
  if (scratch_writable) allow(scratch, fs & ~static_cast<uint64_t>(LANDLOCK_ACCESS_FS_EXECUTE));
  const uint64_t device = LANDLOCK_ACCESS_FS_WRITE_FILE | kFsTruncate | kFsIoctlDev;
  for (const char* d : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"})
    allow(d, device);
  DIR* dev = deny_gpu ? nullptr : opendir("/dev");
  if (dev) {  // the CUDA driver may open its nodes after start-up
    while (const dirent* e = readdir(dev))
      if (std::strncmp(e->d_name, "nvidia", 6) == 0)
        allow(std::string("/dev/") + e->d_name, device);
    closedir(dev);
  }
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) fail("landlock_restrict_self");
  return ruleset;
}

#if defined(__x86_64__)

enum class Act { deny, write, no_sys };  // no_sys: fail with ENOSYS, no verdict
// in_set: the argument is one of `set`; not_in_set: it is none of them.
enum class When { always, bits_set, bits_clear, equals, not_equals, not_self, in_set, not_in_set };
struct Rule {
  long nr;
  const char* name;
  Act act;
  const char* what;  // "the candidate tried to <what>"
  When when = When::always;
  int arg = 0;  // the argument `when` tests
  uint32_t value = 0;
  int path = -1;  // write rules: the argument holding the path written
  const uint32_t* set = nullptr;  // in_set / not_in_set
  int set_n = 0;
};

constexpr const char* kProcess = "start a process";
constexpr const char* kThread =
    "start a thread (on the host backend a candidate runs on the runner's one thread)";
constexpr const char* kThreadStack =
    "start a thread (it mapped a thread stack; on the host backend a candidate runs on the "
    "runner's one thread)";
constexpr const char* kNet = "open a socket (candidates have no network)";
constexpr const char* kOther = "signal, trace or reach into another process";
constexpr const char* kRing = "use io_uring";
constexpr const char* kMeta = "change file metadata";
constexpr const char* kSandbox = "change the sandbox";
constexpr const char* kTty = "inject terminal input";
constexpr const char* kWrite = "write outside its scratch directory";
constexpr const char* kWriteNone =
    "write a file (the shim capture runner has no writable directory: each call is captured in a "
    "process of its own, and nothing one call writes may reach the next)";
constexpr const char* kShare =
    "create an object another process could share (shared memory, a pipe, IPC; each call is "
    "captured in a process of its own, and nothing may pass from one to the next)";
constexpr const char* kGroup = "leave the runner's process group";
constexpr const char* kChildProcess = "start a process (a capture process starts none)";
constexpr const char* kChildShared =
    "change a descriptor the runner shares with the next capture (flags, owner, size)";
constexpr const char* kChildOther =
    "change another process's priority, affinity or limits, or read page-cache residency";
constexpr uint32_t kWriteFlags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC;

const Rule kRules[] = {
    {SYS_fork, "fork", Act::deny, kProcess},
    {SYS_vfork, "vfork", Act::deny, kProcess},
    {SYS_clone, "clone", Act::deny, kProcess, When::bits_clear, 0, CLONE_THREAD},
    {SYS_clone3, "clone3", Act::no_sys, kProcess},
    {SYS_execve, "execve", Act::deny, kProcess},
    {SYS_execveat, "execveat", Act::deny, kProcess},
    // Every family, AF_UNIX included: a path-named socket reaches local daemons (docker,
    // D-Bus, ssh-agent) and landlock ABI <= 7 does not confine connect(). The worker's own
    // protocol runs on inherited pipes; socketpair() stays allowed (it reaches no one).
    {SYS_socket, "socket", Act::deny, kNet},
    {SYS_ptrace, "ptrace", Act::deny, kOther},
    {SYS_process_vm_readv, "process_vm_readv", Act::deny, kOther},
    {SYS_process_vm_writev, "process_vm_writev", Act::deny, kOther},
    {SYS_pidfd_open, "pidfd_open", Act::deny, kOther},
    {SYS_pidfd_getfd, "pidfd_getfd", Act::deny, kOther},
    {SYS_pidfd_send_signal, "pidfd_send_signal", Act::deny, kOther},
    {SYS_tkill, "tkill", Act::deny, kOther},
    {SYS_kill, "kill", Act::deny, kOther, When::not_self, 0},
    {SYS_tgkill, "tgkill", Act::deny, kOther, When::not_self, 0},
    {SYS_rt_sigqueueinfo, "rt_sigqueueinfo", Act::deny, kOther, When::not_self, 0},
    {SYS_rt_tgsigqueueinfo, "rt_tgsigqueueinfo", Act::deny, kOther, When::not_self, 0},
    {SYS_io_uring_setup, "io_uring_setup", Act::deny, kRing},  // its ops bypass this filter
    {SYS_io_uring_enter, "io_uring_enter", Act::deny, kRing},
    {SYS_io_uring_register, "io_uring_register", Act::deny, kRing},
    {SYS_rt_sigaction, "rt_sigaction", Act::deny, kSandbox, When::equals, 0, SIGSYS},
    {SYS_landlock_create_ruleset, "landlock_create_ruleset", Act::deny, kSandbox},
    {SYS_landlock_add_rule, "landlock_add_rule", Act::deny, kSandbox},
    {SYS_ioctl, "ioctl", Act::deny, kTty, When::equals, 1, TIOCSTI},
    // Landlock does not cover metadata: no legitimate use after start-up.
    {SYS_chmod, "chmod", Act::deny, kMeta},
    {SYS_fchmod, "fchmod", Act::deny, kMeta},
    {SYS_fchmodat, "fchmodat", Act::deny, kMeta},
    {452 /* fchmodat2 */, "fchmodat2", Act::deny, kMeta},
    {SYS_chown, "chown", Act::deny, kMeta},
    {SYS_fchown, "fchown", Act::deny, kMeta},
    {SYS_lchown, "lchown", Act::deny, kMeta},
    {SYS_fchownat, "fchownat", Act::deny, kMeta},
    {SYS_setxattr, "setxattr", Act::deny, kMeta},
    {SYS_lsetxattr, "lsetxattr", Act::deny, kMeta},
    {SYS_fsetxattr, "fsetxattr", Act::deny, kMeta},
    {463 /* setxattrat */, "setxattrat", Act::deny, kMeta},
    {SYS_removexattr, "removexattr", Act::deny, kMeta},
    {SYS_lremovexattr, "lremovexattr", Act::deny, kMeta},
    {SYS_fremovexattr, "fremovexattr", Act::deny, kMeta},
    {466 /* removexattrat */, "removexattrat", Act::deny, kMeta},
    {SYS_utime, "utime", Act::deny, kMeta},
    {SYS_utimes, "utimes", Act::deny, kMeta},
    {SYS_futimesat, "futimesat", Act::deny, kMeta},
    {SYS_utimensat, "utimensat", Act::deny, kMeta},
    // Writes: landlock decides (see the top of this file).
    {SYS_open, "open", Act::write, kWrite, When::bits_set, 1, kWriteFlags, 0},
    {SYS_openat, "openat", Act::write, kWrite, When::bits_set, 2, kWriteFlags, 1},
    {SYS_openat2, "openat2", Act::write, kWrite, When::always, 0, 0, 1},
    {SYS_creat, "creat", Act::write, kWrite, When::always, 0, 0, 0},
    {SYS_truncate, "truncate", Act::write, kWrite, When::always, 0, 0, 0},
    {SYS_mkdir, "mkdir", Act::write, kWrite, When::always, 0, 0, 0},
    {SYS_mkdirat, "mkdirat", Act::write, kWrite, When::always, 0, 0, 1},
    {SYS_mknod, "mknod", Act::write, kWrite, When::always, 0, 0, 0},
    {SYS_mknodat, "mknodat", Act::write, kWrite, When::always, 0, 0, 1},
    {SYS_rmdir, "rmdir", Act::write, kWrite, When::always, 0, 0, 0},
    {SYS_unlink, "unlink", Act::write, kWrite, When::always, 0, 0, 0},
    {SYS_unlinkat, "unlinkat", Act::write, kWrite, When::always, 0, 0, 1},
    {SYS_rename, "rename", Act::write, kWrite, When::always, 0, 0, 1},
    {SYS_renameat, "renameat", Act::write, kWrite, When::always, 0, 0, 3},
    {SYS_renameat2, "renameat2", Act::write, kWrite, When::always, 0, 0, 3},
    {SYS_link, "link", Act::write, kWrite, When::always, 0, 0, 1},
    {SYS_linkat, "linkat", Act::write, kWrite, When::always, 0, 0, 3},
    {SYS_symlink, "symlink", Act::write, kWrite, When::always, 0, 0, 1},
    {SYS_symlinkat, "symlinkat", Act::write, kWrite, When::always, 0, 0, 2},
};

// capture_children: every object two processes could share, denied before the candidate loads.
const Rule kCaptureRules[] = {
    {SYS_pipe, "pipe", Act::deny, kShare},
    {SYS_pipe2, "pipe2", Act::deny, kShare},
    {SYS_socketpair, "socketpair", Act::deny, kShare},
    {SYS_memfd_create, "memfd_create", Act::deny, kShare},
    {447 /* memfd_secret */, "memfd_secret", Act::deny, kShare},
    {SYS_mmap, "mmap", Act::deny, kShare, When::bits_set, 3, MAP_SHARED},  // MAP_SHARED_VALIDATE too
    // (with deny_threads, the filter tests MAP_STACK and MAP_SHARED in one rule: kStackRule)
    {SYS_shmget, "shmget", Act::deny, kShare},
    {SYS_shmat, "shmat", Act::deny, kShare},
    {SYS_msgget, "msgget", Act::deny, kShare},
    {SYS_msgsnd, "msgsnd", Act::deny, kShare},
    {SYS_semget, "semget", Act::deny, kShare},
    {SYS_semop, "semop", Act::deny, kShare},
    {SYS_semtimedop, "semtimedop", Act::deny, kShare},
    {SYS_mq_open, "mq_open", Act::deny, kShare},
    {SYS_eventfd, "eventfd", Act::deny, kShare},
    {SYS_eventfd2, "eventfd2", Act::deny, kShare},
    {SYS_timerfd_create, "timerfd_create", Act::deny, kShare},
    {SYS_epoll_create, "epoll_create", Act::deny, kShare},
    {SYS_epoll_create1, "epoll_create1", Act::deny, kShare},
    {SYS_inotify_init, "inotify_init", Act::deny, kShare},
    {SYS_inotify_init1, "inotify_init1", Act::deny, kShare},
    {SYS_fanotify_init, "fanotify_init", Act::deny, kShare},
    {SYS_userfaultfd, "userfaultfd", Act::deny, kShare},
    {SYS_add_key, "add_key", Act::deny, kShare},
    {SYS_request_key, "request_key", Act::deny, kShare},
    {SYS_keyctl, "keyctl", Act::deny, kShare},
    {SYS_setpgid, "setpgid", Act::deny, kGroup},
    {SYS_setsid, "setsid", Act::deny, kGroup},
};

// confine_capture_child: fcntl commands that only read (or duplicate) a descriptor; the ioctls
// that set a shared file's flags or owner.
const uint32_t kFcntlReads[] = {F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_GETLK, F_DUPFD_CLOEXEC,
                                36 /* F_OFD_GETLK */, F_GETOWN, F_GETSIG, 16 /* F_GETOWN_EX */,
                                1025 /* F_GETLEASE */, 1032 /* F_GETPIPE_SZ */, 1034 /* F_GET_SEALS */};
const uint32_t kIoctlSets[] = {FIONBIO, FIOASYNC, 0x8901 /* FIOSETOWN */, 0x8902 /* SIOCSPGRP */,
                               TIOCSPGRP};
constexpr int kChildRuleCount = 18;
Rule g_child_rules[kChildRuleCount];  // filled by confine_capture_child (the parent's pid in them)

constexpr uint32_t kX32Bit = 0x40000000;  // x32 system calls: another ABI, another table
constexpr int kViolationExit = 3;

// With deny_threads: clone with CLONE_THREAD (kRules' clone rule is the process one, and the
// filter then traps every clone) and a thread stack's mapping.
const Rule kThreadRule = {SYS_clone, "clone", Act::deny, kThread};
const Rule kStackRule = {SYS_mmap, "mmap", Act::deny, kThreadStack, When::bits_set, 3, MAP_STACK};

struct {
  int report_fd = -1, ruleset = -1;
  uint32_t marker = 0;
  bool deny_threads = false;
  bool capture_children = false;  // the runner forks a capture child per call
  bool in_child = false;          // this process is such a child (confine_capture_child ran)
  std::atomic<bool> reported{false};
} g;
thread_local bool t_confined = false;  // this thread enforces the landlock ruleset

// The process's own /proc entries: libraries name their threads by writing
// /proc/self/task/<tid>/comm (glibc's pthread_setname_np for another thread; LibTorch's CPU
// pools on some builds). Landlock denies it like any write, but quietly: nothing outside the
// process is touched, and the caller treats the failure as harmless.
bool own_proc_entry(const char* path) {
  auto starts = [&](const char* prefix) {
    size_t i = 0;
    while (prefix[i] && path[i] == prefix[i]) ++i;
    return prefix[i] == '\0';
  };
  if (!starts("/proc/self/") && !starts("/proc/thread-self/")) return false;
  for (size_t i = 0; path[i]; ++i)
    if (path[i] == '.' && path[i + 1] == '.') return false;
  return true;
}

const Rule* rule_for(long nr) {
  if (g.in_child)  // the child's own filter first: it names the stricter rule
    for (const Rule& r : g_child_rules)
      if (r.name && r.nr == nr) return &r;
  if (g.capture_children)
    for (const Rule& r : kCaptureRules)
      if (r.nr == nr) return &r;
  for (const Rule& r : kRules)
    if (r.nr == nr) return &r;
  return nullptr;
}

// --- the filter
sock_filter load(uint32_t offset) {
  return BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset);
}
sock_filter ret(uint32_t action) {
  return BPF_STMT(BPF_RET | BPF_K, action);
}
uint32_t arg_low(int i) {
  return offsetof(seccomp_data, args) + 8 * i;
}  // little-endian

// The process's filter (`child` false: kRules and, with capture_children, kCaptureRules) or a
// capture child's (g_child_rules).
std::vector<sock_filter> filter(bool confine_writes, uint32_t self, bool deny_threads, bool child = false) {
  std::vector<const Rule*> rules;
  if (child) {
    for (const Rule& r : g_child_rules)
      if (r.name) rules.push_back(&r);
  } else {
    for (const Rule& r : kRules) rules.push_back(&r);
    // One rule per call number (the first that matches decides): mmap's stack and shared bits in
    // one test.
    static Rule mmap_rule = kStackRule;
    if (deny_threads) {
      if (g.capture_children) mmap_rule.value = MAP_STACK | MAP_SHARED;
      rules.push_back(&mmap_rule);
    }
    if (g.capture_children)
      for (const Rule& r : kCaptureRules)
        if (!(deny_threads && r.nr == SYS_mmap)) rules.push_back(&r);
  }
  std::vector<sock_filter> p = {
      load(offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      ret(SECCOMP_RET_TRAP),  // i386 (int 0x80) numbers differ: nothing else may pass
      load(offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, kX32Bit, 0, 1),
      ret(SECCOMP_RET_TRAP),
  };
  for (const Rule* rp : rules) {
    const Rule& r = *rp;
    if (r.act == Act::write && !confine_writes) continue;
    const uint32_t hit = r.act == Act::no_sys ? SECCOMP_RET_ERRNO | ENOSYS : SECCOMP_RET_TRAP;
    std::vector<sock_filter> body;
    if (r.act == Act::write) {  // the handler's re-issued call
      body.push_back(load(arg_low(5)));
      body.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, g.marker, 0, 1));
      body.push_back(ret(SECCOMP_RET_ALLOW));
    }
    const bool is_clone = !child && r.nr == SYS_clone;
    if (is_clone && g.capture_children) {  // a process (the capture children) but no thread
      body.push_back(load(arg_low(0)));
      body.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD | CLONE_VM, 0, 1));
      body.push_back(ret(hit));
      body.push_back(ret(SECCOMP_RET_ALLOW));
    } else if (r.when == When::always || (deny_threads && is_clone)) {
      body.push_back(ret(hit));
    } else if (r.when == When::in_set || r.when == When::not_in_set) {
      // [load][jeq v0]..[jeq vn-1][no match][match]: a match jumps to the last return
      const bool hit_if_in = r.when == When::in_set;
      body.push_back(load(arg_low(r.arg)));
      for (int i = 0; i < r.set_n; ++i)
        body.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, r.set[i], static_cast<uint8_t>(r.set_n - i), 0));
      body.push_back(ret(hit_if_in ? SECCOMP_RET_ALLOW : hit));
      body.push_back(ret(hit_if_in ? hit : SECCOMP_RET_ALLOW));
    } else {
      const bool bits = r.when == When::bits_set || r.when == When::bits_clear;
      const bool hit_if_true = r.when == When::bits_set || r.when == When::equals;
      body.push_back(load(arg_low(r.arg)));
      body.push_back(BPF_JUMP(BPF_JMP | (bits ? BPF_JSET : BPF_JEQ) | BPF_K,
                              r.when == When::not_self ? self : r.value, 0, 1));
      body.push_back(ret(hit_if_true ? hit : SECCOMP_RET_ALLOW));
      body.push_back(ret(hit_if_true ? SECCOMP_RET_ALLOW : hit));
    }
    p.push_back(load(offsetof(seccomp_data, nr)));
    p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(r.nr), 0,
                         static_cast<uint8_t>(body.size())));
    p.insert(p.end(), body.begin(), body.end());
  }
  p.push_back(ret(SECCOMP_RET_ALLOW));
  return p;
}

// --- the handler: async-signal-safe from here on (no allocation, no stdio)
struct Line {
  char s[2048];
  size_t n = 0;
  void add(const char* t, size_t max = 512) {  // as JSON string content, printable ASCII only
    for (size_t i = 0; t[i] && i < max && n + 8 < sizeof s; ++i) {
      const unsigned char c = static_cast<unsigned char>(t[i]);
      if (c == '"' || c == '\\') s[n++] = '\\';
      s[n++] = c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
    }
  }
  void raw(const char* t) {
    while (*t && n + 1 < sizeof s) s[n++] = *t++;
  }
  void num(long v) {
    char d[24];
    int k = 0;
    unsigned long u = v < 0 ? 0UL - static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
    do d[k++] = static_cast<char>('0' + u % 10);
    while (u /= 10);
    if (v < 0) d[k++] = '-';
    while (k > 0 && n + 1 < sizeof s) s[n++] = d[--k];
  }
};

[[noreturn]] void report(const Rule* r, long nr, uint32_t arch, const long* a, bool path_read) {
  if (g.reported.exchange(true))
    for (;;) pause();  // another thread is reporting; its exit ends this one
  Line l;
  l.raw("{\"result\":{\"status\":\"sandbox_violation\",\"check\":\"");
  l.raw(r ? r->name : "foreign_abi");
  l.raw("\",\"reason\":\"the candidate tried to ");
  if (r) {
    l.raw(r->act == Act::write && g.capture_children ? kWriteNone : r->what);
    l.raw(": ");
    l.raw(r->name);
    l.raw("(");
    if (r->path >= 0 && path_read) {
      l.raw("\\\"");
      l.add(reinterpret_cast<const char*>(a[r->path]));
      l.raw("\\\"");
    } else {
      for (int i = 0; i < 3; ++i) {
        if (i) l.raw(", ");
        l.num(a[i]);
      }
    }
    l.raw(")");
  } else {
    l.raw("make a system call of another ABI: number ");
    l.num(nr);
    l.raw(", audit arch ");
    l.num(arch);
  }
  l.raw(", denied by the evaluator's sandbox\"},\"fatal\":true}\n");
  for (size_t off = 0; off < l.n;) {
    const ssize_t w = write(g.report_fd, l.s + off, l.n - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  _exit(kViolationExit);
}

void on_sigsys(int, siginfo_t* si, void* context) {
  greg_t* reg = static_cast<ucontext_t*>(context)->uc_mcontext.gregs;
  const long a[6] = {reg[REG_RDI], reg[REG_RSI], reg[REG_RDX],
                     reg[REG_R10], reg[REG_R8],  reg[REG_R9]};
  const long nr = si->si_syscall;
  const Rule* r = si->si_arch == AUDIT_ARCH_X86_64 && !(nr & kX32Bit) ? rule_for(nr) : nullptr;
  if (si->si_arch == AUDIT_ARCH_X86_64 && g.deny_threads) {
    if (nr == SYS_clone && (a[0] & CLONE_THREAD)) r = &kThreadRule;
    if (nr == SYS_mmap) r = a[3] & MAP_STACK ? &kStackRule : rule_for(SYS_mmap);
  }
  if (g.in_child && si->si_arch == AUDIT_ARCH_X86_64 &&
      (nr == SYS_kill || nr == SYS_tkill || nr == SYS_tgkill || nr == SYS_rt_sigqueueinfo ||
       nr == SYS_rt_tgsigqueueinfo) &&
      a[0] == syscall(SYS_getpid)) {
    // A signal to itself (abort(), raise()): the inherited filter cannot tell this child from
    // another process. Signal 0 probes; any other ends the child as that signal would, and the
    // runner dies of it in its turn (runner_main.cpp), so the worker's verdict is unchanged.
    const long sig = nr == SYS_tgkill || nr == SYS_rt_tgsigqueueinfo ? a[2] : a[1];
    if (sig == 0) {
      reg[REG_RAX] = 0;
      return;
    }
    _exit(kSelfSignalExit + static_cast<int>(sig & 63));  // 160..223
  }
  bool path_read = false;
  if (r && r->act == Act::write) {
    const int saved = errno;
    if (!t_confined) t_confined = syscall(SYS_landlock_restrict_self, g.ruleset, 0) == 0;
    long rc = -EPERM;  // a thread that cannot confine itself writes nothing
    if (t_confined) {
      rc = syscall(nr, a[0], a[1], a[2], a[3], a[4], static_cast<long>(g.marker));
      if (rc == -1) rc = -errno;
      path_read = true;  // the kernel read the path before it could deny the call
    }
    errno = saved;
    if ((rc != -EACCES && rc != -EPERM) ||  // allowed (or failed for another reason): return it
        (path_read && own_proc_entry(reinterpret_cast<const char*>(a[r->path])))) {
      reg[REG_RAX] = rc;
      return;
    }
  }
  report(r, nr, si->si_arch, a, path_read);
}

void enforce_seccomp(int report_fd, bool confine_writes, bool deny_threads) {
  g.report_fd = report_fd;
  g.deny_threads = deny_threads;
  // (g.capture_children is set by install_sandbox before this runs)
  while (g.marker == 0)
    if (getrandom(&g.marker, sizeof g.marker, 0) != sizeof g.marker) fail("getrandom");
  std::vector<sock_filter> p =
      filter(confine_writes, static_cast<uint32_t>(getpid()), deny_threads);
  sock_fprog prog{static_cast<unsigned short>(p.size()), p.data()};
  struct sigaction sa {};
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSYS, &sa, nullptr) != 0) fail("sigaction(SIGSYS)");
  sigset_t sys;
  sigemptyset(&sys);
  sigaddset(&sys, SIGSYS);
  pthread_sigmask(SIG_UNBLOCK, &sys, nullptr);
  // TSYNC: every thread of the process gets the filter (and no_new_privs, which landlock needs).
  const long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
  if (rc > 0)
    throw std::runtime_error("seccomp: thread " + std::to_string(rc) +
                             " could not take the filter");
  if (rc != 0) fail("seccomp");
}

#endif  // __x86_64__

}  // namespace

SandboxStatus install_sandbox(const std::string& mode, const std::string& scratch, int report_fd,
                              bool deny_threads, bool deny_gpu, bool capture_children) {
  SandboxStatus st;
  if (mode == "off") {
    st.summary = "off (reward.sandbox: off)";
    return st;
  }
  std::string no_landlock, no_seccomp;
  const long abi =
      syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi <= 0)
    no_landlock = errno == EOPNOTSUPP ? "landlock is disabled in this kernel (lsm= boot option)"
                                      : "this kernel has no landlock";
#if defined(__x86_64__)
  if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) no_seccomp = "this kernel has no seccomp";
#else
  no_seccomp = "the seccomp filter is written for x86_64";
#endif
  auto unavailable = [&](const std::string& why) {
    if (mode == "on")
      throw std::runtime_error("reward.sandbox: on, but " + why +
                               " (reward.sandbox: auto runs with what the kernel offers)");
  };
  if (!no_landlock.empty()) unavailable(no_landlock);
  if (!no_seccomp.empty()) unavailable(no_seccomp);
  if (!no_landlock.empty() && !no_seccomp.empty()) {
    st.summary = "off (" + no_landlock + "; " + no_seccomp + ")";
    return st;
  }
  struct stat sb {};
  if (scratch.empty() || stat(scratch.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode))
    throw std::runtime_error("sandbox: the scratch directory \"" + scratch + "\" does not exist");
  setenv("TMPDIR", scratch.c_str(), 1);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("prctl(PR_SET_NO_NEW_PRIVS)");
#if defined(__x86_64__)
  if (no_landlock.empty()) {
    try {
      g.ruleset = enforce_landlock(static_cast<int>(abi), scratch, deny_gpu, !capture_children);
      t_confined = true;
      st.landlock_abi = static_cast<int>(abi);
    } catch (const std::runtime_error& e) {
      unavailable(e.what());
      no_landlock = e.what();
    }
  }
  if (no_seccomp.empty()) {
    try {
      g.capture_children = capture_children;
      enforce_seccomp(report_fd, st.landlock_abi > 0, deny_threads);
      st.seccomp = true;
    } catch (const std::runtime_error& e) {
      unavailable(e.what());
      no_seccomp = e.what();
    }
  }
#else
  (void)report_fd;
  (void)deny_threads;
  try {
    enforce_landlock(static_cast<int>(abi), scratch, deny_gpu, !capture_children);
    st.landlock_abi = static_cast<int>(abi);
  } catch (const std::runtime_error& e) {
    no_landlock = e.what();
  }
#endif
  const std::string ll = "landlock ABI " + std::to_string(st.landlock_abi);
  if (st.landlock_abi > 0 && st.seccomp)
    st.summary = "on (" + ll + ", seccomp)";
  else if (st.landlock_abi > 0)
    st.summary = "on (" + ll + "; no seccomp: " + no_seccomp + ")";
  else if (st.seccomp)
    st.summary = "on (seccomp; no landlock: " + no_landlock + ")";
  else
    st.summary = "off (" + no_landlock + "; " + no_seccomp + ")";
  return st;
}

void confine_capture_child(int parent) {
#if defined(__x86_64__)
  if (!g.capture_children) return;  // the runner's sandbox is not in force
  const uint32_t pp = static_cast<uint32_t>(parent);
  int n = 0;
  auto add = [&](const Rule& r) { g_child_rules[n++] = r; };
  add({SYS_clone, "clone", Act::deny, kChildProcess});
  add({SYS_fork, "fork", Act::deny, kChildProcess});
  add({SYS_vfork, "vfork", Act::deny, kChildProcess});
  for (const auto& [nr, name] : {std::pair<long, const char*>{SYS_kill, "kill"}, {SYS_tkill, "tkill"},
                                 {SYS_tgkill, "tgkill"}, {SYS_rt_sigqueueinfo, "rt_sigqueueinfo"},
                                 {SYS_rt_tgsigqueueinfo, "rt_tgsigqueueinfo"}})
    add({nr, name, Act::deny, kOther, When::equals, 0, pp});
  add({SYS_fcntl, "fcntl", Act::deny, kChildShared, When::not_in_set, 1, 0, -1, kFcntlReads,
       static_cast<int>(sizeof kFcntlReads / sizeof kFcntlReads[0])});
  add({SYS_ioctl, "ioctl", Act::deny, kChildShared, When::in_set, 1, 0, -1, kIoctlSets,
       static_cast<int>(sizeof kIoctlSets / sizeof kIoctlSets[0])});
  for (const auto& [nr, name] :
       {std::pair<long, const char*>{SYS_setpriority, "setpriority"}, {SYS_sched_setaffinity, "sched_setaffinity"},
        {SYS_sched_setscheduler, "sched_setscheduler"}, {SYS_sched_setparam, "sched_setparam"},
        {SYS_sched_setattr, "sched_setattr"}, {SYS_ioprio_set, "ioprio_set"}, {SYS_mincore, "mincore"}})
    add({nr, name, Act::deny, kChildOther});
  add({SYS_prlimit64, "prlimit64", Act::deny, kChildOther, When::not_equals, 0, 0});  // pid 0: itself
  if (n > kChildRuleCount) std::abort();
  std::vector<sock_filter> p = filter(/*confine_writes=*/false, 0, /*deny_threads=*/false, /*child=*/true);
  sock_fprog prog{static_cast<unsigned short>(p.size()), p.data()};
  g.in_child = true;
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) fail("seccomp (capture child)");
#else
  (void)parent;
#endif
}

}  // namespace kernelrl::worker
