// mma.sync building blocks shared by the Ampere-style HGEMM families (hgemm_mma, hgemm_small):
// cp.async copies, the XOR swizzle of shared tiles, ldmatrix, mma.sync m16n8k16 (fp32 and fp16
// accumulators), the fragment loader of one 16-deep k-step, the tile loader and the main loop
// of a STAGES-deep cp.async pipeline (one k-tile per iteration). Implements no kernel.
//
// Fragments of mma.sync.aligned.m16n8k16.row.col, with g = lane / 4, t = lane % 4: A is 4 x .b32
// (rows g and g+8, k pairs 2t and 2t+8), B is 2 x .b32 (k pairs for column g), C holds rows g and
// g+8, columns 2t and 2t+1. ldmatrix.x4 loads four 8x8 matrices whose row addresses come from
// lanes 8i..8i+7; .trans transposes each.
#ifndef KERNELRL_MMA_SYNC_CUH
#define KERNELRL_MMA_SYNC_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mma_sync {
namespace {  // internal linkage: candidates are dlopen'ed side by side

// Shared tiles are rows of 16-byte chunks; chunk c of row r is stored at chunk c ^ f(r), so the
// 8 row addresses of one ldmatrix (and of a transposed one) fall in 8 different bank groups.
[[maybe_unused]] __device__ __forceinline__ int swz(int row, int col, int row_halves) {
  const int chunks = row_halves / 8;
  const int x = chunks >= 8 ? (row & 7) : chunks == 4 ? ((row >> 1) & 3) : ((row >> 2) & 1);
  return row * row_halves + (((col >> 3) ^ x) << 3) + (col & 7);
}

// Cfg::VEC halves global -> shared, asynchronously (8: 16 bytes through L2 only, 4: 8 bytes).
template <class Cfg>
__device__ __forceinline__ void cp_async(__half* smem, const __half* gmem, bool pred) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = pred ? Cfg::VEC * 2 : 0;  // 0: zero-fill, nothing read
  if constexpr (Cfg::VEC == 8) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(src_bytes));
  }
}
[[maybe_unused]] __device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

[[maybe_unused]] __device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
[[maybe_unused]] __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4],
                                                                   const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
[[maybe_unused]] __device__ __forceinline__ void mma_f32(float (&d)[4], const uint32_t (&a)[4],
                                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
[[maybe_unused]] __device__ __forceinline__ void mma_f16(uint32_t (&d)[2], const uint32_t (&a)[4],
                                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, "
      "{%0,%1};\n"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The ldmatrix.x4 fragments of one 16-deep k-step `kk` of a stage: A (BM x BK, k-contiguous
// rows, swizzled) for the warp's MI m16 tiles, B for its NI n8 tiles, two per ldmatrix.x4: from
// a BN x BK tile (layout tn) or transposed from a row-major BK x BN tile (layout nn).
// Cfg gives MI, NI, WM, WN, BK, BN and B_COL_MAJOR.
template <class Cfg>
__device__ __forceinline__ void load_fragments(uint32_t (&af)[Cfg::MI][4],
                                               uint32_t (&bf)[Cfg::NI][2], const __half* sA,
                                               const __half* sB, int kk, int warp_m, int warp_n,
                                               int lane) {
  static_assert(Cfg::NI % 2 == 0, "ldmatrix.x4 loads B for two n8 tiles");
#pragma unroll
  for (int i = 0; i < Cfg::MI; ++i) {
    const int row = warp_m * Cfg::WM + i * 16 + (lane & 15);
    const int col = kk * 16 + (lane >> 4) * 8;
    ldmatrix_x4(af[i], sA + swz(row, col, Cfg::BK));
  }
#pragma unroll
  for (int j = 0; j < Cfg::NI / 2; ++j) {
    uint32_t r[4];
    if constexpr (Cfg::B_COL_MAJOR) {
      const int row = warp_n * Cfg::WN + j * 16 + (lane & 7) + ((lane >> 4) << 3);
      const int col = kk * 16 + ((lane >> 3) & 1) * 8;
      ldmatrix_x4(r, sB + swz(row, col, Cfg::BK));
    } else {
      const int row = kk * 16 + (lane & 15);
      const int col = warp_n * Cfg::WN + j * 16 + (lane >> 4) * 8;
      ldmatrix_x4_trans(r, sB + swz(row, col, Cfg::BN));
    }
    bf[2 * j][0] = r[0];
    bf[2 * j][1] = r[1];
    bf[2 * j + 1][0] = r[2];
    bf[2 * j + 1][1] = r[3];
  }
}

// acc += A fragments x B fragments for the warp's MI x NI tiles (fp32 or packed fp16 sums).
template <class Cfg>
__device__ __forceinline__ void mma_tiles(float (&acc)[Cfg::MI][Cfg::NI][4],
                                          uint32_t (&hacc)[Cfg::MI][Cfg::NI][2],
                                          const uint32_t (&af)[Cfg::MI][4],
                                          const uint32_t (&bf)[Cfg::NI][2]) {
#pragma unroll
  for (int i = 0; i < Cfg::MI; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::NI; ++j) {
      if constexpr (Cfg::ACC_F16)
        mma_f16(hacc[i][j], af[i], bf[j]);
      else
        mma_f32(acc[i][j], af[i], bf[j]);
    }
}

// One k-tile of A (BM x BK) and B (BK x BN, or BN x BK for tn) into a pipeline stage, each
// copy's address from the block's origin; rows (columns) past M (N) are zero-filled, not read.
// Cfg gives BK, BN, VEC, THREADS, A_TILE, B_TILE and B_COL_MAJOR.
template <class Cfg>
__device__ __forceinline__ void load_tile(__half* sA, __half* sB, const __half* __restrict__ A,
                                          const __half* __restrict__ B, int M, int N, int K, int m0,
                                          int n0, int k0, int tid) {
  constexpr int BK = Cfg::BK, BN = Cfg::BN, VEC = Cfg::VEC, THREADS = Cfg::THREADS;
  // K is a multiple of 64: a deeper k-tile may run past it (zero-filled, not read).
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
    if constexpr (Cfg::B_COL_MAJOR) {  // smem rows are n, columns k
      const int row = c / (BK / VEC), col = (c % (BK / VEC)) * VEC;
      const int gn = n0 + row;
      const bool ok = gn < N && (!K_TAIL || k0 + col < K);
      cp_async<Cfg>(sB + swz(row, col, BK), ok ? B + (size_t)gn * K + k0 + col : B, ok);
    } else {  // smem rows are k, columns n
      const int row = c / (BN / VEC), col = (c % (BN / VEC)) * VEC;
      const int gn = n0 + col;
      const bool ok = gn < N && (!K_TAIL || k0 + row < K);
      cp_async<Cfg>(sB + swz(row, col, BN), ok ? B + (size_t)(k0 + row) * N + gn : B, ok);
    }
  }
}

// Main loop, one k-tile per iteration: wait for the tile, barrier, issue the copy of the tile
// STAGES-1 ahead, then per 16-deep k-step load that step's fragments and run its mma.sync.
// It runs k-tiles kt_begin .. kt_begin + k_tiles - 1 of the block at (m0, n0); Cfg gives STAGES,
// BK, KI, MI, NI, STAGE_HALVES and A_TILE besides what the loaders need.
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
    cp_async_wait<STAGES - 2>();  // tile kt has landed
    __syncthreads();              // ... for every thread, and stage (kt-1) is free again
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

}  // namespace
}  // namespace mma_sync

#endif  // KERNELRL_MMA_SYNC_CUH
