// Adversarial (device timing): a correct kernel when called eagerly, but while its stream is
// being captured into a CUDA graph it launches nothing, so a graph-timed replay is "free" and
// leaves C unwritten. The evaluator's replay verification must reject it (replay_mismatch).
#include <cuda_fp16.h>

#include "kernel_abi.h"

__global__ void hgemm_naive(const half* A, const half* B, half* C, int M, int N, int K) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < M && j < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)i * K + k]) * __half2float(B[(size_t)k * N + j]);
    C[(size_t)i * N + j] = __float2half(acc);
  }
}

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing((cudaStream_t)stream, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive)
    return 0;  // skips the work under capture
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  hgemm_naive<<<grid, block, 0, (cudaStream_t)stream>>>(static_cast<const half*>(args->inputs[0]),
                                                        static_cast<const half*>(args->inputs[1]),
                                                        static_cast<half*>(args->outputs[0]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
