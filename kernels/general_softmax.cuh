// General family `softmax` (CUDA): row softmax, log-softmax and scaled softmax (scale P0) of a
// [B, D] input on the row kernel of general_rows.cuh: the row's max, the sum of exp(x - max),
// then the outputs, each a pass over the row by the threads sharing it. A candidate is this
// file and an instance block: the task's params (`struct Task`), `using Cfg =
// general::rows::Config<...>;` and a kernelrl_launch that returns
// general::rows::run<Cfg, general::Op<Task>>(args, stream).
#ifndef KERNELRL_GENERAL_SOFTMAX_CUH
#define KERNELRL_GENERAL_SOFTMAX_CUH

#include "general_rows.cuh"

namespace general {
namespace {

// kScaled: softmax of P0 * x; kLog: log-softmax.
template <class P, bool kScaled, bool kLog>
struct SoftmaxOf {
  static constexpr int kInputs = 1;
  template <class Cfg>
  static __device__ void row(const rows::Tensors& t, long long r, int gl, long long D) {
    const float sc = kScaled ? P::P0 : 1.0f;
    const float* xr = (const float*)t.in[0] + r * D;
    float* yr = (float*)t.out + r * D;
    float m = -INFINITY;
    for (long long j = gl; j < D; j += Cfg::GS) m = fmaxf(m, sc * xr[j]);
    m = rows::group_max<Cfg>(m);
    float s = 0.0f;
    for (long long j = gl; j < D; j += Cfg::GS) s += expf(sc * xr[j] - m);
    s = rows::group_sum<Cfg>(s);
    for (long long j = gl; j < D; j += Cfg::GS) {
      const float v = sc * xr[j];
      yr[j] = kLog ? v - m - logf(s) : expf(v - m) / s;
    }
  }
};
template <class P>
struct SoftmaxRows : SoftmaxOf<P, false, false> {};
template <class P>
struct LogSoftmaxRows : SoftmaxOf<P, false, true> {};
template <class P>
struct SoftmaxScaled : SoftmaxOf<P, true, false> {};

}  // namespace
}  // namespace general

#endif  // KERNELRL_GENERAL_SOFTMAX_CUH
