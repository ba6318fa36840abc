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

namespace hgemm_small {
namespace {
using namespace mma_sync;

template <int BM_, int BN_, int BK_, int STAGES_, int SPLIT_K_, bool EPI_, bool PDL_,
          bool B_COL_MAJOR_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  static constexpr int STAGES = STAGES_;
  static constexpr int SPLIT_K = SPLIT_K_;
  static constexpr int VEC = 8;
  static constexpr int WM = BM / 2, WN = BN / 2;
  static constexpr int THREADS = 128;
  static constexpr int MI = WM / 16, NI = WN / 8, KI = BK / 16;
  static constexpr int A_TILE = BM * BK, B_TILE = BK * BN;
  static constexpr int STAGE_HALVES = A_TILE + B_TILE;
  static constexpr int LDP = BN + 4;
  static constexpr int LDC = BN + 8;
  static constexpr size_t PIPE_BYTES = size_t(STAGES) * STAGE_HALVES * 2;
  static constexpr size_t PART_BYTES = SPLIT_K > 1 ? size_t(BM) * LDP * 4 : 0;
  static constexpr size_t SMEM_BYTES = PIPE_BYTES > PART_BYTES ? PIPE_BYTES : PART_BYTES;
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block");
  static_assert(size_t(BM) * LDC * 2 <= PIPE_BYTES, "the staged C tile fits the pipeline");
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
    hgemm_small_kernel(const __half* __restrict__ A, const __half* __restrict__ B,
                       __half* __restrict__ C, int M, int N, int K) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WM, WN = Cfg::WN;
  constexpr int MI = Cfg::MI, NI = Cfg::NI, S = Cfg::SPLIT_K;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp >> 1, warp_n = warp & 1;
  const int rank = S > 1 ? (int)(blockIdx.x % S) : 0;
  const int tile = blockIdx.x / S;
  const int tiles_n = (N + BN - 1) / BN;
  const int m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
  const int k_tiles_all = (K + BK - 1) / BK;
  const int per_split = (k_tiles_all + S - 1) / S;
  const int kt_begin = rank * per_split;
  const int k_tiles = max(0, min(k_tiles_all, kt_begin + per_split) - kt_begin);

  float acc[MI][NI][4];
  uint32_t hacc[MI][NI][2];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
  mainloop_simple<Cfg>(acc, hacc, smem, A, B, M, N, K, m0, n0, kt_begin, k_tiles, warp_m, warp_n,
                       lane, tid);

  {
__half* sC = smem;
__syncthreads();
#pragma unroll
for (int i = 0; i < MI; ++i)
#pragma unroll
for (int j = 0; j < NI; ++j) {
 const int r = warp_m * WM + i * 16 + (lane >> 2);
 const int c = warp_n * WN + j * 8 + (lane & 3) * 2;
 *reinterpret_cast<__half2*>(&sC[r * Cfg::LDC + c]) =
     __floats2half2_rn(acc[i][j][0], acc[i][j][1]);
 *reinterpret_cast<__half2*>(&sC[(r + 8) * Cfg::LDC + c]) =
     __floats2half2_rn(acc[i][j][2], acc[i][j][3]);
}
__syncthreads();
for (int e = tid; e < BM * (BN / 8); e += Cfg::THREADS) {
const int r = e / (BN / 8), c = (e % (BN / 8)) * 8;
if (m0 + r < M && n0 + c < N)
 *reinterpret_cast<uint4*>(C + (size_t)(m0 + r) * N + n0 + c) =
     *reinterpret_cast<const uint4*>(&sC[r * Cfg::LDC + c]);
}
}
}

template <class Cfg>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  static bool configured = false;
  if (!configured) {
    if (Cfg::SMEM_BYTES > 48 * 1024 &&
        cudaFuncSetAttribute(hgemm_small_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)Cfg::SMEM_BYTES) != cudaSuccess)
      return 3;
    configured = true;
  }
  const int tiles = ((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(tiles * Cfg::SPLIT_K);
  cfg.blockDim = dim3(Cfg::THREADS);
  cfg.dynamicSmemBytes = Cfg::SMEM_BYTES;
  cfg.stream = (cudaStream_t)stream;
  cudaLaunchAttribute attrs[2];
  int n = 0;
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  if (cudaLaunchKernelEx(&cfg, hgemm_small_kernel<Cfg>, (const __half*)args->inputs[0],
                         (const __half*)args->inputs[1], (__half*)args->outputs[0], M, N,
                         K) != cudaSuccess)
    return 4;
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
}
}

// ---- instance: 32x32x64 tiles, 4 stages, split-K 1, shared-memory epilogue, PDL off, layout nn
using Cfg = hgemm_small::Config</*BM=*/32, /*BN=*/32, /*BK=*/64, /*STAGES=*/4, /*SPLIT_K=*/1,
    /*EPI=*/true, /*PDL=*/false, /*B_COL_MAJOR=*/false>;
extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  return hgemm_small::run<Cfg>(args, stream);
}
