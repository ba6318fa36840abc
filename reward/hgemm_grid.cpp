#include "reward/hgemm_grid.h"

#include <fstream>

#include "common/error.h"
#include "reward/task_json.h"

namespace kernelrl {

const std::vector<int64_t>& hgemm_grid_sizes() {
  static const std::vector<int64_t> s = {64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384};
  return s;
}

std::vector<HgemmShape> hgemm_grid(const std::string& name) {
  std::vector<HgemmShape> out;
  auto cube = [&](const std::vector<int64_t>& sizes) {
    for (auto m : sizes)
      for (auto n : sizes)
        for (auto k : sizes) out.push_back({m, n, k});
  };
  if (name == "full") {
    cube(hgemm_grid_sizes());
  } else if (name == "small") {
    cube({256, 4096, 16384});
  } else {
    std::ifstream in(name);
    if (!in)
      throw UserError("--grid: \"" + name + "\" is not full, small or a readable file of MxNxK lines");
    std::string line;
    for (int no = 1; std::getline(in, line); ++no) {
      auto hash = line.find('#');
      if (hash != std::string::npos) line.erase(hash);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      HgemmShape s;
      try {
        parse_shape(line, s[0], s[1], s[2]);
      } catch (const UserError& e) {
        throw UserError(name + ":" + std::to_string(no) + ": " + e.what());
      }
      out.push_back(s);
    }
    if (out.empty()) throw UserError("--grid: " + name + " lists no shapes");
  }
  return out;
}

}  // namespace kernelrl
