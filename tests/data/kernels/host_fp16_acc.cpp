// Adversarial (host): accumulates in fp16 although the task requires fp32.
#include "kernel_abi.h"

extern "C" int kernelrl_launch(const kernelrl_args* a, void* stream) {
  (void)stream;
  const _Float16* A = static_cast<const _Float16*>(a->inputs[0]);
  const _Float16* B = static_cast<const _Float16*>(a->inputs[1]);
  _Float16* C = static_cast<_Float16*>(a->outputs[0]);
  const int64_t M = a->dims[0], N = a->dims[1], K = a->dims[2];
  _Float16* acc = static_cast<_Float16*>(a->workspace);  // fp16 accumulators
  if ((size_t)N * sizeof(_Float16) > a->workspace_bytes) return 1;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) acc[j] = (_Float16)0.f;
    for (int64_t k = 0; k < K; ++k) {
      const _Float16 x = A[i * K + k];
      for (int64_t j = 0; j < N; ++j) acc[j] = (_Float16)(acc[j] + (_Float16)(x * B[k * N + j]));
    }
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = (_Float16)acc[j];
  }
  return 0;
}
