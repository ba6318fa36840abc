// Adversarial (host): a correct product, then 64 bytes written just past the end of the
// workspace. The guard band behind the workspace must catch it (workspace_overrun).
#include "kernel_abi.h"

extern "C" int kernelrl_launch(const kernelrl_args* a, void* stream) {
  (void)stream;
  const _Float16* A = static_cast<const _Float16*>(a->inputs[0]);
  const _Float16* B = static_cast<const _Float16*>(a->inputs[1]);
  _Float16* C = static_cast<_Float16*>(a->outputs[0]);
  const int64_t M = a->dims[0], N = a->dims[1], K = a->dims[2];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k) acc += (float)A[i * K + k] * (float)B[k * N + j];
      C[i * N + j] = (_Float16)acc;
    }
  unsigned char* w = static_cast<unsigned char*>(a->workspace);
  for (int i = 0; i < 64; ++i) w[a->workspace_bytes + i] = 0x5a;
  return 0;
}
