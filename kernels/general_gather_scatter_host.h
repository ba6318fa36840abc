// General family `gather_scatter` (host C++17; the stream argument is null and ignored): row
// gather y[i] = table[idx[i]] (N = task param 0), scatter-add y[idx[i]] += src[i] into the zeroed
// [V, D] output (V = task param 0), take-along y[b] = x[b, idx[b]], in straightforward loops. A
// candidate is this file and an instance block: the task's params (`struct Task`) and a
// kernelrl_launch that returns general::Op<Task>::run(args).
#ifndef KERNELRL_GENERAL_GATHER_SCATTER_HOST_H
#define KERNELRL_GENERAL_GATHER_SCATTER_HOST_H

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "general_common.h"

namespace general {
namespace {

template <class P>
struct GatherRows {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 2 || args->n_outputs < 1) return 1;
    const long long D = args->dims[1];
    const long long N = (long long)task_param(args, 2, 0);
    const float* table = (const float*)args->inputs[0];
    const long long* idx = (const long long*)args->inputs[1];
    float* y = (float*)args->outputs[0];
    for (long long i = 0; i < N; ++i) std::memcpy(y + i * D, table + idx[i] * D, sizeof(float) * D);
    return 0;
  }
};

template <class P>
struct ScatterAddRows {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 2 || args->n_outputs < 1) return 1;
    const long long N = args->dims[0], D = args->dims[1];
    const long long V = (long long)task_param(args, 2, 0);
    const float* src = (const float*)args->inputs[0];
    const long long* idx = (const long long*)args->inputs[1];
    float* y = (float*)args->outputs[0];
    for (long long i = 0; i < V * D; ++i) y[i] = 0.0f;
    for (long long i = 0; i < N; ++i)
      for (long long d = 0; d < D; ++d) y[idx[i] * D + d] += src[i * D + d];
    return 0;
  }
};

template <class P>
struct TakeAlongRows {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 2 || args->n_outputs < 1) return 1;
    const long long B = args->dims[0], D = args->dims[1];
    const float* x = (const float*)args->inputs[0];
    const long long* idx = (const long long*)args->inputs[1];
    float* y = (float*)args->outputs[0];
    for (long long b = 0; b < B; ++b) y[b] = x[b * D + idx[b]];
    return 0;
  }
};

}  // namespace
}  // namespace general

#endif  // KERNELRL_GENERAL_GATHER_SCATTER_HOST_H
