#include "model/device.h"

#include <torch/cuda.h>

#include "common/error.h"

namespace kernelrl {

int cuda_device_count() {
  try {
    return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

namespace {
int g_cuda_index = 0;
}

void set_default_cuda_index(int index) { g_cuda_index = index; }

torch::Device resolve_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  const bool have = cuda_device_count() > 0;
  if (name == "cuda" && !have)
    throw NotAvailableError("run.device is cuda but no CUDA device is visible to this process");
  if (name == "cuda" || (name == "auto" && have)) return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(g_cuda_index));
  if (name == "auto") return torch::kCPU;
  throw UserError("run.device: expected one of auto, cpu, cuda, got \"" + name + "\"");
}

}  // namespace kernelrl
