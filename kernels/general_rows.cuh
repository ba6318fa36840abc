// The row-wise kernel shared by the general families reduction, softmax and norm (CUDA): one
// row of a [B, D] input per warp (THREADS / 32 rows per block) or per THREADS-thread block
// (BLOCK_PER_ROW), with the group reductions its threads share (warp shuffles, then shared memory
// across the warps of a block). An op is a struct with `kInputs` and a static
// `row<Cfg>(t, row, gl, D)` that computes one row of its tensors t as thread gl of the GS threads
// sharing it.
#ifndef KERNELRL_GENERAL_ROWS_CUH
#define KERNELRL_GENERAL_ROWS_CUH

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "general_common.h"

namespace general {
namespace rows {
namespace {

template <int THREADS_, bool BLOCK_PER_ROW_>
struct Config {
  static constexpr int THREADS = THREADS_;
  static constexpr bool BLOCK_PER_ROW = BLOCK_PER_ROW_;    // else one warp per row
  static constexpr int GS = BLOCK_PER_ROW ? THREADS : 32;  // threads sharing a row
};

constexpr unsigned FULL = 0xffffffffu;

// The op's tensors: inputs in the op's order, then its output.
struct Tensors {
  const void* in[4];
  void* out;
};

// Reduction over the threads of a row; every thread gets the result.
template <class Cfg, class F>
__device__ __forceinline__ float group_reduce(float v, F f) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(FULL, v, o));
  if constexpr (Cfg::BLOCK_PER_ROW) {
    __shared__ float part[Cfg::THREADS / 32];
    __syncthreads();  // a previous reduction may still read part[]
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    v = part[0];
    for (int i = 1; i < Cfg::THREADS / 32; ++i) v = f(v, part[i]);
  }
  return v;
}
template <class Cfg>
__device__ __forceinline__ float group_sum(float v) {
  return group_reduce<Cfg>(v, [](float a, float b) { return a + b; });
}
template <class Cfg>
__device__ __forceinline__ float group_max(float v) {
  return group_reduce<Cfg>(v, [](float a, float b) { return fmaxf(a, b); });
}
template <class Cfg>
__device__ __forceinline__ float group_min(float v) {
  return group_reduce<Cfg>(v, [](float a, float b) { return fminf(a, b); });
}

// (value, index) reduction keeping the larger (want_max) or smaller value, ties to the lower
// index.
template <class Cfg>
__device__ __forceinline__ void group_argbest(float& v, long long& i, bool want_max) {
  auto better = [&](float ov, long long oi) {
    return (want_max ? ov > v : ov < v) || (ov == v && oi < i);
  };
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(FULL, v, o);
    const long long oi = __shfl_xor_sync(FULL, i, o);
    if (better(ov, oi)) {
      v = ov;
      i = oi;
    }
  }
  if constexpr (Cfg::BLOCK_PER_ROW) {
    __shared__ float pv[Cfg::THREADS / 32];
    __shared__ long long pi[Cfg::THREADS / 32];
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
      pv[threadIdx.x >> 5] = v;
      pi[threadIdx.x >> 5] = i;
    }
    __syncthreads();
    v = pv[0];
    i = pi[0];
    for (int w = 1; w < Cfg::THREADS / 32; ++w)
      if (better(pv[w], pi[w])) {
        v = pv[w];
        i = pi[w];
      }
  }
}

// Inclusive prefix sum over the threads of a row; `total` gets the sum of all.
template <class Cfg>
__device__ __forceinline__ float group_scan(float v, float& total) {
  const int l = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float t = __shfl_up_sync(FULL, v, o);
    if (l >= o) v += t;
  }
  if constexpr (!Cfg::BLOCK_PER_ROW) {
    total = __shfl_sync(FULL, v, 31);
    return v;
  } else {
    __shared__ float part[Cfg::THREADS / 32];
    __syncthreads();
    if (l == 31) part[threadIdx.x >> 5] = v;
    __syncthreads();
    float off = 0.0f, tot = 0.0f;
    for (int w = 0; w < Cfg::THREADS / 32; ++w) {
      if (w < (int)(threadIdx.x >> 5)) off += part[w];
      tot += part[w];
    }
    total = tot;
    return v + off;
  }
}

template <class Cfg, class Op>
__global__ void __launch_bounds__(Cfg::THREADS) row_kernel(Tensors t, long long B, long long D) {
  const int gl = Cfg::BLOCK_PER_ROW ? threadIdx.x : (threadIdx.x & 31);
  const long long row = Cfg::BLOCK_PER_ROW
                            ? (long long)blockIdx.x
                            : (long long)blockIdx.x * (Cfg::THREADS / 32) + (threadIdx.x >> 5);
  if (row >= B) return;  // uniform over the threads of a row
  Op::template row<Cfg>(t, row, gl, D);
}

template <class Cfg, class Op>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < Op::kInputs || args->n_outputs < 1 || args->n_dims < 2) return 1;
  const long long B = args->dims[0], D = args->dims[1];
  const long long blocks =
      Cfg::BLOCK_PER_ROW ? B : (B + Cfg::THREADS / 32 - 1) / (Cfg::THREADS / 32);
  if (blocks <= 0 || blocks > 2147483647LL) return 2;
  Tensors t{};
  for (int i = 0; i < Op::kInputs; ++i) t.in[i] = args->inputs[i];
  t.out = args->outputs[0];
  row_kernel<Cfg, Op><<<(unsigned)blocks, Cfg::THREADS, 0, (cudaStream_t)stream>>>(t, B, D);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

}  // namespace
}  // namespace rows
}  // namespace general

#endif  // KERNELRL_GENERAL_ROWS_CUH
