// The PDL policy's fixture (issue 38, item 5; docs/timing.md "What a timed call may overlap"):
// one call = two kernels. Kernel 1 computes C = A·B (the tiled kernel of gpu_l2_tiled.cu);
// kernel 2 spins a prologue (~2 us) that needs nothing of kernel 1, then waits for it
// (cudaGridDependencySynchronize) and rescales C by 1. PDL_MODE (prepended by the test):
//   0  no programmatic launch: the prologue runs after kernel 1
//   1  kernel 2 launched with programmatic stream serialization, kernel 1 triggers at its start:
//      the prologue overlaps kernel 1 (overlap with its own kernels: allowed, timed)
//   2  as 1, and kernel 1 also has the prologue and the attribute: it could overlap the
//      previous call's kernel 2 only if a timed call could overlap the previous call (it may not)
//   3  as 2 without the attribute on kernel 1: mode 2's time must equal this one's
#include <cuda_fp16.h>

#include "kernel_abi.h"

#ifndef PDL_MODE
#define PDL_MODE 1
#endif

constexpr int kTile = 16;

__device__ __forceinline__ void prologue(float* sink) {
  const long long t0 = clock64();
  float x = threadIdx.x;
  while (clock64() - t0 < 4000) x = x * 0.999f + 1.0f;
  if (x == -1.0f) *sink = x;  // never: keeps the loop
}

__global__ void k1(const half* A, const half* B, half* C, int M, int N, int K, float* sink) {
#if PDL_MODE >= 1
  cudaTriggerProgrammaticLaunchCompletion();
#endif
#if PDL_MODE >= 2
  prologue(sink);
  cudaGridDependencySynchronize();
#endif
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

__global__ void k2(half* C, size_t n, float* sink) {
  prologue(sink);
#if PDL_MODE >= 1
  cudaGridDependencySynchronize();
#endif
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    C[i] = __float2half(__half2float(C[i]) * 1.0f);
}

extern "C" int kernelrl_launch(const kernelrl_args* a, void* stream) {
  const int M = (int)a->dims[0], N = (int)a->dims[1], K = (int)a->dims[2];
  float* sink = static_cast<float*>(a->workspace);
  cudaLaunchAttribute pdl[1];
  pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t c1{};
  c1.gridDim = dim3((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
  c1.blockDim = dim3(kTile, kTile);
  c1.stream = (cudaStream_t)stream;
  c1.attrs = pdl;
  c1.numAttrs = PDL_MODE == 2 ? 1 : 0;
  if (cudaLaunchKernelEx(&c1, k1, (const half*)a->inputs[0], (const half*)a->inputs[1], (half*)a->outputs[0], M, N,
                         K, sink) != cudaSuccess)
    return 1;
  cudaLaunchConfig_t c2{};
  c2.gridDim = dim3(32);
  c2.blockDim = dim3(256);
  c2.stream = (cudaStream_t)stream;
  c2.attrs = pdl;
  c2.numAttrs = PDL_MODE >= 1 ? 1 : 0;
  return cudaLaunchKernelEx(&c2, k2, (half*)a->outputs[0], (size_t)M * N, sink) == cudaSuccess ? 0 : 1;
}
