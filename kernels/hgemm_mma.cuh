// HGEMM with mma.sync m16n8k16 tensor-core instructions fed by ldmatrix from XOR-swizzled
// shared memory that a STAGES-deep cp.async pipeline fills: C[M,N] = A[M,K] * B[K,N], fp16 in
// and out, fp32 or fp16 accumulators. A BM x BN x BK block tile of WM x WN warp tiles, grouped
// block rasterization (GROUP_M block rows per group, for L2 reuse), optional split-K (SPLIT_K
// k slices summed in fp32 in the workspace with atomics, then converted to fp16 by a second
// kernel), an optional shared-memory epilogue (16-byte coalesced stores), __launch_bounds__
// blocks per SM, and two main loops: one k-tile per iteration with fragments loaded per k-step
// (DBUF false), or fragments double-buffered in registers across k-steps and k-tiles (DBUF true,
// the CUTLASS multistage order). Rows and columns past M and N are zero-filled, never read.
// A candidate is this file and an instance block: `using Cfg = hgemm_mma::Config<...>;` and a
// kernelrl_launch that returns hgemm_mma::run<Cfg>(args, stream).
#ifndef KERNELRL_HGEMM_MMA_CUH
#define KERNELRL_HGEMM_MMA_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernel_abi.h"
#include "mma_sync.cuh"

namespace hgemm_mma {
namespace {  // internal linkage: candidates are dlopen'ed side by side

using namespace mma_sync;

template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, int SPLIT_K_, int GROUP_M_,
          int VEC_, bool B_COL_MAJOR_, bool ACC_F16_, bool EPI_SMEM_, int MIN_BLOCKS_, bool DBUF_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;  // block tile
  static constexpr int WM = WM_, WN = WN_;            // warp tile
  static constexpr int STAGES = STAGES_;              // cp.async pipeline depth
  static constexpr int SPLIT_K = SPLIT_K_;  // K slices reduced in fp32 through the workspace
  static constexpr int GROUP_M = GROUP_M_;  // block-row group of the grouped rasterization
  static constexpr int VEC = VEC_;          // halves per cp.async (8: 16 bytes, 4: 8 bytes)
  static constexpr bool B_COL_MAJOR = B_COL_MAJOR_;  // layout tn: B(k, n) at B[n * K + k]
  static constexpr bool ACC_F16 = ACC_F16_;          // fp16 accumulators (mma .f16.f16.f16.f16)
  static constexpr bool EPI_SMEM = EPI_SMEM_;     // stage C through shared memory: 16-byte stores
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;  // __launch_bounds__ blocks/SM (caps registers)
  static constexpr bool DBUF = DBUF_;             // fragments double-buffered in registers
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int MI = WM / 16, NI = WN / 8, KI = BK / 16;  // mma tiles per warp, k-tile
  static constexpr int A_TILE = BM * BK, B_TILE = BK * BN;       // halves
  static constexpr int STAGE_HALVES = A_TILE + B_TILE;
  static constexpr int LDC = BN + 8;  // staged C row, padded: no bank conflicts
  static constexpr int SMEM_HALVES = STAGES * STAGE_HALVES > (EPI_SMEM ? BM * LDC : 0)
                                         ? STAGES* STAGE_HALVES
                                         : BM* LDC;
  static constexpr size_t SMEM_BYTES = size_t(SMEM_HALVES) * sizeof(__half);
  static_assert(NI % 2 == 0, "ldmatrix.x4 loads B for two n8 tiles");
  static_assert((A_TILE / VEC) % THREADS == 0 && (B_TILE / VEC) % THREADS == 0, "load split");
  static_assert(STAGES >= 2, "pipeline");
};

// One k-tile into a pipeline stage for the double-buffered main loop: gA = &A[m0][k0] (BM x BK),
// gB = &B[k0][n0] (BK x BN) or, for tn, &B[n0][k0] (BN x BK); rows (columns) at or past
// rows_a = M - m0 (cols_b = N - n0) are zero-filled without being read. Each thread walks its
// copies with one pointer from the tile's corner (its copies are a fixed number of rows apart),
// so few address registers stay live beside 128 fp32 accumulators and two fragment buffers.
template <class Cfg>
__device__ __forceinline__ void load_tile_walk(__half* sA, __half* sB,
                                               const __half* __restrict__ gA,
                                               const __half* __restrict__ gB, int rows_a,
                                               int cols_b, int N, int K, int tid) {
  constexpr int BK = Cfg::BK, BN = Cfg::BN, VEC = Cfg::VEC, THREADS = Cfg::THREADS;
  static_assert(
      Cfg::THREADS % (Cfg::BK / Cfg::VEC) == 0 && Cfg::THREADS % (Cfg::BN / Cfg::VEC) == 0,
      "whole rows per pass");
  constexpr int K_ROWS = THREADS / (BK / VEC);  // rows per pass of a k-contiguous tile
  {
    const int row0 = tid / (BK / VEC), col = (tid % (BK / VEC)) * VEC;
    const __half* src = gA + row0 * K + col;
#pragma unroll
    for (int i = 0; i < Cfg::A_TILE / VEC / THREADS; ++i, src += K_ROWS * K) {
      const bool ok = row0 + i * K_ROWS < rows_a;
      cp_async<Cfg>(sA + swz(row0 + i * K_ROWS, col, BK), ok ? src : gA, ok);
    }
  }
  if constexpr (Cfg::B_COL_MAJOR) {  // smem rows are n, columns k
    const int row0 = tid / (BK / VEC), col = (tid % (BK / VEC)) * VEC;
    const __half* src = gB + row0 * K + col;
#pragma unroll
    for (int i = 0; i < Cfg::B_TILE / VEC / THREADS; ++i, src += K_ROWS * K) {
      const bool ok = row0 + i * K_ROWS < cols_b;
      cp_async<Cfg>(sB + swz(row0 + i * K_ROWS, col, BK), ok ? src : gB, ok);
    }
  } else {  // smem rows are k, columns n
    constexpr int N_ROWS = THREADS / (BN / VEC);
    const int row0 = tid / (BN / VEC), col = (tid % (BN / VEC)) * VEC;
    const __half* src = gB + row0 * N + col;
    const bool ok = col < cols_b;
#pragma unroll
    for (int i = 0; i < Cfg::B_TILE / VEC / THREADS; ++i, src += N_ROWS * N)
      cp_async<Cfg>(sB + swz(row0 + i * N_ROWS, col, BN), ok ? src : gB, ok);
  }
}

// Main loop with fragments double-buffered in registers (the CUTLASS multistage order): while
// the tensor cores run k-step kk, the ldmatrix loads of step kk+1 are in flight, and the last
// step of a k-tile overlaps the loads of the next tile's first step, so the barrier between
// k-tiles no longer drains the tensor pipe. Needs an even number (>= 2) of k-steps per tile.
template <class Cfg>
__device__ __forceinline__ void mainloop_dbuf(float (&acc)[Cfg::MI][Cfg::NI][4],
                                              uint32_t (&hacc)[Cfg::MI][Cfg::NI][2], __half* smem,
                                              const __half* __restrict__ A,
                                              const __half* __restrict__ B, int M, int N, int K,
                                              int m0, int n0, int kt_begin, int k_tiles, int warp_m,
                                              int warp_n, int lane, int tid) {
  constexpr int STAGES = Cfg::STAGES, BK = Cfg::BK, KI = Cfg::KI;
  constexpr int STAGE_HALVES = Cfg::STAGE_HALVES, A_TILE = Cfg::A_TILE;
  static_assert(Cfg::KI >= 2 && Cfg::KI % 2 == 0, "k-step 0 of every tile uses fragment buffer 0");
  // Corners of k-tile t: A at gA + t * BK, B at gB + t * B_STEP.
  const __half* gA = A + (size_t)m0 * K + (size_t)kt_begin * BK;
  const __half* gB = Cfg::B_COL_MAJOR ? B + (size_t)n0 * K + (size_t)kt_begin * BK
                                      : B + (size_t)kt_begin * BK * N + n0;
  const size_t B_STEP = Cfg::B_COL_MAJOR ? BK : (size_t)BK * N;
  uint32_t af[2][Cfg::MI][4], bf[2][Cfg::NI][2];  // fragments of k-step kk in buffer kk & 1
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles)
      load_tile_walk<Cfg>(smem + s * STAGE_HALVES, smem + s * STAGE_HALVES + A_TILE, gA + s * BK,
                          gB + s * B_STEP, M - m0, N - n0, N, K, tid);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>();  // tile 0 has landed
  __syncthreads();
  load_fragments<Cfg>(af[0], bf[0], smem, smem + A_TILE, 0, warp_m, warp_n, lane);
  int read_stage = 0;  // the stage the next fragments come from
  for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
    for (int kk = 0; kk < KI; ++kk) {
      if (kk == KI - 1) {
        // Tile kt+1 has landed for every thread, and no thread reads stage kt any more (its
        // last fragments were loaded in step KI-2): the next iteration's copy may overwrite it.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
      }
      if (kk == 0) {
        // Tile kt+STAGES-1 into the stage read by iteration kt-1 (freed by its barrier).
        const int next = kt + STAGES - 1;
        if (next < k_tiles) {
          __half* st = smem + (next % STAGES) * STAGE_HALVES;
          load_tile_walk<Cfg>(st, st + A_TILE, gA + next * BK, gB + next * B_STEP, M - m0, N - n0,
                              N, K, tid);
        }
        cp_async_commit();
      }
      // This step's mma.sync on fragments loaded one step earlier ...
      mma_tiles<Cfg>(acc, hacc, af[kk & 1], bf[kk & 1]);
      // ... while the next step's fragments load into the other buffer (after the last step:
      // the next tile's first step; unused after the last tile).
      const __half* sA = smem + read_stage * STAGE_HALVES;
      load_fragments<Cfg>(af[(kk + 1) & 1], bf[(kk + 1) & 1], sA, sA + A_TILE, (kk + 1) % KI,
                          warp_m, warp_n, lane);
    }
  }
  cp_async_wait<0>();
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
    hgemm_mma_kernel(const __half* __restrict__ A, const __half* __restrict__ B,
                     __half* __restrict__ C, float* __restrict__ ws, int M, int N, int K,
                     int split_k) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WM, WN = Cfg::WN;
  constexpr int MI = Cfg::MI, NI = Cfg::NI, LDC = Cfg::LDC, GROUP_M = Cfg::GROUP_M;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / Cfg::WARPS_N, warp_n = warp % Cfg::WARPS_N;

  // Grouped rasterization: consecutive blocks sweep GROUP_M block rows column by column, so
  // the A rows and B columns they share stay in L2.
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int pid = blockIdx.x;
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (pid / per_group) * GROUP_M;
  const int group_rows = min(tiles_m - first_m, GROUP_M);
  const int pid_m = first_m + (pid % per_group) % group_rows;
  const int pid_n = (pid % per_group) / group_rows;
  const int m0 = pid_m * BM, n0 = pid_n * BN;

  const int k_tiles_all = K / BK;
  const int per_split = (k_tiles_all + split_k - 1) / split_k;
  const int kt_begin = blockIdx.z * per_split;
  const int k_tiles = max(0, min(k_tiles_all, kt_begin + per_split) - kt_begin);

  float acc[MI][NI][4];
  uint32_t hacc[MI][NI][2];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
      hacc[i][j][0] = hacc[i][j][1] = 0u;
    }

  if constexpr (Cfg::DBUF)
    mainloop_dbuf<Cfg>(acc, hacc, smem, A, B, M, N, K, m0, n0, kt_begin, k_tiles, warp_m, warp_n,
                       lane, tid);
  else
    mainloop_simple<Cfg>(acc, hacc, smem, A, B, M, N, K, m0, n0, kt_begin, k_tiles, warp_m, warp_n,
                         lane, tid);

  // Epilogue: thread (g = lane/4, t = lane%4) holds rows g and g+8, columns 2t and 2t+1 of each
  // 16x8 tile. A Config with SPLIT_K 1 always runs with split_k 1 (run<> never splits more than
  // it asks for): the conditions say so, so that its kernel has no split-K path.
  if (Cfg::EPI_SMEM && (Cfg::SPLIT_K == 1 || split_k == 1)) {
    // Through shared memory (the pipeline buffers, now idle): then 16-byte coalesced stores.
    __syncthreads();
    __half* sC = smem;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const int r = warp_m * WM + i * 16 + (lane >> 2);
        const int c = warp_n * WN + j * 8 + (lane & 3) * 2;
        __half2 lo, hi;
        if constexpr (Cfg::ACC_F16) {
          lo = *reinterpret_cast<const __half2*>(&hacc[i][j][0]);
          hi = *reinterpret_cast<const __half2*>(&hacc[i][j][1]);
        } else {
          lo = __floats2half2_rn(acc[i][j][0], acc[i][j][1]);
          hi = __floats2half2_rn(acc[i][j][2], acc[i][j][3]);
        }
        *reinterpret_cast<__half2*>(&sC[r * LDC + c]) = lo;
        *reinterpret_cast<__half2*>(&sC[(r + 8) * LDC + c]) = hi;
      }
    __syncthreads();
    for (int e = tid; e < BM * BN / 8; e += Cfg::THREADS) {
      const int r = e / (BN / 8), c = (e % (BN / 8)) * 8;
      if (m0 + r < M && n0 + c < N)
        *reinterpret_cast<uint4*>(C + (size_t)(m0 + r) * N + n0 + c) =
            *reinterpret_cast<const uint4*>(&sC[r * LDC + c]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const int row = m0 + warp_m * WM + i * 16 + (lane >> 2);
        const int col = n0 + warp_n * WN + j * 8 + (lane & 3) * 2;
        if (col >= N) continue;
        float v[4];
        if constexpr (Cfg::ACC_F16) {
          const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&hacc[i][j][0]));
          const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&hacc[i][j][1]));
          v[0] = lo.x;
          v[1] = lo.y;
          v[2] = hi.x;
          v[3] = hi.y;
        } else {
          v[0] = acc[i][j][0];
          v[1] = acc[i][j][1];
          v[2] = acc[i][j][2];
          v[3] = acc[i][j][3];
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row + h * 8;
          if (r >= M) continue;
          if (Cfg::SPLIT_K == 1 || split_k == 1) {
            *reinterpret_cast<__half2*>(C + (size_t)r * N + col) =
                __floats2half2_rn(v[2 * h], v[2 * h + 1]);
          } else {
            atomicAdd(ws + (size_t)r * N + col, v[2 * h]);
            atomicAdd(ws + (size_t)r * N + col + 1, v[2 * h + 1]);
          }
        }
      }
  }
}

// Split-K: the fp32 sums in the workspace become C.
__global__ void splitk_to_half(const float* __restrict__ ws, __half* __restrict__ C, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n / 2;
       i += (size_t)gridDim.x * blockDim.x)
    reinterpret_cast<__half2*>(C)[i] = __floats2half2_rn(ws[2 * i], ws[2 * i + 1]);
}

template <class Cfg>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  cudaStream_t s = (cudaStream_t)stream;
  static bool smem_configured = false;  // opt in to more than 48 KiB of shared memory once
  if (!smem_configured) {
    if (cudaFuncSetAttribute(hgemm_mma_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)Cfg::SMEM_BYTES) != cudaSuccess)
      return 3;
    smem_configured = true;
  }
  int split = 1;
  float* ws = (float*)args->workspace;
  if constexpr (Cfg::SPLIT_K > 1) {
    split = Cfg::SPLIT_K < K / Cfg::BK ? Cfg::SPLIT_K : K / Cfg::BK;
    const size_t ws_bytes = (size_t)M * N * sizeof(float);
    if (split > 1 && (ws == nullptr || args->workspace_bytes < ws_bytes)) split = 1;
    if (split > 1 && cudaMemsetAsync(ws, 0, ws_bytes, s) != cudaSuccess) return 4;
  }
  const int tiles = ((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
  hgemm_mma_kernel<Cfg><<<dim3(tiles, 1, split), Cfg::THREADS, Cfg::SMEM_BYTES, s>>>(
      (const __half*)args->inputs[0], (const __half*)args->inputs[1], (__half*)args->outputs[0], ws,
      M, N, K, split);
  if (cudaGetLastError() != cudaSuccess) return 5;
  if (Cfg::SPLIT_K > 1 && split > 1) {
    splitk_to_half<<<1024, 256, 0, s>>>(ws, (__half*)args->outputs[0], (size_t)M * N);
    if (cudaGetLastError() != cudaSuccess) return 6;
  }
  return 0;
}

}  // namespace
}  // namespace hgemm_mma

#endif  // KERNELRL_HGEMM_MMA_CUH
