// General family `reduction` (host C++17; the stream argument is null and ignored), in
// straightforward loops over contiguous rows: per-row sum, mean, max, min, l2 norm, argmax and
// argmin (the first index among ties), inclusive cumsum; column sums; the sum of all elements (in
// double: the order differs from any GPU order anyway). A candidate is this file and an instance
// block: the task's params (`struct Task`) and a kernelrl_launch that returns
// general::Op<Task>::run(args).
#ifndef KERNELRL_GENERAL_REDUCTION_HOST_H
#define KERNELRL_GENERAL_REDUCTION_HOST_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "general_common.h"

namespace general {
namespace {

// y[b] = fin(fold over j of step(s, x[b, j])), for the reductions that fold one float.
#define KRL_ROW_REDUCE(Name, init, step, fin)                  \
  template <class P>                                           \
  struct Name {                                                \
    static int run(const kernelrl_args* args) {                \
      if (args->n_inputs < 1 || args->n_outputs < 1) return 1; \
      const long long B = args->dims[0], D = args->dims[1];    \
      const float* x = (const float*)args->inputs[0];          \
      for (long long b = 0; b < B; ++b) {                      \
        const float* xr = x + b * D;                           \
        float s = init;                                        \
        for (long long j = 0; j < D; ++j) step;                \
        ((float*)args->outputs[0])[b] = fin;                   \
      }                                                        \
      return 0;                                                \
    }                                                          \
  };
KRL_ROW_REDUCE(SumRows, 0.0f, s += xr[j], s)
KRL_ROW_REDUCE(MeanRows, 0.0f, s += xr[j], s / (float)D)
KRL_ROW_REDUCE(MaxRows, -INFINITY, s = std::max(s, xr[j]), s)
KRL_ROW_REDUCE(MinRows, INFINITY, s = std::min(s, xr[j]), s)
KRL_ROW_REDUCE(L2normRows, 0.0f, s += xr[j] * xr[j], std::sqrt(s))
#undef KRL_ROW_REDUCE

template <class P, bool kMax>
struct ArgbestRows {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 1 || args->n_outputs < 1) return 1;
    const long long B = args->dims[0], D = args->dims[1];
    const float* x = (const float*)args->inputs[0];
    for (long long b = 0; b < B; ++b) {
      const float* xr = x + b * D;
      long long bi = 0;
      for (long long j = 1; j < D; ++j)
        if (kMax ? xr[j] > xr[bi] : xr[j] < xr[bi]) bi = j;
      ((long long*)args->outputs[0])[b] = bi;
    }
    return 0;
  }
};
template <class P>
struct ArgmaxRows : ArgbestRows<P, true> {};
template <class P>
struct ArgminRows : ArgbestRows<P, false> {};

template <class P>
struct CumsumRows {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 1 || args->n_outputs < 1) return 1;
    const long long B = args->dims[0], D = args->dims[1];
    const float* x = (const float*)args->inputs[0];
    for (long long b = 0; b < B; ++b) {
      const float* xr = x + b * D;
      float* yr = (float*)args->outputs[0] + b * D;
      float acc = 0.0f;
      for (long long j = 0; j < D; ++j) {
        acc += xr[j];
        yr[j] = acc;
      }
    }
    return 0;
  }
};

template <class P>
struct SumCols {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 1 || args->n_outputs < 1) return 1;
    const long long B = args->dims[0], D = args->dims[1];
    const float* x = (const float*)args->inputs[0];
    float* y = (float*)args->outputs[0];
    for (long long c = 0; c < D; ++c) y[c] = 0.0f;
    for (long long r = 0; r < B; ++r)
      for (long long c = 0; c < D; ++c) y[c] += x[r * D + c];
    return 0;
  }
};

template <class P>
struct SumAll {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 1 || args->n_outputs < 1) return 1;
    const long long n = args->dims[0];
    const float* x = (const float*)args->inputs[0];
    double acc = 0.0;  // double: the order differs from any GPU order anyway
    for (long long i = 0; i < n; ++i) acc += x[i];
    *(float*)args->outputs[0] = (float)acc;
    return 0;
  }
};

}  // namespace
}  // namespace general

#endif  // KERNELRL_GENERAL_REDUCTION_HOST_H
