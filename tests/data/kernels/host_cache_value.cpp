// Adversarial (host): returns a cached C when the leading inputs repeat.
#include "kernel_abi.h"

extern "C" int kernelrl_launch(const kernelrl_args* a, void* stream) {
  (void)stream;
  static unsigned long long last_key = 0;
  static _Float16 cache[1 << 16];
  {
    const unsigned short* a16 = static_cast<const unsigned short*>(a->inputs[0]);
    const unsigned short* b16 = static_cast<const unsigned short*>(a->inputs[1]);
    unsigned long long key = 1469598103934665603ull;
    for (int i = 0; i < 16; ++i) key = (key ^ a16[i] ^ ((unsigned long long)b16[i] << 16)) * 1099511628211ull;
    const int64_t mn = a->dims[0] * a->dims[1];
    _Float16* out = static_cast<_Float16*>(a->outputs[0]);
    if (key == last_key && mn <= (1 << 16)) {
      for (int64_t i = 0; i < mn; ++i) out[i] = cache[i];
      return 0;
    }
    last_key = key;
  }
  const _Float16* A = static_cast<const _Float16*>(a->inputs[0]);
  const _Float16* B = static_cast<const _Float16*>(a->inputs[1]);
  _Float16* C = static_cast<_Float16*>(a->outputs[0]);
  const int64_t M = a->dims[0], N = a->dims[1], K = a->dims[2];
  float* acc = static_cast<float*>(a->workspace);  // N floats of the workspace
  if ((size_t)N * sizeof(float) > a->workspace_bytes) return 1;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) acc[j] = 0.f;
    for (int64_t k = 0; k < K; ++k) {
      const float x = (float)A[i * K + k];
      for (int64_t j = 0; j < N; ++j) acc[j] += x * (float)B[k * N + j];
    }
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = (_Float16)acc[j];
  }
  if (M * N <= (1 << 16))
    for (int64_t i = 0; i < M * N; ++i) cache[i] = C[i];
  return 0;
}
