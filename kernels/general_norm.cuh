// General family `norm` (CUDA): layernorm (eps P0, weight and bias), add + layernorm (of x + r),
// rmsnorm (eps P0, weight) and l2-normalize (by max(||x||, P0)) of the rows of a [B, D] input,
// on the row kernel of general_rows.cuh: the row's statistics by group reductions, then one
// pass writing the outputs. A candidate is this file and an instance block: the task's params
// (`struct Task`), `using Cfg = general::rows::Config<...>;` and a kernelrl_launch that returns
// general::rows::run<Cfg, general::Op<Task>>(args, stream).
#ifndef KERNELRL_GENERAL_NORM_CUH
#define KERNELRL_GENERAL_NORM_CUH

#include "general_rows.cuh"

namespace general {
namespace {

// Inputs x (, r), w, b: y = ((x (+ r)) - mean) / sqrt(var + P0) * w + b.
template <class P, bool kAdd>
struct LayernormOf {
  static constexpr int kInputs = kAdd ? 4 : 3;
  template <class Cfg>
  static __device__ void row(const rows::Tensors& t, long long r, int gl, long long D) {
    const float* xr = (const float*)t.in[0] + r * D;
    const float* rr = kAdd ? (const float*)t.in[1] + r * D : xr;
    const float* w = (const float*)t.in[kAdd ? 2 : 1];
    const float* b = (const float*)t.in[kAdd ? 3 : 2];
    float* yr = (float*)t.out + r * D;
    auto val = [&](long long j) { return kAdd ? xr[j] + rr[j] : xr[j]; };
    float s = 0.0f;
    for (long long j = gl; j < D; j += Cfg::GS) s += val(j);
    const float mean = rows::group_sum<Cfg>(s) / (float)D;
    float q = 0.0f;
    for (long long j = gl; j < D; j += Cfg::GS) {
      const float d = val(j) - mean;
      q += d * d;
    }
    const float rstd = 1.0f / sqrtf(rows::group_sum<Cfg>(q) / (float)D + P::P0);
    for (long long j = gl; j < D; j += Cfg::GS) yr[j] = (val(j) - mean) * rstd * w[j] + b[j];
  }
};
template <class P>
struct Layernorm : LayernormOf<P, false> {};
template <class P>
struct AddLayernorm : LayernormOf<P, true> {};

// Inputs x, w: y = x / sqrt(mean(x^2) + P0) * w.
template <class P>
struct Rmsnorm {
  static constexpr int kInputs = 2;
  template <class Cfg>
  static __device__ void row(const rows::Tensors& t, long long r, int gl, long long D) {
    const float* xr = (const float*)t.in[0] + r * D;
    const float* w = (const float*)t.in[1];
    float* yr = (float*)t.out + r * D;
    float q = 0.0f;
    for (long long j = gl; j < D; j += Cfg::GS) q += xr[j] * xr[j];
    const float rs = 1.0f / sqrtf(rows::group_sum<Cfg>(q) / (float)D + P::P0);
    for (long long j = gl; j < D; j += Cfg::GS) yr[j] = xr[j] * rs * w[j];
  }
};

// y = x / max(||x||, P0).
template <class P>
struct L2NormalizeRows {
  static constexpr int kInputs = 1;
  template <class Cfg>
  static __device__ void row(const rows::Tensors& t, long long r, int gl, long long D) {
    const float* xr = (const float*)t.in[0] + r * D;
    float* yr = (float*)t.out + r * D;
    float q = 0.0f;
    for (long long j = gl; j < D; j += Cfg::GS) q += xr[j] * xr[j];
    const float inv = 1.0f / fmaxf(sqrtf(rows::group_sum<Cfg>(q)), P::P0);
    for (long long j = gl; j < D; j += Cfg::GS) yr[j] = xr[j] * inv;
  }
};

}  // namespace
}  // namespace general

#endif  // KERNELRL_GENERAL_NORM_CUH
