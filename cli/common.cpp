#include <torch/version.h>

#include <sstream>

#include "cli/commands.h"
#include "common/error.h"
#include "model/device.h"

namespace kernelrl::cli {

int exit_code = 0;

void not_built(const std::string& command, const std::string& what) {
  throw NotAvailableError("kernelrl " + command + ": not built yet (" + what + ")");
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string version_string() {
  std::string s = "kernelrl " KERNELRL_VERSION ", LibTorch " TORCH_VERSION;
#ifdef KERNELRL_HAVE_CUDA
  s += ", CUDA kernels built: yes";
#else
  s += ", CUDA kernels built: no (rebuild with a CUDA toolkit for the GPU evaluator)";
#endif
  int n = cuda_device_count();
  s += n > 0 ? ", CUDA available: yes (" + std::to_string(n) + " GPU" + (n > 1 ? "s" : "") + ")"
             : ", CUDA available: no";
  return s;
}

}  // namespace kernelrl::cli
