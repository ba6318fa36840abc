// Host-backend general task `relu` (data/tasks/task_ops.h): y = max(x, 0), dims = {N}.
#include "kernel_abi.h"

extern "C" int kernelrl_launch(const kernelrl_args* a, void* stream) {
  (void)stream;
  const float* x = static_cast<const float*>(a->inputs[0]);
  float* y = static_cast<float*>(a->outputs[0]);
  for (int64_t i = 0; i < a->dims[0]; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
  return 0;
}
