#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "kernel_abi.h"

namespace mma_sync {
namespace {
__device__ __forceinline__ int swz(int row, int col, int row_halves) {
  const int chunks = row_halves / 8;
  const int x = chunks >= 8 ? (row & 7) : chunks == 4 ? ((row >> 1) & 3) : ((row >> 2) & 1);
  return row * row_halves + (((col >> 3) ^ x) << 3) + (col & 7);
}

template <class Cfg>
__device__ __forceinline__ void cp_async(__half* smem, const __half* gmem, bool pred) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = pred ? Cfg::VEC * 2 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4],
                                                                   const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void mma_f32(float (&d)[4], const uint32_t (&a)[4],
                                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <class Cfg>
__device__ __forceinline__ void load_fragments(uint32_t (&af)[Cfg::MI][4],
                                               uint32_t (&bf)[Cfg::NI][2], const __half* sA,
                                               const __half* sB, int kk, int warp_m, int warp_n,
                                               int lane) {
#pragma unroll
  for (int i = 0; i < Cfg::MI; ++i) {
    const int row = warp_m * Cfg::WM + i * 16 + (lane & 15);
    const int col = kk * 16 + (lane >> 4) * 8;
    ldmatrix_x4(af[i], sA + swz(row, col, Cfg::BK));
  }
#pragma unroll
  for (int j = 0; j < Cfg::NI / 2; ++j) {
    uint32_t r[4];
    const int row = kk * 16 + (lane & 15);
    const int col = warp_n * Cfg::WN + j * 16 + (lane >> 4) * 8;
    ldmatrix_x4_trans(r, sB + swz(row, col, Cfg::BN));
    bf[2 * j][0] = r[0];
    bf[2 * j][1] = r[1];
    bf[2 * j + 1][0] = r[2];
    bf[2 * j + 1][1] = r[3];
  }
}

template <class Cfg>
__device__ __forceinline__ void mma_tiles(float (&acc)[Cfg::MI][Cfg::NI][4],
                                          uint32_t (&hacc)[Cfg::MI][Cfg::NI][2],
                                          const uint32_t (&af)[Cfg::MI][4],
                                          const uint32_t (&bf)[Cfg::NI][2]) {
#pragma unroll
  for (int i = 0; i < Cfg::MI; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::NI; ++j) {
      mma_f32(acc[i][j], af[i], bf[j]);
    }
}

template <class Cfg>
__device__ __forceinline__ void load_tile(__half* sA, __half* sB, const __half* __restrict__ A,
                                          const __half* __restrict__ B, int M, int N, int K, int m0,
                                          int n0, int k0, int tid) {
  constexpr int BK = Cfg::BK, BN = Cfg::BN, VEC = Cfg::VEC, THREADS = Cfg::THREADS;
  constexpr bool K_TAIL = BK > 64;
#pragma unroll
  for (int i = 0; i < Cfg::A_TILE / VEC / THREADS; ++i) {
    const int c = tid + i * THREADS;
    const int row = c / (BK / VEC), col = (c % (BK / VEC)) * VEC;
    const int gm = m0 + row;
    const bool ok = gm < M && (!K_TAIL || k0 + col < K);
    cp_async<Cfg>(sA + swz(row, col, BK), ok ? A + (size_t)gm * K + k0 + col : A, ok);
  }
#pragma unroll
  for (int i = 0; i < Cfg::B_TILE / VEC / THREADS; ++i) {
    const int c = tid + i * THREADS;
    const int row = c / (BN / VEC), col = (c % (BN / VEC)) * VEC;
    const int gn = n0 + col;
    const bool ok = gn < N && (!K_TAIL || k0 + row < K);
    cp_async<Cfg>(sB + swz(row, col, BN), ok ? B + (size_t)(k0 + row) * N + gn : B, ok);
  }
}

template <class Cfg>
__device__ __forceinline__ void mainloop_simple(float (&acc)[Cfg::MI][Cfg::NI][4],
                                                uint32_t (&hacc)[Cfg::MI][Cfg::NI][2], __half* smem,
                                                const __half* __restrict__ A,
                                                const __half* __restrict__ B, int M, int N, int K,
                                                int m0, int n0, int kt_begin, int k_tiles,
                                                int warp_m, int warp_n, int lane, int tid) {
  constexpr int STAGES = Cfg::STAGES, BK = Cfg::BK;
  constexpr int STAGE_HALVES = Cfg::STAGE_HALVES, A_TILE = Cfg::A_TILE;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles)
      load_tile<Cfg>(smem + s * STAGE_HALVES, smem + s * STAGE_HALVES + A_TILE, A, B, M, N, K, m0,
                     n0, (kt_begin + s) * BK, tid);
    cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < k_tiles) {
      __half* st = smem + (next % STAGES) * STAGE_HALVES;
      load_tile<Cfg>(st, st + A_TILE, A, B, M, N, K, m0, n0, (kt_begin + next) * BK, tid);
    }
    cp_async_commit();
    const __half* sA = smem + (kt % STAGES) * STAGE_HALVES;
    const __half* sB = sA + A_TILE;
#pragma unroll
    for (int kk = 0; kk < Cfg::KI; ++kk) {
      uint32_t af[Cfg::MI][4], bf[Cfg::NI][2];
      load_fragments<Cfg>(af, bf, sA, sB, kk, warp_m, warp_n, lane);
      mma_tiles<Cfg>(acc, hacc, af, bf);
    }
  }
  cp_async_wait<0>();
}
}
}

namespace hgemm_mma {
namespace {
using namespace mma_sync;

template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, int SPLIT_K_, int GROUP_M_,
          int VEC_, bool B_COL_MAJOR_, bool ACC_F16_, bool EPI_SMEM_, int MIN_BLOCKS_, bool DBUF_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  static constexpr int WM = WM_, WN = WN_;
  static constexpr int STAGES = STAGES_;
  static constexpr int GROUP_M = GROUP_M_;
  static constexpr int VEC = VEC_;
  static constexpr bool EPI_SMEM = EPI_SMEM_;
  static constexpr int MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int MI = WM / 16, NI = WN / 8, KI = BK / 16;
  static constexpr int A_TILE = BM * BK, B_TILE = BK * BN;
  static constexpr int STAGE_HALVES = A_TILE + B_TILE;
  static constexpr int LDC = BN + 8;
  static constexpr int SMEM_HALVES = STAGES * STAGE_HALVES > (EPI_SMEM ? BM * LDC : 0)
                                         ? STAGES* STAGE_HALVES
                                         : BM* LDC;
  static constexpr size_t SMEM_BYTES = size_t(SMEM_HALVES) * sizeof(__half);
};

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

  mainloop_simple<Cfg>(acc, hacc, smem, A, B, M, N, K, m0, n0, kt_begin, k_tiles, warp_m, warp_n,
                       lane, tid);

  __syncthreads();
  __half* sC = smem;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const int r = warp_m * WM + i * 16 + (lane >> 2);
      const int c = warp_n * WN + j * 8 + (lane & 3) * 2;
      __half2 lo, hi;
      lo = __floats2half2_rn(acc[i][j][0], acc[i][j][1]);
      hi = __floats2half2_rn(acc[i][j][2], acc[i][j][3]);
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
}

template <class Cfg>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  cudaStream_t s = (cudaStream_t)stream;
  static bool smem_configured = false;
  if (!smem_configured) {
    if (cudaFuncSetAttribute(hgemm_mma_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)Cfg::SMEM_BYTES) != cudaSuccess)
      return 3;
    smem_configured = true;
  }
  int split = 1;
  float* ws = (float*)args->workspace;
  const int tiles = ((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
  hgemm_mma_kernel<Cfg><<<dim3(tiles, 1, split), Cfg::THREADS, Cfg::SMEM_BYTES, s>>>(
      (const __half*)args->inputs[0], (const __half*)args->inputs[1], (__half*)args->outputs[0], ws,
      M, N, K, split);
  if (cudaGetLastError() != cudaSuccess) return 5;
  return 0;
}
}
}

// ---- instance: block tile 128x128x32, warp tile 64x64, 3 stages, split-K 1, block-swizzle group 8, 16-byte cp.async, shared-memory epilogue, min blocks/SM 3, B row-major (nn), f32 accumulation
using Cfg = hgemm_mma::Config</*BM=*/128, /*BN=*/128, /*BK=*/32, /*WM=*/64, /*WN=*/64, /*STAGES=*/3,
    /*SPLIT_K=*/1, /*GROUP_M=*/8, /*VEC=*/8, /*B_COL_MAJOR=*/false, /*ACC_F16=*/false,
    /*EPI_SMEM=*/true, /*MIN_BLOCKS=*/3, /*DBUF=*/false>;
extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  return hgemm_mma::run<Cfg>(args, stream);
}
