// Normalization ops (family `norm`): over the last dim of x [B, D], with weights w [D], b [D].
#include <ATen/ATen.h>

#include "data/tasks/task_ops.h"

namespace kernelrl {

std::vector<OpInfo> norm_ops() {
  return {
      {"layernorm", "norm", "y = (x - mean) / sqrt(var + eps) * w + b over the last dim (biased var)",
       {"B", "D"}, {{"x", {"B", "D"}}, {"w", {"D"}}, {"b", {"D"}}}, {{"y", {"B", "D"}}}, {"eps"},
       1e-4, 1e-4,
       [](const OpCall& c) {
         return at::layer_norm(c.in[0], {c.in[0].size(1)}, c.in[1], c.in[2], c.p(0));
       }},
      {"rmsnorm", "norm", "y = x / sqrt(mean(x^2) + eps) * w over the last dim", {"B", "D"},
       {{"x", {"B", "D"}}, {"w", {"D"}}}, {{"y", {"B", "D"}}}, {"eps"}, 1e-4, 1e-4,
       [](const OpCall& c) {
         return c.in[0] * at::rsqrt(c.in[0].pow(2).mean(1, true) + c.p(0)) * c.in[1];
       }},
      {"l2_normalize_rows", "norm", "y = x / max(||x||_2, eps) over the last dim", {"B", "D"},
       {{"x", {"B", "D"}}}, {{"y", {"B", "D"}}}, {"eps"}, 1e-5, 1e-4,
       [](const OpCall& c) { return c.in[0] / at::norm(c.in[0], 2, {1}, true).clamp_min(c.p(0)); }},
      {"add_layernorm", "norm", "y = layernorm(x + r) * w + b over the last dim", {"B", "D"},
       {{"x", {"B", "D"}}, {"r", {"B", "D"}}, {"w", {"D"}}, {"b", {"D"}}}, {{"y", {"B", "D"}}},
       {"eps"}, 1e-4, 1e-4,
       [](const OpCall& c) {
         return at::layer_norm(c.in[0] + c.in[1], {c.in[0].size(1)}, c.in[2], c.in[3], c.p(0));
       }},
  };
}

}  // namespace kernelrl
