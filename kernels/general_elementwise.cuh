// General family `elementwise` (CUDA): y = f(x) or f(x, z) over n floats, a grid-stride loop of
// THREADS-thread blocks, with float4 loads and stores (VEC 4) when every pointer is 16-byte
// aligned plus a scalar tail, else one element per thread per step. The formulas are in
// general_elementwise_ops.h. A candidate is this file and an instance block: the task's params
// (`struct Task`), `using Cfg = general::elementwise::Config<...>;` and a kernelrl_launch that
// returns general::elementwise::run<Cfg, general::Op<Task>>(args, stream).
#ifndef KERNELRL_GENERAL_ELEMENTWISE_CUH
#define KERNELRL_GENERAL_ELEMENTWISE_CUH

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "general_elementwise_ops.h"

namespace general {
namespace elementwise {
namespace {

template <int THREADS_, int VEC_>
struct Config {
  static constexpr int THREADS = THREADS_;  // threads per block
  static constexpr int VEC = VEC_;          // 4: float4 body when aligned, 1: scalar
};

template <class Cfg, class Op>
__global__ void __launch_bounds__(Cfg::THREADS)
    elementwise_kernel(const float* __restrict__ x, const float* __restrict__ z,
                       float* __restrict__ y, long long n, bool vec_ok) {
  constexpr int THREADS = Cfg::THREADS;
  const long long tid = (long long)blockIdx.x * THREADS + threadIdx.x;
  const long long stride = (long long)gridDim.x * THREADS;
  long long done = 0;
  if (Cfg::VEC == 4 && vec_ok) {  // float4 body, scalar tail
    const long long n4 = n / 4;
    for (long long i = tid; i < n4; i += stride) {
      const float4 a = reinterpret_cast<const float4*>(x)[i];
      const float4 b = Op::kBinary ? reinterpret_cast<const float4*>(z)[i] : a;
      reinterpret_cast<float4*>(y)[i] =
          make_float4(Op::f(a.x, b.x), Op::f(a.y, b.y), Op::f(a.z, b.z), Op::f(a.w, b.w));
    }
    done = n4 * 4;
  }
  for (long long i = done + tid; i < n; i += stride) y[i] = Op::f(x[i], Op::kBinary ? z[i] : 0.0f);
}

template <class Cfg, class Op>
int run(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < (Op::kBinary ? 2 : 1) || args->n_outputs < 1 || args->n_dims < 1) return 1;
  const long long n = args->dims[0];
  const float* x = (const float*)args->inputs[0];
  const float* z = Op::kBinary ? (const float*)args->inputs[1] : x;
  float* y = (float*)args->outputs[0];
  const bool vec_ok =
      ((uintptr_t)x % 16 == 0) && ((uintptr_t)z % 16 == 0) && ((uintptr_t)y % 16 == 0);
  long long blocks = (n / Cfg::VEC + Cfg::THREADS - 1) / Cfg::THREADS;
  blocks = blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks);
  elementwise_kernel<Cfg, Op>
      <<<(unsigned)blocks, Cfg::THREADS, 0, (cudaStream_t)stream>>>(x, z, y, n, vec_ok);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

}  // namespace
}  // namespace elementwise
}  // namespace general

#endif  // KERNELRL_GENERAL_ELEMENTWISE_CUH
