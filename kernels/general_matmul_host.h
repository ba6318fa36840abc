// General family `matmul` (host C++17; the stream argument is null and ignored), fp32: y[b] =
// act(a[b] @ bm[b] + bias) with the loops blocked in TILE-wide cache tiles over M, N and K, and
// y = a @ v (matvec) in a straightforward loop. The ops are in general_matmul_ops.h. A candidate
// is this file and an instance block: the task's params (`struct Task`) and a kernelrl_launch
// that returns general::matmul_host::run<Cfg, general::Op<Task>>(args) or
// general::matmul_host::run_matvec(args).
#ifndef KERNELRL_GENERAL_MATMUL_HOST_H
#define KERNELRL_GENERAL_MATMUL_HOST_H

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "general_matmul_ops.h"

namespace general {
namespace matmul_host {
namespace {

template <int TILE_>
struct Config {
  static constexpr long long TILE = TILE_;  // cache block over M, N and K
};

template <class Cfg, class Op>
int run(const kernelrl_args* args) {
  if (args->n_inputs < (Op::kBias ? 3 : 2) || args->n_outputs < 1) return 1;
  long long Bt, M, N, K;
  matmul_sizes<Op>(args, Bt, M, N, K);
  const float* a0 = (const float*)args->inputs[0];
  const float* b0 = (const float*)args->inputs[1];
  const float* bias = Op::kBias ? (const float*)args->inputs[2] : nullptr;
  float* y0 = (float*)args->outputs[0];
  constexpr long long T = Cfg::TILE;
  for (long long z = 0; z < Bt; ++z) {
    const float* a = a0 + z * M * K;
    const float* b = b0 + z * K * N;
    float* y = y0 + z * M * N;
    for (long long i = 0; i < M * N; ++i) y[i] = 0.0f;
    for (long long i0 = 0; i0 < M; i0 += T)
      for (long long k0 = 0; k0 < K; k0 += T)
        for (long long j0 = 0; j0 < N; j0 += T)
          for (long long i = i0; i < std::min(M, i0 + T); ++i)
            for (long long k = k0; k < std::min(K, k0 + T); ++k) {
              const float av = a[i * K + k];
              for (long long j = j0; j < std::min(N, j0 + T); ++j)
                y[i * N + j] += av * b[k * N + j];
            }
    for (long long i = 0; i < M; ++i)
      for (long long j = 0; j < N; ++j) {
        const float v = y[i * N + j] + (bias ? bias[j] : 0.0f);
        y[i * N + j] = Op::act(v);
      }
  }
  return 0;
}

inline int run_matvec(const kernelrl_args* args) {
  if (args->n_inputs < 2 || args->n_outputs < 1) return 1;
  const long long M = args->dims[0], K = args->dims[1];
  const float* a = (const float*)args->inputs[0];
  const float* v = (const float*)args->inputs[1];
  float* y = (float*)args->outputs[0];
  for (long long m = 0; m < M; ++m) {
    float acc = 0.0f;
    for (long long k = 0; k < K; ++k) acc += a[m * K + k] * v[k];
    y[m] = acc;
  }
  return 0;
}

}  // namespace
}  // namespace matmul_host
}  // namespace general

#endif  // KERNELRL_GENERAL_MATMUL_HOST_H
