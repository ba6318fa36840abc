/* The one contract between the evaluator and every candidate kernel (issue 4). Candidates include
 * this header (or the evaluator prepends it): it declares the argument block and the C-linkage
 * entry point a candidate must define. It implements nothing. Plain C so that nvcc, g++ and
 * dlsym agree on the symbol name `kernelrl_launch`.
 *
 * HGEMM: inputs[0] = A (M x K row-major fp16), inputs[1] = B (K x N row-major for layout nn,
 * column-major for tn), outputs[0] = C (M x N row-major fp16), dims = {M, N, K}; fp32
 * accumulation unless the task says acc: f16. All work goes on `stream` (a cudaStream_t; null on
 * the host backend). A 32 MiB workspace is provided, with a guard band behind it: writing past
 * workspace_bytes is a failed check. Return 0 on success.
 *
 * A candidate may use CUDA C++, inline PTX and intrinsics, CuTe and CUTLASS (the evaluator
 * compiles with the CUTLASS headers of reward.include_dirs on the include path, nvcc -O3
 * -DNDEBUG -std=c++17 --expt-relaxed-constexpr for the device's arch, sm_90a on Hopper: a
 * release build, so assert() is compiled out; g++ -O2 -DNDEBUG on the host backend). It may not
 * create streams, events or graphs, allocate, synchronize the device, or call cuBLAS, cuDNN or
 * LibTorch in HGEMM tasks (the static screen names the rule).
 *
 * Calls must be capturable (GPU): the evaluator captures each distinct call of kernelrl_launch
 * into a CUDA graph once and runs only that captured work, rebuilt from the candidate's own
 * kernels, for every check and timed replay. So the call may only enqueue kernels, memsets and
 * device-to-device copies on `stream` (host-side setup such as encoding TMA descriptors is fine;
 * no stream or device synchronization, no host read of device results, no host callbacks, no
 * library kernels). A call that cannot be captured is `not_capturable`; work that cannot be
 * rebuilt is `not_replayable`. Each call completes its own outputs with its own work: naming
 * another call's buffers, or deferring work to a later call, is `reward_hack` / `cross_call_work`;
 * leaving device state behind (an L2 persisting set-aside, access-policy windows) is
 * `reward_hack` / `device_state`. Results may not be cached across calls (by input values).
 *
 * The candidate's host code runs alone in a fresh process per candidate (the runner), under an
 * OS sandbox (reward.sandbox; Linux landlock + seccomp, reward/worker/sandbox.h): it may not
 * start processes (fork, exec, system, posix_spawn), open sockets of any family, trace or signal
 * other processes, use io_uring, change file metadata, or create, write, remove or rename files
 * anywhere except its scratch directory $TMPDIR. Such a call does not run: the candidate gets
 * `sandbox_violation` naming the call (and path), however it was spelled (macros, raw syscall,
 * inline assembly). Anything it writes to the runner's channel is `reward_hack` /
 * `forged_message`. Reading files and threads are not the sandbox's concern (the screen rejects
 * threads). docs/sandbox.md has the whole threat model. */
#ifndef KERNELRL_KERNEL_ABI_H
#define KERNELRL_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  const void* inputs[8];  int n_inputs;
  void*       outputs[4]; int n_outputs;
  int64_t     dims[8];    int n_dims;       /* HGEMM: M, N, K */
  void*       workspace;  size_t workspace_bytes;
} kernelrl_args;

#ifdef __cplusplus
extern "C" {
#endif
/* every candidate defines, with C linkage: */
int kernelrl_launch(const kernelrl_args* args, void* stream);  /* cudaStream_t; 0 = success */
#ifdef __cplusplus
}
#endif

#endif /* KERNELRL_KERNEL_ABI_H */
