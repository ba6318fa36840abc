// General family `transpose` (CUDA): y[b, c, r] = x[b, r, c] for x of shape [Bt, R, C] (rank 2:
// Bt = 1), through 32x32 tiles of padded shared memory with ROWS thread rows per tile (coalesced
// reads and writes, no bank conflicts on the transposed read), or one thread per element
// (TILED false: coalesced reads, strided writes). A candidate is this file and an instance
// block: `using Cfg = general::transpose::Config<...>;` and a kernelrl_launch that returns
// general::transpose::run<Cfg, general::Op<Task>>(args, stream).
#ifndef KERNELRL_GENERAL_TRANSPOSE_CUH
#define KERNELRL_GENERAL_TRANSPOSE_CUH

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "general_common.h"

namespace general {
namespace {

// The ops: the rank of x.
template <class P>
struct Transpose2d {
  static constexpr int kRank = 2;
};
template <class P>
struct Transpose021 {
  static constexpr int kRank = 3;
};

}  // namespace

namespace transpose {
namespace {

template <bool TILED_, int ROWS_>
struct Config {
  static constexpr bool TILED = TILED_;  // 32x32 shared-memory tiles, else one thread per element
  static constexpr int ROWS = ROWS_;     // thread rows per 32x32 tile
};

template <class Cfg>
__global__ void transpose_tiled(const float* __restrict__ x, float* __restrict__ y, long long R,
                                long long C) {
  constexpr int ROWS = Cfg::ROWS;
  __shared__ float tile[32][33];  // +1 column: no bank conflicts on the transposed read
  const long long b = blockIdx.z;
  const float* xb = x + b * R * C;
  float* yb = y + b * R * C;
  const long long r0 = (long long)blockIdx.y * 32, c0 = (long long)blockIdx.x * 32;
  for (int i = threadIdx.y; i < 32; i += ROWS) {
    const long long r = r0 + i, c = c0 + threadIdx.x;
    if (r < R && c < C) tile[i][threadIdx.x] = xb[r * C + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += ROWS) {
    const long long c = c0 + i, r = r0 + threadIdx.x;
    if (r < R && c < C) yb[c * R + r] = tile[threadIdx.x][i];
  }
}

__global__ void transpose_naive(const float* __restrict__ x, float* __restrict__ y, long long R,
                                long long C, long long total) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const long long b = i / (R * C), rc = i % (R * C), r = rc / C, c = rc % C;
  y[b * R * C + c * R + r] = x[i];
}

template <class Cfg, class Op>
int run(const kernelrl_args* args, void* stream) {
  constexpr int RANK = Op::kRank;
  if (args->n_inputs < 1 || args->n_outputs < 1 || args->n_dims < RANK) return 1;
  const long long Bt = RANK == 3 ? args->dims[0] : 1;
  const long long R = args->dims[RANK - 2], C = args->dims[RANK - 1];
  cudaStream_t s = (cudaStream_t)stream;
  if (Cfg::TILED) {
    dim3 grid((unsigned)((C + 31) / 32), (unsigned)((R + 31) / 32), (unsigned)Bt);
    transpose_tiled<Cfg><<<grid, dim3(32, Cfg::ROWS), 0, s>>>((const float*)args->inputs[0],
                                                              (float*)args->outputs[0], R, C);
  } else {
    const long long total = Bt * R * C;
    transpose_naive<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(
        (const float*)args->inputs[0], (float*)args->outputs[0], R, C, total);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

}  // namespace
}  // namespace transpose
}  // namespace general

#endif  // KERNELRL_GENERAL_TRANSPOSE_CUH
