// HGEMM for Hopper (sm_90a): C[M,N] = A[M,K] * B[K,N], fp16 in, fp32 accumulate, fp16 out.
// wgmma.mma_async (m64nNk16) reads both operands from 128B-swizzled shared memory that TMA
// (cp.async.bulk.tensor) fills through an mbarrier pipeline of STAGES slots. Warp-specialized
// and persistent: warpgroup 0 is the producer (one thread issues the TMA loads), warpgroups
// 1..CONSUMERS run wgmma on 64*WG_M rows each and the epilogue; every CTA walks the tiles of
// a rastered tile order. Optional 2-CTA clusters share the B tile by TMA multicast; optional
// split-K writes fp32 partial sums to the workspace and a second kernel adds them.
// Layouts: A row-major (K-major); B row-major for nn (N-major: the transposed wgmma B) or
// column-major for tn (K-major). Epilogue: 16-bit stores straight from the accumulators, or
// swizzled shared memory + TMA store. Host side: tensor maps are encoded on every call through
// the driver entry point (no -lcuda), launches only enqueue on the given stream.
// A candidate is this file (it includes the kernelrl_args contract, kernel_abi.h) and an instance
// block: `using Cfg = hgemm_wgmma::Config<...>;` and a kernelrl_launch that
// returns hgemm_wgmma::run<Cfg>(args, stream). Measured on an H100: docs/benchmarks.md.
#ifndef KERNELRL_HGEMM_WGMMA_CUH
#define KERNELRL_HGEMM_WGMMA_CUH

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernel_abi.h"

namespace hgemm_wgmma {
// Internal linkage for everything: a function-local static of an inline or template function
// with external linkage is a process-wide unique symbol (STB_GNU_UNIQUE), so a second candidate
// of the same Config dlopen'ed into the evaluator's worker would reuse the first one's "already
// set up" flag and launch its own kernel without the shared-memory opt-in (seen on an H100).
namespace {

// EPI: 0 = 16-bit stores from registers, 1 = swizzled smem + TMA store.
// RASTER: 0 = bands of SWIZZLE tile columns walked row by row, 1 = bands of SWIZZLE tile rows.
template <int BM_, int BN_, int BK_, int STAGES_, int CONSUMERS_, int CLUSTER_, bool B_KMAJOR_,
          int RASTER_, int SWIZZLE_, int SPLIT_K_, int EPI_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, STAGES = STAGES_;
  static constexpr int CONSUMERS = CONSUMERS_, CLUSTER = CLUSTER_;
  static constexpr bool B_KMAJOR = B_KMAJOR_;  // tn: B(k, n) at B[n * K + k]
  static constexpr int RASTER = RASTER_, SWIZZLE = SWIZZLE_, SPLIT_K = SPLIT_K_, EPI = EPI_;
  static constexpr int WG_M = BM / (64 * CONSUMERS);  // m64 blocks per consumer warpgroup
  static constexpr int THREADS = 128 * (CONSUMERS + 1);
  static constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int EPI_BYTES = EPI == 1 && SPLIT_K == 1 ? CONSUMERS * 2 * 64 * 128 : 0;
  static constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + EPI_BYTES + STAGES * 16;
  static_assert(WG_M >= 1 && WG_M * 64 * CONSUMERS == BM, "BM = 64 * WG_M * CONSUMERS");
  static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "wgmma N in {64,128,192,256}");
  static_assert(BK % 64 == 0, "BK: whole 128-byte swizzle rows");
  static_assert(CLUSTER == 1 || (CLUSTER == 2 && BN % 128 == 0), "cluster 2 splits B in halves");
  static_assert(WG_M * BN / 2 <= 128, "accumulators per thread");
  static_assert(SMEM_BYTES <= 232448, "shared memory per block");
};

// ---- PTX wrappers ------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// Arrive on the barrier at the same offset in CTA `rank` of the cluster (self included). The
// default .release.cta suffices (as in CUTLASS's cluster barriers): what it publishes, that our
// wgmma reads of a stage are done, wgmma.wait_group already completed.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
}
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                         int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// The same box lands at `dst` and completes on `bar` in every CTA of `mask`.
__device__ __forceinline__ void tma_load_multicast(uint32_t dst, const CUtensorMap* map,
                                                   uint32_t bar, int c0, int c1, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}
__device__ __forceinline__ void tma_store(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map),
      "r"(src), "r"(c0), "r"(c1)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
template <int REGS>
__device__ __forceinline__ void regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

// Shared-memory matrix descriptor, 128B swizzle: start address, leading and stride byte offsets.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<uint64_t>(lbo >> 4) << 16 |
         static_cast<uint64_t>(sbo >> 4) << 32 | 1ull << 62;
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads across wgmma_wait.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma m64nNk16, f32 += f16 * f16, A and B from shared memory; TB = 1: B is N-major.
// Operand lists: accumulators %0..%(N/2-1), then desc A, desc B, scale-d, TB.
#define KRL_R10(p) \
  "%" #p "0, %" #p "1, %" #p "2, %" #p "3, %" #p "4, %" #p "5, %" #p "6, %" #p "7, %" #p "8, %" #p "9, "
#define KRL_F8(i)                                                                     \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define KRL_F32(i) KRL_F8(i), KRL_F8(i + 8), KRL_F8(i + 16), KRL_F8(i + 24)
#define KRL_WGMMA(n, list, ia, ib, is, it, ...)                                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" is ", 0;\n"                                 \
               "wgmma.mma_async.sync.aligned.m64n" #n "k16.f32.f16.f16 {" list "}, %" ia        \
               ", %" ib ", p, 1, 1, 0, %" it ";\n}\n"                                            \
               : __VA_ARGS__                                                                   \
               : "l"(da), "l"(db), "r"(scale_d), "n"(TB))

template <int N, int TB>
__device__ __forceinline__ void wgmma(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (N == 64) {
    KRL_WGMMA(64, KRL_R10() KRL_R10(1) KRL_R10(2) "%30, %31", "32", "33", "34", "35",
              KRL_F32(0));
  } else if constexpr (N == 128) {
    KRL_WGMMA(128,
              KRL_R10() KRL_R10(1) KRL_R10(2) KRL_R10(3) KRL_R10(4) KRL_R10(5)
              "%60, %61, %62, %63",
              "64", "65", "66", "67", KRL_F32(0), KRL_F32(32));
  } else if constexpr (N == 192) {
    KRL_WGMMA(192,
              KRL_R10() KRL_R10(1) KRL_R10(2) KRL_R10(3) KRL_R10(4) KRL_R10(5) KRL_R10(6)
              KRL_R10(7) KRL_R10(8) "%90, %91, %92, %93, %94, %95",
              "96", "97", "98", "99", KRL_F32(0), KRL_F32(32), KRL_F32(64));
  } else {
    KRL_WGMMA(256,
              KRL_R10() KRL_R10(1) KRL_R10(2) KRL_R10(3) KRL_R10(4) KRL_R10(5) KRL_R10(6)
              KRL_R10(7) KRL_R10(8) KRL_R10(9) KRL_R10(10) KRL_R10(11)
              "%120, %121, %122, %123, %124, %125, %126, %127",
              "128", "129", "130", "131", KRL_F32(0), KRL_F32(32), KRL_F32(64), KRL_F32(96));
  }
}
#undef KRL_WGMMA
#undef KRL_F32
#undef KRL_F8
#undef KRL_R10

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

// Work unit u -> tile (mt of this CTA, nt) and k-block range. Units are split-major so that the
// CTAs running at once share A rows and B columns in L2: the tile order walks bands SWIZZLE
// wide. A cluster takes CLUSTER vertically adjacent tiles (one m-group) that share their B tile.
// Every unit has at least one k-block (run<> leaves no empty split): the consumers' last
// release of a unit is of a stage they read. A unit may have fewer k-blocks than STAGES: the
// producer's and the consumers' stage index and phase bit run on across units, so the ring
// neither restarts nor drains at a unit's end.
struct Schedule {
  int m_groups, n_tiles, tiles, units, k_blocks, kps;
  __device__ __forceinline__ void locate(int u, int cluster, int rank, int bm, int raster,
                                         int swz, int& mt, int& nt, int& kb0, int& kb1) const {
    const int tile = u % tiles, split = u / tiles;
    int mg, n;
    if (raster == 0) {  // bands of swz tile columns
      const int band = tile / (swz * m_groups), r = tile % (swz * m_groups);
      const int first = band * swz, width = min(swz, n_tiles - first);
      mg = r / width;
      n = first + r % width;
    } else {  // bands of swz m-groups
      const int band = tile / (swz * n_tiles), r = tile % (swz * n_tiles);
      const int first = band * swz, height = min(swz, m_groups - first);
      n = r / height;
      mg = first + r % height;
    }
    mt = mg * cluster + rank;
    nt = n;
    kb0 = split * kps;
    kb1 = min(k_blocks, kb0 + kps);
  }
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                const __grid_constant__ CUtensorMap tma_c, __half* __restrict__ C,
                float* __restrict__ partial, int M, int N, int K, int splits, int kps) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, STAGES = Cfg::STAGES;
  constexpr int CL = Cfg::CLUSTER, WG_M = Cfg::WG_M;
  extern __shared__ uint8_t smem_raw[];
  // [A stages][B stages][epilogue buffers][full barriers][empty barriers], 1024-aligned.
  const uint32_t sA = (smem_u32(smem_raw) + 1023) & ~1023u;
  const uint32_t sB = sA + STAGES * Cfg::A_BYTES;
  const uint32_t sE = sB + STAGES * Cfg::B_BYTES;
  const uint32_t bars = sE + Cfg::EPI_BYTES;
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (STAGES + s); };
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const int rank = Cfg::CLUSTER > 1 ? static_cast<int>(cluster_rank()) : 0;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full(s), 1);                              // the producer's expect_tx
      mbar_init(empty(s), 4 * Cfg::CONSUMERS * CL);       // every consumer warp of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if constexpr (Cfg::CLUSTER > 1) cluster_sync();

  Schedule sch;
  const int m_tiles = (M + BM - 1) / BM;
  sch.m_groups = (m_tiles + CL - 1) / CL;
  sch.n_tiles = (N + BN - 1) / BN;
  sch.tiles = sch.m_groups * sch.n_tiles;
  sch.units = sch.tiles * splits;
  sch.k_blocks = (K + BK - 1) / BK;
  sch.kps = kps;
  const int cid = blockIdx.x / CL, n_clusters = gridDim.x / CL;

  if (wg == 0) {  // ---- producer warpgroup: one thread issues every TMA load ----
    if constexpr (Cfg::CONSUMERS == 2) regs_dec<40>();
    if (t == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tma_a) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tma_b) : "memory");
      int stage = 0;
      uint32_t phase = 0;
      for (int u = cid; u < sch.units; u += n_clusters) {
        int mt, nt, kb0, kb1;
        sch.locate(u, CL, rank, BM, Cfg::RASTER, Cfg::SWIZZLE, mt, nt, kb0, kb1);
        for (int kb = kb0; kb < kb1; ++kb) {
          mbar_wait(empty(stage), phase ^ 1);  // a fresh barrier passes parity 1 at once
          mbar_expect_tx(full(stage), Cfg::STAGE_BYTES);
          const uint32_t a_dst = sA + stage * Cfg::A_BYTES, b_dst = sB + stage * Cfg::B_BYTES;
#pragma unroll
          for (int kc = 0; kc < BK / 64; ++kc)
            tma_load(a_dst + kc * BM * 128, &tma_a, full(stage), kb * BK + kc * 64, mt * BM);
          if constexpr (Cfg::B_KMAJOR) {  // [BK/64][BN rows][64 k]; this CTA loads BN/CL rows
            constexpr int ROWS = BN / CL;
#pragma unroll
            for (int kc = 0; kc < BK / 64; ++kc) {
              const uint32_t dst = b_dst + kc * BN * 128 + rank * ROWS * 128;
              if constexpr (Cfg::CLUSTER > 1)
                tma_load_multicast(dst, &tma_b, full(stage), kb * BK + kc * 64,
                                   nt * BN + rank * ROWS, (1 << CL) - 1);
              else
                tma_load(dst, &tma_b, full(stage), kb * BK + kc * 64, nt * BN);
            }
          } else {  // [BN/64][BK rows][64 n]; this CTA loads BN/64/CL column chunks
            constexpr int CHUNKS = BN / 64 / CL;
#pragma unroll
            for (int i = 0; i < CHUNKS; ++i) {
              const int nc = rank * CHUNKS + i;
              const uint32_t dst = b_dst + nc * BK * 128;
              if constexpr (Cfg::CLUSTER > 1)
                tma_load_multicast(dst, &tma_b, full(stage), nt * BN + nc * 64, kb * BK,
                                   (1 << CL) - 1);
              else
                tma_load(dst, &tma_b, full(stage), nt * BN + nc * 64, kb * BK);
            }
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {  // ---- consumer warpgroups: wgmma main loop + epilogue ----
    if constexpr (Cfg::CONSUMERS == 2) regs_inc<232>();
    const int c = wg - 1, warp = t / 32, lane = t % 32;
    float acc[WG_M][BN / 2];
#pragma unroll
    for (int mi = 0; mi < WG_M; ++mi)
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[mi][i] = 0.0f;
    // A consumed stage goes back to the producer of every CTA that fills it: lane r of each
    // warp arrives on CTA r's empty barrier.
    auto release = [&](int s) {
      if constexpr (Cfg::CLUSTER > 1) {
        if (lane < CL) mbar_arrive_cluster(empty(s), lane);
      } else {
        if (lane == 0) mbar_arrive(empty(s));
      }
    };
    int stage = 0, ebuf = 0;
    uint32_t phase = 0;
    for (int u = cid; u < sch.units; u += n_clusters) {
      int mt, nt, kb0, kb1;
      sch.locate(u, CL, rank, BM, Cfg::RASTER, Cfg::SWIZZLE, mt, nt, kb0, kb1);
      int prev = 0;
      for (int kb = kb0; kb < kb1; ++kb) {
        mbar_wait(full(stage), phase);
        const uint32_t a_s = sA + stage * Cfg::A_BYTES, b_s = sB + stage * Cfg::B_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          const int kc = kk / 4, ko = (kk % 4) * 32;  // 64-wide k chunk, byte offset in a row
          // K-major: 8-row groups 1024 B apart (SBO); N-major: k rows 128 B apart, 8-row
          // groups 1024 B apart (SBO), 64-column chunks BK*128 B apart (LBO).
          const uint64_t db = Cfg::B_KMAJOR
                                  ? smem_desc(b_s + kc * BN * 128 + ko, 16, 1024)
                                  : smem_desc(b_s + kk * 16 * 128, BK * 128, 1024);
#pragma unroll
          for (int mi = 0; mi < WG_M; ++mi) {
            const uint64_t da =
                smem_desc(a_s + kc * BM * 128 + (c * WG_M + mi) * 64 * 128 + ko, 16, 1024);
            wgmma<BN, Cfg::B_KMAJOR ? 0 : 1>(acc[mi], da, db, (kb > kb0 || kk > 0) ? 1 : 0);
          }
        }
        wgmma_commit();
        wgmma_wait<1>();  // the previous k-block's wgmma are done: release its stage
        if (kb > kb0) release(prev);
        prev = stage;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
      wgmma_wait<0>();
#pragma unroll
      for (int mi = 0; mi < WG_M; ++mi) fence_regs(acc[mi]);
      release(prev);

      // ---- epilogue: accumulator (row w*16 + lane/4 (+8), col 8j + 2*(lane%4)) -> C ----
      const int r_in = warp * 16 + lane / 4, c_in = 2 * (lane % 4);
#pragma unroll
      for (int mi = 0; mi < WG_M; ++mi) {
        const int row0 = mt * BM + (c * WG_M + mi) * 64;
        if (row0 >= M) continue;  // uniform over the warpgroup
        if (Cfg::SPLIT_K > 1 && splits > 1) {
          float* P = partial + static_cast<size_t>(kb0 / sch.kps) * M * N;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int col = nt * BN + 8 * j + c_in;
            if (col >= N) continue;
            const size_t o = static_cast<size_t>(row0 + r_in) * N + col;
            *reinterpret_cast<float2*>(P + o) = make_float2(acc[mi][4 * j], acc[mi][4 * j + 1]);
            *reinterpret_cast<float2*>(P + o + 8 * static_cast<size_t>(N)) =
                make_float2(acc[mi][4 * j + 2], acc[mi][4 * j + 3]);
          }
        } else if (Cfg::EPI == 0 || Cfg::SPLIT_K > 1) {  // (no TMA-store buffers with split-K)
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int col = nt * BN + 8 * j + c_in;
            if (col >= N) continue;
            const size_t o = static_cast<size_t>(row0 + r_in) * N + col;
            *reinterpret_cast<uint32_t*>(C + o) = pack_half2(acc[mi][4 * j], acc[mi][4 * j + 1]);
            *reinterpret_cast<uint32_t*>(C + o + 8 * static_cast<size_t>(N)) =
                pack_half2(acc[mi][4 * j + 2], acc[mi][4 * j + 3]);
          }
        } else {
          // 64x64 boxes through two 8 KiB buffers per consumer, 128B-swizzled like the tensor
          // map (16-byte chunk j of row r at chunk j ^ (r % 8)): conflict-free 4-byte stores.
#pragma unroll
          for (int cc = 0; cc < BN / 64; ++cc) {
            if (nt * BN + cc * 64 >= N) continue;  // uniform: a box wholly right of C
            const uint32_t buf = sE + (c * 2 + ebuf) * 8192;
            if (t == 0) tma_store_wait_read<1>();  // the store that last read `buf` is done
            named_barrier(1 + c, 128);
#pragma unroll
            for (int jj = 0; jj < 8; ++jj) {
              const int j = cc * 8 + jj;
              const uint32_t off = ((jj ^ (r_in & 7)) << 4) + c_in * 2;
              asm volatile("st.shared.b32 [%0], %1;" ::"r"(buf + r_in * 128 + off),
                           "r"(pack_half2(acc[mi][4 * j], acc[mi][4 * j + 1])));
              asm volatile("st.shared.b32 [%0], %1;" ::"r"(buf + (r_in + 8) * 128 + off),
                           "r"(pack_half2(acc[mi][4 * j + 2], acc[mi][4 * j + 3])));
            }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            named_barrier(1 + c, 128);
            if (t == 0) tma_store(&tma_c, buf, nt * BN + cc * 64, row0);
            ebuf ^= 1;
          }
        }
      }
    }
    if (Cfg::EPI == 1 && t == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
  if constexpr (Cfg::CLUSTER > 1) {  // no CTA leaves while its peer may still signal its barriers
    __syncwarp();
    cluster_sync();
  }
}

// Split-K: C = sum over the splits of the fp32 partial products, 4 elements per thread. The
// split loop is unrolled so that up to 8 of a thread's loads are in flight at once: a small C
// split 16 or 32 ways has few threads, each waiting on L2 once per batch, not once per split.
__global__ void splitk_reduce(const float* __restrict__ partial, __half* __restrict__ C,
                              size_t mn, int splits) {
  for (size_t i = 4 * (blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x); i < mn;
       i += 4 * static_cast<size_t>(gridDim.x) * blockDim.x) {
    float4 s = *reinterpret_cast<const float4*>(partial + i);
#pragma unroll 8
    for (int k = 1; k < splits; ++k) {
      const float4 p = *reinterpret_cast<const float4*>(partial + k * mn + i);
      s.x += p.x, s.y += p.y, s.z += p.z, s.w += p.w;
    }
    uint2 out = make_uint2(pack_half2(s.x, s.y), pack_half2(s.z, s.w));
    *reinterpret_cast<uint2*>(C + i) = out;
  }
}

// ---- host side --------------------------------------------------------------------------
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A 2-D fp16 tensor map over a row-major [rows][cols] matrix with a box of [box_rows][64],
// 128B swizzle, zero fill out of bounds.
inline bool encode_map(CUtensorMap* map, const void* ptr, int64_t rows, int64_t cols,
                       int box_rows) {
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  cuuint32_t estr[2] = {1, 1};
  return tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void*>(ptr),
                              dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The kernelrl_launch body for one Config: 0 on success.
template <class Cfg>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int64_t M = args->dims[0], N = args->dims[1], K = args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  if (M > (1 << 30) || N > (1 << 30) || K > (1 << 30)) return 2;
  if (tensor_map_encoder() == nullptr) return 3;
  auto kernel = gemm_kernel<Cfg>;
  // Once per Config: the shared-memory opt-in and how many clusters fit at once.
  static const int max_clusters = [&] {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             Cfg::SMEM_BYTES) != cudaSuccess)
      return 0;
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 0;
    if (Cfg::CLUSTER == 1) return sms;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(Cfg::CLUSTER * (sms / Cfg::CLUSTER));
    lc.blockDim = dim3(Cfg::THREADS);
    lc.dynamicSmemBytes = Cfg::SMEM_BYTES;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = Cfg::CLUSTER;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    lc.attrs = at;
    lc.numAttrs = 1;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &lc) != cudaSuccess || n <= 0) return 0;
    return n;
  }();
  if (max_clusters <= 0) return 4;

  CUtensorMap ta, tb, tc;
  const bool ok =
      encode_map(&ta, args->inputs[0], M, K, Cfg::BM) &&
      (Cfg::B_KMAJOR ? encode_map(&tb, args->inputs[1], N, K, Cfg::BN / Cfg::CLUSTER)
                     : encode_map(&tb, args->inputs[1], K, N, Cfg::BK)) &&
      encode_map(&tc, args->outputs[0], M, N, 64);
  if (!ok) return 3;

  // Splits: at most one per k-block, at most as many fp32 M x N partials as the workspace holds
  // (one split, no workspace, when not even two fit), and no empty split: every split has kps
  // k-blocks but the last, which has 1..kps.
  const int k_blocks = static_cast<int>((K + Cfg::BK - 1) / Cfg::BK);
  int splits = Cfg::SPLIT_K < k_blocks ? Cfg::SPLIT_K : k_blocks;
  const size_t partial_bytes = static_cast<size_t>(M) * N * 4;
  const size_t fit = args->workspace == nullptr ? 0 : args->workspace_bytes / partial_bytes;
  if (static_cast<size_t>(splits) > fit) splits = static_cast<int>(fit);
  if (splits < 2) splits = 1;
  const int kps = (k_blocks + splits - 1) / splits;
  splits = (k_blocks + kps - 1) / kps;
  const int64_t m_groups = ((M + Cfg::BM - 1) / Cfg::BM + Cfg::CLUSTER - 1) / Cfg::CLUSTER;
  const int64_t units = m_groups * ((N + Cfg::BN - 1) / Cfg::BN) * splits;
  const int clusters = static_cast<int>(units < max_clusters ? units : max_clusters);

  cudaLaunchConfig_t lc = {};
  lc.gridDim = dim3(clusters * Cfg::CLUSTER);
  lc.blockDim = dim3(Cfg::THREADS);
  lc.dynamicSmemBytes = Cfg::SMEM_BYTES;
  lc.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = Cfg::CLUSTER;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  lc.attrs = at;
  lc.numAttrs = Cfg::CLUSTER > 1 ? 1 : 0;
  float* partial = splits > 1 ? static_cast<float*>(args->workspace) : nullptr;
  if (cudaLaunchKernelEx(&lc, kernel, ta, tb, tc, static_cast<__half*>(args->outputs[0]), partial,
                         static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), splits,
                         kps) != cudaSuccess)
    return 5;
  if (splits > 1) {  // one thread per 4 elements, up to 1024 blocks of 256 (a grid-stride loop)
    const int64_t blocks = (M * N / 4 + 255) / 256;
    splitk_reduce<<<blocks < 1024 ? static_cast<int>(blocks) : 1024, 256, 0,
                    static_cast<cudaStream_t>(stream)>>>(
        partial, static_cast<__half*>(args->outputs[0]), static_cast<size_t>(M) * N, splits);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 6;
}

}  // namespace
}  // namespace hgemm_wgmma

#endif  // KERNELRL_HGEMM_WGMMA_CUH
