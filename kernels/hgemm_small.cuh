// HGEMM for small and skinny shapes, latency first: C[M,N] = A[M,K] * B[K,N], fp16 in and out,
// fp32 accumulation. Where the whole problem is a few microseconds the cost is the fixed part of
// a call (launch, the first loads' DRAM latency, a second kernel, a memset), not throughput, so
// this kernel is one launch of small 4-warp blocks (BM x BN tiles, mma.sync m16n8k16 fed by
// ldmatrix from a STAGES-deep cp.async pipeline, the main loop of mma_sync.cuh), sized so the
// whole grid is resident at once (one wave), with no persistent scheduler, no TMA descriptors
// and no second kernel:
// - SPLIT_K > 1 splits K over the SPLIT_K blocks of a thread-block cluster; each writes its fp32
//   partial tile to its own shared memory, and after a cluster barrier block r sums rows
//   [r * BM / SPLIT_K, (r + 1) * BM / SPLIT_K) of every block's partial through distributed
//   shared memory and stores them as fp16. No workspace, no atomics, no memset.
// - EPI (SPLIT_K 1) stages the fp16 tile through shared memory and writes it with 16-byte
//   coalesced stores (else fp16 pairs straight from the accumulators: 16 bytes per row per
//   quad of threads, partial sectors); the split-K reduction always writes 16-byte chunks.
// - PDL launches with programmatic stream serialization: the next kernel in the stream may be
//   scheduled while this one runs (this kernel releases its dependents at its start), and this
//   kernel waits (griddepcontrol.wait) for the previous one's memory before its first load. A
//   kernel that waits for nothing costs nothing; behind a kernel that releases it early, the
//   launch latency overlaps the previous kernel's tail.
// A: M x K row-major; B: K x N row-major (nn) or N x K row-major (tn, B_COL_MAJOR); C: M x N.
// A candidate is this file and an instance block: `using Cfg = hgemm_small::Config<...>;` and a
// kernelrl_launch that returns hgemm_small::run<Cfg>(args, stream).
#ifndef KERNELRL_HGEMM_SMALL_CUH
#define KERNELRL_HGEMM_SMALL_CUH

#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernel_abi.h"
#include "mma_sync.cuh"

namespace hgemm_small {
namespace {  // internal linkage: candidates are dlopen'ed side by side

using namespace mma_sync;
namespace cg = cooperative_groups;

template <int BM_, int BN_, int BK_, int STAGES_, int SPLIT_K_, bool EPI_, bool PDL_,
          bool B_COL_MAJOR_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;  // block tile
  static constexpr int STAGES = STAGES_;              // cp.async pipeline depth
  static constexpr int SPLIT_K = SPLIT_K_;  // blocks of a cluster that split K (1: no cluster)
  static constexpr bool EPI = EPI_;         // C through shared memory, 16-byte stores
  static constexpr bool PDL = PDL_;         // programmatic dependent launch
  static constexpr bool B_COL_MAJOR = B_COL_MAJOR_;  // layout tn: B(k, n) at B[n * K + k]
  static constexpr bool ACC_F16 = false;
  static constexpr int VEC = 8;                   // halves per cp.async (16 bytes)
  static constexpr int WM = BM / 2, WN = BN / 2;  // 2 x 2 warps
  static constexpr int THREADS = 128;
  static constexpr int MI = WM / 16, NI = WN / 8, KI = BK / 16;
  static constexpr int A_TILE = BM * BK, B_TILE = BK * BN;  // halves
  static constexpr int STAGE_HALVES = A_TILE + B_TILE;
  static constexpr int LDP = BN + 4;  // fp32 partial row, padded (16-byte aligned rows)
  static constexpr int LDC = BN + 8;  // staged fp16 row, padded (16-byte aligned rows)
  static constexpr size_t PIPE_BYTES = size_t(STAGES) * STAGE_HALVES * 2;
  static constexpr size_t PART_BYTES = SPLIT_K > 1 ? size_t(BM) * LDP * 4 : 0;
  static constexpr size_t SMEM_BYTES = PIPE_BYTES > PART_BYTES ? PIPE_BYTES : PART_BYTES;
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: m16 tiles, pairs of n8 tiles");
  static_assert((A_TILE / VEC) % THREADS == 0 && (B_TILE / VEC) % THREADS == 0, "load split");
  static_assert(STAGES >= 2, "pipeline");
  static_assert(SPLIT_K >= 1 && SPLIT_K <= 16 && BM % SPLIT_K == 0, "split rows per block");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block");
  static_assert(size_t(BM) * LDC * 2 <= PIPE_BYTES, "the staged C tile fits the pipeline");
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
    hgemm_small_kernel(const __half* __restrict__ A, const __half* __restrict__ B,
                       __half* __restrict__ C, int M, int N, int K) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WM, WN = Cfg::WN;
  constexpr int MI = Cfg::MI, NI = Cfg::NI, S = Cfg::SPLIT_K;
  if constexpr (Cfg::PDL) {
    // Let the next kernel of the stream be scheduled now; then wait until the previous one's
    // writes are visible (a no-op when it was not launched as our dependency).
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp >> 1, warp_n = warp & 1;
  // Consecutive blocks: the S k-ranges of one tile (one cluster), tiles in row-major order.
  const int rank = S > 1 ? (int)(blockIdx.x % S) : 0;
  const int tile = blockIdx.x / S;
  const int tiles_n = (N + BN - 1) / BN;
  const int m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
  const int k_tiles_all = (K + BK - 1) / BK;  // BK 128: the last k-tile may be half empty
  const int per_split = (k_tiles_all + S - 1) / S;
  const int kt_begin = rank * per_split;
  const int k_tiles = max(0, min(k_tiles_all, kt_begin + per_split) - kt_begin);

  float acc[MI][NI][4];
  uint32_t hacc[MI][NI][2];  // unused: fp32 accumulation only
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
  mainloop_simple<Cfg>(acc, hacc, smem, A, B, M, N, K, m0, n0, kt_begin, k_tiles, warp_m, warp_n,
                       lane, tid);

  // Thread (g = lane/4, t = lane%4) holds rows g and g+8, columns 2t and 2t+1 of each 16x8 tile.
  if constexpr (Cfg::SPLIT_K == 1 && !Cfg::EPI) {
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const int row = m0 + warp_m * WM + i * 16 + (lane >> 2);
        const int col = n0 + warp_n * WN + j * 8 + (lane & 3) * 2;
        if (col >= N) continue;
        if (row < M)
          *reinterpret_cast<__half2*>(C + (size_t)row * N + col) =
              __floats2half2_rn(acc[i][j][0], acc[i][j][1]);
        if (row + 8 < M)
          *reinterpret_cast<__half2*>(C + (size_t)(row + 8) * N + col) =
              __floats2half2_rn(acc[i][j][2], acc[i][j][3]);
      }
  } else if constexpr (Cfg::SPLIT_K == 1) {
    // The fp16 tile through shared memory (the drained pipeline), then 16-byte stores.
    __half* sC = smem;
    __syncthreads();  // every warp is done reading the pipeline's last stage
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
  } else {
    // The fp32 partial tile into this block's shared memory (the pipeline is drained) ...
    float* part = reinterpret_cast<float*>(smem_raw);
    __syncthreads();  // every warp is done reading the pipeline's last stage
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const int r = warp_m * WM + i * 16 + (lane >> 2);
        const int c = warp_n * WN + j * 8 + (lane & 3) * 2;
        *reinterpret_cast<float2*>(&part[r * Cfg::LDP + c]) =
            make_float2(acc[i][j][0], acc[i][j][1]);
        *reinterpret_cast<float2*>(&part[(r + 8) * Cfg::LDP + c]) =
            make_float2(acc[i][j][2], acc[i][j][3]);
      }
    // ... visible to the cluster; then block `rank` sums its BM / S rows over the S partials.
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    constexpr int ROWS = BM / S;
    for (int e = tid; e < ROWS * (BN / 8); e += Cfg::THREADS) {
      const int r = rank * ROWS + e / (BN / 8), c = (e % (BN / 8)) * 8;
      float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int q = 0; q < S; ++q) {
        const float4* p =
            reinterpret_cast<const float4*>(cluster.map_shared_rank(&part[r * Cfg::LDP + c], q));
        const float4 lo = p[0], hi = p[1];
        v[0] += lo.x;
        v[1] += lo.y;
        v[2] += lo.z;
        v[3] += lo.w;
        v[4] += hi.x;
        v[5] += hi.y;
        v[6] += hi.z;
        v[7] += hi.w;
      }
      if (m0 + r < M && n0 + c < N) {
        __half2 h[4] = {__floats2half2_rn(v[0], v[1]), __floats2half2_rn(v[2], v[3]),
                        __floats2half2_rn(v[4], v[5]), __floats2half2_rn(v[6], v[7])};
        *reinterpret_cast<uint4*>(C + (size_t)(m0 + r) * N + n0 + c) =
            *reinterpret_cast<const uint4*>(h);
      }
    }
    cluster.sync();  // no block leaves while another still reads its shared memory
  }
}

template <class Cfg>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  static bool configured = false;  // once per process: attributes are not stream work
  if (!configured) {
    if (Cfg::SMEM_BYTES > 48 * 1024 &&
        cudaFuncSetAttribute(hgemm_small_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)Cfg::SMEM_BYTES) != cudaSuccess)
      return 3;
    if (Cfg::SPLIT_K > 8 &&
        cudaFuncSetAttribute(hgemm_small_kernel<Cfg>,
                             cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
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
  if (Cfg::SPLIT_K > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = Cfg::SPLIT_K;
    attrs[n].val.clusterDim.y = 1;
    attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  if (Cfg::PDL) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  if (cudaLaunchKernelEx(&cfg, hgemm_small_kernel<Cfg>, (const __half*)args->inputs[0],
                         (const __half*)args->inputs[1], (__half*)args->outputs[0], M, N,
                         K) != cudaSuccess)
    return 4;
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}

}  // namespace
}  // namespace hgemm_small

#endif  // KERNELRL_HGEMM_SMALL_CUH
