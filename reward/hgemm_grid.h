// HGEMM shape grids for `kernelrl bench`: the 1,000-config grid (M, N, K each in {64, 128, 256,
// 512, 1024, 2048, 4096, 8192, 12288, 16384}), the 27-shape `small` subset ({256, 4096,
// 16384}³) and shape files (one MxNxK per line, '#' comments).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kernelrl {

using HgemmShape = std::array<int64_t, 3>;  // M, N, K

const std::vector<int64_t>& hgemm_grid_sizes();
// "full", "small", or a path to a shape file; throws UserError for a bad file or line.
std::vector<HgemmShape> hgemm_grid(const std::string& name_or_file);

}  // namespace kernelrl
