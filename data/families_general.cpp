// General kernel families (CUDA and host): elementwise, reduction, softmax, norm, transpose,
// gather_scatter, matmul. One generator per category; the op (task_ops.h) picks the formula and
// the params are baked in as constants. Sizes come from kernelrl_args.dims: the first input's
// shape, then the task params bit-cast from double (op params first, then the sizes the first
// input does not carry, see task_suite.h).
#include <map>
#include <sstream>
#include <stdexcept>

#include "data/families.h"
#include "data/families_internal.h"
#include "data/task_ops.h"

namespace kernelrl {
namespace {

using families::fill;
using families::float_literal;
using KV = std::vector<std::pair<std::string, std::string>>;

const char* kCudaHead = R"(#include <cuda_runtime.h>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
$ABI$
namespace {
[[maybe_unused]] constexpr float P0 = $P0$, P1 = $P1$;  // the task's scalar parameters
// Task param i (a double bit-cast into dims after the first input's shape).
[[maybe_unused]] inline double task_param(const kernelrl_args* a, int first_rank, int i) {
  double d;
  std::memcpy(&d, &a->dims[first_rank + i], sizeof d);
  return d;
}
)";

const char* kHostHead = R"(#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
$ABI$
namespace {
[[maybe_unused]] constexpr float P0 = $P0$, P1 = $P1$;  // the task's scalar parameters
// Task param i (a double bit-cast into dims after the first input's shape).
[[maybe_unused]] inline double task_param(const kernelrl_args* a, int first_rank, int i) {
  double d;
  std::memcpy(&d, &a->dims[first_rank + i], sizeof d);
  return d;
}
)";

// Elementwise formulas over float x (and z for binary ops); valid in CUDA device code and C++.
const std::map<std::string, std::string>& ew_exprs() {
  static const std::map<std::string, std::string> m = {
      {"relu", "fmaxf(x, 0.0f)"},
      {"leaky_relu", "x > 0.0f ? x : x * P0"},
      {"gelu", "0.5f * x * (1.0f + erff(x * 0.70710678118654752f))"},
      {"gelu_tanh", "0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)))"},
      {"sigmoid", "1.0f / (1.0f + expf(-x))"},
      {"tanh", "tanhf(x)"},
      {"silu", "x / (1.0f + expf(-x))"},
      {"softplus", "x > 20.0f ? x : log1pf(expf(x))"},
      {"elu", "x > 0.0f ? x : P0 * (expf(x) - 1.0f)"},
      {"hardtanh", "fminf(fmaxf(x, P0), P1)"},
      {"hardsigmoid", "fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f)"},
      {"mish", "x * tanhf(x > 20.0f ? x : log1pf(expf(x)))"},
      {"selu", "1.0507009873554805f * (x > 0.0f ? x : 1.6732632423543772f * (expf(x) - 1.0f))"},
      {"softsign", "x / (1.0f + fabsf(x))"},
      {"scale_shift", "x * P0 + P1"},
      {"add", "x + z"},
      {"mul", "x * z"},
      {"add_relu", "fmaxf(x + z, 0.0f)"},
      {"maximum", "fmaxf(x, z)"},
  };
  return m;
}
bool is_binary(const std::string& op) {
  return op == "add" || op == "mul" || op == "add_relu" || op == "maximum";
}
std::string act_of_matmul(const std::string& op) {
  if (op == "matmul_bias_relu") return "fmaxf(v, 0.0f)";
  if (op == "matmul_bias_gelu") return "0.5f * v * (1.0f + erff(v * 0.70710678118654752f))";
  if (op == "matmul_bias_sigmoid") return "1.0f / (1.0f + expf(-v))";
  return "v";
}

// ---------------------------------------------------------------- CUDA: elementwise
const char* kCudaElementwise = R"(constexpr int THREADS = $THREADS$, VEC = $VEC$;
constexpr bool BINARY = $BINARY$;
__device__ __forceinline__ float op(float x, float z) { (void)z; return $EXPR$; }

__global__ void __launch_bounds__(THREADS) elementwise_kernel(const float* __restrict__ x,
    const float* __restrict__ z, float* __restrict__ y, long long n, bool vec_ok) {
  const long long tid = (long long)blockIdx.x * THREADS + threadIdx.x;
  const long long stride = (long long)gridDim.x * THREADS;
  long long done = 0;
  if (VEC == 4 && vec_ok) {  // float4 body, scalar tail
    const long long n4 = n / 4;
    for (long long i = tid; i < n4; i += stride) {
      const float4 a = reinterpret_cast<const float4*>(x)[i];
      const float4 b = BINARY ? reinterpret_cast<const float4*>(z)[i] : a;
      reinterpret_cast<float4*>(y)[i] = make_float4(op(a.x, b.x), op(a.y, b.y), op(a.z, b.z), op(a.w, b.w));
    }
    done = n4 * 4;
  }
  for (long long i = done + tid; i < n; i += stride) y[i] = op(x[i], BINARY ? z[i] : 0.0f);
}
}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < (BINARY ? 2 : 1) || args->n_outputs < 1 || args->n_dims < 1) return 1;
  const long long n = args->dims[0];
  const float* x = (const float*)args->inputs[0];
  const float* z = BINARY ? (const float*)args->inputs[1] : x;
  float* y = (float*)args->outputs[0];
  const bool vec_ok = ((uintptr_t)x % 16 == 0) && ((uintptr_t)z % 16 == 0) && ((uintptr_t)y % 16 == 0);
  long long blocks = (n / VEC + THREADS - 1) / THREADS;
  blocks = blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks);
  elementwise_kernel<<<(unsigned)blocks, THREADS, 0, (cudaStream_t)stream>>>(x, z, y, n, vec_ok);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
)";

// ---------------------------------------------------------------- CUDA: row-wise ops
const char* kCudaRowCommon = R"(constexpr int THREADS = $THREADS$;
constexpr bool BLOCK_PER_ROW = $BLOCK$;          // else one warp per row
constexpr int GS = BLOCK_PER_ROW ? THREADS : 32;  // threads sharing a row
constexpr unsigned FULL = 0xffffffffu;

// Reduction over the threads of a row; every thread gets the result.
template <class F>
[[maybe_unused]] __device__ __forceinline__ float group_reduce(float v, F f) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(FULL, v, o));
  if constexpr (BLOCK_PER_ROW) {
    __shared__ float part[THREADS / 32];
    __syncthreads();  // a previous reduction may still read part[]
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    v = part[0];
    for (int i = 1; i < THREADS / 32; ++i) v = f(v, part[i]);
  }
  return v;
}
[[maybe_unused]] __device__ __forceinline__ float group_sum(float v) { return group_reduce(v, [](float a, float b) { return a + b; }); }
[[maybe_unused]] __device__ __forceinline__ float group_max(float v) { return group_reduce(v, [](float a, float b) { return fmaxf(a, b); }); }
[[maybe_unused]] __device__ __forceinline__ float group_min(float v) { return group_reduce(v, [](float a, float b) { return fminf(a, b); }); }

// (value, index) reduction keeping the larger (want_max) or smaller value, ties to the lower index.
[[maybe_unused]] __device__ __forceinline__ void group_argbest(float& v, long long& i, bool want_max) {
  auto better = [&](float ov, long long oi) {
    return (want_max ? ov > v : ov < v) || (ov == v && oi < i);
  };
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(FULL, v, o);
    const long long oi = __shfl_xor_sync(FULL, i, o);
    if (better(ov, oi)) { v = ov; i = oi; }
  }
  if constexpr (BLOCK_PER_ROW) {
    __shared__ float pv[THREADS / 32];
    __shared__ long long pi[THREADS / 32];
    __syncthreads();
    if ((threadIdx.x & 31) == 0) { pv[threadIdx.x >> 5] = v; pi[threadIdx.x >> 5] = i; }
    __syncthreads();
    v = pv[0]; i = pi[0];
    for (int w = 1; w < THREADS / 32; ++w)
      if (better(pv[w], pi[w])) { v = pv[w]; i = pi[w]; }
  }
}

// Inclusive prefix sum over the threads of a row; `total` gets the sum of all.
[[maybe_unused]] __device__ __forceinline__ float group_scan(float v, float& total) {
  const int l = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float t = __shfl_up_sync(FULL, v, o);
    if (l >= o) v += t;
  }
  if constexpr (!BLOCK_PER_ROW) {
    total = __shfl_sync(FULL, v, 31);
    return v;
  } else {
    __shared__ float part[THREADS / 32];
    __syncthreads();
    if (l == 31) part[threadIdx.x >> 5] = v;
    __syncthreads();
    float off = 0.0f, tot = 0.0f;
    for (int w = 0; w < THREADS / 32; ++w) {
      if (w < (int)(threadIdx.x >> 5)) off += part[w];
      tot += part[w];
    }
    total = tot;
    return v + off;
  }
}

__global__ void __launch_bounds__(THREADS) row_kernel($KARGS$, long long B, long long D) {
  const int gl = BLOCK_PER_ROW ? threadIdx.x : (threadIdx.x & 31);
  const long long row = BLOCK_PER_ROW ? (long long)blockIdx.x
                                      : (long long)blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5);
  if (row >= B) return;  // uniform over the threads of a row
$BODY$
}
}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < $NIN$ || args->n_outputs < 1 || args->n_dims < 2) return 1;
  const long long B = args->dims[0], D = args->dims[1];
  const long long blocks = BLOCK_PER_ROW ? B : (B + THREADS / 32 - 1) / (THREADS / 32);
  if (blocks <= 0 || blocks > 2147483647LL) return 2;
  row_kernel<<<(unsigned)blocks, THREADS, 0, (cudaStream_t)stream>>>($LARGS$, B, D);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
)";

struct RowOp {
  std::string kargs, body, largs;
  int nin;
};

RowOp row_op(const std::string& op) {
  const std::string x1 = "const float* __restrict__ x, float* __restrict__ y";
  const std::string l1 = "(const float*)args->inputs[0], (float*)args->outputs[0]";
  auto reduce = [&](const std::string& init, const std::string& acc, const std::string& red,
                    const std::string& fin) {
    return RowOp{x1,
                 "  const float* xr = x + row * D;\n  float s = " + init +
                     ";\n  for (long long j = gl; j < D; j += GS) { const float v = xr[j]; " + acc +
                     " }\n  s = " + red + "(s);\n  if (gl == 0) y[row] = " + fin + ";",
                 l1, 1};
  };
  if (op == "sum_rows") return reduce("0.0f", "s += v;", "group_sum", "s");
  if (op == "mean_rows") return reduce("0.0f", "s += v;", "group_sum", "s / (float)D");
  if (op == "max_rows") return reduce("-INFINITY", "s = fmaxf(s, v);", "group_max", "s");
  if (op == "min_rows") return reduce("INFINITY", "s = fminf(s, v);", "group_min", "s");
  if (op == "l2norm_rows") return reduce("0.0f", "s += v * v;", "group_sum", "sqrtf(s)");
  if (op == "argmax_rows" || op == "argmin_rows") {
    bool mx = op == "argmax_rows";
    return {"const float* __restrict__ x, long long* __restrict__ y",
            std::string("  const float* xr = x + row * D;\n  float best = ") +
                (mx ? "-INFINITY" : "INFINITY") +
                ";\n  long long bi = D;\n  for (long long j = gl; j < D; j += GS) {\n"
                "    const float v = xr[j];\n    if (" +
                (mx ? "v > best" : "v < best") +
                " || bi == D) { best = v; bi = j; }\n  }\n  group_argbest(best, bi, " +
                (mx ? "true" : "false") + ");\n  if (gl == 0) y[row] = bi;",
            "(const float*)args->inputs[0], (long long*)args->outputs[0]", 1};
  }
  if (op == "cumsum_rows")
    return {x1,
            "  const float* xr = x + row * D;\n  float* yr = y + row * D;\n  float carry = 0.0f;\n"
            "  for (long long base = 0; base < D; base += GS) {\n"
            "    const long long j = base + gl;\n    float total;\n"
            "    const float s = group_scan(j < D ? xr[j] : 0.0f, total);\n"
            "    if (j < D) yr[j] = carry + s;\n    carry += total;\n  }",
            l1, 1};
  if (op == "softmax_rows" || op == "log_softmax_rows" || op == "softmax_scaled") {
    std::string sc = op == "softmax_scaled" ? "P0 * " : "";
    std::string out = op == "log_softmax_rows" ? "v - m - logf(s)" : "expf(v - m) / s";
    return {x1,
            "  const float* xr = x + row * D;\n  float* yr = y + row * D;\n  float m = -INFINITY;\n"
            "  for (long long j = gl; j < D; j += GS) m = fmaxf(m, " +
                sc +
                "xr[j]);\n"
                "  m = group_max(m);\n  float s = 0.0f;\n"
                "  for (long long j = gl; j < D; j += GS) s += expf(" +
                sc +
                "xr[j] - m);\n"
                "  s = group_sum(s);\n"
                "  for (long long j = gl; j < D; j += GS) { const float v = " +
                sc + "xr[j]; yr[j] = " + out + "; }",
            l1, 1};
  }
  if (op == "layernorm" || op == "add_layernorm") {
    bool add = op == "add_layernorm";
    std::string val = add ? "(xr[j] + rr[j])" : "xr[j]";
    return {std::string("const float* __restrict__ x, ") +
                (add ? "const float* __restrict__ r, " : "") +
                "const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ y",
            std::string("  const float* xr = x + row * D;\n") +
                (add ? "  const float* rr = r + row * D;\n" : "") +
                "  float* yr = y + row * D;\n  float s = 0.0f;\n"
                "  for (long long j = gl; j < D; j += GS) s += " +
                val +
                ";\n"
                "  const float mean = group_sum(s) / (float)D;\n  float q = 0.0f;\n"
                "  for (long long j = gl; j < D; j += GS) { const float d = " +
                val +
                " - mean; q += d * d; }\n"
                "  const float rstd = 1.0f / sqrtf(group_sum(q) / (float)D + P0);\n"
                "  for (long long j = gl; j < D; j += GS) yr[j] = (" +
                val + " - mean) * rstd * w[j] + b[j];",
            add ? "(const float*)args->inputs[0], (const float*)args->inputs[1], "
                  "(const float*)args->inputs[2], (const float*)args->inputs[3], "
                  "(float*)args->outputs[0]"
                : "(const float*)args->inputs[0], (const float*)args->inputs[1], "
                  "(const float*)args->inputs[2], (float*)args->outputs[0]",
            add ? 4 : 3};
  }
  if (op == "rmsnorm")
    return {
        "const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y",
        "  const float* xr = x + row * D;\n  float* yr = y + row * D;\n  float q = 0.0f;\n"
        "  for (long long j = gl; j < D; j += GS) q += xr[j] * xr[j];\n"
        "  const float rs = 1.0f / sqrtf(group_sum(q) / (float)D + P0);\n"
        "  for (long long j = gl; j < D; j += GS) yr[j] = xr[j] * rs * w[j];",
        "(const float*)args->inputs[0], (const float*)args->inputs[1], (float*)args->outputs[0]",
        2};
  if (op == "l2_normalize_rows")
    return {x1,
            "  const float* xr = x + row * D;\n  float* yr = y + row * D;\n  float q = 0.0f;\n"
            "  for (long long j = gl; j < D; j += GS) q += xr[j] * xr[j];\n"
            "  const float inv = 1.0f / fmaxf(sqrtf(group_sum(q)), P0);\n"
            "  for (long long j = gl; j < D; j += GS) yr[j] = xr[j] * inv;",
            l1, 1};
  throw std::logic_error("row_op: " + op);
}

// ---------------------------------------------------------------- CUDA: one-off kernels
const char* kCudaSumCols = R"(constexpr int THREADS = $THREADS$;
// One thread per column; consecutive threads read consecutive columns of a row (coalesced).
__global__ void __launch_bounds__(THREADS) sum_cols_kernel(const float* __restrict__ x,
    float* __restrict__ y, long long B, long long D) {
  const long long c = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (c >= D) return;
  float s = 0.0f;
  for (long long r = 0; r < B; ++r) s += x[r * D + c];
  y[c] = s;
}
}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 1 || args->n_outputs < 1 || args->n_dims < 2) return 1;
  const long long B = args->dims[0], D = args->dims[1];
  sum_cols_kernel<<<(unsigned)((D + THREADS - 1) / THREADS), THREADS, 0, (cudaStream_t)stream>>>(
      (const float*)args->inputs[0], (float*)args->outputs[0], B, D);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
)";

const char* kCudaSumAll = R"(constexpr int THREADS = $THREADS$;
// Grid-stride partial sums, a block reduction in shared memory, one atomicAdd per block.
__global__ void __launch_bounds__(THREADS) sum_all_kernel(const float* __restrict__ x,
    float* __restrict__ y, long long n) {
  __shared__ float part[THREADS / 32];
  float s = 0.0f;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * THREADS)
    s += x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int w = 0; w < THREADS / 32; ++w) t += part[w];
    atomicAdd(y, t);
  }
}
}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 1 || args->n_outputs < 1 || args->n_dims < 1) return 1;
  const long long n = args->dims[0];
  cudaStream_t s = (cudaStream_t)stream;
  if (cudaMemsetAsync(args->outputs[0], 0, sizeof(float), s) != cudaSuccess) return 2;
  long long blocks = (n + THREADS - 1) / THREADS;
  blocks = blocks < 1 ? 1 : (blocks > 1024 ? 1024 : blocks);
  sum_all_kernel<<<(unsigned)blocks, THREADS, 0, s>>>((const float*)args->inputs[0], (float*)args->outputs[0], n);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
)";

const char* kCudaTranspose =
    R"(constexpr bool TILED = $TILED$;  // 32x32 shared-memory tiles, else one thread per element
constexpr int ROWS = $ROWS$;      // thread rows per 32x32 tile
// y[b, c, r] = x[b, r, c] for x of shape [Bt, R, C].
__global__ void transpose_tiled(const float* __restrict__ x, float* __restrict__ y, long long R, long long C) {
  __shared__ float tile[32][33];  // +1 column: no bank conflicts on the transposed read
  const long long b = blockIdx.z;
  const float* xb = x + b * R * C;
  float* yb = y + b * R * C;
  const long long r0 = (long long)blockIdx.y * 32, c0 = (long long)blockIdx.x * 32;
  for (int i = threadIdx.y; i < 32; i += ROWS) {
    const long long r = r0 + i, c = c0 + threadIdx.x;
    if (r < R && c < C) tile[i][threadIdx.x] = xb[r * C + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += ROWS) {
    const long long c = c0 + i, r = r0 + threadIdx.x;
    if (r < R && c < C) yb[c * R + r] = tile[threadIdx.x][i];
  }
}
__global__ void transpose_naive(const float* __restrict__ x, float* __restrict__ y, long long R, long long C, long long total) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const long long b = i / (R * C), rc = i % (R * C), r = rc / C, c = rc % C;
  y[b * R * C + c * R + r] = x[i];
}
}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 1 || args->n_outputs < 1 || args->n_dims < $RANK$) return 1;
  const long long Bt = $RANK$ == 3 ? args->dims[0] : 1;
  const long long R = args->dims[$RANK$ - 2], C = args->dims[$RANK$ - 1];
  cudaStream_t s = (cudaStream_t)stream;
  if (TILED) {
    dim3 grid((unsigned)((C + 31) / 32), (unsigned)((R + 31) / 32), (unsigned)Bt);
    transpose_tiled<<<grid, dim3(32, ROWS), 0, s>>>((const float*)args->inputs[0], (float*)args->outputs[0], R, C);
  } else {
    const long long total = Bt * R * C;
    transpose_naive<<<(unsigned)((total + 255) / 256), 256, 0, s>>>((const float*)args->inputs[0], (float*)args->outputs[0], R, C, total);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
)";

const char* kCudaGather = R"(constexpr int THREADS = $THREADS$;
__global__ void __launch_bounds__(THREADS) gather_kernel($KARGS$, long long n_rows, long long D, long long total) {
  const long long t = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (t >= total) return;
$BODY$
}
}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < $MINDIMS$) return 1;
  cudaStream_t s = (cudaStream_t)stream;
$LAUNCH$
  if (total <= 0) return 0;
  gather_kernel<<<(unsigned)((total + THREADS - 1) / THREADS), THREADS, 0, s>>>($LARGS$, n_rows, D, total);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
)";

const char* kCudaMatmul =
    R"(constexpr int TILE = $TILE$;  // square shared-memory tiles of A and B, TILE x TILE threads
constexpr bool HAS_BIAS = $BIAS$;
__device__ __forceinline__ float act(float v) { return $ACT$; }
// y[b] = act(a[b] @ bm[b] + bias) for a [M, K], bm [K, N]; blockIdx.z is the batch.
__global__ void matmul_kernel(const float* __restrict__ a, const float* __restrict__ bm,
    const float* __restrict__ bias, float* __restrict__ y, long long M, long long N, long long K) {
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];
  const long long z = blockIdx.z;
  a += z * M * K; bm += z * K * N; y += z * M * N;
  const long long row = (long long)blockIdx.y * TILE + threadIdx.y;
  const long long col = (long long)blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (long long k0 = 0; k0 < K; k0 += TILE) {
    const long long ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? a[row * K + ka] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? bm[kb * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc = fmaf(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);
    __syncthreads();
  }
  if (row < M && col < N) {
    float v = acc + (HAS_BIAS ? bias[col] : 0.0f);
    y[row * N + col] = act(v);
  }
}
}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < (HAS_BIAS ? 3 : 2) || args->n_outputs < 1 || args->n_dims < $MINDIMS$) return 1;
$SIZES$
  dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE), (unsigned)Bt);
  matmul_kernel<<<grid, dim3(TILE, TILE), 0, (cudaStream_t)stream>>>((const float*)args->inputs[0],
      (const float*)args->inputs[1], HAS_BIAS ? (const float*)args->inputs[2] : nullptr,
      (float*)args->outputs[0], M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
)";

const char* kCudaMatvec = R"(constexpr int THREADS = $THREADS$;
// One warp per row of a; lanes stride over k and reduce with shuffles.
__global__ void __launch_bounds__(THREADS) matvec_kernel(const float* __restrict__ a,
    const float* __restrict__ v, float* __restrict__ y, long long M, long long K) {
  const long long row = (long long)blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5);
  if (row >= M) return;
  const int lane = threadIdx.x & 31;
  float s = 0.0f;
  for (long long k = lane; k < K; k += 32) s = fmaf(a[row * K + k], v[k], s);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) y[row] = s;
}
}  // namespace

extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
  if (args->n_inputs < 2 || args->n_outputs < 1 || args->n_dims < 2) return 1;
  const long long M = args->dims[0], K = args->dims[1];
  const long long blocks = (M + THREADS / 32 - 1) / (THREADS / 32);
  matvec_kernel<<<(unsigned)blocks, THREADS, 0, (cudaStream_t)stream>>>((const float*)args->inputs[0],
      (const float*)args->inputs[1], (float*)args->outputs[0], M, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
)";

// ---------------------------------------------------------------- host kernels
std::string host_body(const std::string& op, int64_t tile) {
  std::ostringstream s;
  const OpInfo* info = find_op(op);
  const std::string cat = info->category;
  s << "extern \"C\" int kernelrl_launch(const kernelrl_args* args, void* /*stream: host*/) {\n";
  s << "  if (args->n_inputs < " << info->inputs.size() << " || args->n_outputs < 1) return 1;\n";
  auto in = [&](int i, const char* type = "float") {
    return std::string("(const ") + type + "*)args->inputs[" + std::to_string(i) + "]";
  };
  if (cat == "elementwise") {
    s << "  const long long n = args->dims[0];\n  const float* xp = " << in(0) << ";\n";
    s << "  const float* zp = " << (is_binary(op) ? in(1) : std::string("xp")) << ";\n";
    s << "  float* y = (float*)args->outputs[0];\n";
    s << "  for (long long i = 0; i < n; ++i) {\n    const float x = xp[i], z = zp[i];\n    "
         "(void)z;\n";
    s << "    y[i] = " << ew_exprs().at(op) << ";\n  }\n";
  } else if (op == "sum_all") {
    s << "  const long long n = args->dims[0];\n  const float* x = " << in(0) << ";\n";
    s << "  double acc = 0.0;  // double: the order differs from any GPU order anyway\n";
    s << "  for (long long i = 0; i < n; ++i) acc += x[i];\n  *(float*)args->outputs[0] = "
         "(float)acc;\n";
  } else if (op == "sum_cols") {
    s << "  const long long B = args->dims[0], D = args->dims[1];\n  const float* x = " << in(0)
      << ";\n";
    s << "  float* y = (float*)args->outputs[0];\n  for (long long c = 0; c < D; ++c) y[c] = "
         "0.0f;\n";
    s << "  for (long long r = 0; r < B; ++r)\n    for (long long c = 0; c < D; ++c) y[c] += x[r * "
         "D + c];\n";
  } else if (cat == "reduction" || cat == "softmax" || cat == "norm") {
    s << "  const long long B = args->dims[0], D = args->dims[1];\n  const float* x = " << in(0)
      << ";\n";
    s << "  for (long long b = 0; b < B; ++b) {\n    const float* xr = x + b * D;\n";
    if (op == "argmax_rows" || op == "argmin_rows") {
      s << "    long long bi = 0;\n    for (long long j = 1; j < D; ++j) if (xr[j] "
        << (op == "argmax_rows" ? ">" : "<") << " xr[bi]) bi = j;\n";
      s << "    ((long long*)args->outputs[0])[b] = bi;\n";
    } else if (op == "cumsum_rows") {
      s << "    float* yr = (float*)args->outputs[0] + b * D;\n    float acc = 0.0f;\n";
      s << "    for (long long j = 0; j < D; ++j) { acc += xr[j]; yr[j] = acc; }\n";
    } else if (cat == "reduction") {
      std::string init = op == "max_rows" ? "-INFINITY" : op == "min_rows" ? "INFINITY" : "0.0f";
      std::string step = op == "max_rows"      ? "s = std::max(s, xr[j]);"
                         : op == "min_rows"    ? "s = std::min(s, xr[j]);"
                         : op == "l2norm_rows" ? "s += xr[j] * xr[j];"
                                               : "s += xr[j];";
      std::string fin = op == "mean_rows"     ? "s / (float)D"
                        : op == "l2norm_rows" ? "std::sqrt(s)"
                                              : "s";
      s << "    float s = " << init << ";\n    for (long long j = 0; j < D; ++j) " << step << "\n";
      s << "    ((float*)args->outputs[0])[b] = " << fin << ";\n";
    } else if (cat == "softmax") {
      std::string sc = op == "softmax_scaled" ? "P0 * " : "";
      s << "    float* yr = (float*)args->outputs[0] + b * D;\n    float m = -INFINITY;\n";
      s << "    for (long long j = 0; j < D; ++j) m = std::max(m, " << sc << "xr[j]);\n";
      s << "    float sum = 0.0f;\n    for (long long j = 0; j < D; ++j) sum += std::exp(" << sc
        << "xr[j] - m);\n";
      if (op == "log_softmax_rows")
        s << "    const float lse = m + std::log(sum);\n    for (long long j = 0; j < D; ++j) "
             "yr[j] = xr[j] - lse;\n";
      else
        s << "    for (long long j = 0; j < D; ++j) yr[j] = std::exp(" << sc
          << "xr[j] - m) / sum;\n";
    } else if (op == "layernorm" || op == "add_layernorm") {
      bool add = op == "add_layernorm";
      int wi = add ? 2 : 1;
      s << "    const float* w = " << in(wi) << ";\n    const float* bb = " << in(wi + 1) << ";\n";
      s << "    float* yr = (float*)args->outputs[0] + b * D;\n";
      if (add) s << "    const float* rr = " << in(1) << " + b * D;\n";
      std::string v = add ? "(xr[j] + rr[j])" : "xr[j]";
      s << "    float mean = 0.0f;\n    for (long long j = 0; j < D; ++j) mean += " << v
        << ";\n    mean /= (float)D;\n";
      s << "    float var = 0.0f;\n    for (long long j = 0; j < D; ++j) { const float d = " << v
        << " - mean; var += d * d; }\n";
      s << "    const float rstd = 1.0f / std::sqrt(var / (float)D + P0);\n";
      s << "    for (long long j = 0; j < D; ++j) yr[j] = (" << v
        << " - mean) * rstd * w[j] + bb[j];\n";
    } else if (op == "rmsnorm") {
      s << "    const float* w = " << in(1)
        << ";\n    float* yr = (float*)args->outputs[0] + b * D;\n";
      s << "    float q = 0.0f;\n    for (long long j = 0; j < D; ++j) q += xr[j] * xr[j];\n";
      s << "    const float rs = 1.0f / std::sqrt(q / (float)D + P0);\n";
      s << "    for (long long j = 0; j < D; ++j) yr[j] = xr[j] * rs * w[j];\n";
    } else if (op == "l2_normalize_rows") {
      s << "    float* yr = (float*)args->outputs[0] + b * D;\n";
      s << "    float q = 0.0f;\n    for (long long j = 0; j < D; ++j) q += xr[j] * xr[j];\n";
      s << "    const float inv = 1.0f / std::max(std::sqrt(q), P0);\n";
      s << "    for (long long j = 0; j < D; ++j) yr[j] = xr[j] * inv;\n";
    }
    s << "  }\n";
  } else if (cat == "transpose") {
    bool three = op == "transpose_021";
    s << "  const long long Bt = " << (three ? "args->dims[0]" : "1") << ";\n";
    s << "  const long long R = args->dims[" << (three ? 1 : 0) << "], C = args->dims["
      << (three ? 2 : 1) << "];\n";
    s << "  const float* x = " << in(0) << ";\n  float* y = (float*)args->outputs[0];\n";
    s << "  constexpr long long T = 32;  // cache blocks\n";
    s << "  for (long long b = 0; b < Bt; ++b)\n    for (long long r0 = 0; r0 < R; r0 += T)\n"
         "      for (long long c0 = 0; c0 < C; c0 += T)\n"
         "        for (long long r = r0; r < std::min(R, r0 + T); ++r)\n"
         "          for (long long c = c0; c < std::min(C, c0 + T); ++c)\n"
         "            y[b * R * C + c * R + r] = x[b * R * C + r * C + c];\n";
  } else if (op == "gather_rows") {
    s << "  const long long D = args->dims[1];\n  const long long N = (long long)task_param(args, "
         "2, 0);\n";
    s << "  const float* table = " << in(0) << ";\n  const long long* idx = " << in(1, "long long")
      << ";\n";
    s << "  float* y = (float*)args->outputs[0];\n";
    s << "  for (long long i = 0; i < N; ++i) std::memcpy(y + i * D, table + idx[i] * D, "
         "sizeof(float) * D);\n";
  } else if (op == "scatter_add_rows") {
    s << "  const long long N = args->dims[0], D = args->dims[1];\n  const long long V = (long "
         "long)task_param(args, 2, 0);\n";
    s << "  const float* src = " << in(0) << ";\n  const long long* idx = " << in(1, "long long")
      << ";\n";
    s << "  float* y = (float*)args->outputs[0];\n  for (long long i = 0; i < V * D; ++i) y[i] = "
         "0.0f;\n";
    s << "  for (long long i = 0; i < N; ++i)\n    for (long long d = 0; d < D; ++d) y[idx[i] * D "
         "+ d] += src[i * D + d];\n";
  } else if (op == "take_along_rows") {
    s << "  const long long B = args->dims[0], D = args->dims[1];\n";
    s << "  const float* x = " << in(0) << ";\n  const long long* idx = " << in(1, "long long")
      << ";\n";
    s << "  float* y = (float*)args->outputs[0];\n  for (long long b = 0; b < B; ++b) y[b] = x[b * "
         "D + idx[b]];\n";
  } else if (op == "matvec") {
    s << "  const long long M = args->dims[0], K = args->dims[1];\n";
    s << "  const float* a = " << in(0) << ";\n  const float* v = " << in(1)
      << ";\n  float* y = (float*)args->outputs[0];\n";
    s << "  for (long long m = 0; m < M; ++m) {\n    float acc = 0.0f;\n"
         "    for (long long k = 0; k < K; ++k) acc += a[m * K + k] * v[k];\n    y[m] = acc;\n  "
         "}\n";
  } else if (cat == "matmul") {
    bool bmm = op == "bmm";
    bool bias = op != "matmul" && !bmm;
    if (bmm)
      s << "  const long long Bt = args->dims[0], M = args->dims[1], K = args->dims[2];\n"
           "  const long long N = (long long)task_param(args, 3, 0);\n";
    else
      s << "  const long long Bt = 1, M = args->dims[0], K = args->dims[1];\n"
           "  const long long N = (long long)task_param(args, 2, 0);\n";
    s << "  const float* a0 = " << in(0) << ";\n  const float* b0 = " << in(1) << ";\n";
    s << "  const float* bias = " << (bias ? in(2) : std::string("nullptr")) << ";\n";
    s << "  float* y0 = (float*)args->outputs[0];\n";
    s << "  constexpr long long T = " << tile << ";  // cache block over M, N and K\n";
    s << "  for (long long z = 0; z < Bt; ++z) {\n"
         "    const float* a = a0 + z * M * K;\n    const float* b = b0 + z * K * N;\n    float* y "
         "= y0 + z * M * N;\n"
         "    for (long long i = 0; i < M * N; ++i) y[i] = 0.0f;\n"
         "    for (long long i0 = 0; i0 < M; i0 += T)\n      for (long long k0 = 0; k0 < K; k0 += "
         "T)\n"
         "        for (long long j0 = 0; j0 < N; j0 += T)\n"
         "          for (long long i = i0; i < std::min(M, i0 + T); ++i)\n"
         "            for (long long k = k0; k < std::min(K, k0 + T); ++k) {\n"
         "              const float av = a[i * K + k];\n"
         "              for (long long j = j0; j < std::min(N, j0 + T); ++j) y[i * N + j] += av * "
         "b[k * N + j];\n"
         "            }\n";
    s << "    for (long long i = 0; i < M; ++i)\n      for (long long j = 0; j < N; ++j) {\n"
         "        const float v = y[i * N + j] + (bias ? bias[j] : 0.0f);\n"
         "        y[i * N + j] = "
      << act_of_matmul(op) << ";\n      }\n  }\n";
  } else {
    throw std::logic_error("host_body: " + op);
  }
  s << "  return 0;\n}\n";
  return s.str();
}

std::string p_literal(const std::vector<double>& p, size_t i) {
  return float_literal(i < p.size() ? p[i] : 0.0);
}

KernelVariant base_variant(const std::string& family, const std::string& backend,
                           const OpInfo& info, const std::vector<double>& op_params,
                           std::vector<std::pair<std::string, int64_t>> params) {
  KernelVariant v;
  v.family = family;
  v.backend = backend;
  v.op = info.name;
  v.op_params = op_params;
  v.params = std::move(params);
  v.name = family + "_" + backend + "_" + info.name +
           (v.params.empty() ? "" : "_" + families::param_list(v.params, "_"));
  return v;
}

std::string op_contract(const OpInfo& info, const std::vector<double>& op_params) {
  std::ostringstream s;
  s << info.name << ": " << info.formula << ". Inputs:";
  for (size_t i = 0; i < info.inputs.size(); ++i) {
    s << (i ? "," : "") << " inputs[" << i << "] = " << info.inputs[i].name << " [";
    for (size_t k = 0; k < info.inputs[i].shape.size(); ++k)
      s << (k ? ", " : "") << info.inputs[i].shape[k];
    s << "] " << info.inputs[i].dtype;
  }
  s << "; output: outputs[0] = " << info.outputs[0].name << " [";
  for (size_t k = 0; k < info.outputs[0].shape.size(); ++k)
    s << (k ? ", " : "") << info.outputs[0].shape[k];
  s << "] " << info.outputs[0].dtype << ". dims = the shape of " << info.inputs[0].name;
  int extra = 0;
  for (size_t i = 0; i < info.params.size(); ++i) {
    s << ", then " << info.params[i] << " = " << (i < op_params.size() ? op_params[i] : 0.0)
      << " as a double bit-cast to int64";
    ++extra;
  }
  std::vector<std::string> missing;
  for (const auto& sz : info.sizes) {
    bool found = false;
    for (const auto& d : info.inputs[0].shape) found |= d == sz;
    if (!found) missing.push_back(sz);
  }
  for (const auto& m : missing) s << ", then the size " << m << " as a double bit-cast to int64";
  s << "; contiguous row-major tensors";
  return s.str();
}

}  // namespace

std::vector<KernelVariant> general_family_variants(const std::string& family,
                                                   const std::string& backend,
                                                   const std::string& op,
                                                   const std::vector<double>& op_params) {
  const OpInfo* info = find_op(op);
  if (!info) throw std::invalid_argument("unknown op " + op);
  std::string cat = info->category;
  std::string fam = cat;
  if (fam != family) return {};
  std::vector<KernelVariant> out;
  KV head = {{"ABI", kernel_abi_prelude()},
             {"P0", p_literal(op_params, 0)},
             {"P1", p_literal(op_params, 1)}};
  const std::string contract = op_contract(*info, op_params);
  auto finish = [&](KernelVariant v, const std::string& body, const std::string& how) {
    const bool cuda = v.backend == "cuda";
    v.source = "// " + info->name + " (" + info->formula + "), " + (cuda ? "CUDA" : "host C++") +
               ": " + how + "\n" + fill(cuda ? kCudaHead : kHostHead, head) + body;
    v.instruction = std::string("Write a ") +
                    (cuda ? "CUDA kernel" : "host (CPU, plain C++17) function") +
                    " for KernelRL's kernelrl_launch contract that computes " + contract + "." +
                    (cuda ? " All work on the given stream." : " The stream argument is null.") +
                    " Approach: " + how + ".";
    out.push_back(std::move(v));
  };
  if (backend == "host") {
    std::vector<int64_t> tiles =
        cat == "matmul" && op != "matvec" ? std::vector<int64_t>{16, 64} : std::vector<int64_t>{0};
    for (int64_t t : tiles) {
      auto v = base_variant(family, "host", *info, op_params,
                            t ? std::vector<std::pair<std::string, int64_t>>{{"TILE", t}}
                              : std::vector<std::pair<std::string, int64_t>>{});
      std::string how =
          t ? "loops blocked in " + std::to_string(t) + "-wide cache tiles over M, N and K"
            : "straightforward loops over contiguous rows";
      finish(v, "}  // namespace\n\n" + host_body(op, t), how);
    }
    return out;
  }
  if (cat == "elementwise") {
    for (int threads : {128, 256, 512})
      for (int vec : {1, 4}) {
        auto v =
            base_variant(family, "cuda", *info, op_params, {{"THREADS", threads}, {"VEC", vec}});
        KV kv = {{"THREADS", std::to_string(threads)},
                 {"VEC", std::to_string(vec)},
                 {"BINARY", is_binary(op) ? "true" : "false"},
                 {"EXPR", ew_exprs().at(op)}};
        finish(v, fill(kCudaElementwise, kv),
               "a grid-stride loop with " + std::to_string(threads) + "-thread blocks" +
                   (vec == 4 ? ", float4 loads and stores when the pointers are 16-byte aligned "
                               "plus a scalar tail"
                             : ", one element per thread per step"));
      }
  } else if (op == "sum_cols" || op == "sum_all") {
    for (int threads : {128, 256}) {
      auto v = base_variant(family, "cuda", *info, op_params, {{"THREADS", threads}});
      finish(v,
             fill(op == "sum_cols" ? kCudaSumCols : kCudaSumAll,
                  {{"THREADS", std::to_string(threads)}}),
             op == "sum_cols"
                 ? "one thread per column summing down the rows (coalesced reads)"
                 : "grid-stride partial sums, warp shuffles and shared memory per block, "
                   "one atomicAdd per block into the zeroed output");
    }
  } else if (cat == "reduction" || cat == "softmax" || cat == "norm") {
    RowOp r = row_op(op);
    for (int block : {0, 1})
      for (int threads : {128, 256}) {
        auto v = base_variant(family, "cuda", *info, op_params,
                              {{"BLOCKROW", block}, {"THREADS", threads}});
        KV kv = {{"THREADS", std::to_string(threads)},
                 {"BLOCK", block ? "true" : "false"},
                 {"KARGS", r.kargs},
                 {"BODY", r.body},
                 {"LARGS", r.largs},
                 {"NIN", std::to_string(r.nin)}};
        finish(v, fill(kCudaRowCommon, kv),
               block ? "one " + std::to_string(threads) +
                           "-thread block per row, warp shuffles then shared memory for the row "
                           "reductions"
                     : "one warp per row (" + std::to_string(threads / 32) +
                           " rows per block), reductions with warp shuffles");
      }
  } else if (cat == "transpose") {
    for (int tiled : {1, 0})
      for (int rows : {8, 16}) {
        if (!tiled && rows == 16) continue;
        auto v = base_variant(family, "cuda", *info, op_params, {{"TILED", tiled}, {"ROWS", rows}});
        finish(v,
               fill(kCudaTranspose, {{"TILED", tiled ? "true" : "false"},
                                     {"ROWS", std::to_string(rows)},
                                     {"RANK", op == "transpose_021" ? "3" : "2"}}),
               tiled ? "32x32 tiles through padded shared memory, " + std::to_string(rows) +
                           " thread rows per tile, coalesced reads and writes"
                     : "one thread per element (coalesced reads, strided writes)");
      }
  } else if (cat == "gather_scatter") {
    std::string kargs, body, launch, largs, mindims = "2";
    if (op == "gather_rows") {
      kargs =
          "const float* __restrict__ table, const long long* __restrict__ idx, float* __restrict__ "
          "y";
      body = "  const long long i = t / D, d = t % D;\n  y[t] = table[idx[i] * D + d];";
      launch =
          "  const long long D = args->dims[1];\n  const long long n_rows = (long "
          "long)task_param(args, 2, 0);\n"
          "  const long long total = n_rows * D;";
      mindims = "3";
    } else if (op == "scatter_add_rows") {
      kargs =
          "const float* __restrict__ src, const long long* __restrict__ idx, float* __restrict__ y";
      body = "  const long long i = t / D, d = t % D;\n  atomicAdd(&y[idx[i] * D + d], src[t]);";
      launch =
          "  const long long n_rows = args->dims[0], D = args->dims[1];\n"
          "  const long long V = (long long)task_param(args, 2, 0);\n"
          "  if (cudaMemsetAsync(args->outputs[0], 0, sizeof(float) * V * D, s) != cudaSuccess) "
          "return 2;\n"
          "  const long long total = n_rows * D;";
      mindims = "3";
    } else {
      kargs =
          "const float* __restrict__ x, const long long* __restrict__ idx, float* __restrict__ y";
      body = "  y[t] = x[t * D + idx[t]];";
      launch =
          "  const long long n_rows = args->dims[0], D = args->dims[1];\n  const long long total = "
          "n_rows;";
    }
    largs =
        "(const float*)args->inputs[0], (const long long*)args->inputs[1], "
        "(float*)args->outputs[0]";
    for (int threads : {128, 256}) {
      auto v = base_variant(family, "cuda", *info, op_params, {{"THREADS", threads}});
      finish(v,
             fill(kCudaGather, {{"THREADS", std::to_string(threads)},
                                {"KARGS", kargs},
                                {"BODY", body},
                                {"LAUNCH", launch},
                                {"LARGS", largs},
                                {"MINDIMS", mindims}}),
             op == "scatter_add_rows"
                 ? "zero the output, then one thread per source element with atomicAdd"
                 : "one thread per output element");
    }
  } else if (op == "matvec") {
    for (int threads : {128, 256}) {
      auto v = base_variant(family, "cuda", *info, op_params, {{"THREADS", threads}});
      finish(v, fill(kCudaMatvec, {{"THREADS", std::to_string(threads)}}),
             "one warp per row, lanes striding over K, shuffle reduction");
    }
  } else if (cat == "matmul") {
    bool bmm = op == "bmm";
    std::string sizes =
        bmm ? "  const long long Bt = args->dims[0], M = args->dims[1], K = args->dims[2];\n"
              "  const long long N = (long long)task_param(args, 3, 0);"
            : "  const long long Bt = 1, M = args->dims[0], K = args->dims[1];\n"
              "  const long long N = (long long)task_param(args, 2, 0);";
    for (int tile : {16, 32}) {
      auto v = base_variant(family, "cuda", *info, op_params, {{"TILE", tile}});
      finish(v,
             fill(kCudaMatmul, {{"TILE", std::to_string(tile)},
                                {"BIAS", op != "matmul" && !bmm ? "true" : "false"},
                                {"ACT", act_of_matmul(op)},
                                {"SIZES", sizes},
                                {"MINDIMS", bmm ? "4" : "3"}}),
             std::to_string(tile) + "x" + std::to_string(tile) +
                 " shared-memory tiles of A and B, one output per thread, fp32 FMA, bias and "
                 "activation fused in the epilogue");
    }
  }
  return out;
}

}  // namespace kernelrl
