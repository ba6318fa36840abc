// HGEMM, shared-memory SIMT tiling (no tensor cores): C[M,N] = A[M,K] * B[K,N], fp16 in and
// out, fp32 or fp16 accumulation. Each block computes a BM x BN tile of C, staging BK-deep
// slices of A and B in k-major padded shared memory; each thread accumulates a TM x TN register
// tile. Rows and columns past M and N are zero-filled on load and skipped on store.
// A candidate is this file and an instance block: `using Cfg = hgemm_tiled::Config<...>;` and a
// kernelrl_launch that returns hgemm_tiled::run<Cfg>(args, stream).
#ifndef KERNELRL_HGEMM_TILED_CUH
#define KERNELRL_HGEMM_TILED_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernel_abi.h"

namespace hgemm_tiled {
namespace {  // internal linkage: candidates are dlopen'ed side by side

template <int BM_, int BN_, int BK_, int TM_, int TN_, bool B_COL_MAJOR_, bool ACC_F16_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;  // block tile
  static constexpr int TM = TM_, TN = TN_;            // per-thread tile
  static constexpr bool B_COL_MAJOR = B_COL_MAJOR_;   // layout tn: B(k, n) at B[n * K + k]
  static constexpr bool ACC_F16 = ACC_F16_;           // fp16 running sums (__hfma)
  static constexpr int THREADS = (BM / TM) * (BN / TN);
  using acc_t = typename std::conditional<ACC_F16, __half, float>::type;
  static_assert(THREADS <= 1024, "too many threads");
  static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0, "tile/threads mismatch");
};

[[maybe_unused]] __device__ __forceinline__ float fma_acc(__half a, __half b, float c) {
  return fmaf(__half2float(a), __half2float(b), c);
}
[[maybe_unused]] __device__ __forceinline__ __half fma_acc(__half a, __half b, __half c) {
  return __hfma(a, b, c);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    hgemm_tiled_kernel(const __half* __restrict__ A, const __half* __restrict__ B,
                       __half* __restrict__ C, int M, int N, int K) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int THREADS = Cfg::THREADS;
  using acc_t = typename Cfg::acc_t;
  // k-major tiles so a thread's TM (TN) operands sit side by side; +8 halves of padding.
  __shared__ __half As[BK][BM + 8];
  __shared__ __half Bs[BK][BN + 8];
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  acc_t acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = acc_t(0.0f);

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int e = tid; e < BM * BK; e += THREADS) {
      int r = e / BK, c = e % BK;
      int gm = m0 + r;
      As[c][r] = gm < M ? A[(size_t)gm * K + k0 + c] : __float2half(0.0f);
    }
#pragma unroll
    for (int e = tid; e < BK * BN; e += THREADS) {
      int r, c;
      if (Cfg::B_COL_MAJOR) {
        c = e / BK;
        r = e % BK;
      } else {
        r = e / BN;
        c = e % BN;
      }
      int gn = n0 + c;
      __half v = __float2half(0.0f);
      if (gn < N) v = Cfg::B_COL_MAJOR ? B[(size_t)gn * K + k0 + r] : B[(size_t)(k0 + r) * N + gn];
      Bs[r][c] = v;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      __half a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fma_acc(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    int row = m0 + ty * TM + i;
    if (row >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      int col = n0 + tx * TN + j;
      if (col < N) C[(size_t)row * N + col] = __float2half(float(acc[i][j]));
    }
  }
}

template <class Cfg>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  dim3 grid((N + Cfg::BN - 1) / Cfg::BN, (M + Cfg::BM - 1) / Cfg::BM);
  hgemm_tiled_kernel<Cfg><<<grid, Cfg::THREADS, 0, (cudaStream_t)stream>>>(
      (const __half*)args->inputs[0], (const __half*)args->inputs[1], (__half*)args->outputs[0], M,
      N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

}  // namespace
}  // namespace hgemm_tiled

#endif  // KERNELRL_HGEMM_TILED_CUH
