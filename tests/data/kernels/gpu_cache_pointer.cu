// Adversarial (GPU): skips the work when called again with the same buffers. Since reward
// integrity v3 its host code runs once per distinct call (the evaluator captures each call once
// and replays the captured work), so the cache never answers: it passes, timed as the naive
// kernel it is (the host backend's host_cache_pointer.cpp, called every time, is still caught).
#include <cuda_fp16.h>

#include "kernel_abi.h"

__global__ void hgemm_naive(const half* A, const half* B, half* C, int M, int N, int K) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < M && j < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)i * K + k]) * __half2float(B[(size_t)k * N + j]);
    C[(size_t)i * N + j] = __float2half(acc);
  }
}

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  static const void* last_a = nullptr;
  if (args->inputs[0] == last_a) return 0;
  last_a = args->inputs[0];
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  hgemm_naive<<<grid, block, 0, (cudaStream_t)stream>>>(static_cast<const half*>(args->inputs[0]),
                                                        static_cast<const half*>(args->inputs[1]),
                                                        static_cast<half*>(args->outputs[0]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
