// General task `relu` (data/tasks/task_ops.h) on the GPU: y = max(x, 0), dims = {N}.
#include "kernel_abi.h"

__global__ void relu(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}

extern "C" int kernelrl_launch(const kernelrl_args* a, void* stream) {
  const int64_t n = a->dims[0];
  relu<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      static_cast<const float*>(a->inputs[0]), static_cast<float*>(a->outputs[0]), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
