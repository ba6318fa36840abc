// Adversarial (issue 38, item 1; reward integrity, cold L2): gpu_l2_tiled.cu with every input
// load carrying an L2 evict_last policy (createpolicy.fractional.L2::evict_last +
// ld.global.L2::cache_hint). Lines so marked sit in the persisting set-aside, which a plain
// write pass over twice the L2 does not evict: with the old flush its "cold" time equalled its
// hot time (-9 to -11 % at 64^3-256^3 on an H200, 2026-11-28). Expected now: ok, cold time
// within the noise of gpu_l2_tiled.cu's.
#include <cuda_fp16.h>

#include "kernel_abi.h"

constexpr int kTile = 16;

__device__ __forceinline__ float load_keep(const half* p, unsigned long long policy) {
  unsigned short v;
  asm volatile("ld.global.L2::cache_hint.b16 %0, [%1], %2;" : "=h"(v) : "l"(p), "l"(policy));
  return __half2float(__ushort_as_half(v));
}

__global__ void hgemm_tiled(const half* A, const half* B, half* C, int M, int N, int K) {
  __shared__ float As[kTile][kTile], Bs[kTile][kTile];
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    As[ty][tx] = (row < M && k0 + tx < K) ? load_keep(A + (size_t)row * K + k0 + tx, policy) : 0.f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? load_keep(B + (size_t)(k0 + ty) * N + col, policy) : 0.f;
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
