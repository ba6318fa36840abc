// Calls a CUDA runtime function the shim capture does not provide (cudaGraphCreate): with
// reward.capture: shim the candidate fails before it loads with `cudart_unsupported`
// (tests/unit/shim/test_shim_capture.cpp).
#include "kernel_abi.h"

__global__ void shim_c(float* out) { out[threadIdx.x] = 0.f; }

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  cudaGraph_t g;
  if (cudaGraphCreate(&g, 0) == cudaSuccess) cudaGraphDestroy(g);
  shim_c<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<float*>(args->outputs[0]));
  return 0;
}
