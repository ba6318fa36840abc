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

// The L2 flush (issue 38: cold means cold, whatever the candidate does). A plain write pass over
// twice the L2 evicts lines of normal priority only: lines a candidate loaded with an L2
// evict_last policy (createpolicy + ld.global.L2::cache_hint, or a persisting access window) sit
// in the persisting set-aside and survive it. Pass 1 writes the flush buffer with an evict_last
// policy of its own, so it competes with those lines in the set-aside and, writing more than the
// whole L2, evicts them. Pass 2 demotes each flush line to normal priority (applypriority) and
// writes it again with normal priority, so no evict_last line of the flush stays behind to
// shrink the L2 the timed replay gets, and every normal line is evicted as by the plain pass.
// 16-byte stores; `words` counts uint4s.
__global__ void flush_evict_last_kernel(uint4* p, size_t words, unsigned v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %1, %1, %1}, %2;" ::"l"(p + i), "r"(v), "l"(policy)
                 : "memory");
#else
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = make_uint4(v, v, v, v);
#endif
}

__global__ void flush_normal_kernel(uint4* p, size_t words, unsigned v) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if ((i & 7) == 0) asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(p + i) : "memory");
#endif
    p[i] = make_uint4(v, v, v, v);
  }
}

cudaError_t launch_flush(void* buffer, size_t bytes, unsigned value, bool evict_last_pass, int sms,
                         cudaStream_t stream) {
  const size_t words = bytes / sizeof(uint4);
  const int blocks = 4 * (sms > 0 ? sms : 132);
  if (evict_last_pass) flush_evict_last_kernel<<<blocks, 512, 0, stream>>>(static_cast<uint4*>(buffer), words, value);
  flush_normal_kernel<<<blocks, 512, 0, stream>>>(static_cast<uint4*>(buffer), words, value + 1);
  return cudaGetLastError();
}

}  // namespace kernelrl::worker
