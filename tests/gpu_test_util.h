// What every GPU-labelled test shares: whether a CUDA device is visible, and the skip that
// keeps the test green (GTEST_SKIP) on machines without one (CI, the 2-core build host).
#pragma once

#include <gtest/gtest.h>

#ifdef KERNELRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace kernelrl {

inline bool have_cuda_device() {
#ifdef KERNELRL_HAVE_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

}  // namespace kernelrl

#define REQUIRE_CUDA() \
  if (!::kernelrl::have_cuda_device()) GTEST_SKIP() << "no CUDA device visible"
