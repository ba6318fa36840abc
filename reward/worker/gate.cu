// The gate: one single-thread kernel on the legacy default stream that spins until the host
// opens it (or a cycle limit passes). Work a candidate launches on the legacy or per-thread
// default stream queues behind it, so after the candidate's own stream drains, its outputs show
// only what it did on that stream: work that escaped the stream is caught deterministically.
// The same kernel on the candidate's stream holds device-mode replays until they are all issued.
// The clock stamp beside them reads each SM's cycle counter and the global nanosecond timer, so
// that two stamps around a timed replay give the SM clock it ran at.
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

// One thread per block writes (global timer ns, SM cycle counter) into slot `smid`; launched with
// more blocks than SMs, so nearly every SM holds a block. Slots of SMs without one stay 0.
__global__ void clock_stamp_kernel(unsigned long long* slots, unsigned n_slots) {
  if (threadIdx.x != 0) return;
  unsigned smid;
  unsigned long long ns;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  const long long cycles = clock64();
  if (smid < n_slots) {
    slots[2 * smid] = ns;
    slots[2 * smid + 1] = static_cast<unsigned long long>(cycles);
  }
}

cudaError_t launch_clock_stamp(unsigned long long* slots, unsigned n_slots, int blocks, cudaStream_t stream) {
  clock_stamp_kernel<<<blocks, 32, 0, stream>>>(slots, n_slots);
  return cudaGetLastError();
}

}  // namespace kernelrl::worker
