#include "reward/worker/baselines.h"

#include <tuple>

#ifdef KERNELRL_HAVE_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>
#include <cublas_v2.h>

#include "common/cuda_check.h"
#endif

namespace kernelrl::worker {

namespace {
constexpr size_t kWorkspaceBytes = 32u << 20;  // the 32 MiB every contender gets
using ShapeKey = std::tuple<std::string, int64_t, int64_t, int64_t>;
}  // namespace

struct HgemmBaselines::Impl {
  Backend& backend;
  at::Device device;
  std::map<ShapeKey, int> lt_auto;
#ifdef KERNELRL_HAVE_CUDA
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  at::Tensor workspace;
  // One cuBLASLt plan per (layout, M, N, K): descriptors and the heuristic list.
  struct LtPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    std::vector<cublasLtMatmulHeuristicResult_t> algos;
  };
  std::map<ShapeKey, LtPlan> plans;

  LtPlan& plan(const std::string& layout, int64_t m, int64_t n, int64_t k) {
    ShapeKey key{layout, m, n, k};
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    LtPlan p;
    // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B is the first operand.
    CUDA_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = layout == "tn" ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    CUDA_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUDA_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (layout == "tn")  // Btn viewed column-major: K×N with ld K, transposed
      CUDA_CHECK(cublasLtMatrixLayoutCreate(&p.lb, CUDA_R_16F, k, n, k));
    else
      CUDA_CHECK(cublasLtMatrixLayoutCreate(&p.lb, CUDA_R_16F, n, k, n));
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p.la, CUDA_R_16F, k, m, k));
    CUDA_CHECK(cublasLtMatrixLayoutCreate(&p.lc, CUDA_R_16F, n, m, n));
    cublasLtMatmulPreference_t pref;
    CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = kWorkspaceBytes;
    CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws));
    std::vector<cublasLtMatmulHeuristicResult_t> res(100);
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, p.op, p.lb, p.la, p.lc, p.lc, pref, 100,
                                                       res.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_SUCCESS)
      for (int i = 0; i < found; ++i)
        if (res[i].state == CUBLAS_STATUS_SUCCESS) p.algos.push_back(res[i]);
    return plans.emplace(key, p).first->second;
  }

  bool lt_run(LtPlan& p, int index, const HgemmOperands& o, const std::string& layout) {
    if (index < 0 || index >= static_cast<int>(p.algos.size())) return false;
    const float alpha = 1.f, beta = 0.f;
    const void* b = layout == "tn" ? o.Btn.data_ptr() : o.Bnn.data_ptr();
    return cublasLtMatmul(lt, p.op, &alpha, b, p.lb, o.A.data_ptr(), p.la, &beta, o.C.data_ptr(),
                          p.lc, o.C.data_ptr(), p.lc, &p.algos[index].algo,
                          workspace.data_ptr(), kWorkspaceBytes,
                          static_cast<cudaStream_t>(backend.stream())) == CUBLAS_STATUS_SUCCESS;
  }
#endif
  Impl(Backend& b, at::Device d) : backend(b), device(d) {}
};

HgemmBaselines::HgemmBaselines(Backend& backend, at::Device device)
    : impl_(std::make_unique<Impl>(backend, device)) {
#ifdef KERNELRL_HAVE_CUDA
  if (backend.gpu()) {
    impl_->workspace = at::empty({static_cast<int64_t>(kWorkspaceBytes)},
                                 at::TensorOptions().dtype(at::kByte).device(device));
    CUDA_CHECK(cublasCreate(&impl_->blas));
    CUDA_CHECK(cublasSetStream(impl_->blas, static_cast<cudaStream_t>(backend.stream())));
    CUDA_CHECK(cublasSetWorkspace(impl_->blas, impl_->workspace.data_ptr(), kWorkspaceBytes));
    CUDA_CHECK(cublasLtCreate(&impl_->lt));
  }
#endif
}

HgemmBaselines::~HgemmBaselines() {
#ifdef KERNELRL_HAVE_CUDA
  for (auto& [k, p] : impl_->plans) {
    cublasLtMatrixLayoutDestroy(p.la);
    cublasLtMatrixLayoutDestroy(p.lb);
    cublasLtMatrixLayoutDestroy(p.lc);
    cublasLtMatmulDescDestroy(p.op);
  }
  if (impl_->lt) cublasLtDestroy(impl_->lt);
  if (impl_->blas) cublasDestroy(impl_->blas);
#endif
}

std::vector<std::string> HgemmBaselines::available() const {
  if (!impl_->backend.gpu()) return {"torch"};
  return {"torch",           "cublas-nn",       "cublas-tn", "lt-heuristic-nn",
          "lt-heuristic-tn", "lt-auto-nn",      "lt-auto-tn"};
}

bool HgemmBaselines::run(const std::string& name, const HgemmOperands& o, const std::string& layout,
                         std::string* error) {
  const int64_t m = o.A.size(0), k = o.A.size(1), n = o.C.size(1);
  if (name == "torch") {
    at::Tensor b = layout == "tn" ? o.Btn.t() : o.Bnn;
    at::Tensor c = o.C;  // matmul_out writes through a non-const handle
#ifdef KERNELRL_HAVE_CUDA
    if (impl_->backend.gpu()) {
      c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(
          static_cast<cudaStream_t>(impl_->backend.stream()), impl_->backend.device_index()));
      at::matmul_out(c, o.A, b);
      return true;
    }
#endif
    at::matmul_out(c, o.A, b);
    return true;
  }
#ifdef KERNELRL_HAVE_CUDA
  if (name == "cublas-nn" || name == "cublas-tn") {
    const float alpha = 1.f, beta = 0.f;
    cublasStatus_t st;
    if (name == "cublas-nn")
      st = cublasGemmEx(impl_->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, o.Bnn.data_ptr(),
                        CUDA_R_16F, n, o.A.data_ptr(), CUDA_R_16F, k, &beta, o.C.data_ptr(),
                        CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else
      st = cublasGemmEx(impl_->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, o.Btn.data_ptr(),
                        CUDA_R_16F, k, o.A.data_ptr(), CUDA_R_16F, k, &beta, o.C.data_ptr(),
                        CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS && error) *error = name + ": " + cublasGetStatusName(st);
    return st == CUBLAS_STATUS_SUCCESS;
  }
  if (name.rfind("lt-", 0) == 0) {
    std::string lay = name.substr(name.size() - 2);
    auto& p = impl_->plan(lay, m, n, k);
    int index = 0;
    if (name.rfind("lt-auto", 0) == 0) {
      index = lt_algo(lay, m, n, k);
      if (index < 0) {
        if (error) *error = name + ": not autotuned";
        return false;
      }
    }
    bool ok = impl_->lt_run(p, index, o, lay);
    if (!ok && error) *error = name + ": cublasLtMatmul failed (algo " + std::to_string(index) + ")";
    return ok;
  }
#endif
  if (error) *error = "unknown baseline " + name;
  return false;
}

int HgemmBaselines::lt_algo_count(const std::string& layout, int64_t m, int64_t n, int64_t k) {
#ifdef KERNELRL_HAVE_CUDA
  if (impl_->backend.gpu()) return static_cast<int>(impl_->plan(layout, m, n, k).algos.size());
#endif
  return 0;
}

bool HgemmBaselines::run_lt(const std::string& layout, int index, const HgemmOperands& o) {
#ifdef KERNELRL_HAVE_CUDA
  if (impl_->backend.gpu())
    return impl_->lt_run(impl_->plan(layout, o.A.size(0), o.C.size(1), o.A.size(1)), index, o, layout);
#endif
  return false;
}

void HgemmBaselines::set_lt_algo(const std::string& layout, int64_t m, int64_t n, int64_t k,
                                 int index) {
  impl_->lt_auto[{layout, m, n, k}] = index;
}

int HgemmBaselines::lt_algo(const std::string& layout, int64_t m, int64_t n, int64_t k) const {
  auto it = impl_->lt_auto.find({layout, m, n, k});
  return it == impl_->lt_auto.end() ? -1 : it->second;
}

}  // namespace kernelrl::worker
