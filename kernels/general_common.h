// Shared by the general kernel families (CUDA and host): the task's scalar parameters and the
// reading of task params from kernelrl_args.dims. The dims convention: the first input's shape,
// then the task params bit-cast from double (op params first, then the sizes the first input
// does not carry; data/tasks/task_suite.h). Implements no kernel.
#ifndef KERNELRL_GENERAL_COMMON_H
#define KERNELRL_GENERAL_COMMON_H

#include <cstdint>
#include <cstring>

#include "kernel_abi.h"

#ifdef __CUDACC__
#define KRL_HD __host__ __device__
#else
#define KRL_HD
#endif

namespace general {
namespace {  // internal linkage: candidates are dlopen'ed side by side

// Task param i: a double bit-cast into dims after the first input's shape (of rank first_rank).
[[maybe_unused]] inline double task_param(const kernelrl_args* a, int first_rank, int i) {
  double d;
  std::memcpy(&d, &a->dims[first_rank + i], sizeof d);
  return d;
}

}  // namespace
}  // namespace general

// An op is a struct template over the task, `template <class P> struct Op`, where P holds the
// task's scalar parameters as constants (an instance block defines it):
//   struct Task { static constexpr float P0 = 0.01f, P1 = 0.0f; };

#endif  // KERNELRL_GENERAL_COMMON_H
