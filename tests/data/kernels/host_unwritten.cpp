// Adversarial (host): leaves the last row of C unwritten.
#include "kernel_abi.h"

extern "C" int kernelrl_launch(const kernelrl_args* a, void* stream) {
  (void)stream;
  const _Float16* A = static_cast<const _Float16*>(a->inputs[0]);
  const _Float16* B = static_cast<const _Float16*>(a->inputs[1]);
  _Float16* C = static_cast<_Float16*>(a->outputs[0]);
  const int64_t M = a->dims[0], N = a->dims[1], K = a->dims[2];
  float* acc = static_cast<float*>(a->workspace);  // N floats of the workspace
  if ((size_t)N * sizeof(float) > a->workspace_bytes) return 1;
  for (int64_t i = 0; i < M - 1; ++i) {
    for (int64_t j = 0; j < N; ++j) acc[j] = 0.f;
    for (int64_t k = 0; k < K; ++k) {
      const float x = (float)A[i * K + k];
      for (int64_t j = 0; j < N; ++j) acc[j] += x * (float)B[k * N + j];
    }
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = (_Float16)acc[j];
  }
  return 0;
}
