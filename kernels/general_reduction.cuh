// General family `reduction` (CUDA): per-row reductions of a [B, D] input on the row kernel of
// general_rows.cuh (sum, mean, max, min, l2 norm, argmax/argmin with ties to the lower index,
// inclusive cumsum), and two kernels of their own: column sums (one thread per column, summing
// down the rows: coalesced reads) and the sum of all elements (grid-stride partial sums, warp
// shuffles and shared memory per block, one atomicAdd per block into the zeroed output).
// A candidate is this file and an instance block: the task's params (`struct Task`), a Config
// and a kernelrl_launch that returns general::rows::run<Cfg, general::Op<Task>>(args, stream)
// (row ops), general::run_sum_cols<Cfg> or general::run_sum_all<Cfg>.
#ifndef KERNELRL_GENERAL_REDUCTION_CUH
#define KERNELRL_GENERAL_REDUCTION_CUH

#include "general_rows.cuh"

namespace general {
namespace {

using rows::group_argbest;
using rows::group_max;
using rows::group_min;
using rows::group_scan;
using rows::group_sum;
using rows::Tensors;

// y[row] = fin(red over j of step(x[row, j])), for the reductions that fold one float.
#define KRL_ROW_REDUCE(Name, init, step, red, fin)                                   \
  template <class P>                                                                 \
  struct Name {                                                                      \
    static constexpr int kInputs = 1;                                                \
    template <class Cfg>                                                             \
    static __device__ void row(const Tensors& t, long long r, int gl, long long D) { \
      const float* xr = (const float*)t.in[0] + r * D;                               \
      float s = init;                                                                \
      for (long long j = gl; j < D; j += Cfg::GS) {                                  \
        const float v = xr[j];                                                       \
        step;                                                                        \
      }                                                                              \
      s = red<Cfg>(s);                                                               \
      if (gl == 0) ((float*)t.out)[r] = fin;                                         \
    }                                                                                \
  };
KRL_ROW_REDUCE(SumRows, 0.0f, s += v, group_sum, s)
KRL_ROW_REDUCE(MeanRows, 0.0f, s += v, group_sum, s / (float)D)
KRL_ROW_REDUCE(MaxRows, -INFINITY, s = fmaxf(s, v), group_max, s)
KRL_ROW_REDUCE(MinRows, INFINITY, s = fminf(s, v), group_min, s)
KRL_ROW_REDUCE(L2normRows, 0.0f, s += v * v, group_sum, sqrtf(s))
#undef KRL_ROW_REDUCE

// y[row] = the index of the row's largest (smallest) value, the lowest one among ties (int64).
template <class P, bool kMax>
struct ArgbestRows {
  static constexpr int kInputs = 1;
  template <class Cfg>
  static __device__ void row(const Tensors& t, long long r, int gl, long long D) {
    const float* xr = (const float*)t.in[0] + r * D;
    float best = kMax ? -INFINITY : INFINITY;
    long long bi = D;
    for (long long j = gl; j < D; j += Cfg::GS) {
      const float v = xr[j];
      if ((kMax ? v > best : v < best) || bi == D) {
        best = v;
        bi = j;
      }
    }
    group_argbest<Cfg>(best, bi, kMax);
    if (gl == 0) ((long long*)t.out)[r] = bi;
  }
};
template <class P>
struct ArgmaxRows : ArgbestRows<P, true> {};
template <class P>
struct ArgminRows : ArgbestRows<P, false> {};

// y[row, j] = sum of x[row, 0..j]: scans of GS elements, each carried into the next.
template <class P>
struct CumsumRows {
  static constexpr int kInputs = 1;
  template <class Cfg>
  static __device__ void row(const Tensors& t, long long r, int gl, long long D) {
    const float* xr = (const float*)t.in[0] + r * D;
    float* yr = (float*)t.out + r * D;
    float carry = 0.0f;
    for (long long base = 0; base < D; base += Cfg::GS) {
      const long long j = base + gl;
      float total;
      const float s = group_scan<Cfg>(j < D ? xr[j] : 0.0f, total);
      if (j < D) yr[j] = carry + s;
      carry += total;
    }
  }
};

template <int THREADS_>
struct ColsConfig {
  static constexpr int THREADS = THREADS_;  // threads per block
};

// One thread per column; consecutive threads read consecutive columns of a row (coalesced).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    sum_cols_kernel(const float* __restrict__ x, float* __restrict__ y, long long B, long long D) {
  const long long c = (long long)blockIdx.x * Cfg::THREADS + threadIdx.x;
  if (c >= D) return;
  float s = 0.0f;
  for (long long r = 0; r < B; ++r) s += x[r * D + c];
  y[c] = s;
}

template <class Cfg>
int run_sum_cols(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 1 || args->n_outputs < 1 || args->n_dims < 2) return 1;
  const long long B = args->dims[0], D = args->dims[1];
  sum_cols_kernel<Cfg>
      <<<(unsigned)((D + Cfg::THREADS - 1) / Cfg::THREADS), Cfg::THREADS, 0,
         (cudaStream_t)stream>>>((const float*)args->inputs[0], (float*)args->outputs[0], B, D);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

// Grid-stride partial sums, a block reduction in shared memory, one atomicAdd per block.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    sum_all_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  constexpr int THREADS = Cfg::THREADS;
  __shared__ float part[THREADS / 32];
  float s = 0.0f;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
       i += (long long)gridDim.x * THREADS)
    s += x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int w = 0; w < THREADS / 32; ++w) t += part[w];
    atomicAdd(y, t);
  }
}

template <class Cfg>
int run_sum_all(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 1 || args->n_outputs < 1 || args->n_dims < 1) return 1;
  const long long n = args->dims[0];
  cudaStream_t s = (cudaStream_t)stream;
  if (cudaMemsetAsync(args->outputs[0], 0, sizeof(float), s) != cudaSuccess) return 2;
  long long blocks = (n + Cfg::THREADS - 1) / Cfg::THREADS;
  blocks = blocks < 1 ? 1 : (blocks > 1024 ? 1024 : blocks);
  sum_all_kernel<Cfg><<<(unsigned)blocks, Cfg::THREADS, 0, s>>>((const float*)args->inputs[0],
                                                                (float*)args->outputs[0], n);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

}  // namespace
}  // namespace general

#endif  // KERNELRL_GENERAL_REDUCTION_CUH
