// Elementwise ops (family `elementwise`): activations over x [N], binary ops over x, z [N].
#include <ATen/ATen.h>

#include "data/tasks/task_ops.h"

namespace kernelrl {
namespace {

using Ref = at::Tensor (*)(const OpCall&);

OpInfo unary(const std::string& name, const std::string& formula, Ref ref,
             std::vector<std::string> params = {}, double tol = 1e-5) {
  return {name, "elementwise", formula, {"N"}, {{"x", {"N"}}}, {{"y", {"N"}}}, params, tol, tol,
          ref};
}
OpInfo binary(const std::string& name, const std::string& formula, Ref ref) {
  return {name, "elementwise", formula, {"N"}, {{"x", {"N"}}, {"z", {"N"}}}, {{"y", {"N"}}},
          {},   1e-5,          1e-5,    ref};
}

}  // namespace

std::vector<OpInfo> elementwise_ops() {
  return {
      unary("relu", "y = max(x, 0)", [](const OpCall& c) { return at::relu(c.in[0]); }),
      unary("leaky_relu", "y = x if x > 0 else slope * x",
            [](const OpCall& c) { return at::leaky_relu(c.in[0], c.p(0)); }, {"slope"}),
      unary("gelu", "y = 0.5 x (1 + erf(x / sqrt(2)))",
            [](const OpCall& c) { return at::gelu(c.in[0]); }),
      unary("gelu_tanh", "y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
            [](const OpCall& c) { return at::gelu(c.in[0], "tanh"); }),
      unary("sigmoid", "y = 1 / (1 + exp(-x))",
            [](const OpCall& c) { return at::sigmoid(c.in[0]); }),
      unary("tanh", "y = tanh(x)", [](const OpCall& c) { return at::tanh(c.in[0]); }),
      unary("silu", "y = x * sigmoid(x)", [](const OpCall& c) { return at::silu(c.in[0]); }),
      unary("softplus", "y = log(1 + exp(x)), y = x for x > 20",
            [](const OpCall& c) { return at::softplus(c.in[0], 1.0, 20.0); }),
      unary("elu", "y = x if x > 0 else alpha (exp(x) - 1)",
            [](const OpCall& c) { return at::elu(c.in[0], c.p(0)); }, {"alpha"}),
      unary("hardtanh", "y = min(max(x, lo), hi)",
            [](const OpCall& c) { return at::hardtanh(c.in[0], c.p(0), c.p(1)); }, {"lo", "hi"}),
      unary("hardsigmoid", "y = min(max(x / 6 + 1/2, 0), 1)",
            [](const OpCall& c) { return at::hardsigmoid(c.in[0]); }),
      unary("mish", "y = x tanh(softplus(x))", [](const OpCall& c) { return at::mish(c.in[0]); }),
      unary("selu", "y = 1.0507009873554805 (x if x > 0 else 1.6732632423543772 (exp(x) - 1))",
            [](const OpCall& c) { return at::selu(c.in[0]); }),
      unary("softsign", "y = x / (1 + |x|)",
            [](const OpCall& c) { return c.in[0] / (1 + c.in[0].abs()); }),
      unary("scale_shift", "y = scale * x + shift",
            [](const OpCall& c) { return c.in[0] * c.p(0) + c.p(1); }, {"scale", "shift"}),
      binary("add", "y = x + z", [](const OpCall& c) { return c.in[0] + c.in[1]; }),
      binary("mul", "y = x * z", [](const OpCall& c) { return c.in[0] * c.in[1]; }),
      binary("add_relu", "y = max(x + z, 0)",
             [](const OpCall& c) { return at::relu(c.in[0] + c.in[1]); }),
      binary("maximum", "y = max(x, z)",
             [](const OpCall& c) { return at::maximum(c.in[0], c.in[1]); }),
  };
}

}  // namespace kernelrl
