// The gate: one single-thread kernel on the legacy default stream that spins until the host
// opens it (or a cycle limit passes). Work a candidate launches on the legacy or per-thread
// default stream queues behind it, so after the candidate's own stream drains, its outputs show
// only what it did on that stream: work that escaped the stream is caught deterministically.
// The same kernel on the candidate's stream holds device-mode replays until they are all issued.
#include <cuda_runtime.h>

namespace kernelrl::worker {

__global__ void gate_kernel(const volatile int* open, long long max_cycles) {
  const long long t0 = clock64();
  while (*open == 0 && clock64() - t0 < max_cycles) {
  }
}

cudaError_t launch_gate(const int* open_device_ptr, long long max_cycles, cudaStream_t stream) {
  gate_kernel<<<1, 1, 0, stream>>>(open_device_ptr, max_cycles);
  return cudaGetLastError();
}

// Diagnostic probe (KERNELRL_TIMING_DIAG=probe): one small block that reads and writes 16 KiB,
// launched back-to-back; its device time per launch shows per-kernel overheads of the process.
__global__ void probe_kernel(float* p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  p[i] = p[i] * 0.5f + 1.0f;
}

cudaError_t launch_probe(float* data, cudaStream_t stream) {
  probe_kernel<<<16, 256, 0, stream>>>(data);
  return cudaGetLastError();
}

}  // namespace kernelrl::worker
