// Gather and scatter ops (family `gather_scatter`): int64 indices into rows or along rows.
#include <ATen/ATen.h>

#include "data/tasks/task_ops.h"

namespace kernelrl {

std::vector<OpInfo> gather_scatter_ops() {
  return {
      {"gather_rows", "gather_scatter", "y[i, :] = table[idx[i], :] (idx int64)", {"V", "D", "N"},
       {{"table", {"V", "D"}}, {"idx", {"N"}, "i64", "index", "V"}}, {{"y", {"N", "D"}}}, {}, 0, 0,
       [](const OpCall& c) { return at::index_select(c.in[0], 0, c.in[1]); }},
      // Zero the output, then atomicAdd per source element.
      {"scatter_add_rows", "gather_scatter",
       "y = zeros(V, D); y[idx[i], :] += src[i, :] for every i (idx int64)", {"V", "D", "N"},
       {{"src", {"N", "D"}}, {"idx", {"N"}, "i64", "index", "V"}}, {{"y", {"V", "D"}}}, {}, 1e-4,
       1e-4,
       [](const OpCall& c) {
         return at::zeros({c.sizes.at("V"), c.in[0].size(1)}, c.in[0].options())
             .index_add_(0, c.in[1], c.in[0]);
       },
       /*grid=*/"scatter_add"},
      {"take_along_rows", "gather_scatter", "y[b] = x[b, idx[b]] (idx int64)", {"B", "D"},
       {{"x", {"B", "D"}}, {"idx", {"B"}, "i64", "index", "D"}}, {{"y", {"B"}}}, {}, 0, 0,
       [](const OpCall& c) { return c.in[0].gather(1, c.in[1].unsqueeze(1)).squeeze(1); }},
  };
}

}  // namespace kernelrl
