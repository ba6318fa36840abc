// General task `relu` on the GPU, slowed by a known number of SM cycles: a single thread spins
// kSpinCycles cycles (clock64) before the relu kernel runs. The test of the evaluator's clock
// stamps (test_reward_gpu, MeasuredClockMatchesACycleCountedKernel) checks that the device time
// it measures times the SM clock it measures is this cycle count.
#include "kernel_abi.h"

constexpr long long kSpinCycles = 4000000;

__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

__global__ void relu(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}

extern "C" int kernelrl_launch(const kernelrl_args* a, void* stream) {
  const int64_t n = a->dims[0];
  spin<<<1, 1, 0, (cudaStream_t)stream>>>(kSpinCycles);
  relu<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      static_cast<const float*>(a->inputs[0]), static_cast<float*>(a->outputs[0]), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
