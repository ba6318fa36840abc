// General family `softmax` (host C++17; the stream argument is null and ignored): row softmax,
// log-softmax and scaled softmax (scale P0), in straightforward loops over contiguous rows: the
// row's max, the sum of exp(x - max), then the outputs. A candidate is this file and an instance
// block: the task's params (`struct Task`) and a kernelrl_launch that returns
// general::Op<Task>::run(args).
#ifndef KERNELRL_GENERAL_SOFTMAX_HOST_H
#define KERNELRL_GENERAL_SOFTMAX_HOST_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "general_common.h"

namespace general {
namespace {

// kScaled: softmax of P0 * x; kLog: log-softmax.
template <class P, bool kScaled, bool kLog>
struct SoftmaxOf {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 1 || args->n_outputs < 1) return 1;
    const long long B = args->dims[0], D = args->dims[1];
    const float sc = kScaled ? P::P0 : 1.0f;
    const float* x = (const float*)args->inputs[0];
    for (long long b = 0; b < B; ++b) {
      const float* xr = x + b * D;
      float* yr = (float*)args->outputs[0] + b * D;
      float m = -INFINITY;
      for (long long j = 0; j < D; ++j) m = std::max(m, sc * xr[j]);
      float sum = 0.0f;
      for (long long j = 0; j < D; ++j) sum += std::exp(sc * xr[j] - m);
      if (kLog) {
        const float lse = m + std::log(sum);
        for (long long j = 0; j < D; ++j) yr[j] = xr[j] - lse;
      } else {
        for (long long j = 0; j < D; ++j) yr[j] = std::exp(sc * xr[j] - m) / sum;
      }
    }
    return 0;
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

#endif  // KERNELRL_GENERAL_SOFTMAX_HOST_H
