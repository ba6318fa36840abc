// Adversarial (GPU): returns a cached C when the leading inputs repeat (key in device memory).
#include <cuda_fp16.h>

#include "kernel_abi.h"

__device__ unsigned long long g_key = 0;
__device__ int g_hit = 0;
__device__ half g_cache[1 << 20];

// One thread: fingerprint of the first 16 elements of A and B.
__global__ void fingerprint(const half* A, const half* B) {
  const unsigned short* a = reinterpret_cast<const unsigned short*>(A);
  const unsigned short* b = reinterpret_cast<const unsigned short*>(B);
  unsigned long long key = 1469598103934665603ull;
  for (int i = 0; i < 16; ++i) key = (key ^ a[i] ^ ((unsigned long long)b[i] << 16)) * 1099511628211ull;
  g_hit = key == g_key;
  g_key = key;
}

__global__ void hgemm_naive(const half* A, const half* B, half* C, int M, int N, int K) {
  const size_t idx = (size_t)(blockIdx.y * blockDim.y + threadIdx.y) * N + blockIdx.x * blockDim.x + threadIdx.x;
  const bool cacheable = (size_t)M * N <= (1u << 20);
  if (cacheable && g_hit && blockIdx.y * blockDim.y + threadIdx.y < M && blockIdx.x * blockDim.x + threadIdx.x < N) {
    C[idx] = g_cache[idx];
    return;
  }
  const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < M && j < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)i * K + k]) * __half2float(B[(size_t)k * N + j]);
    C[(size_t)i * N + j] = __float2half(acc);
    if (cacheable) g_cache[(size_t)i * N + j] = __float2half(acc);
  }
}

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  fingerprint<<<1, 1, 0, (cudaStream_t)stream>>>(static_cast<const half*>(args->inputs[0]),
                                                static_cast<const half*>(args->inputs[1]));
  hgemm_naive<<<grid, block, 0, (cudaStream_t)stream>>>(static_cast<const half*>(args->inputs[0]),
                                                        static_cast<const half*>(args->inputs[1]),
                                                        static_cast<half*>(args->outputs[0]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
