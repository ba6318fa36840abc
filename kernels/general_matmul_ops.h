// The ops of the general matmul family, for CUDA device code and host C++ alike: whether an op
// adds a bias, whether it is batched (bmm), and its activation.
#ifndef KERNELRL_GENERAL_MATMUL_OPS_H
#define KERNELRL_GENERAL_MATMUL_OPS_H

#include <cmath>

#include "general_common.h"

namespace general {
namespace {

#define KRL_MATMUL_OP(Name, bias, batched, expr)            \
  template <class P>                                        \
  struct Name {                                             \
    static constexpr bool kBias = bias, kBatched = batched; \
    static KRL_HD float act(float v) { return expr; }       \
  };
KRL_MATMUL_OP(Matmul, false, false, v)
KRL_MATMUL_OP(MatmulBiasRelu, true, false, fmaxf(v, 0.0f))
KRL_MATMUL_OP(MatmulBiasGelu, true, false, 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)))
KRL_MATMUL_OP(MatmulBiasSigmoid, true, false, 1.0f / (1.0f + expf(-v)))
KRL_MATMUL_OP(Bmm, false, true, v)
#undef KRL_MATMUL_OP

// Sizes: a [Bt, M, K] (Bt = 1 unless batched), bm [Bt, K, N]; N is the task param after a's
// shape.
template <class Op>
inline void matmul_sizes(const kernelrl_args* args, long long& Bt, long long& M, long long& N,
                         long long& K) {
  if (Op::kBatched) {
    Bt = args->dims[0], M = args->dims[1], K = args->dims[2];
    N = (long long)task_param(args, 3, 0);
  } else {
    Bt = 1, M = args->dims[0], K = args->dims[1];
    N = (long long)task_param(args, 2, 0);
  }
}

}  // namespace
}  // namespace general

#endif  // KERNELRL_GENERAL_MATMUL_OPS_H
