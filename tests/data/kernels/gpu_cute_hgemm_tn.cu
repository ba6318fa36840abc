// A CuTe-based HGEMM candidate (layout tn: A M x K and B N x K, both K-major; fp32 accumulation):
// 128x128x32 CTA tiles staged in shared memory with 16-byte copies, a TiledMMA of four warps
// over the SM80 16x8x16 fp16 -> fp32 tensor-core atom (mma.sync, valid on sm_90a), fp16
// epilogue. Shapes must be multiples of the tile (returns 2 otherwise). It exists to show that
// candidates may use CuTe/CUTLASS with the headers the evaluator provides.
#include <cute/tensor.hpp>

#include "kernel_abi.h"

using namespace cute;

template <class TiledMma>
__global__ void __launch_bounds__(128) cute_hgemm_tn(const half_t* A, const half_t* B, half_t* C,
                                                      int M, int N, int K, TiledMma mma) {
  auto tiler = make_shape(Int<128>{}, Int<128>{}, Int<32>{});
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(K, Int<1>{}));
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(K, Int<1>{}));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, Int<1>{}));
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});  // (128, 32, k)
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});  // (128, 32, k)
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});  // (128, 128)

  __shared__ alignas(128) half_t smem_a[128 * 32];
  __shared__ alignas(128) half_t smem_b[128 * 32];
  auto s_layout = make_layout(make_shape(Int<128>{}, Int<32>{}), make_stride(Int<32>{}, Int<1>{}));
  Tensor sA = make_tensor(make_smem_ptr(smem_a), s_layout);
  Tensor sB = make_tensor(make_smem_ptr(smem_b), s_layout);

  // 128 threads x 8 halves: 32 rows x 4 chunks of the 128 x 32 tile per pass.
  auto g2s = make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, half_t>{},
                             make_layout(make_shape(Int<32>{}, Int<4>{}), make_stride(Int<4>{}, Int<1>{})),
                             make_layout(make_shape(Int<1>{}, Int<8>{})));
  auto thr_copy = g2s.get_slice(threadIdx.x);
  Tensor tAgA = thr_copy.partition_S(gA);
  Tensor tAsA = thr_copy.partition_D(sA);
  Tensor tBgB = thr_copy.partition_S(gB);
  Tensor tBsB = thr_copy.partition_D(sB);

  auto thr_mma = mma.get_slice(threadIdx.x);
  Tensor tCsA = thr_mma.partition_A(sA);
  Tensor tCsB = thr_mma.partition_B(sB);
  Tensor tCrA = thr_mma.partition_fragment_A(sA);
  Tensor tCrB = thr_mma.partition_fragment_B(sB);
  Tensor tCgC = thr_mma.partition_C(gC);
  Tensor tCrC = thr_mma.partition_fragment_C(gC);  // fp32 accumulators (the atom's C type)
  clear(tCrC);

  const int k_tiles = size<2>(gA);
  for (int kt = 0; kt < k_tiles; ++kt) {
    copy(g2s, tAgA(_, _, _, kt), tAsA);
    copy(g2s, tBgB(_, _, _, kt), tBsB);
    __syncthreads();
    copy(tCsA, tCrA);
    copy(tCsB, tCrB);
    gemm(mma, tCrA, tCrB, tCrC);
    __syncthreads();
  }
  for (int i = 0; i < size(tCrC); ++i) tCgC(i) = half_t(tCrC(i));
}

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  const int M = (int)args->dims[0], N = (int)args->dims[1], K = (int)args->dims[2];
  if (M % 128 || N % 128 || K % 32) return 2;
  auto mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{}, Layout<Shape<_2, _2, _1>>{});
  dim3 grid(M / 128, N / 128);
  cute_hgemm_tn<<<grid, 128, 0, (cudaStream_t)stream>>>(
      static_cast<const half_t*>(args->inputs[0]), static_cast<const half_t*>(args->inputs[1]),
      static_cast<half_t*>(args->outputs[0]), M, N, K, mma);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
