// HGEMM on the host (plain C++17 for g++; the stream argument is null and ignored): C[M,N] =
// A[M,K] * B[K,N] on raw fp16 bit patterns, converted to float and back with round-to-nearest-
// even by bit manipulation. The loops are blocked in TILE x TILE tiles of C and K for cache
// reuse; with fp16 accumulation the running sums are rounded to fp16 after every k block.
// A candidate is this file and an instance block: `using Cfg = hgemm_host::Config<...>;` and a
// kernelrl_launch that returns hgemm_host::run<Cfg>(args).
#ifndef KERNELRL_HGEMM_HOST_H
#define KERNELRL_HGEMM_HOST_H

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernel_abi.h"

namespace hgemm_host {
namespace {  // internal linkage: candidates are dlopen'ed side by side

template <int TILE_, bool B_COL_MAJOR_, bool ACC_F16_>
struct Config {
  static constexpr int TILE = TILE_;  // cache block (rows and columns of C, depth of K)
  static constexpr bool B_COL_MAJOR = B_COL_MAJOR_;  // layout tn: B(k, n) at B[n * K + k]
  static constexpr bool ACC_F16 = ACC_F16_;  // round the running sum to fp16 after every k block
};

inline float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_half(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // overflow to inf
  if (ax < 0x38800000u) {                        // subnormal or zero
    if (ax < 0x33000000u) return sign;
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    const int shift = 126 - (int)e;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return sign | (uint16_t)r;
  }
  uint32_t r = ((ax >> 13) - (112u << 10));
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return sign | (uint16_t)r;
}

template <class Cfg>
int run(const kernelrl_args* args) {
  constexpr int TILE = Cfg::TILE;
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 3) return 1;
  const int64_t M = args->dims[0], N = args->dims[1], K = args->dims[2];
  if (M <= 0 || N <= 0 || K <= 0 || M % 64 || N % 64 || K % 64) return 2;
  const uint16_t* A = (const uint16_t*)args->inputs[0];
  const uint16_t* B = (const uint16_t*)args->inputs[1];
  uint16_t* C = (uint16_t*)args->outputs[0];
  float a_blk[TILE * TILE], b_blk[TILE * TILE], c_blk[TILE * TILE];
  for (int64_t i0 = 0; i0 < M; i0 += TILE)
    for (int64_t j0 = 0; j0 < N; j0 += TILE) {
      for (int t = 0; t < TILE * TILE; ++t) c_blk[t] = 0.0f;
      for (int64_t k0 = 0; k0 < K; k0 += TILE) {
        for (int i = 0; i < TILE; ++i)
          for (int k = 0; k < TILE; ++k)
            a_blk[i * TILE + k] = half_to_float(A[(i0 + i) * K + k0 + k]);
        for (int k = 0; k < TILE; ++k)
          for (int j = 0; j < TILE; ++j)
            b_blk[k * TILE + j] = half_to_float(Cfg::B_COL_MAJOR ? B[(j0 + j) * K + k0 + k]
                                                                 : B[(k0 + k) * N + j0 + j]);
        for (int i = 0; i < TILE; ++i)
          for (int k = 0; k < TILE; ++k) {
            const float a = a_blk[i * TILE + k];
            for (int j = 0; j < TILE; ++j) c_blk[i * TILE + j] += a * b_blk[k * TILE + j];
          }
        if (Cfg::ACC_F16)
          for (int t = 0; t < TILE * TILE; ++t) c_blk[t] = half_to_float(float_to_half(c_blk[t]));
      }
      for (int i = 0; i < TILE; ++i)
        for (int j = 0; j < TILE; ++j)
          C[(i0 + i) * N + j0 + j] = float_to_half(c_blk[i * TILE + j]);
    }
  return 0;
}

}  // namespace
}  // namespace hgemm_host

#endif  // KERNELRL_HGEMM_HOST_H
