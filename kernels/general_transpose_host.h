// General family `transpose` (host C++17; the stream argument is null and ignored): y[b, c, r] =
// x[b, r, c] for x of shape [Bt, R, C] (rank 2: Bt = 1), in 32x32 cache blocks. A candidate is
// this file and an instance block: the task's params (`struct Task`) and a kernelrl_launch that
// returns general::Op<Task>::run(args).
#ifndef KERNELRL_GENERAL_TRANSPOSE_HOST_H
#define KERNELRL_GENERAL_TRANSPOSE_HOST_H

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "general_common.h"

namespace general {
namespace {

template <class P, int kRank>
struct TransposeOf {
  static int run(const kernelrl_args* args) {
    if (args->n_inputs < 1 || args->n_outputs < 1) return 1;
    const long long Bt = kRank == 3 ? args->dims[0] : 1;
    const long long R = args->dims[kRank - 2], C = args->dims[kRank - 1];
    const float* x = (const float*)args->inputs[0];
    float* y = (float*)args->outputs[0];
    constexpr long long T = 32;  // cache blocks
    for (long long b = 0; b < Bt; ++b)
      for (long long r0 = 0; r0 < R; r0 += T)
        for (long long c0 = 0; c0 < C; c0 += T)
          for (long long r = r0; r < std::min(R, r0 + T); ++r)
            for (long long c = c0; c < std::min(C, c0 + T); ++c)
              y[b * R * C + c * R + r] = x[b * R * C + r * C + c];
    return 0;
  }
};
template <class P>
struct Transpose2d : TransposeOf<P, 2> {};
template <class P>
struct Transpose021 : TransposeOf<P, 3> {};

}  // namespace
}  // namespace general

#endif  // KERNELRL_GENERAL_TRANSPOSE_HOST_H
