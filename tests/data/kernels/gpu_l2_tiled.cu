// The plain kernel of the two cold-L2 fixtures (issue 38): a naive shared-memory tiled HGEMM
// (16x16 tiles, fp32 accumulate, NN). gpu_l2_evict_last.cu and gpu_l2_prefetch_next.cu are this
// kernel with one change each; their cold time must match this one's within the noise.
#include <cuda_fp16.h>

#include "kernel_abi.h"

constexpr int kTile = 16;

__global__ void hgemm_tiled(const half* A, const half* B, half* C, int M, int N, int K) {
  __shared__ float As[kTile][kTile], Bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    As[ty][tx] = (row < M && k0 + tx < K) ? __half2float(A[(size_t)row * K + k0 + tx]) : 0.f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? __half2float(B[(size_t)(k0 + ty) * N + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = __float2half(acc);
}

extern "C" int kernelrl_launch(const kernelrl_args* a, void* stream) {
  const int M = (int)a->dims[0], N = (int)a->dims[1], K = (int)a->dims[2];
  dim3 block(kTile, kTile), grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
  hgemm_tiled<<<grid, block, 0, (cudaStream_t)stream>>>((const half*)a->inputs[0], (const half*)a->inputs[1],
                                                        (half*)a->outputs[0], M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
