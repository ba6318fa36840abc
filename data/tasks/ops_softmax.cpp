// Softmax ops (family `softmax`): per row of x [B, D].
#include <ATen/ATen.h>

#include "data/tasks/task_ops.h"

namespace kernelrl {

std::vector<OpInfo> softmax_ops() {
  return {
      {"softmax_rows", "softmax", "y[b, :] = softmax(x[b, :])", {"B", "D"}, {{"x", {"B", "D"}}},
       {{"y", {"B", "D"}}}, {}, 1e-6, 1e-4,
       [](const OpCall& c) { return at::softmax(c.in[0], 1); }},
      {"log_softmax_rows", "softmax", "y[b, :] = log_softmax(x[b, :])", {"B", "D"},
       {{"x", {"B", "D"}}}, {{"y", {"B", "D"}}}, {}, 1e-4, 1e-5,
       [](const OpCall& c) { return at::log_softmax(c.in[0], 1); }},
      {"softmax_scaled", "softmax", "y[b, :] = softmax(scale * x[b, :])", {"B", "D"},
       {{"x", {"B", "D"}}}, {{"y", {"B", "D"}}}, {"scale"}, 1e-6, 1e-4,
       [](const OpCall& c) { return at::softmax(c.in[0] * c.p(0), 1); }},
  };
}

}  // namespace kernelrl
