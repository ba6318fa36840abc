// Adversarial (issue 38, item 2; reward integrity, cold L2): gpu_l2_tiled.cu whose calls also
// prefetch the next timing set's A and B into L2 (prefetch.global.L2). The host code learns the
// stride between timing sets from the pointers of consecutive captured calls and passes it as
// an integer, so no parameter word names another set (the peer-word check sees nothing) and the
// outputs are its own (the call-boundary replay sees nothing). With timing sets at a constant
// stride replayed in capture order it won 6-7 % at 64^3-256^3 (H200, 2026-11-28). Expected now
// (sets at random offsets, replayed in an order drawn after capture): ok, cold time within the
// noise of gpu_l2_tiled.cu's. With reward.capture: shim each call is captured in a fresh child
// of the runner (docs/sandbox.md), so g_prev_* are always 0 and it learns no stride at all
// (PREFETCH_TELL makes that visible as a verdict).
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdlib>

#include "kernel_abi.h"

constexpr int kTile = 16;

__global__ void hgemm_tiled(const half* A, const half* B, half* C, int M, int N, int K, long long stride_a,
                            long long stride_b) {
  __shared__ float As[kTile][kTile], Bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  // The next set's A and B, 128-byte lines spread over every thread of the grid.
  if (stride_a != 0 && stride_b != 0) {
    const size_t threads = (size_t)gridDim.x * gridDim.y * blockDim.x * blockDim.y;
    const size_t me = ((size_t)blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y + ty * blockDim.x + tx;
    const char* na = reinterpret_cast<const char*>(A) + stride_a;
    const char* nb = reinterpret_cast<const char*>(B) + stride_b;
    const size_t la = ((size_t)M * K * sizeof(half) + 127) / 128, lb = ((size_t)K * N * sizeof(half) + 127) / 128;
    for (size_t l = me; l < la + lb; l += threads) {
      const char* p = l < la ? na + 128 * l : nb + 128 * (l - la);
      asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
    }
  }
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    As[ty][tx] = (row < M && k0 + tx < K) ? __half2float(A[(size_t)row * K + k0 + tx]) : 0.f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? __half2float(B[(size_t)(k0 + ty) * N + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = __float2half(acc);
}

// The previous call's pointers (the runner captures the timing sets one after another).
static intptr_t g_prev_a = 0, g_prev_b = 0;

extern "C" int kernelrl_launch(const kernelrl_args* a, void* stream) {
  const int M = (int)a->dims[0], N = (int)a->dims[1], K = (int)a->dims[2];
  const intptr_t pa = (intptr_t)a->inputs[0], pb = (intptr_t)a->inputs[1];
  long long sa = g_prev_a ? (long long)(pa - g_prev_a) : 0, sb = g_prev_b ? (long long)(pb - g_prev_b) : 0;
  // Only a plausible stride (a timing set's neighbour, not a check trial's far-away buffer).
  const long long limit = 256ll << 20;
  if (sa == 0 || sb == 0 || llabs(sa) > limit || llabs(sb) > limit) sa = sb = 0;
#ifdef PREFETCH_TELL
  // Tells RewardL2Gpu that a stride was learned (nonzero_return): with the shim runner's capture
  // children no capture sees the previous one, so this never fires there.
  if (sa != 0) return 1;
#endif
  g_prev_a = pa;
  g_prev_b = pb;
  dim3 block(kTile, kTile), grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
  hgemm_tiled<<<grid, block, 0, (cudaStream_t)stream>>>((const half*)a->inputs[0], (const half*)a->inputs[1],
                                                        (half*)a->outputs[0], M, N, K, sa, sb);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
