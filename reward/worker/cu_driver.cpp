#include "reward/worker/cu_driver.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace kernelrl::worker {

namespace {

CuDriver resolve() {
  CuDriver d;
  auto get = [](const char* name, void** fn) {
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion(name, fn, CUDA_VERSION, cudaEnableDefault, &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess || !*fn)
      throw std::runtime_error(std::string("the CUDA driver has no ") + name + " (CUDA " +
                               std::to_string(CUDA_VERSION) + " ABI)");
  };
  // #f is the name as written here (the unversioned driver symbol); the member is cuda.h's.
#define KRL_CU_RESOLVE(f) get(#f, reinterpret_cast<void**>(&d.f));
  KRL_CU_FUNCTIONS(KRL_CU_RESOLVE)
#undef KRL_CU_RESOLVE
  return d;
}

}  // namespace

const CuDriver& cu() {
  static const CuDriver d = resolve();
  return d;
}

}  // namespace kernelrl::worker
