// Standalone device-time benchmark of the hgemm_wgmma family (kernels/hgemm_wgmma.cuh) against
// cuBLASLt, no LibTorch. Per shape and layout: every variant and every algorithm that
// cublasLtMatmulAlgoGetHeuristic returns is captured as a CUDA graph of CALLS back-to-back calls,
// call i on input set i (distinct buffers); before each timed replay, untimed: fresh standard
// normal values into every set and a 2xL2 memset that flushes the L2. Replays are interleaved in
// a random order each round; a contender's time is its median replay / CALLS.
//   lt-heur: cuBLASLt's first heuristic algorithm; lt-auto: the fastest of all returned
//   algorithms (a pre-pass of PRE rounds picks it, then it is timed with the variants).
// Correctness: each variant's output on set 0 (poisoned with NaN first) against lt-auto's,
// ||C - C_lt|| / ||C_lt|| in double; a variant over 5e-3 or with a non-finite value FAILs and is
// not timed.
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I. \
//        bench/bench_wgmma.cu -lcublasLt -o bench_wgmma
//   ./bench_wgmma [--shapes 4096x4096x4096:nn,...] [--rounds R] [--pre P] [--only SUBSTR,...]
#include "kernels/kernel_abi.h"
#include "kernels/hgemm_wgmma.cuh"

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
#define CKL(x)                                                                            \
  do {                                                                                    \
    cublasStatus_t s_ = (x);                                                              \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                    \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)s_);     \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

namespace {

constexpr int kCalls = 20;
constexpr size_t kWorkspace = 32u << 20;
using LaunchFn = int (*)(const kernelrl_args*, void*);

struct Variant {
  std::string name;
  bool tn;
  LaunchFn fn;
  int (*max_clusters)();  // how many clusters of the kernel fit on the device at once
};

template <class Cfg>
int max_clusters() {
  auto k = hgemm_wgmma::gemm_kernel<Cfg>;
  if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES) !=
      cudaSuccess)
    return -1;
  cudaLaunchConfig_t lc = {};
  lc.gridDim = dim3(Cfg::CLUSTER * 64);
  lc.blockDim = dim3(Cfg::THREADS);
  lc.dynamicSmemBytes = Cfg::SMEM_BYTES;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = Cfg::CLUSTER;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  lc.attrs = at;
  lc.numAttrs = 1;
  int n = 0;
  return cudaOccupancyMaxActiveClusters(&n, k, &lc) == cudaSuccess ? n : -2;
}

template <int BM, int BN, int BK, int ST, int CO, int CL, int RA, int SW, int SK, int EPI>
void add(std::vector<Variant>& v) {
  char name[128];
  std::snprintf(name, sizeof name, "m%dn%dk%d_s%d_c%d_x%d_r%d_w%d_sk%d_e%d", BM, BN, BK, ST, CO,
                CL, RA, SW, SK, EPI);
  using Nn = hgemm_wgmma::Config<BM, BN, BK, ST, CO, CL, false, RA, SW, SK, EPI>;
  using Tn = hgemm_wgmma::Config<BM, BN, BK, ST, CO, CL, true, RA, SW, SK, EPI>;
  v.push_back({std::string(name) + "_nn", false, &hgemm_wgmma::run<Nn>, &max_clusters<Nn>});
  v.push_back({std::string(name) + "_tn", true, &hgemm_wgmma::run<Tn>, &max_clusters<Tn>});
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
  // Run 1 (2026-11-23, H100): 128x256 s4 with bands of 16 tile rows was the best at 4096^3 and
  // 8192^3; direct stores, BK 128 and 128x192 lost; 2-CTA clusters ran 2.4x slower (a
  // cluster-scope release on the stage arrivals, since fixed: at par in run 2).
  //  BM   BN  BK ST CO CL RA SW SK EPI
  add<128, 256, 64, 4, 2, 1, 1, 16, 1, 1>(v);
  add<128, 256, 64, 4, 2, 1, 1, 8, 1, 1>(v);
  add<128, 256, 64, 4, 2, 1, 1, 32, 1, 1>(v);
  add<128, 256, 64, 4, 2, 1, 0, 16, 1, 1>(v);
  add<128, 256, 64, 4, 2, 1, 0, 8, 1, 1>(v);
  add<128, 256, 64, 3, 2, 1, 1, 16, 1, 1>(v);
  add<128, 256, 64, 4, 2, 2, 1, 16, 1, 1>(v);
  add<128, 256, 64, 4, 2, 2, 0, 8, 1, 1>(v);
  add<256, 128, 64, 4, 2, 1, 1, 16, 1, 1>(v);
  add<256, 128, 64, 4, 2, 2, 0, 8, 1, 1>(v);
  add<128, 128, 64, 6, 2, 1, 0, 8, 1, 1>(v);
  add<128, 128, 64, 6, 2, 2, 0, 8, 1, 1>(v);
  add<128, 128, 64, 6, 2, 1, 0, 8, 2, 1>(v);
  add<128, 64, 64, 8, 2, 1, 0, 8, 1, 1>(v);
  add<64, 128, 64, 8, 1, 1, 0, 8, 1, 1>(v);
  add<64, 256, 64, 4, 1, 1, 0, 8, 1, 1>(v);
  add<64, 128, 64, 8, 1, 1, 0, 8, 2, 0>(v);
  return v;
}

__device__ unsigned mix(unsigned x) {
  x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; x *= 3266489917u; x ^= x >> 16;
  return x;
}
// Standard normal values (Box-Muller over a counter hash), as the evaluator draws them.
__global__ void fill_random(half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned a = mix((unsigned)i * 2654435761u ^ seed * 2246822519u), b = mix(a ^ 0x9e3779b9u);
    float u1 = (a + 1.0f) * 2.3283064e-10f, u2 = b * 2.3283064e-10f;
    p[i] = __float2half(sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}
// sums[0] += (c - r)^2, sums[1] += r^2, sums[2] += non-finite c.
__global__ void diff_norms(const half* c, const half* r, size_t n, double* sums) {
  double d = 0, rr = 0, bad = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float x = __half2float(c[i]), y = __half2float(r[i]);
    if (!isfinite(x)) bad += 1;
    else d += (double)(x - y) * (x - y);
    rr += (double)y * y;
  }
  for (int o = 16; o; o >>= 1) {
    d += __shfl_xor_sync(~0u, d, o);
    rr += __shfl_xor_sync(~0u, rr, o);
    bad += __shfl_xor_sync(~0u, bad, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(sums, d);
    atomicAdd(sums + 1, rr);
    atomicAdd(sums + 2, bad);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Set {
  half *a, *b, *c;
};

}  // namespace

int main(int argc, char** argv) {
  std::string shapes_arg =
      "4096x4096x4096:nn,4096x4096x4096:tn,8192x8192x8192:nn,8192x8192x8192:tn,"
      "1024x1024x1024:nn,2048x2048x2048:nn,4096x4096x1024:nn,128x8192x8192:nn";
  std::string only;
  int rounds = 10, pre = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--shapes") shapes_arg = argv[i + 1];
    else if (k == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (k == "--pre") pre = std::atoi(argv[i + 1]);
    else if (k == "--only") only = argv[i + 1];
  }
  struct Shape {
    long m, n, k;
    std::string layout;
  };
  std::vector<Shape> shapes;
  {
    std::stringstream ss(shapes_arg);
    for (std::string t; std::getline(ss, t, ',');) {
      Shape s{};
      char lay[8] = "nn";
      if (std::sscanf(t.c_str(), "%ldx%ldx%ld:%2s", &s.m, &s.n, &s.k, lay) < 3) {
        std::fprintf(stderr, "bad shape %s (MxNxK:nn|tn)\n", t.c_str());
        return 2;
      }
      s.layout = lay;
      shapes.push_back(s);
    }
  }
  auto selected = [&](const std::string& name) {
    if (only.empty()) return true;
    std::stringstream ss(only);
    for (std::string t; std::getline(ss, t, ',');)
      if (name.find(t) != std::string::npos) return true;
    return false;
  };
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasLtHandle_t lt;
  CKL(cublasLtCreate(&lt));
  void* ws;
  CK(cudaMalloc(&ws, kWorkspace));
  size_t flush_bytes = 2 * static_cast<size_t>(prop.l2CacheSize);
  void* flush;
  CK(cudaMalloc(&flush, flush_bytes));
  double* sums;
  CK(cudaMalloc(&sums, 3 * sizeof(double)));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::mt19937 rng(7);
  const auto all = variants();
  std::printf("device,%s,sms,%d\n", prop.name, prop.multiProcessorCount);
  for (const auto& v : all)
    if (selected(v.name)) std::printf("max_active_clusters,%s,%d\n", v.name.c_str(), v.max_clusters());
  std::printf("M,N,K,layout,contender,status,rel_err,device_us,tflops,vs_lt_auto\n");
  struct Summary {
    std::string shape, best;
    double heur_us, auto_us, best_us;
  };
  std::vector<Summary> summary;

  for (const auto& s : shapes) {
    const bool tn = s.layout == "tn";
    size_t free_b, total_b;
    CK(cudaMemGetInfo(&free_b, &total_b));
    size_t set_bytes = 2 * (s.m * s.k + s.k * s.n + s.m * s.n);
    int n_sets = (int)std::max<size_t>(1, std::min<size_t>(kCalls, free_b * 6 / 10 / set_bytes));
    std::vector<Set> sets(n_sets);
    for (auto& st : sets) {
      CK(cudaMalloc(&st.a, 2 * s.m * s.k));
      CK(cudaMalloc(&st.b, 2 * s.k * s.n));
      CK(cudaMalloc(&st.c, 2 * s.m * s.n));
    }
    half* ref;
    CK(cudaMalloc(&ref, 2 * s.m * s.n));
    unsigned seed = 1;
    auto refresh = [&] {
      for (auto& st : sets) {
        fill_random<<<1024, 256, 0, stream>>>(st.a, s.m * s.k, seed++);
        fill_random<<<1024, 256, 0, stream>>>(st.b, s.k * s.n, seed++);
      }
    };
    // Row-major C[M,N] = A B is column-major C^T = B^T A^T (as bench_lt_graph.cu).
    cublasLtMatmulDesc_t op;
    CKL(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = tn ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    CKL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CKL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtMatrixLayout_t la, lb, lc;
    if (tn) CKL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, s.k, s.n, s.k));
    else CKL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, s.n, s.k, s.n));
    CKL(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, s.k, s.m, s.k));
    CKL(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, s.n, s.m, s.n));
    cublasLtMatmulPreference_t pref;
    CKL(cublasLtMatmulPreferenceCreate(&pref));
    size_t wsb = kWorkspace;
    CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                             sizeof wsb));
    cublasLtMatmulHeuristicResult_t heur[32];
    int found = 0;
    CKL(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 32, heur, &found));
    const float alpha = 1.f, beta = 0.f;
    auto lt_call = [&](int algo, const Set& st, half* c) {
      return cublasLtMatmul(lt, op, &alpha, st.b, la, st.a, lb, &beta, c, lc, c, lc,
                            &heur[algo].algo, ws, kWorkspace, stream);
    };

    // A contender: a graph of kCalls calls, each on its own set.
    struct Contender {
      std::string name;
      cudaGraphExec_t g;
      std::vector<double> us;
    };
    auto capture = [&](auto&& call) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      for (int i = 0; i < kCalls; ++i) call(sets[i % n_sets]);
      CK(cudaStreamEndCapture(stream, &g));
      cudaGraphExec_t ge;
      CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphDestroy(g));
      CK(cudaGraphLaunch(ge, stream));  // upload + warm-up
      CK(cudaStreamSynchronize(stream));
      return ge;
    };
    auto time_round = [&](std::vector<Contender>& cs, int r) {
      std::vector<size_t> order(cs.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t i : order) {
        refresh();
        CK(cudaMemsetAsync(flush, r & 0xff, flush_bytes, stream));
        CK(cudaEventRecord(e0, stream));
        CK(cudaGraphLaunch(cs[i].g, stream));
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        cs[i].us.push_back(ms * 1000.0 / kCalls);
      }
    };

    refresh();
    CK(cudaStreamSynchronize(stream));
    // cuBLASLt pre-pass: every algorithm that runs, PRE rounds, pick the fastest.
    std::vector<Contender> lts;
    std::vector<int> lt_algo;
    for (int a = 0; a < found; ++a) {
      if (lt_call(a, sets[0], sets[0].c) != CUBLAS_STATUS_SUCCESS) continue;
      CK(cudaStreamSynchronize(stream));
      lts.push_back({"lt_algo" + std::to_string(a),
                     capture([&](const Set& st) { CKL(lt_call(a, st, st.c)); }), {}});
      lt_algo.push_back(a);
    }
    for (int r = 0; r < pre; ++r) time_round(lts, r);
    size_t best_lt = 0;
    for (size_t i = 1; i < lts.size(); ++i)
      if (median(lts[i].us) < median(lts[best_lt].us)) best_lt = i;
    const int heur_algo = lt_algo[0], auto_algo = lt_algo[best_lt];
    for (auto& c : lts) CK(cudaGraphExecDestroy(c.g));
    // The reference output: lt-auto on set 0.
    CKL(lt_call(auto_algo, sets[0], ref));
    CK(cudaStreamSynchronize(stream));

    std::vector<Contender> cs;
    cs.push_back({"lt-heur", capture([&](const Set& st) { CKL(lt_call(heur_algo, st, st.c)); }), {}});
    cs.push_back({"lt-auto", capture([&](const Set& st) { CKL(lt_call(auto_algo, st, st.c)); }), {}});
    std::vector<double> errs(2, 0.0);
    for (const auto& v : all) {
      if (v.tn != tn || !selected(v.name)) continue;
      kernelrl_args args{};
      args.inputs[0] = sets[0].a;
      args.inputs[1] = sets[0].b;
      args.n_inputs = 2;
      args.outputs[0] = sets[0].c;
      args.n_outputs = 1;
      args.dims[0] = s.m;
      args.dims[1] = s.n;
      args.dims[2] = s.k;
      args.n_dims = 3;
      args.workspace = ws;
      args.workspace_bytes = kWorkspace;
      std::fprintf(stderr, "checking %s %ldx%ldx%ld\n", v.name.c_str(), s.m, s.n, s.k);
      CK(cudaMemsetAsync(sets[0].c, 0xff, 2 * s.m * s.n, stream));  // NaN poison
      int rc = v.fn(&args, stream);
      cudaError_t err = cudaStreamSynchronize(stream);
      if (err != cudaSuccess) {
        std::printf("%ld,%ld,%ld,%s,%s,CUDA_ERROR %s,,,,\n", s.m, s.n, s.k, s.layout.c_str(),
                    v.name.c_str(), cudaGetErrorString(err));
        std::fflush(stdout);
        return 3;  // the context is gone
      }
      if (rc != 0) {
        std::printf("%ld,%ld,%ld,%s,%s,RC%d,,,,\n", s.m, s.n, s.k, s.layout.c_str(),
                    v.name.c_str(), rc);
        continue;
      }
      CK(cudaMemsetAsync(sums, 0, 3 * sizeof(double), stream));
      diff_norms<<<512, 256, 0, stream>>>(sets[0].c, ref, s.m * s.n, sums);
      double h[3];
      CK(cudaMemcpyAsync(h, sums, sizeof h, cudaMemcpyDeviceToHost, stream));
      CK(cudaStreamSynchronize(stream));
      const double rel = std::sqrt(h[0] / h[1]);
      if (h[2] > 0 || !(rel < 5e-3)) {
        std::printf("%ld,%ld,%ld,%s,%s,FAIL nonfinite=%.0f,%.3g,,,\n", s.m, s.n, s.k,
                    s.layout.c_str(), v.name.c_str(), h[2], rel);
        std::fflush(stdout);
        continue;
      }
      auto call = [&](const Set& st) {
        kernelrl_args a = args;
        a.inputs[0] = st.a;
        a.inputs[1] = st.b;
        a.outputs[0] = st.c;
        if (v.fn(&a, stream) != 0) std::exit(4);
      };
      cs.push_back({v.name, capture(call), {}});
      errs.push_back(rel);
    }
    auto report = [&](std::vector<Contender>& cs, const std::vector<double>& errs) {
      for (int r = 0; r < rounds; ++r) time_round(cs, r);
      const double flop = 2.0 * s.m * s.n * s.k;
      const double auto_us = median(cs[1].us);

      size_t best = 2;
      for (size_t i = 0; i < cs.size(); ++i) {
        const double us = median(cs[i].us);
        if (i >= 2 && us < median(cs[best].us)) best = i;
        std::printf("%ld,%ld,%ld,%s,%s,ok,%.3g,%.2f,%.1f,%.3f\n", s.m, s.n, s.k, s.layout.c_str(),
                    cs[i].name.c_str(), errs[i], us, flop / us * 1e-6, auto_us / us);
      }
      std::fflush(stdout);
      char shape[96];
      std::snprintf(shape, sizeof shape, "%ldx%ldx%ld %s", s.m, s.n, s.k, s.layout.c_str());
      summary.push_back({shape, best < cs.size() ? cs[best].name : "-", median(cs[0].us), auto_us,
                         best < cs.size() ? median(cs[best].us) : 0.0});
    };
    if (rounds == 0) {  // check only
      for (size_t i = 2; i < cs.size(); ++i)
        std::printf("%ld,%ld,%ld,%s,%s,ok,%.3g,,,\n", s.m, s.n, s.k, s.layout.c_str(),
                    cs[i].name.c_str(), errs[i]);
      std::fflush(stdout);
    } else {
      report(cs, errs);
    }
    for (auto& c : cs) CK(cudaGraphExecDestroy(c.g));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    for (auto& st : sets) {
      CK(cudaFree(st.a));
      CK(cudaFree(st.b));
      CK(cudaFree(st.c));
    }
    CK(cudaFree(ref));
  }
  std::printf("\nshape | lt-heur us | lt-auto us | best wgmma us | best/lt-auto | best variant\n");
  for (const auto& r : summary)
    std::printf("%s | %.1f | %.1f | %.1f | %.3f | %s\n", r.shape.c_str(), r.heur_us, r.auto_us,
                r.best_us, r.best_us > 0 ? r.auto_us / r.best_us : 0.0, r.best.c_str());
  return 0;
}
