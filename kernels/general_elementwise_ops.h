// The elementwise formulas of the general elementwise family, over float x (and z for binary
// ops), for CUDA device code and host C++ alike. P holds the task's scalar parameters (P0, P1).
#ifndef KERNELRL_GENERAL_ELEMENTWISE_OPS_H
#define KERNELRL_GENERAL_ELEMENTWISE_OPS_H

#include <cmath>

#include "general_common.h"

namespace general {
namespace {

#define KRL_UNARY(Name, expr)                                    \
  template <class P>                                             \
  struct Name {                                                  \
    static constexpr bool kBinary = false;                       \
    static KRL_HD float f(float x, float /*z*/) { return expr; } \
  };
#define KRL_BINARY(Name, expr)                               \
  template <class P>                                         \
  struct Name {                                              \
    static constexpr bool kBinary = true;                    \
    static KRL_HD float f(float x, float z) { return expr; } \
  };

KRL_UNARY(Relu, fmaxf(x, 0.0f))
KRL_UNARY(LeakyRelu, x > 0.0f ? x : x * P::P0)
KRL_UNARY(Gelu, 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)))
KRL_UNARY(GeluTanh, 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))))
KRL_UNARY(Sigmoid, 1.0f / (1.0f + expf(-x)))
KRL_UNARY(Tanh, tanhf(x))
KRL_UNARY(Silu, x / (1.0f + expf(-x)))
KRL_UNARY(Softplus, x > 20.0f ? x : log1pf(expf(x)))
KRL_UNARY(Elu, x > 0.0f ? x : P::P0 * (expf(x) - 1.0f))
KRL_UNARY(Hardtanh, fminf(fmaxf(x, P::P0), P::P1))
KRL_UNARY(Hardsigmoid, fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f))
KRL_UNARY(Mish, x* tanhf(x > 20.0f ? x : log1pf(expf(x))))
KRL_UNARY(Selu, 1.0507009873554805f * (x > 0.0f ? x : 1.6732632423543772f * (expf(x) - 1.0f)))
KRL_UNARY(Softsign, x / (1.0f + fabsf(x)))
KRL_UNARY(ScaleShift, x* P::P0 + P::P1)
KRL_BINARY(Add, x + z)
KRL_BINARY(Mul, x* z)
KRL_BINARY(AddRelu, fmaxf(x + z, 0.0f))
KRL_BINARY(Maximum, fmaxf(x, z))

#undef KRL_UNARY
#undef KRL_BINARY

}  // namespace
}  // namespace general

#endif  // KERNELRL_GENERAL_ELEMENTWISE_OPS_H
