// HGEMM kernel families: hgemm_tiled, hgemm_wmma, hgemm_mma (CUDA) and hgemm_host (C++).
#include <sstream>

#include "data/families.h"
#include "data/families_internal.h"

namespace kernelrl {
namespace {

using families::fill;

const char* kHgemmContract =
    "C[M,N] = A[M,K] * B[K,N] with A row-major fp16, B $BLAYOUT$ fp16 and C row-major fp16, "
    "$ACC$ accumulation; inputs[0]=A, inputs[1]=B, outputs[0]=C, dims={M,N,K}; every launch on "
    "the given stream; M, N and K are multiples of 64";

std::string contract(const std::string& layout, const std::string& acc) {
  return families::hgemm_contract(layout, acc);
}

}  // namespace

std::string families::hgemm_contract(const std::string& layout, const std::string& acc) {
  return fill(
      kHgemmContract,
      {{"BLAYOUT", layout == "nn" ? "row-major (KxN)" : "column-major (KxN, i.e. NxK row-major)"},
       {"ACC", acc == "f32" ? "fp32" : "fp16"}});
}

namespace {

// ---------------------------------------------------------------------------------------------
const char* kTiledTemplate = R"CUDA(// HGEMM, shared-memory SIMT tiling: $SUMMARY$
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
$ABI$
namespace {

constexpr int BM = $BM$, BN = $BN$, BK = $BK$;  // block tile
constexpr int TM = $TM$, TN = $TN$;             // per-thread tile
constexpr bool B_COL_MAJOR = $TN_LAYOUT$;       // layout tn: B(k, n) at B[n * K + k]
constexpr int THREADS = (BM / TM) * (BN / TN);
static_assert(THREADS <= 1024, "too many threads");
static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0, "tile/threads mismatch");

typedef $ACC_T$ acc_t;
__device__ __forceinline__ acc_t fma_acc(__half a, __half b, acc_t c) {
$FMA$
}

__global__ void __launch_bounds__(THREADS) hgemm_tiled_kernel(
    const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K) {
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
      if (B_COL_MAJOR) { c = e / BK; r = e % BK; } else { r = e / BN; c = e % BN; }
      int gn = n0 + c;
      __half v = __float2half(0.0f);
      if (gn < N) v = B_COL_MAJOR ? B[(size_t)gn * K + k0 + r] : B[(size_t)(k0 + r) * N + gn];
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

}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  hgemm_tiled_kernel<<<grid, THREADS, 0, (cudaStream_t)stream>>>(
      (const __half*)args->inputs[0], (const __half*)args->inputs[1], (__half*)args->outputs[0],
      M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
)CUDA";

// ---------------------------------------------------------------------------------------------
const char* kWmmaTemplate = R"CUDA(// HGEMM, WMMA tensor cores: $SUMMARY$
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <cstddef>
#include <type_traits>
#include <cstdint>
$ABI$
namespace {

using namespace nvcuda;
constexpr int BM = $BM$, BN = $BN$, BK = 32;    // block tile
constexpr int WM = $WM$, WN = $WN$;             // warp tile
constexpr bool B_COL_MAJOR = $TN_LAYOUT$;       // layout tn: B(k, n) at B[n * K + k]
constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
constexpr int FM = WM / 16, FN = WN / 16;
constexpr int PAD = 8;                          // halves; keeps ldm a multiple of 8
constexpr int LDA = BK + PAD;
constexpr int LDB = B_COL_MAJOR ? BK + PAD : BN + PAD;
constexpr int B_ROWS = B_COL_MAJOR ? BN : BK;
typedef $ACC_T$ acc_t;
typedef typename std::conditional<B_COL_MAJOR, wmma::col_major, wmma::row_major>::type b_layout;

__device__ __forceinline__ uint4 load8(const __half* p, bool ok) {
  return ok ? *reinterpret_cast<const uint4*>(p) : make_uint4(0, 0, 0, 0);
}

__global__ void __launch_bounds__(THREADS) hgemm_wmma_kernel(
    const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K) {
  __shared__ __align__(32) __half As[BM * LDA];
  __shared__ __align__(32) __half Bs[B_ROWS * LDB];
  __shared__ __align__(32) acc_t stage[THREADS / 32][16 * 16];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
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
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, b_layout> b[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i)
        wmma::load_matrix_sync(a[i], &As[(wm * WM + i * 16) * LDA + kk], LDA);
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        const __half* p = B_COL_MAJOR ? &Bs[(wn * WN + j * 16) * LDB + kk]
                                      : &Bs[kk * LDB + wn * WN + j * 16];
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

}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  hgemm_wmma_kernel<<<grid, THREADS, 0, (cudaStream_t)stream>>>(
      (const __half*)args->inputs[0], (const __half*)args->inputs[1], (__half*)args->outputs[0],
      M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
)CUDA";

// ---------------------------------------------------------------------------------------------
const char* kMmaTemplate = R"CUDA(// HGEMM, mma.sync + ldmatrix + cp.async pipeline: $SUMMARY$
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
$ABI$
namespace {

constexpr int BM = $BM$, BN = $BN$, BK = $BK$;  // block tile
constexpr int WM = $WM$, WN = $WN$;             // warp tile
constexpr int STAGES = $STAGES$;                // cp.async pipeline depth
constexpr int SPLIT_K = $SPLITK$;               // K slices reduced in fp32 through the workspace
constexpr int GROUP_M = $GROUP$;                // block-row group of the grouped rasterization
constexpr int VEC = $VEC$;                      // halves per cp.async (8: 16 bytes, 4: 8 bytes)
constexpr bool B_COL_MAJOR = $TN_LAYOUT$;       // layout tn: B(k, n) at B[n * K + k]
constexpr bool ACC_F16 = $ACC16$;               // fp16 accumulators (mma .f16.f16.f16.f16)
constexpr bool EPI_SMEM = $EPI$;                // stage C through shared memory: 16-byte stores
constexpr int MIN_BLOCKS = $MINB$;              // __launch_bounds__ blocks per SM (caps registers)
constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
constexpr int MI = WM / 16, NI = WN / 8, KI = BK / 16;  // mma tiles per warp and per k-tile
constexpr int A_TILE = BM * BK, B_TILE = BK * BN;       // halves
constexpr int STAGE_HALVES = A_TILE + B_TILE;
constexpr int LDC = BN + 8;                             // staged C row, padded: no bank conflicts
constexpr int SMEM_HALVES = STAGES * STAGE_HALVES > (EPI_SMEM ? BM * LDC : 0)
                                ? STAGES * STAGE_HALVES : BM * LDC;
constexpr size_t SMEM_BYTES = size_t(SMEM_HALVES) * sizeof(__half);
static_assert(NI % 2 == 0, "ldmatrix.x4 loads B for two n8 tiles");
static_assert((A_TILE / VEC) % THREADS == 0 && (B_TILE / VEC) % THREADS == 0, "load split");
static_assert(STAGES >= 2, "pipeline");

// Shared tiles are rows of 16-byte chunks; chunk c of row r is stored at chunk c ^ f(r), so the
// 8 row addresses of one ldmatrix (and of a transposed one) fall in 8 different bank groups.
__device__ __forceinline__ int swz(int row, int col, int row_halves) {
  const int chunks = row_halves / 8;
  const int x = chunks >= 8 ? (row & 7) : chunks == 4 ? ((row >> 1) & 3) : ((row >> 2) & 1);
  return row * row_halves + (((col >> 3) ^ x) << 3) + (col & 7);
}

__device__ __forceinline__ void cp_async(__half* smem, const __half* gmem, bool pred) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = pred ? VEC * 2 : 0;  // 0: zero-fill, nothing read
  if constexpr (VEC == 8) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __half* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void mma_f32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_f16(uint32_t (&d)[2], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

$LOADERS$
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) hgemm_mma_kernel(
    const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    float* __restrict__ ws, int M, int N, int K, int split_k) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;

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

$MAINLOOP$
  // Epilogue: thread (g = lane/4, t = lane%4) holds rows g and g+8, columns 2t and 2t+1 of each
  // 16x8 tile.
  if (EPI_SMEM && split_k == 1) {
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
        if constexpr (ACC_F16) {
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
    for (int e = tid; e < BM * BN / 8; e += THREADS) {
      const int r = e / (BN / 8), c = (e % (BN / 8)) * 8;
      if (m0 + r < M && n0 + c < N)
        *reinterpret_cast<uint4*>(C + (size_t)(m0 + r) * N + n0 + c) =
            *reinterpret_cast<const uint4*>(&sC[r * LDC + c]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const int row = m0 + warp_m * WM + i * 16 + (lane >> 2);
      const int col = n0 + warp_n * WN + j * 8 + (lane & 3) * 2;
      if (col >= N) continue;
      float v[4];
      if constexpr (ACC_F16) {
        const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&hacc[i][j][0]));
        const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&hacc[i][j][1]));
        v[0] = lo.x; v[1] = lo.y; v[2] = hi.x; v[3] = hi.y;
      } else {
        v[0] = acc[i][j][0]; v[1] = acc[i][j][1]; v[2] = acc[i][j][2]; v[3] = acc[i][j][3];
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row + h * 8;
        if (r >= M) continue;
        if (split_k == 1) {
          *reinterpret_cast<__half2*>(C + (size_t)r * N + col) = __floats2half2_rn(v[2 * h], v[2 * h + 1]);
        } else {
          atomicAdd(ws + (size_t)r * N + col, v[2 * h]);
          atomicAdd(ws + (size_t)r * N + col + 1, v[2 * h + 1]);
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

}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  cudaStream_t s = (cudaStream_t)stream;
  static bool smem_configured = false;  // opt in to more than 48 KiB of shared memory once
  if (!smem_configured) {
    if (cudaFuncSetAttribute(hgemm_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)SMEM_BYTES) != cudaSuccess)
      return 3;
    smem_configured = true;
  }
  int split = SPLIT_K < K / BK ? SPLIT_K : K / BK;
  const size_t ws_bytes = (size_t)M * N * sizeof(float);
  if (split > 1 && (args->workspace == nullptr || args->workspace_bytes < ws_bytes)) split = 1;
  float* ws = (float*)args->workspace;
  if (split > 1 && cudaMemsetAsync(ws, 0, ws_bytes, s) != cudaSuccess) return 4;
  const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  hgemm_mma_kernel<<<dim3(tiles, 1, split), THREADS, SMEM_BYTES, s>>>(
      (const __half*)args->inputs[0], (const __half*)args->inputs[1], (__half*)args->outputs[0],
      ws, M, N, K, split);
  if (cudaGetLastError() != cudaSuccess) return 5;
  if (split > 1) {
    splitk_to_half<<<1024, 256, 0, s>>>(ws, (__half*)args->outputs[0], (size_t)M * N);
    if (cudaGetLastError() != cudaSuccess) return 6;
  }
  return 0;
}
)CUDA";

// Main loop, one k-tile per iteration: wait for the tile, barrier, issue the copy of the tile
// STAGES-1 ahead, then per 16-deep k-step load that step's fragments and run its mma.sync.
const char* kMmaMainloopSimple =
    R"CUDA(#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles)
      load_tile(smem + s * STAGE_HALVES, smem + s * STAGE_HALVES + A_TILE, A, B, M, N, K, m0, n0,
                (kt_begin + s) * BK, tid);
    cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>();  // tile kt has landed
    __syncthreads();              // ... for every thread, and stage (kt-1) is free again
    const int next = kt + STAGES - 1;
    if (next < k_tiles) {
      __half* st = smem + (next % STAGES) * STAGE_HALVES;
      load_tile(st, st + A_TILE, A, B, M, N, K, m0, n0, (kt_begin + next) * BK, tid);
    }
    cp_async_commit();
    const __half* sA = smem + (kt % STAGES) * STAGE_HALVES;
    const __half* sB = sA + A_TILE;
#pragma unroll
    for (int kk = 0; kk < KI; ++kk) {
      uint32_t af[MI][4], bf[NI][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        const int row = warp_m * WM + i * 16 + (lane & 15);
        const int col = kk * 16 + (lane >> 4) * 8;
        ldmatrix_x4(af[i], sA + swz(row, col, BK));
      }
#pragma unroll
      for (int j = 0; j < NI / 2; ++j) {
        uint32_t r[4];
        if constexpr (B_COL_MAJOR) {
          const int row = warp_n * WN + j * 16 + (lane & 7) + ((lane >> 4) << 3);
          const int col = kk * 16 + ((lane >> 3) & 1) * 8;
          ldmatrix_x4(r, sB + swz(row, col, BK));
        } else {
          const int row = kk * 16 + (lane & 15);
          const int col = warp_n * WN + j * 16 + (lane >> 4) * 8;
          ldmatrix_x4_trans(r, sB + swz(row, col, BN));
        }
        bf[2 * j][0] = r[0];
        bf[2 * j][1] = r[1];
        bf[2 * j + 1][0] = r[2];
        bf[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) {
          if constexpr (ACC_F16) mma_f16(hacc[i][j], af[i], bf[j]);
          else mma_f32(acc[i][j], af[i], bf[j]);
        }
    }
  }
  cp_async_wait<0>();
)CUDA";

// Tile loader of the simple main loop: each copy's address from the block's origin.
const char* kMmaTileLoaderSimple =
    R"CUDA(// One k-tile of A (BM x BK) and B (BK x BN, or BN x BK for tn) into a pipeline stage.
__device__ __forceinline__ void load_tile(__half* sA, __half* sB, const __half* __restrict__ A,
                                          const __half* __restrict__ B, int M, int N, int K,
                                          int m0, int n0, int k0, int tid) {
#pragma unroll
  for (int i = 0; i < A_TILE / VEC / THREADS; ++i) {
    const int c = tid + i * THREADS;
    const int row = c / (BK / VEC), col = (c % (BK / VEC)) * VEC;
    const int gm = m0 + row;
    const bool ok = gm < M;
    cp_async(sA + swz(row, col, BK), A + (size_t)(ok ? gm : 0) * K + k0 + col, ok);
  }
#pragma unroll
  for (int i = 0; i < B_TILE / VEC / THREADS; ++i) {
    const int c = tid + i * THREADS;
    if constexpr (B_COL_MAJOR) {  // smem rows are n, columns k
      const int row = c / (BK / VEC), col = (c % (BK / VEC)) * VEC;
      const int gn = n0 + row;
      const bool ok = gn < N;
      cp_async(sB + swz(row, col, BK), B + (size_t)(ok ? gn : 0) * K + k0 + col, ok);
    } else {  // smem rows are k, columns n
      const int row = c / (BN / VEC), col = (c % (BN / VEC)) * VEC;
      const int gn = n0 + col;
      const bool ok = gn < N;
      cp_async(sB + swz(row, col, BN), B + (size_t)(k0 + row) * N + (ok ? gn : 0), ok);
    }
  }
}
)CUDA";

// Loaders of the double-buffered main loop. The tile loader walks each thread's copies with one
// pointer from the tile's corner (the copies of a thread are a fixed number of rows apart), so
// few address registers stay live beside 128 fp32 accumulators and two fragment buffers.
const char* kMmaLoadersDoubleBuffered =
    R"CUDA(// One k-tile into a pipeline stage: gA = &A[m0][k0] (BM x BK), gB = &B[k0][n0] (BK x BN) or,
// for tn, &B[n0][k0] (BN x BK); rows (columns) at or past rows_a = M - m0 (cols_b = N - n0) are
// zero-filled without being read.
__device__ __forceinline__ void load_tile(__half* sA, __half* sB, const __half* __restrict__ gA,
                                          const __half* __restrict__ gB, int rows_a, int cols_b,
                                          int N, int K, int tid) {
  static_assert(THREADS % (BK / VEC) == 0 && THREADS % (BN / VEC) == 0, "whole rows per pass");
  constexpr int K_ROWS = THREADS / (BK / VEC);  // rows per pass of a k-contiguous tile
  {
    const int row0 = tid / (BK / VEC), col = (tid % (BK / VEC)) * VEC;
    const __half* src = gA + row0 * K + col;
#pragma unroll
    for (int i = 0; i < A_TILE / VEC / THREADS; ++i, src += K_ROWS * K) {
      const bool ok = row0 + i * K_ROWS < rows_a;
      cp_async(sA + swz(row0 + i * K_ROWS, col, BK), ok ? src : gA, ok);
    }
  }
  if constexpr (B_COL_MAJOR) {  // smem rows are n, columns k
    const int row0 = tid / (BK / VEC), col = (tid % (BK / VEC)) * VEC;
    const __half* src = gB + row0 * K + col;
#pragma unroll
    for (int i = 0; i < B_TILE / VEC / THREADS; ++i, src += K_ROWS * K) {
      const bool ok = row0 + i * K_ROWS < cols_b;
      cp_async(sB + swz(row0 + i * K_ROWS, col, BK), ok ? src : gB, ok);
    }
  } else {  // smem rows are k, columns n
    constexpr int N_ROWS = THREADS / (BN / VEC);
    const int row0 = tid / (BN / VEC), col = (tid % (BN / VEC)) * VEC;
    const __half* src = gB + row0 * N + col;
    const bool ok = col < cols_b;
#pragma unroll
    for (int i = 0; i < B_TILE / VEC / THREADS; ++i, src += N_ROWS * N)
      cp_async(sB + swz(row0 + i * N_ROWS, col, BN), ok ? src : gB, ok);
  }
}

// The ldmatrix.x4 fragments of one 16-deep k-step of a stage: A for the warp's MI m16 tiles, B
// for its NI n8 tiles (two per ldmatrix.x4; transposed from the row-major B tile of layout nn).
__device__ __forceinline__ void load_fragments(uint32_t (&af)[MI][4], uint32_t (&bf)[NI][2],
                                               const __half* sA, const __half* sB, int kk,
                                               int warp_m, int warp_n, int lane) {
#pragma unroll
  for (int i = 0; i < MI; ++i) {
    const int row = warp_m * WM + i * 16 + (lane & 15);
    const int col = kk * 16 + (lane >> 4) * 8;
    ldmatrix_x4(af[i], sA + swz(row, col, BK));
  }
#pragma unroll
  for (int j = 0; j < NI / 2; ++j) {
    uint32_t r[4];
    if constexpr (B_COL_MAJOR) {
      const int row = warp_n * WN + j * 16 + (lane & 7) + ((lane >> 4) << 3);
      const int col = kk * 16 + ((lane >> 3) & 1) * 8;
      ldmatrix_x4(r, sB + swz(row, col, BK));
    } else {
      const int row = kk * 16 + (lane & 15);
      const int col = warp_n * WN + j * 16 + (lane >> 4) * 8;
      ldmatrix_x4_trans(r, sB + swz(row, col, BN));
    }
    bf[2 * j][0] = r[0];
    bf[2 * j][1] = r[1];
    bf[2 * j + 1][0] = r[2];
    bf[2 * j + 1][1] = r[3];
  }
}
)CUDA";

// Main loop with fragments double-buffered in registers (the CUTLASS multistage order): while
// the tensor cores run k-step kk, the ldmatrix loads of step kk+1 are in flight, and the last
// step of a k-tile overlaps the loads of the next tile's first step, so the barrier between
// k-tiles no longer drains the tensor pipe. Needs an even number (>= 2) of k-steps per tile.
const char* kMmaMainloopDoubleBuffered =
    R"CUDA(  static_assert(KI >= 2 && KI % 2 == 0, "k-step 0 of every tile uses fragment buffer 0");
  // Corners of k-tile t: A at gA + t * BK, B at gB + t * B_STEP.
  const __half* gA = A + (size_t)m0 * K + (size_t)kt_begin * BK;
  const __half* gB = B_COL_MAJOR ? B + (size_t)n0 * K + (size_t)kt_begin * BK
                                 : B + (size_t)kt_begin * BK * N + n0;
  const size_t B_STEP = B_COL_MAJOR ? BK : (size_t)BK * N;
  uint32_t af[2][MI][4], bf[2][NI][2];  // fragments of k-step kk in buffer kk & 1
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles)
      load_tile(smem + s * STAGE_HALVES, smem + s * STAGE_HALVES + A_TILE, gA + s * BK,
                gB + s * B_STEP, M - m0, N - n0, N, K, tid);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>();  // tile 0 has landed
  __syncthreads();
  load_fragments(af[0], bf[0], smem, smem + A_TILE, 0, warp_m, warp_n, lane);
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
          load_tile(st, st + A_TILE, gA + next * BK, gB + next * B_STEP, M - m0, N - n0, N, K,
                    tid);
        }
        cp_async_commit();
      }
      // This step's mma.sync on fragments loaded one step earlier ...
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) {
          if constexpr (ACC_F16) mma_f16(hacc[i][j], af[kk & 1][i], bf[kk & 1][j]);
          else mma_f32(acc[i][j], af[kk & 1][i], bf[kk & 1][j]);
        }
      // ... while the next step's fragments load into the other buffer (after the last step:
      // the next tile's first step; unused after the last tile).
      const __half* sA = smem + read_stage * STAGE_HALVES;
      load_fragments(af[(kk + 1) & 1], bf[(kk + 1) & 1], sA, sA + A_TILE, (kk + 1) % KI, warp_m,
                     warp_n, lane);
    }
  }
  cp_async_wait<0>();
)CUDA";

// ---------------------------------------------------------------------------------------------
const char* kHostTemplate =
    R"CPP(// HGEMM on the host (plain C++): $SUMMARY$
#include <cstddef>
#include <cstdint>
#include <cstring>
          $ABI$
          namespace {

          constexpr int TILE = $TILE$;  // cache block (rows and columns of C, depth of K)
          constexpr bool B_COL_MAJOR = $TN_LAYOUT$;  // layout tn: B(k, n) at B[n * K + k]
          constexpr bool ACC_F16 = $ACC16$;  // round the running sum to fp16 after every k block

          float half_to_float(uint16_t h) {
            const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
            uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
            if (exp == 0) {
              if (mant == 0) {
                bits = sign;
              } else {  // subnormal: normalize
                exp = 127 - 15 + 1;
                while (!(mant & 0x400u)) {
                  mant <<= 1;
                  --exp;
                }
                bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
              }
            } else if (exp == 31) {
              bits = sign | 0x7f800000u | (mant << 13);
            } else {
              bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
            }
            float f;
            std::memcpy(&f, &bits, 4);
            return f;
          }

          uint16_t float_to_half(float f) {  // round to nearest even
            uint32_t x;
            std::memcpy(&x, &f, 4);
            const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
            const uint32_t ax = x & 0x7fffffffu;
            if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u);
            if (ax >= 0x477ff000u) return sign | 0x7c00u;  // overflow to inf
            if (ax < 0x38800000u) {                        // subnormal or zero
              if (ax < 0x33000000u) return sign;
              const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
              const int shift = 126 - (int)e;
              uint32_t r = m >> shift;
              const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
              if (rem > half || (rem == half && (r & 1u))) ++r;
              return sign | (uint16_t)r;
            }
            uint32_t r = ((ax >> 13) - (112u << 10));
            const uint32_t rem = ax & 0x1fffu;
            if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
            return sign | (uint16_t)r;
          }

          }  // namespace

          extern "C" int kernelrl_launch(const kernelrl_args* args, void* /*stream: host
                                                                             backend*/) {
            if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
            const int64_t M = args->dims[0], N = args->dims[1], K = args->dims[2];
            if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
            const uint16_t* A = (const uint16_t*)args->inputs[0];
            const uint16_t* B = (const uint16_t*)args->inputs[1];
            uint16_t* C = (uint16_t*)args->outputs[0];
            float a_blk[TILE * TILE], b_blk[TILE * TILE], c_blk[TILE * TILE];
            for (int64_t i0 = 0; i0 < M; i0 += TILE)
              for (int64_t j0 = 0; j0 < N; j0 += TILE) {
                for (int t = 0; t < TILE * TILE; ++t) c_blk[t] = 0.0f;
                for (int64_t k0 = 0; k0 < K; k0 += TILE) {
                  for (int i = 0; i < TILE; ++i)
                    for (int k = 0; k < TILE; ++k)
                      a_blk[i * TILE + k] = half_to_float(A[(i0 + i) * K + k0 + k]);
                  for (int k = 0; k < TILE; ++k)
                    for (int j = 0; j < TILE; ++j)
                      b_blk[k * TILE + j] = half_to_float(B_COL_MAJOR ? B[(j0 + j) * K + k0 + k]
                                                                      : B[(k0 + k) * N + j0 + j]);
                  for (int i = 0; i < TILE; ++i)
                    for (int k = 0; k < TILE; ++k) {
                      const float a = a_blk[i * TILE + k];
                      for (int j = 0; j < TILE; ++j) c_blk[i * TILE + j] += a * b_blk[k * TILE + j];
                    }
                  if (ACC_F16)
                    for (int t = 0; t < TILE * TILE; ++t) c_blk[t] = half_to_float(float_to_half(c_blk[t]));
                }
                for (int i = 0; i < TILE; ++i)
                  for (int j = 0; j < TILE; ++j)
                    C[(i0 + i) * N + j0 + j] = float_to_half(c_blk[i * TILE + j]);
              }
            return 0;
          }
)CPP";

std::string layout_word(const std::string& layout) {
  return layout == "nn" ? "B row-major (nn)" : "B column-major (tn)";
}

KernelVariant make(const std::string& family, const std::string& backend, const std::string& layout,
                   const std::string& acc, std::vector<std::pair<std::string, int64_t>> params) {
  KernelVariant v;
  v.family = family;
  v.backend = backend;
  v.op = "hgemm";
  v.layout = layout;
  v.acc = acc;
  v.params = std::move(params);
  v.name = family + "_" + layout + "_acc" + acc + "_" + families::param_list(v.params, "_");
  return v;
}

std::vector<std::pair<std::string, std::string>> common_keys(const KernelVariant& v,
                                                             const std::string& summary) {
  std::vector<std::pair<std::string, std::string>> kv = {
      {"ABI", kernel_abi_prelude()},
      {"SUMMARY", summary},
      {"TN_LAYOUT", v.layout == "tn" ? "true" : "false"},
      {"ACC16", v.acc == "f16" ? "true" : "false"},
      {"ACC_T", v.acc == "f16" ? "__half" : "float"}};
  for (const auto& [k, x] : v.params) kv.push_back({k, std::to_string(x)});
  return kv;
}

void finish_tiled(KernelVariant& v) {
  auto p = [&](const char* k) {
    for (auto& [n, x] : v.params)
      if (n == k) return x;
    return int64_t{0};
  };
  std::ostringstream s;
  s << "block tile " << p("BM") << "x" << p("BN") << "x" << p("BK") << ", thread tile " << p("TM")
    << "x" << p("TN") << ", " << layout_word(v.layout) << ", " << v.acc << " accumulation";
  auto kv = common_keys(v, s.str());
  kv.push_back({"FMA", v.acc == "f16" ? "  return __hfma(a, b, c);"
                                      : "  return fmaf(__half2float(a), __half2float(b), c);"});
  v.source = fill(kTiledTemplate, kv);
  v.instruction = "Write a CUDA HGEMM kernel for KernelRL's kernelrl_launch contract: " +
                  contract(v.layout, v.acc) +
                  ". Use a classic shared-memory tiled SIMT kernel (no tensor cores): each block "
                  "computes a " +
                  std::to_string(p("BM")) + "x" + std::to_string(p("BN")) + " tile of C, staging " +
                  std::to_string(p("BK")) +
                  "-deep slices of A and B in shared memory (k-major, padded), and each thread "
                  "accumulates a " +
                  std::to_string(p("TM")) + "x" + std::to_string(p("TN")) +
                  " register tile; rows and columns past M and N are zero-filled on load and "
                  "skipped on store.";
}

void finish_wmma(KernelVariant& v) {
  auto p = [&](const char* k) {
    for (auto& [n, x] : v.params)
      if (n == k) return x;
    return int64_t{0};
  };
  std::ostringstream s;
  s << "block tile " << p("BM") << "x" << p("BN") << "x32, warp tile " << p("WM") << "x" << p("WN")
    << ", " << layout_word(v.layout) << ", " << v.acc << " accumulation";
  v.source = fill(kWmmaTemplate, common_keys(v, s.str()));
  int warps = static_cast<int>((p("BM") / p("WM")) * (p("BN") / p("WN")));
  v.instruction = "Write a CUDA HGEMM kernel for KernelRL's kernelrl_launch contract: " +
                  contract(v.layout, v.acc) +
                  ". Use the WMMA API (nvcuda::wmma, 16x16x16 fp16 fragments" +
                  (v.acc == "f16" ? std::string(", fp16 accumulator fragments")
                                  : std::string(", fp32 accumulator fragments")) +
                  "): a " + std::to_string(p("BM")) + "x" + std::to_string(p("BN")) +
                  " block tile with " + std::to_string(warps) + " warps of " +
                  std::to_string(p("WM")) + "x" + std::to_string(p("WN")) +
                  " each, 32-deep k slices loaded with 16-byte vector loads into padded shared "
                  "memory, " +
                  (v.layout == "tn" ? "col_major B fragments" : "row_major B fragments") +
                  ", and an epilogue that stages each fragment through shared memory to convert "
                  "to fp16 with bounds checks.";
}

void finish_mma(KernelVariant& v) {
  auto p = [&](const char* k) {
    for (auto& [n, x] : v.params)
      if (n == k) return x;
    return int64_t{0};
  };
  std::ostringstream s;
  s << "block tile " << p("BM") << "x" << p("BN") << "x" << p("BK") << ", warp tile " << p("WM")
    << "x" << p("WN") << ", " << p("STAGES") << " stages, split-K " << p("SPLITK")
    << ", block-swizzle group " << p("GROUP") << ", " << p("VEC") * 2 << "-byte cp.async, "
    << (p("EPI") ? "shared-memory epilogue, " : "") << "min blocks/SM " << p("MINB") << ", "
    << (p("DBUF") ? "double-buffered fragments, " : "") << layout_word(v.layout) << ", " << v.acc
    << " accumulation";
  auto kv = common_keys(v, s.str());
  kv.push_back({"LOADERS", p("DBUF") ? kMmaLoadersDoubleBuffered : kMmaTileLoaderSimple});
  kv.push_back({"MAINLOOP", p("DBUF") ? kMmaMainloopDoubleBuffered : kMmaMainloopSimple});
  v.source = fill(kMmaTemplate, kv);
  int warps = static_cast<int>((p("BM") / p("WM")) * (p("BN") / p("WN")));
  std::ostringstream ins;
  ins << "Write a CUDA HGEMM kernel for KernelRL's kernelrl_launch contract: "
      << contract(v.layout, v.acc) << ". Use mma.sync.aligned.m16n8k16 tensor-core instructions ("
      << (v.acc == "f16" ? "fp16" : "fp32") << " accumulators) fed by ldmatrix.x4"
      << (v.layout == "nn" ? " (.trans for the row-major B tile)" : "") << " from shared memory, a "
      << p("STAGES") << "-stage cp.async pipeline (" << p("VEC") * 2
      << "-byte copies, zero-fill past M and N) and XOR-swizzled shared memory so ldmatrix is "
         "bank-conflict free. Block tile "
      << p("BM") << "x" << p("BN") << "x" << p("BK") << " with " << warps << " warps of " << p("WM")
      << "x" << p("WN") << "; grouped block rasterization with groups of " << p("GROUP")
      << " block rows for L2 reuse";
  if (p("SPLITK") > 1)
    ins << "; split-K into " << p("SPLITK")
        << " slices accumulated in fp32 in the workspace with atomics, then converted to fp16 "
           "(falling back to one slice when M*N*4 bytes exceed the workspace)";
  if (p("EPI"))
    ins << "; the epilogue stages C through the idle pipeline shared memory (rows padded by 8 "
           "halves) and writes it with 16-byte coalesced stores";
  if (p("MINB") > 1)
    ins << "; __launch_bounds__(" << 32 * warps << ", " << p("MINB") << ") so " << p("MINB")
        << " blocks fit per SM";
  if (p("DBUF"))
    ins << "; fragments double-buffered in registers: each 16-deep k-step's mma.sync runs on "
           "fragments loaded during the step before, while the next step's ldmatrix loads (across "
           "the k-tile boundary too) go to the other buffer, with the pipeline's wait and barrier "
           "before a tile's last k-step; each thread walks its cp.async copies with one pointer "
           "from the tile corner to save registers";
  ins << ". Opt in to the dynamic shared memory it needs ("
      << p("STAGES") * (p("BM") * p("BK") + p("BK") * p("BN")) * 2 / 1024 << " KiB).";
  v.instruction = ins.str();
}

void finish_host(KernelVariant& v) {
  int64_t tile = v.params[0].second;
  std::string summary = "cache blocks of " + std::to_string(tile) + ", " + layout_word(v.layout) +
                        ", " + v.acc + " accumulation";
  v.source = fill(kHostTemplate, common_keys(v, summary));
  v.instruction =
      "Write a host (CPU, plain C++17) HGEMM for KernelRL's kernelrl_launch contract "
      "(the stream argument is null and ignored): " +
      contract(v.layout, v.acc) +
      ". fp16 values are raw 16-bit patterns: convert them to float and back with "
      "round-to-nearest-even by bit manipulation; block the loops in " +
      std::to_string(tile) + "x" + std::to_string(tile) + " tiles of C and K for cache reuse" +
      (v.acc == "f16" ? ", rounding the running sums to fp16 after every k block." : ".");
}

}  // namespace

std::vector<KernelVariant> hgemm_family_variants(const std::string& family) {
  if (family == "hgemm_wgmma") return families::hgemm_wgmma_variants();
  if (family == "hgemm_cutlass") return families::hgemm_cutlass_variants();
  std::vector<KernelVariant> out;
  for (const std::string layout : {"nn", "tn"})
    for (const std::string acc : {"f32", "f16"}) {
      if (family == "hgemm_tiled") {
        const int tiles[][5] = {
            {64, 64, 16, 4, 4}, {128, 128, 16, 8, 8}, {64, 128, 16, 4, 8}, {128, 64, 32, 8, 4}};
        for (auto& t : tiles) {
          auto v = make(family, "cuda", layout, acc,
                        {{"BM", t[0]}, {"BN", t[1]}, {"BK", t[2]}, {"TM", t[3]}, {"TN", t[4]}});
          finish_tiled(v);
          out.push_back(v);
        }
      } else if (family == "hgemm_wmma") {
        const int tiles[][4] = {{64, 64, 32, 32},
                                {128, 128, 64, 64},
                                {128, 64, 64, 32},
                                {64, 128, 32, 64},
                                {128, 128, 32, 64}};
        for (auto& t : tiles) {
          auto v = make(family, "cuda", layout, acc,
                        {{"BM", t[0]}, {"BN", t[1]}, {"WM", t[2]}, {"WN", t[3]}});
          finish_wmma(v);
          out.push_back(v);
        }
      } else if (family == "hgemm_mma") {
        // {BM, BN, BK, WM, WN, STAGES}
        const int tiles[][6] = {{128, 128, 32, 64, 64, 3}, {128, 128, 32, 64, 64, 4},
                                {128, 256, 32, 64, 64, 3}, {128, 256, 32, 64, 64, 4},
                                {256, 128, 32, 64, 64, 3}, {128, 128, 64, 64, 64, 3},
                                {128, 256, 64, 64, 64, 3}, {64, 128, 32, 32, 64, 4},
                                {64, 64, 64, 32, 32, 3},   {128, 128, 32, 32, 64, 4}};
        for (auto& t : tiles)
          for (int split : {1, 2, 4})
            for (int group : {1, 8, 16})
              for (int vec : {8, 4})
                for (int epi : {0, 1})
                  for (int minb : {1, 3}) {
                    const int warps = (t[0] / t[3]) * (t[1] / t[4]);
                    // Keep the grid moderate: the extra knobs on the default raster only.
                    if (vec == 4 && (split != 1 || group != 8 || epi || minb > 1)) continue;
                    if ((epi || minb > 1) && (split != 1 || group != 8)) continue;
                    if (minb > 1 && warps != 4) continue;  // 3 x 4 warps: <= 170 registers
                    if (split > 1 && t[0] * t[1] > 128 * 128) continue;  // split-K: small C
                    auto v = make(family, "cuda", layout, acc,
                                  {{"BM", t[0]},
                                   {"BN", t[1]},
                                   {"BK", t[2]},
                                   {"WM", t[3]},
                                   {"WN", t[4]},
                                   {"STAGES", t[5]},
                                   {"SPLITK", split},
                                   {"GROUP", group},
                                   {"VEC", vec},
                                   {"EPI", epi},
                                   {"MINB", minb}});
                    finish_mma(v);
                    out.push_back(v);
                  }
        // Fragments double-buffered in registers (DBUF): the shared-memory epilogue on the
        // default raster for every tile, groups of 16 for the 8-warp tiles, split-K for the
        // small tiles. {BM, BN, BK, WM, WN, STAGES}
        const int dbuf_tiles[][6] = {
            {128, 128, 32, 64, 64, 3}, {128, 128, 32, 64, 64, 4}, {128, 128, 64, 64, 64, 3},
            {128, 256, 32, 64, 64, 3}, {128, 256, 32, 64, 64, 4}, {128, 256, 64, 64, 64, 3},
            {256, 128, 32, 64, 64, 3}, {256, 128, 32, 64, 64, 4}, {256, 128, 64, 64, 64, 3},
            {64, 128, 32, 32, 64, 4},  {128, 64, 32, 64, 32, 4},  {64, 64, 32, 32, 32, 4},
            {64, 64, 64, 32, 32, 3}};
        for (auto& t : dbuf_tiles)
          for (int split : {1, 2, 4})
            for (int group : {8, 16}) {
              const int warps = (t[0] / t[3]) * (t[1] / t[4]);
              if (group == 16 && (warps != 8 || split != 1)) continue;
              if (split > 1 && t[0] * t[1] > 128 * 64) continue;
              auto v = make(family, "cuda", layout, acc,
                            {{"BM", t[0]},
                             {"BN", t[1]},
                             {"BK", t[2]},
                             {"WM", t[3]},
                             {"WN", t[4]},
                             {"STAGES", t[5]},
                             {"SPLITK", split},
                             {"GROUP", group},
                             {"VEC", 8},
                             {"EPI", split == 1 ? 1 : 0},
                             {"MINB", 1},
                             {"DBUF", 1}});
              finish_mma(v);
              out.push_back(v);
            }
      } else if (family == "hgemm_host") {
        for (int tile : {32, 64}) {
          auto v = make(family, "host", layout, acc, {{"TILE", tile}});
          finish_host(v);
          out.push_back(v);
        }
      }
    }
  return out;
}

}  // namespace kernelrl
