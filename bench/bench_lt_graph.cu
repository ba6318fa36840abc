// Standalone device-time timer for cuBLASLt fp16 GEMM (fp32 accumulate), sharing no code with
// the evaluator: the independent reference that the evaluator's device-mode lt-auto baseline is
// checked against (docs/benchmarks.md, "Measurement trust").
//
// Per shape and layout: every algorithm cublasLtMatmulAlgoGetHeuristic returns (up to 32) is
// captured as a CUDA graph of CALLS back-to-back calls, call i on input set i (distinct buffers);
// before each timed replay, untimed: fresh random values into the sets and a 2xL2 memset that
// flushes the L2. Replays of all algorithms are interleaved in random order; the result is the
// best algorithm's median replay time / CALLS. Beside it, events around one eager call of that
// algorithm (the device idle when it is issued): the call time a host loop sees.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 bench_lt_graph.cu -lcublasLt -o bench_lt_graph
//   ./bench_lt_graph [--shapes 64,256,...|MxNxK,...] [--layout nn|tn] [--rounds R]
//                    [--reserve-mb MB] [--algos N] [--gap-us U] [--clocks 1] > out.csv
//
// Two switches for what runs beside the timed replays (at the power cap a kernel's clock
// follows what ran in the milliseconds before it, docs/timing.md): --algos N times only the
// first N algorithms of the heuristic's list (1: the top one alone, back to back), --gap-us U
// runs an untimed one-block spin kernel of ~U us (near-idle power) before each timed replay's
// refresh, as a slower, low-power contender interleaved beside it would.
//
// --clocks 1: a one-thread-per-block stamp kernel (SM id, %globaltimer, clock64) on every SM
// right before and after each timed replay, outside its events; each replay's SM clock is the
// median over SMs of cycles / ns between the two, and its time at the rated clock is
// t * f / f_rated. The row then carries the best algorithm's median clock and median rated time
// (0 without --clocks), which take the clock out of a comparison at the power cap.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)
#define CKL(x)                                                                                 \
  do {                                                                                         \
    cublasStatus_t s_ = (x);                                                                   \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, static_cast<int>(s_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

constexpr int kCalls = 20;
constexpr size_t kWorkspace = 32u << 20;

__device__ unsigned mix(unsigned x) {
  x ^= x >> 15; x *= 2246822519u; x ^= x >> 13; x *= 3266489917u; x ^= x >> 16;
  return x;
}
// Standard normal values (Box-Muller over a counter hash): the distribution the evaluator draws.
// At power-limited sizes the value distribution moves the clocks, so it must match.
__global__ void fill_random(half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned a = mix((unsigned)i * 2654435761u ^ seed * 2246822519u), b = mix(a ^ 0x9e3779b9u);
    float u1 = (a + 1.0f) * 2.3283064e-10f, u2 = b * 2.3283064e-10f;
    p[i] = __float2half(sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}

// One block that spins for `ns` nanoseconds of the global timer: the device busy, at near-idle
// power.
__global__ void spin_ns(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// Where each SM is when the stamp reaches it: slots[2 * smid] = global ns, [2 * smid + 1] = cycles.
__global__ void clock_stamp(unsigned long long* slots, unsigned n_slots) {
  if (threadIdx.x != 0) return;
  unsigned smid;
  unsigned long long ns;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  long long cycles = clock64();
  if (smid < n_slots) {
    slots[2 * smid] = ns;
    slots[2 * smid + 1] = static_cast<unsigned long long>(cycles);
  }
}
constexpr unsigned kSmSlots = 1024;  // %smid's bound

// The median over SMs of the clock between two stamps (MHz; 0 if no SM was stamped twice).
double stamped_mhz(const std::vector<unsigned long long>& a, const std::vector<unsigned long long>& b) {
  std::vector<double> f;
  for (unsigned sm = 0; sm < kSmSlots; ++sm) {
    unsigned long long n0 = a[2 * sm], c0 = a[2 * sm + 1], n1 = b[2 * sm], c1 = b[2 * sm + 1];
    if (n0 != 0 && n1 > n0 && c1 > c0) f.push_back(1000.0 * static_cast<double>(c1 - c0) / static_cast<double>(n1 - n0));
  }
  if (f.empty()) return 0;
  std::sort(f.begin(), f.end());
  return f[f.size() / 2];
}

struct Set {
  half *a, *b, *c;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string shapes_arg = "64,128,256,512,768,1024,1536,2048,3072,4096,8192,16384", layout = "nn";
  int rounds = 15, max_algos = 32;
  long reserve_mb = 0, gap_us = 0;
  bool clocks = false;
  if (argc % 2 == 0) {
    std::fprintf(stderr, "bench_lt_graph: option %s has no value\n", argv[argc - 1]);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--shapes") shapes_arg = argv[i + 1];
    else if (k == "--reserve-mb") reserve_mb = std::atol(argv[i + 1]);
    else if (k == "--layout") layout = argv[i + 1];
    else if (k == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (k == "--algos") max_algos = std::atoi(argv[i + 1]);
    else if (k == "--gap-us") gap_us = std::atol(argv[i + 1]);
    else if (k == "--clocks") clocks = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "bench_lt_graph: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (max_algos < 1 || max_algos > 32 || rounds < 1 || gap_us < 0) {
    std::fprintf(stderr, "bench_lt_graph: --algos must be 1..32, --rounds >= 1, --gap-us >= 0\n");
    return 2;
  }
  struct Shape { long m, n, k; };
  std::vector<Shape> shapes;
  std::stringstream ss(shapes_arg);
  for (std::string t; std::getline(ss, t, ',');) {
    long m, n, k;
    if (std::sscanf(t.c_str(), "%ldx%ldx%ld", &m, &n, &k) == 3) shapes.push_back({m, n, k});
    else shapes.push_back({std::atol(t.c_str()), std::atol(t.c_str()), std::atol(t.c_str())});
  }
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
  // --reserve-mb: device memory held (and written once) for the whole run, as a process with
  // weights or caches holds it; a diagnostic of footprint-dependent per-kernel overheads.
  if (reserve_mb > 0) {
    void* held;
    CK(cudaMalloc(&held, static_cast<size_t>(reserve_mb) << 20));
    CK(cudaMemset(held, 0, static_cast<size_t>(reserve_mb) << 20));
    CK(cudaDeviceSynchronize());
  }
  int rated_khz = 0;
  CK(cudaDeviceGetAttribute(&rated_khz, cudaDevAttrClockRate, 0));
  unsigned long long* stamps_dev;  // two stamp sets: before and after a replay
  CK(cudaMalloc(&stamps_dev, 2 * 2 * kSmSlots * sizeof(unsigned long long)));
  std::vector<unsigned long long> st0(2 * kSmSlots), st1(2 * kSmSlots);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::mt19937 rng(7);
  std::printf("device,%s\nM,N,K,layout,algos,best_algo,device_us,call_us,tflops,sm_mhz,rated_us\n", prop.name);
  for (const auto& s : shapes) {
    size_t free_b, total_b;
    CK(cudaMemGetInfo(&free_b, &total_b));
    size_t set_bytes = 2 * (s.m * s.k + s.k * s.n + s.m * s.n);
    int n_sets = static_cast<int>(std::max<size_t>(1, std::min<size_t>(kCalls, free_b * 4 / 10 / set_bytes)));
    std::vector<Set> sets(n_sets);
    for (auto& st : sets) {
      CK(cudaMalloc(&st.a, 2 * s.m * s.k));
      CK(cudaMalloc(&st.b, 2 * s.k * s.n));
      CK(cudaMalloc(&st.c, 2 * s.m * s.n));
    }
    unsigned seed = 1;
    auto refresh = [&] {
      for (auto& st : sets) {
        fill_random<<<1024, 256, 0, stream>>>(st.a, s.m * s.k, seed++);
        fill_random<<<1024, 256, 0, stream>>>(st.b, s.k * s.n, seed++);
      }
    };
    // Row-major C[M,N] = A[M,K] B: computed as column-major C^T[N,M] = B^T A^T.
    // nn: B is K x N row-major (column-major N x K, ld N); tn: B stored N x K (column-major K x N
    // read transposed, ld K).
    cublasLtMatmulDesc_t op;
    CKL(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = layout == "tn" ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    CKL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CKL(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtMatrixLayout_t la, lb, lc;
    if (layout == "tn") CKL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, s.k, s.n, s.k));
    else CKL(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, s.n, s.k, s.n));
    CKL(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, s.k, s.m, s.k));
    CKL(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, s.n, s.m, s.n));
    cublasLtMatmulPreference_t pref;
    CKL(cublasLtMatmulPreferenceCreate(&pref));
    size_t wsb = kWorkspace;
    CKL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t heur[32];
    int found = 0;
    CKL(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, max_algos, heur, &found));
    const float alpha = 1.f, beta = 0.f;
    auto call = [&](int algo, const Set& st) {
      return cublasLtMatmul(lt, op, &alpha, st.b, la, st.a, lb, &beta, st.c, lc, st.c, lc,
                            &heur[algo].algo, ws, kWorkspace, stream);
    };
    std::vector<cudaGraphExec_t> graphs;
    std::vector<int> algo_of;
    refresh();
    for (int a = 0; a < found; ++a) {
      if (call(a, sets[0]) != CUBLAS_STATUS_SUCCESS) continue;  // refused
      CK(cudaStreamSynchronize(stream));
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      for (int i = 0; i < kCalls; ++i) CKL(call(a, sets[i % n_sets]));
      CK(cudaStreamEndCapture(stream, &g));
      cudaGraphExec_t ge;
      CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphDestroy(g));
      graphs.push_back(ge);
      algo_of.push_back(a);
      CK(cudaGraphLaunch(ge, stream));  // upload + warm-up
    }
    CK(cudaStreamSynchronize(stream));
    std::vector<std::vector<double>> t(graphs.size()), rated(graphs.size()), mhz(graphs.size());
    std::vector<size_t> order(graphs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (int r = 0; r < rounds; ++r) {
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t g : order) {
        if (gap_us > 0) spin_ns<<<1, 32, 0, stream>>>(static_cast<unsigned long long>(gap_us) * 1000ull);
        refresh();
        CK(cudaMemsetAsync(flush, r & 0xff, flush_bytes, stream));
        if (clocks) {
          CK(cudaMemsetAsync(stamps_dev, 0, 2 * 2 * kSmSlots * sizeof(unsigned long long), stream));
          clock_stamp<<<2 * prop.multiProcessorCount, 32, 0, stream>>>(stamps_dev, kSmSlots);
        }
        CK(cudaEventRecord(e0, stream));
        CK(cudaGraphLaunch(graphs[g], stream));
        CK(cudaEventRecord(e1, stream));
        if (clocks) clock_stamp<<<2 * prop.multiProcessorCount, 32, 0, stream>>>(stamps_dev + 2 * kSmSlots, kSmSlots);
        CK(cudaEventSynchronize(e1));
        if (clocks) CK(cudaStreamSynchronize(stream));  // the stamp queued after e1
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t[g].push_back(ms * 1000.0 / kCalls);
        if (clocks) {
          CK(cudaMemcpy(st0.data(), stamps_dev, st0.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(st1.data(), stamps_dev + 2 * kSmSlots, st1.size() * sizeof(unsigned long long),
                        cudaMemcpyDeviceToHost));
          double f = stamped_mhz(st0, st1);
          if (f > 0) {
            mhz[g].push_back(f);
            rated[g].push_back(t[g].back() * f / (rated_khz / 1000.0));
          }
        }
      }
    }
    size_t best = 0;
    for (size_t g = 1; g < graphs.size(); ++g)
      if (median(t[g]) < median(t[best])) best = g;
    // Eager call time of the best algorithm, the device idle when each call is issued.
    std::vector<double> calls;
    for (int r = 0; r < rounds; ++r) {
      refresh();
      CK(cudaMemsetAsync(flush, r & 0xff, flush_bytes, stream));
      CK(cudaStreamSynchronize(stream));
      CK(cudaEventRecord(e0, stream));
      CKL(call(algo_of[best], sets[r % n_sets]));
      CK(cudaEventRecord(e1, stream));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      calls.push_back(ms * 1000.0);
    }
    double dev_us = median(t[best]);
    const bool have_clock = !mhz[best].empty();
    std::printf("%ld,%ld,%ld,%s,%zu,%d,%.3f,%.3f,%.1f,%.0f,%.3f\n", s.m, s.n, s.k, layout.c_str(), graphs.size(),
                algo_of[best], dev_us, median(calls), 2.0 * s.m * s.n * s.k / dev_us * 1e-6,
                have_clock ? median(mhz[best]) : 0.0, have_clock ? median(rated[best]) : 0.0);
    std::fflush(stdout);
    for (auto g : graphs) CK(cudaGraphExecDestroy(g));
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
  }
  return 0;
}
