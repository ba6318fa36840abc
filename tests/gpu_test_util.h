// What every GPU-labelled test shares: whether a CUDA device is visible, and the skip that
// keeps the test green (GTEST_SKIP) on machines without one (CI, the 2-core build host).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

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

// reward.capture for the GPU suites (docs/sandbox.md, "The runner"): KERNELRL_TEST_CAPTURE=shim
// runs every evaluator they start with the shim capture runner, unset or `context` with the
// context runner (the default), so that the whole GPU suite runs in both modes.
inline std::string test_capture() {
  const char* e = std::getenv("KERNELRL_TEST_CAPTURE");
  return e && *e ? e : "context";  // reward.capture's default
}

}  // namespace kernelrl

#define REQUIRE_CUDA() \
  if (!::kernelrl::have_cuda_device()) GTEST_SKIP() << "no CUDA device visible"
