// What the worker's OS sandbox must stop, spelled so that the text screen (reward/screen.cpp)
// does not see it. The sandbox tests prepend `#define HOSTILE n` and `#define TARGET_DIR "..."`
// and wrap a correct kernel (host_hgemm_ok.cpp, gpu_naive.cu) so that its first call runs
// misbehave_once() first:
//   0  writes a file in $TMPDIR, the worker's scratch directory (allowed)
//   1  fopen(TARGET_DIR "/pasted.txt", "w") through a token-pasted name
//   2  creates TARGET_DIR "/raw.txt" with a raw syscall(SYS_openat, ...)
//   3  opens a TCP socket through a token-pasted name
//   4  forks through a token-pasted name; the child writes TARGET_DIR "/forked.txt"
//   5  as 4 with SIGSYS blocked first (the filter's signal then kills the worker)
//   6  names its thread through /proc/self/task/<tid>/comm, as libraries do (denied quietly)
//   7  starts a thread through token-pasted names (declared without <pthread.h>); the thread
//      writes TARGET_DIR "/thread.txt" (host backend only: a GPU runner allows threads)
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CAT(a, b) a##b

#if HOSTILE == 7
extern "C" int CAT(pthread_, create)(unsigned long*, const void*, void* (*)(void*), void*);
extern "C" int pthread_join(unsigned long, void**);
static void* misbehave_thread(void*) {
  FILE* f = CAT(fo, pen)(TARGET_DIR "/thread.txt", "w");
  if (f) fclose(f);
  return 0;
}
#endif

static void misbehave_once(void) {
  static int done = 0;
  if (done) return;
  done = 1;
#if HOSTILE == 0
  char path[4096];
  snprintf(path, sizeof path, "%s/allowed.txt", CAT(get, env)("TMPDIR"));
  FILE* f = CAT(fo, pen)(path, "w");
  if (f) fclose(f);
#elif HOSTILE == 1
  FILE* f = CAT(fo, pen)(TARGET_DIR "/pasted.txt", "w");
  if (f) {
    fputs("escaped\n", f);
    fclose(f);
  }
#elif HOSTILE == 2
  long fd = syscall(SYS_openat, AT_FDCWD, TARGET_DIR "/raw.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) close((int)fd);
#elif HOSTILE == 3
  int s = CAT(sock, et)(AF_INET, SOCK_STREAM, 0);
  if (s >= 0) close(s);
#elif HOSTILE == 4 || HOSTILE == 5
#if HOSTILE == 5
  sigset_t sys;
  sigemptyset(&sys);
  sigaddset(&sys, SIGSYS);
  sigprocmask(SIG_BLOCK, &sys, NULL);
#endif
  pid_t pid = CAT(fo, rk)();
  if (pid == 0) {
    FILE* f = CAT(fo, pen)(TARGET_DIR "/forked.txt", "w");
    if (f) fclose(f);
    _exit(0);
  }
  if (pid > 0) waitpid(pid, NULL, 0);
#elif HOSTILE == 6
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%ld/comm", syscall(SYS_gettid));
  FILE* f = CAT(fo, pen)(path, "w");
  if (f) fclose(f);
#elif HOSTILE == 7
  unsigned long t = 0;
  if (CAT(pthread_, create)(&t, NULL, misbehave_thread, NULL) == 0) pthread_join(t, NULL);
#endif
}
