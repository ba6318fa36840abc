// General family `matmul` (CUDA), fp32: y[b] = act(a[b] @ bm[b] + bias) through TILE x TILE
// shared-memory tiles of A and B (TILE x TILE threads, one output each, fp32 FMA; bias and
// activation fused in the epilogue; blockIdx.z is the batch of bmm), and y = a @ v (matvec: one
// warp per row, lanes striding over K, shuffle reduction). The ops are in
// general_matmul_ops.h. A candidate is this file and an instance block: a Config and a
// kernelrl_launch that returns general::matmul::run<Cfg, general::Op<Task>>(args, stream) or
// general::matmul::run_matvec<Cfg>(args, stream).
#ifndef KERNELRL_GENERAL_MATMUL_CUH
#define KERNELRL_GENERAL_MATMUL_CUH

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "general_matmul_ops.h"

namespace general {
namespace matmul {
namespace {

template <int TILE_>
struct Config {
  static constexpr int TILE = TILE_;  // square shared-memory tiles of A and B, TILE x TILE threads
};

// y[b] = act(a[b] @ bm[b] + bias) for a [M, K], bm [K, N]; blockIdx.z is the batch.
template <class Cfg, class Op>
__global__ void matmul_kernel(const float* __restrict__ a, const float* __restrict__ bm,
                              const float* __restrict__ bias, float* __restrict__ y, long long M,
                              long long N, long long K) {
  constexpr int TILE = Cfg::TILE;
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];
  const long long z = blockIdx.z;
  a += z * M * K;
  bm += z * K * N;
  y += z * M * N;
  const long long row = (long long)blockIdx.y * TILE + threadIdx.y;
  const long long col = (long long)blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (long long k0 = 0; k0 < K; k0 += TILE) {
    const long long ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? a[row * K + ka] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? bm[kb * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = fmaf(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);
    __syncthreads();
  }
  if (row < M && col < N) {
    float v = acc + (Op::kBias ? bias[col] : 0.0f);
    y[row * N + col] = Op::act(v);
  }
}

template <class Cfg, class Op>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < (Op::kBias ? 3 : 2) || args->n_outputs < 1 ||
      args->n_dims < (Op::kBatched ? 4 : 3))
    return 1;
  long long Bt, M, N, K;
  matmul_sizes<Op>(args, Bt, M, N, K);
  constexpr int TILE = Cfg::TILE;
  dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE), (unsigned)Bt);
  matmul_kernel<Cfg, Op><<<grid, dim3(TILE, TILE), 0, (cudaStream_t)stream>>>(
      (const float*)args->inputs[0], (const float*)args->inputs[1],
      Op::kBias ? (const float*)args->inputs[2] : nullptr, (float*)args->outputs[0], M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

template <int THREADS_>
struct MatvecConfig {
  static constexpr int THREADS = THREADS_;  // threads per block, one warp per row
};

// One warp per row of a; lanes stride over k and reduce with shuffles.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    matvec_kernel(const float* __restrict__ a, const float* __restrict__ v, float* __restrict__ y,
                  long long M, long long K) {
  const long long row = (long long)blockIdx.x * (Cfg::THREADS / 32) + (threadIdx.x >> 5);
  if (row >= M) return;
  const int lane = threadIdx.x & 31;
  float s = 0.0f;
  for (long long k = lane; k < K; k += 32) s = fmaf(a[row * K + k], v[k], s);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) y[row] = s;
}

template <class Cfg>
int run_matvec(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 2) return 1;
  const long long M = args->dims[0], K = args->dims[1];
  const long long blocks = (M + Cfg::THREADS / 32 - 1) / (Cfg::THREADS / 32);
  matvec_kernel<Cfg><<<(unsigned)blocks, Cfg::THREADS, 0, (cudaStream_t)stream>>>(
      (const float*)args->inputs[0], (const float*)args->inputs[1], (float*)args->outputs[0], M, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

}  // namespace
}  // namespace matmul
}  // namespace general

#endif  // KERNELRL_GENERAL_MATMUL_CUH
