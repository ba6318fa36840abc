// Adversarial: correct C, but a second kernel writes 64 bytes past the end of the workspace.
// The guard band behind the workspace must catch it (workspace_overrun).
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


__global__ void scribble(unsigned char* p, size_t offset) { p[offset + threadIdx.x] = 0x5a; }
extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  hgemm_naive<<<grid, block, 0, (cudaStream_t)stream>>>(static_cast<const half*>(args->inputs[0]),
                                                        static_cast<const half*>(args->inputs[1]),
                                                        static_cast<half*>(args->outputs[0]), M, N, K);
  scribble<<<1, 64, 0, (cudaStream_t)stream>>>(static_cast<unsigned char*>(args->workspace),
                                               args->workspace_bytes);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
