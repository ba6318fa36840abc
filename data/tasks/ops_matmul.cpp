// Small fp32 matmul ops (family `matmul`): a @ bm with fused bias and activation, matvec, bmm.
#include <ATen/ATen.h>

#include "data/tasks/task_ops.h"

namespace kernelrl {

std::vector<OpInfo> matmul_ops() {
  const std::vector<OpTensor> ab = {{"a", {"M", "K"}}, {"bm", {"K", "N"}}};
  const std::vector<OpTensor> ab_bias = {{"a", {"M", "K"}}, {"bm", {"K", "N"}}, {"bias", {"N"}}};
  const std::vector<OpTensor> y = {{"y", {"M", "N"}}};
  return {
      {"matmul", "matmul", "y = a @ bm (fp32)", {"M", "N", "K"}, ab, y, {}, 1e-3, 1e-3,
       [](const OpCall& c) { return at::matmul(c.in[0], c.in[1]); }},
      {"matmul_bias_relu", "matmul", "y = relu(a @ bm + bias)", {"M", "N", "K"}, ab_bias, y, {},
       1e-3, 1e-3, [](const OpCall& c) { return at::relu(at::addmm(c.in[2], c.in[0], c.in[1])); }},
      {"matmul_bias_gelu", "matmul", "y = gelu(a @ bm + bias), erf form", {"M", "N", "K"}, ab_bias,
       y, {}, 1e-3, 1e-3,
       [](const OpCall& c) { return at::gelu(at::addmm(c.in[2], c.in[0], c.in[1])); }},
      {"matmul_bias_sigmoid", "matmul", "y = sigmoid(a @ bm + bias)", {"M", "N", "K"}, ab_bias, y,
       {}, 1e-4, 1e-3,
       [](const OpCall& c) { return at::sigmoid(at::addmm(c.in[2], c.in[0], c.in[1])); }},
      // One warp per row (CUDA); plain loops on the host.
      {"matvec", "matmul", "y[m] = sum_k a[m, k] v[k]", {"M", "K"},
       {{"a", {"M", "K"}}, {"v", {"K"}}}, {{"y", {"M"}}}, {}, 1e-3, 1e-3,
       [](const OpCall& c) { return at::mv(c.in[0], c.in[1]); }, /*grid=*/"matvec"},
      {"bmm", "matmul", "y[b] = a[b] @ bm[b]", {"B", "M", "N", "K"},
       {{"a", {"B", "M", "K"}}, {"bm", {"B", "K", "N"}}}, {{"y", {"B", "M", "N"}}}, {}, 1e-3, 1e-3,
       [](const OpCall& c) { return at::bmm(c.in[0], c.in[1]); }},
  };
}

}  // namespace kernelrl
