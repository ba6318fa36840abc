// HGEMM with the WMMA API (nvcuda::wmma, 16x16x16 fp16 fragments, fp32 or fp16 accumulator
// fragments): C[M,N] = A[M,K] * B[K,N], fp16 in and out. A BM x BN block tile of WM x WN warp
// tiles; 32-deep k slices loaded with 16-byte vector loads into padded shared memory (rows past
// M and N zero-filled); row_major B fragments for layout nn, col_major for tn; the epilogue
// stages each fragment through shared memory to convert to fp16 with bounds checks.
// A candidate is this file and an instance block: `using Cfg = hgemm_wmma::Config<...>;` and a
// kernelrl_launch that returns hgemm_wmma::run<Cfg>(args, stream).
#ifndef KERNELRL_HGEMM_WMMA_CUH
#define KERNELRL_HGEMM_WMMA_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernel_abi.h"

namespace hgemm_wmma {
namespace {  // internal linkage: candidates are dlopen'ed side by side

using namespace nvcuda;

template <int BM_, int BN_, int WM_, int WN_, bool B_COL_MAJOR_, bool ACC_F16_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = 32;  // block tile
  static constexpr int WM = WM_, WN = WN_;           // warp tile
  static constexpr bool B_COL_MAJOR = B_COL_MAJOR_;  // layout tn: B(k, n) at B[n * K + k]
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int FM = WM / 16, FN = WN / 16;
  static constexpr int PAD = 8;  // halves; keeps ldm a multiple of 8
  static constexpr int LDA = BK + PAD;
  static constexpr int LDB = B_COL_MAJOR ? BK + PAD : BN + PAD;
  static constexpr int B_ROWS = B_COL_MAJOR ? BN : BK;
  using acc_t = typename std::conditional<ACC_F16_, __half, float>::type;
  using b_layout = typename std::conditional<B_COL_MAJOR, wmma::col_major, wmma::row_major>::type;
};

[[maybe_unused]] __device__ __forceinline__ uint4 load8(const __half* p, bool ok) {
  return ok ? *reinterpret_cast<const uint4*>(p) : make_uint4(0, 0, 0, 0);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    hgemm_wmma_kernel(const __half* __restrict__ A, const __half* __restrict__ B,
                      __half* __restrict__ C, int M, int N, int K) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WM, WN = Cfg::WN;
  constexpr int THREADS = Cfg::THREADS, FM = Cfg::FM, FN = Cfg::FN;
  constexpr int LDA = Cfg::LDA, LDB = Cfg::LDB;
  constexpr bool B_COL_MAJOR = Cfg::B_COL_MAJOR;
  using acc_t = typename Cfg::acc_t;
  __shared__ __align__(32) __half As[BM * LDA];
  __shared__ __align__(32) __half Bs[Cfg::B_ROWS * LDB];
  __shared__ __align__(32) acc_t stage[THREADS / 32][16 * 16];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, acc_t> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], acc_t(0.0f));

  for (int k0 = 0; k0 < K; k0 += BK) {
    // 16-byte vector loads; rows past M (N) are zero-filled.
    for (int c = tid; c < BM * BK / 8; c += THREADS) {
      int r = c / (BK / 8), col = (c % (BK / 8)) * 8;
      int gm = m0 + r;
      *reinterpret_cast<uint4*>(&As[r * LDA + col]) =
          load8(A + (size_t)(gm < M ? gm : 0) * K + k0 + col, gm < M);
    }
    if (B_COL_MAJOR) {
      for (int c = tid; c < BN * BK / 8; c += THREADS) {
        int r = c / (BK / 8), col = (c % (BK / 8)) * 8;  // r: n, col: k
        int gn = n0 + r;
        *reinterpret_cast<uint4*>(&Bs[r * LDB + col]) =
            load8(B + (size_t)(gn < N ? gn : 0) * K + k0 + col, gn < N);
      }
    } else {
      for (int c = tid; c < BK * BN / 8; c += THREADS) {
        int r = c / (BN / 8), col = (c % (BN / 8)) * 8;  // r: k, col: n
        int gn = n0 + col;
        *reinterpret_cast<uint4*>(&Bs[r * LDB + col]) =
            load8(B + (size_t)(k0 + r) * N + (gn < N ? gn : 0), gn < N);
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[FM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, typename Cfg::b_layout> b[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i)
        wmma::load_matrix_sync(a[i], &As[(wm * WM + i * 16) * LDA + kk], LDA);
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        const __half* p =
            B_COL_MAJOR ? &Bs[(wn * WN + j * 16) * LDB + kk] : &Bs[kk * LDB + wn * WN + j * 16];
        wmma::load_matrix_sync(b[j], p, LDB);
      }
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  // Epilogue: each fragment through a per-warp staging tile, converted to fp16, bounds-checked.
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) {
      wmma::store_matrix_sync(stage[warp], acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        int row = m0 + wm * WM + i * 16 + e / 16, col = n0 + wn * WN + j * 16 + e % 16;
        if (row < M && col < N) C[(size_t)row * N + col] = __float2half(float(stage[warp][e]));
      }
      __syncwarp();
    }
}

template <class Cfg>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  dim3 grid((N + Cfg::BN - 1) / Cfg::BN, (M + Cfg::BM - 1) / Cfg::BM);
  hgemm_wmma_kernel<Cfg><<<grid, Cfg::THREADS, 0, (cudaStream_t)stream>>>(
      (const __half*)args->inputs[0], (const __half*)args->inputs[1], (__half*)args->outputs[0], M,
      N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

}  // namespace
}  // namespace hgemm_wmma

#endif  // KERNELRL_HGEMM_WMMA_CUH
