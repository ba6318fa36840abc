#include "data/task_ops.h"

namespace kernelrl {
namespace {

OpInfo unary(const std::string& name, const std::string& formula,
             std::vector<std::string> params = {}, double tol = 1e-5) {
  return {name, "elementwise", formula, {"N"}, {{"x", {"N"}}}, {{"y", {"N"}}}, params, tol, tol};
}
OpInfo binary(const std::string& name, const std::string& formula) {
  return {name, "elementwise", formula, {"N"}, {{"x", {"N"}}, {"z", {"N"}}}, {{"y", {"N"}}}, {}, 1e-5, 1e-5};
}
OpInfo row_reduce(const std::string& name, const std::string& formula, double tol,
                  const std::string& out_dtype = "f32") {
  return {name, "reduction", formula, {"B", "D"}, {{"x", {"B", "D"}}},
          {{"y", {"B"}, out_dtype}}, {}, tol, tol};
}

std::vector<OpInfo> make_ops() {
  std::vector<OpInfo> ops = {
      unary("relu", "y = max(x, 0)"),
      unary("leaky_relu", "y = x if x > 0 else slope * x", {"slope"}),
      unary("gelu", "y = 0.5 x (1 + erf(x / sqrt(2)))", {}, 1e-5),
      unary("gelu_tanh", "y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))", {}, 1e-5),
      unary("sigmoid", "y = 1 / (1 + exp(-x))", {}, 1e-5),
      unary("tanh", "y = tanh(x)", {}, 1e-5),
      unary("silu", "y = x * sigmoid(x)", {}, 1e-5),
      unary("softplus", "y = log(1 + exp(x)), y = x for x > 20", {}, 1e-5),
      unary("elu", "y = x if x > 0 else alpha (exp(x) - 1)", {"alpha"}, 1e-5),
      unary("hardtanh", "y = min(max(x, lo), hi)", {"lo", "hi"}),
      unary("hardsigmoid", "y = min(max(x / 6 + 1/2, 0), 1)"),
      unary("mish", "y = x tanh(softplus(x))", {}, 1e-5),
      unary("selu", "y = 1.0507009873554805 (x if x > 0 else 1.6732632423543772 (exp(x) - 1))", {}, 1e-5),
      unary("softsign", "y = x / (1 + |x|)"),
      unary("scale_shift", "y = scale * x + shift", {"scale", "shift"}),
      binary("add", "y = x + z"),
      binary("mul", "y = x * z"),
      binary("add_relu", "y = max(x + z, 0)"),
      binary("maximum", "y = max(x, z)"),
      row_reduce("sum_rows", "y[b] = sum_d x[b, d]", 1e-4),
      row_reduce("mean_rows", "y[b] = mean_d x[b, d]", 1e-5),
      row_reduce("max_rows", "y[b] = max_d x[b, d]", 0),
      row_reduce("min_rows", "y[b] = min_d x[b, d]", 0),
      row_reduce("argmax_rows", "y[b] = first d maximizing x[b, d] (int64)", 0, "i64"),
      row_reduce("argmin_rows", "y[b] = first d minimizing x[b, d] (int64)", 0, "i64"),
      row_reduce("l2norm_rows", "y[b] = sqrt(sum_d x[b, d]^2)", 1e-5),
      {"cumsum_rows", "reduction", "y[b, d] = sum_{e <= d} x[b, e]", {"B", "D"},
       {{"x", {"B", "D"}}}, {{"y", {"B", "D"}}}, {}, 1e-3, 1e-4},
      {"sum_cols", "reduction", "y[d] = sum_b x[b, d]", {"B", "D"}, {{"x", {"B", "D"}}},
       {{"y", {"D"}}}, {}, 1e-3, 1e-4},
      {"sum_all", "reduction", "y[0] = sum_i x[i]", {"N"}, {{"x", {"N"}}}, {{"y", {"1"}}}, {},
       1e-2, 1e-4},
      {"softmax_rows", "softmax", "y[b, :] = softmax(x[b, :])", {"B", "D"}, {{"x", {"B", "D"}}},
       {{"y", {"B", "D"}}}, {}, 1e-6, 1e-4},
      {"log_softmax_rows", "softmax", "y[b, :] = log_softmax(x[b, :])", {"B", "D"},
       {{"x", {"B", "D"}}}, {{"y", {"B", "D"}}}, {}, 1e-4, 1e-5},
      {"softmax_scaled", "softmax", "y[b, :] = softmax(scale * x[b, :])", {"B", "D"},
       {{"x", {"B", "D"}}}, {{"y", {"B", "D"}}}, {"scale"}, 1e-6, 1e-4},
      {"layernorm", "norm", "y = (x - mean) / sqrt(var + eps) * w + b over the last dim (biased var)",
       {"B", "D"}, {{"x", {"B", "D"}}, {"w", {"D"}}, {"b", {"D"}}}, {{"y", {"B", "D"}}}, {"eps"},
       1e-4, 1e-4},
      {"rmsnorm", "norm", "y = x / sqrt(mean(x^2) + eps) * w over the last dim", {"B", "D"},
       {{"x", {"B", "D"}}, {"w", {"D"}}}, {{"y", {"B", "D"}}}, {"eps"}, 1e-4, 1e-4},
      {"l2_normalize_rows", "norm", "y = x / max(||x||_2, eps) over the last dim", {"B", "D"},
       {{"x", {"B", "D"}}}, {{"y", {"B", "D"}}}, {"eps"}, 1e-5, 1e-4},
      {"add_layernorm", "norm", "y = layernorm(x + r) * w + b over the last dim", {"B", "D"},
       {{"x", {"B", "D"}}, {"r", {"B", "D"}}, {"w", {"D"}}, {"b", {"D"}}}, {{"y", {"B", "D"}}},
       {"eps"}, 1e-4, 1e-4},
      {"transpose2d", "transpose", "y[c, r] = x[r, c]", {"R", "C"}, {{"x", {"R", "C"}}},
       {{"y", {"C", "R"}}}, {}, 0, 0},
      {"transpose_021", "transpose", "y[b, c, r] = x[b, r, c]", {"B", "R", "C"},
       {{"x", {"B", "R", "C"}}}, {{"y", {"B", "C", "R"}}}, {}, 0, 0},
      {"gather_rows", "gather_scatter", "y[i, :] = table[idx[i], :] (idx int64)", {"V", "D", "N"},
       {{"table", {"V", "D"}}, {"idx", {"N"}, "i64", "index", "V"}}, {{"y", {"N", "D"}}}, {}, 0, 0},
      {"scatter_add_rows", "gather_scatter",
       "y = zeros(V, D); y[idx[i], :] += src[i, :] for every i (idx int64)", {"V", "D", "N"},
       {{"src", {"N", "D"}}, {"idx", {"N"}, "i64", "index", "V"}}, {{"y", {"V", "D"}}}, {}, 1e-4,
       1e-4},
      {"take_along_rows", "gather_scatter", "y[b] = x[b, idx[b]] (idx int64)", {"B", "D"},
       {{"x", {"B", "D"}}, {"idx", {"B"}, "i64", "index", "D"}}, {{"y", {"B"}}}, {}, 0, 0},
      {"matmul", "matmul", "y = a @ bm (fp32)", {"M", "N", "K"},
       {{"a", {"M", "K"}}, {"bm", {"K", "N"}}}, {{"y", {"M", "N"}}}, {}, 1e-3, 1e-3},
      {"matmul_bias_relu", "matmul", "y = relu(a @ bm + bias)", {"M", "N", "K"},
       {{"a", {"M", "K"}}, {"bm", {"K", "N"}}, {"bias", {"N"}}}, {{"y", {"M", "N"}}}, {}, 1e-3, 1e-3},
      {"matmul_bias_gelu", "matmul", "y = gelu(a @ bm + bias), erf form", {"M", "N", "K"},
       {{"a", {"M", "K"}}, {"bm", {"K", "N"}}, {"bias", {"N"}}}, {{"y", {"M", "N"}}}, {}, 1e-3, 1e-3},
      {"matmul_bias_sigmoid", "matmul", "y = sigmoid(a @ bm + bias)", {"M", "N", "K"},
       {{"a", {"M", "K"}}, {"bm", {"K", "N"}}, {"bias", {"N"}}}, {{"y", {"M", "N"}}}, {}, 1e-4, 1e-3},
      {"matvec", "matmul", "y[m] = sum_k a[m, k] v[k]", {"M", "K"}, {{"a", {"M", "K"}}, {"v", {"K"}}},
       {{"y", {"M"}}}, {}, 1e-3, 1e-3},
      {"bmm", "matmul", "y[b] = a[b] @ bm[b]", {"B", "M", "N", "K"},
       {{"a", {"B", "M", "K"}}, {"bm", {"B", "K", "N"}}}, {{"y", {"B", "M", "N"}}}, {}, 1e-3, 1e-3},
  };
  return ops;
}

}  // namespace

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> ops = make_ops();
  return ops;
}

const OpInfo* find_op(const std::string& name) {
  for (const auto& op : all_ops())
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace kernelrl
