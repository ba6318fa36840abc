// gpu_naive.cu whose host code answers correctly only where its process sees exactly one GPU,
// as its device 0: the candidate runner shows it the worker's GPU alone (CUDA_VISIBLE_DEVICES,
// Backend::child_visible_devices). Anywhere else it computes nothing and leaves C unwritten.
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
  int count = 0, device = -1;
  if (cudaGetDeviceCount(&count) != cudaSuccess || cudaGetDevice(&device) != cudaSuccess) return 1;
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  const bool alone = count == 1 && device == 0;
  dim3 block(16, 16), grid(alone ? (N + 15) / 16 : 1, alone ? (M + 15) / 16 : 1);
  hgemm_naive<<<grid, block, 0, (cudaStream_t)stream>>>(static_cast<const half*>(args->inputs[0]),
                                                        static_cast<const half*>(args->inputs[1]),
                                                        static_cast<half*>(args->outputs[0]),
                                                        alone ? M : 0, alone ? N : 0, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
