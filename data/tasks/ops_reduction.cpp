// Reduction ops (family `reduction`): per row of x [B, D], per column, over everything, and the
// row prefix sum.
#include <ATen/ATen.h>

#include "data/tasks/task_ops.h"

namespace kernelrl {
namespace {

using Ref = at::Tensor (*)(const OpCall&);

OpInfo row_reduce(const std::string& name, const std::string& formula, double tol, Ref ref,
                  const std::string& out_dtype = "f32") {
  return {name, "reduction", formula, {"B", "D"}, {{"x", {"B", "D"}}}, {{"y", {"B"}, out_dtype}},
          {},   tol,         tol,     ref};
}

}  // namespace

std::vector<OpInfo> reduction_ops() {
  std::vector<OpInfo> ops = {
      row_reduce("sum_rows", "y[b] = sum_d x[b, d]", 1e-4,
                 [](const OpCall& c) { return c.in[0].sum(1); }),
      row_reduce("mean_rows", "y[b] = mean_d x[b, d]", 1e-5,
                 [](const OpCall& c) { return c.in[0].mean(1); }),
      row_reduce("max_rows", "y[b] = max_d x[b, d]", 0,
                 [](const OpCall& c) { return c.in[0].amax(1); }),
      row_reduce("min_rows", "y[b] = min_d x[b, d]", 0,
                 [](const OpCall& c) { return c.in[0].amin(1); }),
      row_reduce("argmax_rows", "y[b] = first d maximizing x[b, d] (int64)", 0,
                 [](const OpCall& c) { return c.in[0].argmax(1); }, "i64"),
      row_reduce("argmin_rows", "y[b] = first d minimizing x[b, d] (int64)", 0,
                 [](const OpCall& c) { return c.in[0].argmin(1); }, "i64"),
      row_reduce("l2norm_rows", "y[b] = sqrt(sum_d x[b, d]^2)", 1e-5,
                 [](const OpCall& c) { return at::norm(c.in[0], 2, {1}); }),
      {"cumsum_rows", "reduction", "y[b, d] = sum_{e <= d} x[b, e]", {"B", "D"},
       {{"x", {"B", "D"}}}, {{"y", {"B", "D"}}}, {}, 1e-3, 1e-4,
       [](const OpCall& c) { return c.in[0].cumsum(1); }},
      // One thread per column (coalesced reads down the rows).
      {"sum_cols", "reduction", "y[d] = sum_b x[b, d]", {"B", "D"}, {{"x", {"B", "D"}}},
       {{"y", {"D"}}}, {}, 1e-3, 1e-4, [](const OpCall& c) { return c.in[0].sum(0); },
       /*grid=*/"columns"},
      // Block partial sums, one atomicAdd per block.
      {"sum_all", "reduction", "y[0] = sum_i x[i]", {"N"}, {{"x", {"N"}}}, {{"y", {"1"}}}, {},
       1e-2, 1e-4, [](const OpCall& c) { return c.in[0].sum().reshape({1}); },
       /*grid=*/"atomic_all"},
  };
  return ops;
}

}  // namespace kernelrl
