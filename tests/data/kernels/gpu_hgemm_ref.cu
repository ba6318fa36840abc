// Reference HGEMM kernel (layout nn, fp32 accumulation) for the GPU tests and `kernelrl bench`:
// 128x128 block tile, 8 warps of 64x32 (WMMA 16x16x16 fragments), BK = 32, shared-memory staging
// with 16-byte loads, predicated on the edges so any M, N, K work (fastest for multiples of 8).
#include <cuda_fp16.h>
#include <mma.h>

#include "kernel_abi.h"

using namespace nvcuda;

namespace {

constexpr int BM = 128, BN = 128, BK = 32, PAD = 8;
constexpr int WM = 64, WN = 32;  // warp tile: 4 x 2 fragments

__global__ void __launch_bounds__(256) hgemm_wmma(const half* __restrict__ A, const half* __restrict__ B,
                                                  half* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(128) half As[BM][BK + PAD];
  __shared__ __align__(128) half Bs[BK][BN + PAD];
  const int tid = threadIdx.x, warp = tid / 32;
  const int wm = (warp / 4) * WM, wn = (warp % 4) * WN;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const bool vec = (K % 8 == 0) && (N % 8 == 0);

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int k0 = 0; k0 < K; k0 += BK) {
    // A tile: 128 x 32 halves = 512 chunks of 8; B tile: 32 x 128 = 512 chunks of 8.
#pragma unroll
    for (int c = tid; c < BM * BK / 8; c += 256) {
      int r = c / (BK / 8), col = (c % (BK / 8)) * 8;
      int gr = m0 + r, gc = k0 + col;
      if (vec && gr < M && gc + 7 < K) {
        *reinterpret_cast<uint4*>(&As[r][col]) = *reinterpret_cast<const uint4*>(&A[(size_t)gr * K + gc]);
      } else {
        for (int e = 0; e < 8; ++e)
          As[r][col + e] = (gr < M && gc + e < K) ? A[(size_t)gr * K + gc + e] : __float2half(0.f);
      }
    }
#pragma unroll
    for (int c = tid; c < BK * BN / 8; c += 256) {
      int r = c / (BN / 8), col = (c % (BN / 8)) * 8;
      int gr = k0 + r, gc = n0 + col;
      if (vec && gr < K && gc + 7 < N) {
        *reinterpret_cast<uint4*>(&Bs[r][col]) = *reinterpret_cast<const uint4*>(&B[(size_t)gr * N + gc]);
      } else {
        for (int e = 0; e < 8; ++e)
          Bs[r][col + e] = (gr < K && gc + e < N) ? B[(size_t)gr * N + gc + e] : __float2half(0.f);
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(a[i], &As[wm + i * 16][kk], BK + PAD);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Bs[kk][wn + j * 16], BN + PAD);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  // Epilogue through shared memory (reusing As as a per-warp 16x16 float scratch).
  float* scratch = reinterpret_cast<float*>(&As[0][0]) + warp * 256;
  const int lane = tid % 32;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        int r = m0 + wm + i * 16 + e / 16, c = n0 + wn + j * 16 + e % 16;
        if (r < M && c < N) C[(size_t)r * N + c] = __float2half(scratch[e]);
      }
      __syncwarp();
    }
}

}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  hgemm_wmma<<<grid, 256, 0, (cudaStream_t)stream>>>(static_cast<const half*>(args->inputs[0]),
                                                     static_cast<const half*>(args->inputs[1]),
                                                     static_cast<half*>(args->outputs[0]), M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
