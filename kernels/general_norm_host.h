// General family `norm` (host C++17; the stream argument is null and ignored): layernorm (eps P0,
// weight and bias), add + layernorm (of x + r), rmsnorm (eps P0, weight) and l2-normalize (by
// max(||x||, P0)), in straightforward loops over contiguous rows. A candidate is this file and
// an instance block: the task's params (`struct Task`) and a kernelrl_launch that returns
// general::Op<Task>::run(args).
#ifndef KERNELRL_GENERAL_NORM_HOST_H
#define KERNELRL_GENERAL_NORM_HOST_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "general_common.h"

namespace general {
namespace {

// Inputs x (, r), w, b: y = ((x (+ r)) - mean) / sqrt(var + P0) * w + b.
template <class P, bool kAdd>
struct LayernormOf {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < (kAdd ? 4 : 3) || args->n_outputs < 1) return 1;
    const long long B = args->dims[0], D = args->dims[1];
    const float* x = (const float*)args->inputs[0];
    const float* w = (const float*)args->inputs[kAdd ? 2 : 1];
    const float* bb = (const float*)args->inputs[kAdd ? 3 : 2];
    for (long long b = 0; b < B; ++b) {
      const float* xr = x + b * D;
      const float* rr = kAdd ? (const float*)args->inputs[1] + b * D : xr;
      float* yr = (float*)args->outputs[0] + b * D;
      auto v = [&](long long j) { return kAdd ? xr[j] + rr[j] : xr[j]; };
      float mean = 0.0f;
      for (long long j = 0; j < D; ++j) mean += v(j);
      mean /= (float)D;
      float var = 0.0f;
      for (long long j = 0; j < D; ++j) {
        const float d = v(j) - mean;
        var += d * d;
      }
      const float rstd = 1.0f / std::sqrt(var / (float)D + P::P0);
      for (long long j = 0; j < D; ++j) yr[j] = (v(j) - mean) * rstd * w[j] + bb[j];
    }
    return 0;
  }
};
template <class P>
struct Layernorm : LayernormOf<P, false> {};
template <class P>
struct AddLayernorm : LayernormOf<P, true> {};

// Inputs x, w: y = x / sqrt(mean(x^2) + P0) * w.
template <class P>
struct Rmsnorm {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 2 || args->n_outputs < 1) return 1;
    const long long B = args->dims[0], D = args->dims[1];
    const float* x = (const float*)args->inputs[0];
    const float* w = (const float*)args->inputs[1];
    for (long long b = 0; b < B; ++b) {
      const float* xr = x + b * D;
      float* yr = (float*)args->outputs[0] + b * D;
      float q = 0.0f;
      for (long long j = 0; j < D; ++j) q += xr[j] * xr[j];
      const float rs = 1.0f / std::sqrt(q / (float)D + P::P0);
      for (long long j = 0; j < D; ++j) yr[j] = xr[j] * rs * w[j];
    }
    return 0;
  }
};

// y = x / max(||x||, P0).
template <class P>
struct L2NormalizeRows {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 1 || args->n_outputs < 1) return 1;
    const long long B = args->dims[0], D = args->dims[1];
    const float* x = (const float*)args->inputs[0];
    for (long long b = 0; b < B; ++b) {
      const float* xr = x + b * D;
      float* yr = (float*)args->outputs[0] + b * D;
      float q = 0.0f;
      for (long long j = 0; j < D; ++j) q += xr[j] * xr[j];
      const float inv = 1.0f / std::max(std::sqrt(q), P::P0);
      for (long long j = 0; j < D; ++j) yr[j] = xr[j] * inv;
    }
    return 0;
  }
};

}  // namespace
}  // namespace general

#endif  // KERNELRL_GENERAL_NORM_HOST_H
