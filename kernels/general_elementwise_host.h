// General family `elementwise` (host C++17; the stream argument is null and ignored): y = f(x)
// or f(x, z) in one straightforward loop. The formulas are in general_elementwise_ops.h. A
// candidate is this file and an instance block: the task's params (`struct Task`) and a
// kernelrl_launch that returns general::elementwise_host::run<general::Op<Task>>(args).
#ifndef KERNELRL_GENERAL_ELEMENTWISE_HOST_H
#define KERNELRL_GENERAL_ELEMENTWISE_HOST_H

#include <cstddef>
#include <cstdint>

#include "general_elementwise_ops.h"

namespace general {
namespace elementwise_host {
namespace {

template <class Op>
int run(const kernelrl_args* args) {
  if (args->n_inputs < (Op::kBinary ? 2 : 1) || args->n_outputs < 1) return 1;
  const long long n = args->dims[0];
  const float* xp = (const float*)args->inputs[0];
  const float* zp = Op::kBinary ? (const float*)args->inputs[1] : xp;
  float* y = (float*)args->outputs[0];
  for (long long i = 0; i < n; ++i) y[i] = Op::f(xp[i], zp[i]);
  return 0;
}

}  // namespace
}  // namespace elementwise_host
}  // namespace general

#endif  // KERNELRL_GENERAL_ELEMENTWISE_HOST_H
