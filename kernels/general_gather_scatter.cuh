// General family `gather_scatter` (CUDA), one thread per output (or source) element: row gather
// y[i, d] = table[idx[i], d] (N = task param 0), scatter-add y[idx[i], d] += src[i, d] into the
// zeroed [V, D] output (V = task param 0; atomicAdd), take-along y[b] = x[b, idx[b]]. An op
// gives the element count and its per-element work. A candidate is this file and an instance
// block: `using Cfg = general::gather_scatter::Config<...>;` and a kernelrl_launch that returns
// general::gather_scatter::run<Cfg, general::Op<Task>>(args, stream).
#ifndef KERNELRL_GENERAL_GATHER_SCATTER_CUH
#define KERNELRL_GENERAL_GATHER_SCATTER_CUH

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "general_common.h"

namespace general {
namespace {

// Each op: kMinDims; prepare() reads the sizes (and zeroes an output it accumulates into);
// at(t) does element t of `total`.
struct IndexOp {
  const float* x;        // table / src / x
  const long long* idx;  // row indices (int64)
  float* y;
  long long n_rows, D, total;
};

template <class P>
struct GatherRows {
  static constexpr int kMinDims = 3;
  static int prepare(const kernelrl_args* args, cudaStream_t, IndexOp& o) {
    o.D = args->dims[1];
    o.n_rows = (long long)task_param(args, 2, 0);
    o.total = o.n_rows * o.D;
    return 0;
  }
  static __device__ void at(const IndexOp& o, long long t) {
    const long long i = t / o.D, d = t % o.D;
    o.y[t] = o.x[o.idx[i] * o.D + d];
  }
};

template <class P>
struct ScatterAddRows {
  static constexpr int kMinDims = 3;
  static int prepare(const kernelrl_args* args, cudaStream_t s, IndexOp& o) {
    o.n_rows = args->dims[0];
    o.D = args->dims[1];
    const long long V = (long long)task_param(args, 2, 0);
    if (cudaMemsetAsync(args->outputs[0], 0, sizeof(float) * V * o.D, s) != cudaSuccess) return 2;
    o.total = o.n_rows * o.D;
    return 0;
  }
  static __device__ void at(const IndexOp& o, long long t) {
    const long long i = t / o.D, d = t % o.D;
    atomicAdd(&o.y[o.idx[i] * o.D + d], o.x[t]);
  }
};

template <class P>
struct TakeAlongRows {
  static constexpr int kMinDims = 2;
  static int prepare(const kernelrl_args* args, cudaStream_t, IndexOp& o) {
    o.n_rows = args->dims[0];
    o.D = args->dims[1];
    o.total = o.n_rows;
    return 0;
  }
  static __device__ void at(const IndexOp& o, long long t) { o.y[t] = o.x[t * o.D + o.idx[t]]; }
};

}  // namespace

namespace gather_scatter {
namespace {

template <int THREADS_>
struct Config {
  static constexpr int THREADS = THREADS_;  // threads per block
};

template <class Cfg, class Op>
__global__ void __launch_bounds__(Cfg::THREADS) gather_kernel(IndexOp o) {
  const long long t = (long long)blockIdx.x * Cfg::THREADS + threadIdx.x;
  if (t >= o.total) return;
  Op::at(o, t);
}

template <class Cfg, class Op>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < Op::kMinDims) return 1;
  cudaStream_t s = (cudaStream_t)stream;
  IndexOp o{(const float*)args->inputs[0],
            (const long long*)args->inputs[1],
            (float*)args->outputs[0],
            0,
            0,
            0};
  if (int rc = Op::prepare(args, s, o)) return rc;
  if (o.total <= 0) return 0;
  gather_kernel<Cfg, Op>
      <<<(unsigned)((o.total + Cfg::THREADS - 1) / Cfg::THREADS), Cfg::THREADS, 0, s>>>(o);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

}  // namespace
}  // namespace gather_scatter
}  // namespace general

#endif  // KERNELRL_GENERAL_GATHER_SCATTER_CUH
