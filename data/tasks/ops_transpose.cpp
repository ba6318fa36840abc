// Transpose ops (family `transpose`): 2-D and batched.
#include <ATen/ATen.h>

#include "data/tasks/task_ops.h"

namespace kernelrl {

std::vector<OpInfo> transpose_ops() {
  return {
      {"transpose2d", "transpose", "y[c, r] = x[r, c]", {"R", "C"}, {{"x", {"R", "C"}}},
       {{"y", {"C", "R"}}}, {}, 0, 0, [](const OpCall& c) { return c.in[0].t().contiguous(); }},
      {"transpose_021", "transpose", "y[b, c, r] = x[b, r, c]", {"B", "R", "C"},
       {{"x", {"B", "R", "C"}}}, {{"y", {"B", "C", "R"}}}, {}, 0, 0,
       [](const OpCall& c) { return c.in[0].transpose(1, 2).contiguous(); }},
  };
}

}  // namespace kernelrl
