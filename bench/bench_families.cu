// Standalone HGEMM family bench (issue 5): loads compiled family variants (shared libraries
// exporting kernelrl_launch), checks each against a naive fp32-accumulating reference kernel on
// shapes with partial tiles, then times them at one shape against cuBLASLt autotuned (every
// algorithm of cublasLtMatmulAlgoGetHeuristic, best median kept) with CUDA events, interleaved,
// rotating 3 input sets. Built and run by bench/bench_families.sh on the GPU machine; not part
// of the CMake build (bench/CMakeLists.txt globs *.cpp).
//   bench_families M N K nn|tn f32|f16 lib.so [lib.so ...]
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/kernel_abi.h"

#define CUDA_CHECK(x)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define CUBLAS_CHECK(x)                                                                       \
  do {                                                                                        \
    cublasStatus_t s_ = (x);                                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                        \
      std::fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

using LaunchFn = int (*)(const kernelrl_args*, void*);

// C[m,n] = sum_k A[m,k] B(k,n) in fp32 (B row-major KxN for nn, column-major for tn).
__global__ void reference_gemm(const __half* A, const __half* B, float* C, int M, int N, int K,
                               bool tn) {
  int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
  if (n >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)m * K + k]) *
           __half2float(tn ? B[(size_t)n * K + k] : B[(size_t)k * N + n]);
  C[(size_t)m * N + n] = acc;
}

__global__ void fill_uniform(__half* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    h *= 3266489917u;
    h ^= h >> 16;
    x[i] = __float2half((h & 0xffffff) / 8388608.0f - 1.0f);  // uniform [-1, 1)
  }
}

struct Check {
  bool ok;
  double max_err, bound_ratio;
  int rc;
};

Check check(LaunchFn fn, int M, int N, int K, bool tn, bool acc16, void* ws, size_t ws_bytes) {
  __half *A, *B, *C;
  float* R;
  CUDA_CHECK(cudaMalloc(&A, (size_t)M * K * 2));
  CUDA_CHECK(cudaMalloc(&B, (size_t)K * N * 2));
  CUDA_CHECK(cudaMalloc(&C, (size_t)M * N * 2));
  CUDA_CHECK(cudaMalloc(&R, (size_t)M * N * 4));
  fill_uniform<<<512, 256>>>(A, (size_t)M * K, 1 + M);
  fill_uniform<<<512, 256>>>(B, (size_t)K * N, 7 + N);
  CUDA_CHECK(cudaMemset(C, 0xff, (size_t)M * N * 2));  // poison: fp16 NaN
  reference_gemm<<<dim3((N + 127) / 128, M), 128>>>(A, B, R, M, N, K, tn);
  CUDA_CHECK(cudaGetLastError());
  kernelrl_args a{};
  a.inputs[0] = A;
  a.inputs[1] = B;
  a.n_inputs = 2;
  a.outputs[0] = C;
  a.n_outputs = 1;
  a.dims[0] = M;
  a.dims[1] = N;
  a.dims[2] = K;
  a.n_dims = 3;
  a.workspace = ws;
  a.workspace_bytes = ws_bytes;
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  int rc = fn(&a, s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamDestroy(s));
  std::vector<__half> c((size_t)M * N);
  std::vector<float> r((size_t)M * N);
  CUDA_CHECK(cudaMemcpy(c.data(), C, c.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(r.data(), R, r.size() * 4, cudaMemcpyDeviceToHost));
  // Metric: |C - R| <= atol + rtol |R|. fp32 accumulation: one fp16 rounding of the result
  // (2^-11 relative) plus summation order; fp16 accumulation grows with sqrt(K) roundings.
  double atol = acc16 ? 0.05 * std::sqrt((double)K) : 0.02, rtol = acc16 ? 0.02 : 0.01;
  double worst = 0, max_err = 0;
  bool finite = true;
  for (size_t i = 0; i < c.size(); ++i) {
    double v = __half2float(c[i]);
    if (!std::isfinite(v)) {
      finite = false;
      break;
    }
    double e = std::fabs(v - r[i]);
    max_err = std::max(max_err, e);
    worst = std::max(worst, e / (atol + rtol * std::fabs(r[i])));
  }
  CUDA_CHECK(cudaFree(A));
  CUDA_CHECK(cudaFree(B));
  CUDA_CHECK(cudaFree(C));
  CUDA_CHECK(cudaFree(R));
  return {rc == 0 && finite && worst <= 1.0, finite ? max_err : INFINITY, finite ? worst : INFINITY,
          rc};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s M N K nn|tn f32|f16 lib.so...\n", argv[0]);
    return 2;
  }
  const int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
  const bool tn = std::string(argv[4]) == "tn", acc16 = std::string(argv[5]) == "f16";
  const size_t ws_bytes = 32u << 20;
  void* ws;
  CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, shape %dx%dx%d %s acc %s\n", prop.name, M, N, K, tn ? "tn" : "nn",
              acc16 ? "f16" : "f32");

  // Timing buffers: 3 rotating sets (A+B+C = 3 x 32 MiB at 4096^3) against L2 reuse across calls.
  constexpr int kSets = 3;
  __half *A[kSets], *B[kSets], *C[kSets];
  for (int i = 0; i < kSets; ++i) {
    CUDA_CHECK(cudaMalloc(&A[i], (size_t)M * K * 2));
    CUDA_CHECK(cudaMalloc(&B[i], (size_t)K * N * 2));
    CUDA_CHECK(cudaMalloc(&C[i], (size_t)M * N * 2));
    fill_uniform<<<512, 256>>>(A[i], (size_t)M * K, 11 + i);
    fill_uniform<<<512, 256>>>(B[i], (size_t)K * N, 23 + i);
  }
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));

  // cuBLASLt: row-major C = A B is column-major C^T = B^T A^T: m=N, n=M, k=K.
  cublasLtHandle_t lt;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t op;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, acc16 ? CUBLAS_COMPUTE_16F : CUBLAS_COMPUTE_32F,
                                        acc16 ? CUDA_R_16F : CUDA_R_32F));
  cublasOperation_t ta = tn ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la, lb, lc;
  if (tn)
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, K, N, K));  // B stored NxK row-major
  else
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, N, K, N));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, K, M, K));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, N, M, N));
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws_bytes, sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t heur[32];
  int n_algo = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 32, heur, &n_algo));
  float alpha_f = 1, beta_f = 0;
  __half alpha_h = __float2half(1.0f), beta_h = __float2half(0.0f);
  const void* alpha = acc16 ? (const void*)&alpha_h : (const void*)&alpha_f;
  const void* beta = acc16 ? (const void*)&beta_h : (const void*)&beta_f;
  auto lt_run = [&](int algo, int set) {
    CUBLAS_CHECK(cublasLtMatmul(lt, op, alpha, B[set], la, A[set], lb, beta, C[set], lc, C[set], lc,
                                &heur[algo].algo, ws, ws_bytes, stream));
  };
  auto time_one = [&](auto&& run, int iters) {
    std::vector<double> t;
    for (int i = 0; i < iters; ++i) {
      CUDA_CHECK(cudaEventRecord(e0, stream));
      run(i % kSets);
      CUDA_CHECK(cudaEventRecord(e1, stream));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1e3);
    }
    return median(t);
  };
  int best_algo = 0;
  double best_lt = INFINITY;
  for (int a = 0; a < n_algo; ++a) {
    for (int w = 0; w < 3; ++w) lt_run(a, w % kSets);
    double t = time_one([&](int set) { lt_run(a, set); }, 10);
    if (t < best_lt) {
      best_lt = t;
      best_algo = a;
    }
  }
  const double flop = 2.0 * M * N * K;
  std::printf("cuBLASLt autotuned: %d algorithms tried, best #%d %.1f us = %.1f TFLOP/s\n", n_algo,
              best_algo, best_lt, flop / best_lt * 1e-6);

  // Correctness shapes: partial block tiles in M and N (odd multiples of 64), then the timed shape.
  const int shapes[][3] = {{64, 64, 64}, {192, 320, 448}, {576, 64, 1024}, {1088, 1216, 256}};
  std::printf("%-75s %-6s %10s %10s %9s %8s\n", "variant", "check", "max_err", "median_us",
              "TFLOP/s", "% cuBLASLt");
  for (int li = 6; li < argc; ++li) {
    std::string path = argv[li];
    std::string name = path.substr(path.rfind('/') + 1);
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::printf("%-75s LOADFAIL %s\n", name.c_str(), dlerror());
      continue;
    }
    auto fn = (LaunchFn)dlsym(h, "kernelrl_launch");
    if (!fn) {
      std::printf("%-75s NOSYM\n", name.c_str());
      continue;
    }
    bool ok = true;
    double max_err = 0;
    for (auto& s : shapes) {
      Check c = check(fn, s[0], s[1], s[2], tn, acc16, ws, ws_bytes);
      ok &= c.ok;
      max_err = std::max(max_err, c.max_err);
      if (!c.ok)
        std::printf("  FAIL %s at %dx%dx%d: rc %d, max_err %.4g, worst/bound %.3g\n", name.c_str(),
                    s[0], s[1], s[2], c.rc, c.max_err, c.bound_ratio);
    }
    Check c = check(fn, M, N, K, tn, acc16, ws, ws_bytes);
    ok &= c.ok;
    max_err = std::max(max_err, c.max_err);
    if (!c.ok)
      std::printf("  FAIL %s at %dx%dx%d: rc %d, max_err %.4g, worst/bound %.3g\n", name.c_str(), M,
                  N, K, c.rc, c.max_err, c.bound_ratio);
    kernelrl_args args[kSets];
    for (int i = 0; i < kSets; ++i) {
      args[i] = kernelrl_args{};
      args[i].inputs[0] = A[i];
      args[i].inputs[1] = B[i];
      args[i].n_inputs = 2;
      args[i].outputs[0] = C[i];
      args[i].n_outputs = 1;
      args[i].dims[0] = M;
      args[i].dims[1] = N;
      args[i].dims[2] = K;
      args[i].n_dims = 3;
      args[i].workspace = ws;
      args[i].workspace_bytes = ws_bytes;
    }
    for (int w = 0; w < 3; ++w) fn(&args[w % kSets], stream);
    // Interleaved: candidate, cuBLASLt best, candidate, ... (medians of each).
    std::vector<double> tc, tl;
    for (int i = 0; i < 15; ++i) {
      tc.push_back(time_one([&](int set) { fn(&args[set], stream); }, 1));
      tl.push_back(time_one([&](int set) { lt_run(best_algo, set); }, 1));
    }
    double mc = median(tc), ml = median(tl);
    std::printf("%-75s %-6s %10.4g %10.1f %9.1f %7.1f%%  (cuBLASLt %.1f us)\n", name.c_str(),
                ok ? "ok" : "FAIL", max_err, mc, flop / mc * 1e-6, 100.0 * ml / mc, ml);
    std::fflush(stdout);
  }
  return 0;
}
