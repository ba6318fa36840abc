// First GPU check: allocate, run a cuBLASLt fp16 GEMM with fp32 accumulation, and compare
// with an fp64 CPU reference of the same fp16 inputs. Skips where no GPU is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#ifdef KERNELRL_HAVE_CUDA
#include <cuda_fp16.h>

#include "gpu_test_util.h"
#include "common/cuda_check.h"
#endif

namespace kernelrl {
namespace {

#ifdef KERNELRL_HAVE_CUDA
TEST(GpuSmoke, CublasLtHgemmMatchesCpuReference) {
  REQUIRE_CUDA();
  const int M = 192, N = 320, K = 256;  // row-major A (MxK), B (KxN), C (MxN)
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<__half> a(M * K), b(K * N), c(M * N, __float2half(NAN));
  for (auto& x : a) x = __float2half(dist(rng));
  for (auto& x : b) x = __float2half(dist(rng));

  __half *da, *db, *dc;
  CUDA_CHECK(cudaMalloc(&da, a.size() * sizeof(__half)));
  CUDA_CHECK(cudaMalloc(&db, b.size() * sizeof(__half)));
  CUDA_CHECK(cudaMalloc(&dc, c.size() * sizeof(__half)));
  CUDA_CHECK(cudaMemcpy(da, a.data(), a.size() * sizeof(__half), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, b.data(), b.size() * sizeof(__half), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dc, 0xFF, c.size() * sizeof(__half)));  // poison: 0xFFFF is NaN

  cublasLtHandle_t lt;
  CUDA_CHECK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t op;
  CUDA_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: pass B as the first operand.
  cublasLtMatrixLayout_t lb, la, lc;
  CUDA_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, N, K, N));
  CUDA_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, K, M, K));
  CUDA_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, N, M, N));
  void* workspace;
  const size_t ws_bytes = 32 << 20;
  CUDA_CHECK(cudaMalloc(&workspace, ws_bytes));
  cublasLtMatmulPreference_t pref;
  CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws_bytes, sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  CUDA_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, lb, la, lc, lc, pref, 1, &heur, &found));
  ASSERT_GT(found, 0);
  const float alpha = 1.f, beta = 0.f;
  CUDA_CHECK(cublasLtMatmul(lt, op, &alpha, db, lb, da, la, &beta, dc, lc, dc, lc, &heur.algo,
                            workspace, ws_bytes, nullptr));
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(c.data(), dc, c.size() * sizeof(__half), cudaMemcpyDeviceToHost));

  // Metric: max |C - C_ref| over |C_ref| scale; fp16 output rounding bounds it by ~2^-11
  // relative to each element, so 1e-2 absolute on values of magnitude ~16 is generous.
  double max_err = 0, ref_norm = 0, err_norm = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0;
      for (int k = 0; k < K; ++k)
        ref += double(__half2float(a[i * K + k])) * double(__half2float(b[k * N + j]));
      double got = __half2float(c[i * N + j]);
      ASSERT_FALSE(std::isnan(got)) << "element (" << i << "," << j << ") not written";
      max_err = std::max(max_err, std::fabs(got - ref));
      err_norm += (got - ref) * (got - ref);
      ref_norm += ref * ref;
    }
  EXPECT_LT(std::sqrt(err_norm / ref_norm), 1e-3);
  EXPECT_LT(max_err, 0.05);

  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);
  CUDA_CHECK(cudaFree(workspace));
  CUDA_CHECK(cudaFree(da));
  CUDA_CHECK(cudaFree(db));
  CUDA_CHECK(cudaFree(dc));
}
#else
TEST(GpuSmoke, CublasLtHgemmMatchesCpuReference) {
  GTEST_SKIP() << "built without CUDA";
}
#endif

}  // namespace
}  // namespace kernelrl
