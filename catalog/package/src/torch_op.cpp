// The catalog as PyTorch operators (generated package; a separate library so that plain C++
// users need no LibTorch):
//   torch.ops.load_library(".../libkernelrl_catalog_torch.so")
//   c = torch.ops.kernelrl.hgemm(a, b, "nn")   # a: (M, K) fp16; b: (K, N) for nn, (N, K) for tn
//   torch.ops.kernelrl.route(M, N, K, "nn")    # kernel id the dispatch picks, "" = cuBLASLt
//   torch.ops.kernelrl.set_dispatch("auto")    # auto | cublaslt | catalog
//   torch.ops.kernelrl.device()                # the table the current device uses, "" = none
// hgemm runs on the current CUDA stream and may be captured into a CUDA graph once its shape
// has been called outside capture.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <array>
#include <string>

#include "kernelrl_catalog.h"

namespace {

kernelrl_layout parse_layout(c10::string_view layout) {
  TORCH_CHECK(layout == "nn" || layout == "tn",
              "kernelrl::hgemm: layout must be \"nn\" or \"tn\", got \"", std::string(layout),
              "\"");
  return layout == "nn" ? KERNELRL_LAYOUT_NN : KERNELRL_LAYOUT_TN;
}

// (M, N, K) of a @ b (nn) or a @ b.T (tn), with the shape checks.
std::array<int64_t, 3> gemm_dims(const at::Tensor& a, const at::Tensor& b, kernelrl_layout layout) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "kernelrl::hgemm: a and b must be 2-D, got ", a.dim(),
              "-D and ", b.dim(), "-D");
  const int64_t m = a.size(0), k = a.size(1);
  const int64_t kb = layout == KERNELRL_LAYOUT_NN ? b.size(0) : b.size(1);
  const int64_t n = layout == KERNELRL_LAYOUT_NN ? b.size(1) : b.size(0);
  TORCH_CHECK(kb == k, "kernelrl::hgemm: a is ", m, "x", k, " but b (layout ",
              layout == KERNELRL_LAYOUT_NN ? "nn" : "tn", ") has K = ", kb);
  return {m, n, k};
}

at::Tensor hgemm_cuda(const at::Tensor& a, const at::Tensor& b, c10::string_view layout_name) {
  const kernelrl_layout layout = parse_layout(layout_name);
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "kernelrl::hgemm: a and b must be CUDA tensors");
  TORCH_CHECK(a.device() == b.device(), "kernelrl::hgemm: a and b are on different devices");
  TORCH_CHECK(a.scalar_type() == at::kHalf && b.scalar_type() == at::kHalf,
              "kernelrl::hgemm: a and b must be float16, got ", a.scalar_type(), " and ",
              b.scalar_type());
  auto [m, n, k] = gemm_dims(a, b, layout);
  c10::cuda::CUDAGuard guard(a.device());
  at::Tensor ac = a.contiguous(), bc = b.contiguous();
  at::Tensor c = at::empty({m, n}, a.options());
  int rc = kernelrl_catalog_hgemm(m, n, k, ac.data_ptr(), bc.data_ptr(), c.data_ptr(), layout,
                                  at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(rc == 0, "kernelrl::hgemm: ", kernelrl_catalog_last_error());
  return c;
}

// Shapes only (torch.compile / fake tensors).
at::Tensor hgemm_meta(const at::Tensor& a, const at::Tensor& b, c10::string_view layout_name) {
  auto [m, n, k] = gemm_dims(a, b, parse_layout(layout_name));
  (void)k;
  return at::empty({m, n}, a.options());
}

std::string route(int64_t m, int64_t n, int64_t k, c10::string_view layout) {
  const char* id = kernelrl_catalog_route(m, n, k, parse_layout(layout));
  return id ? id : "";
}

std::string device() {
  return kernelrl_catalog_device();
}

void set_dispatch(c10::string_view mode) {
  TORCH_CHECK(mode == "auto" || mode == "cublaslt" || mode == "catalog",
              "kernelrl::set_dispatch: mode must be auto, cublaslt or catalog, got \"",
              std::string(mode), "\"");
  kernelrl_catalog_set_dispatch(mode == "auto"       ? KERNELRL_DISPATCH_AUTO
                                : mode == "cublaslt" ? KERNELRL_DISPATCH_CUBLASLT
                                                     : KERNELRL_DISPATCH_CATALOG);
}

}  // namespace

TORCH_LIBRARY(kernelrl, m) {
  m.def("hgemm(Tensor a, Tensor b, str layout=\"nn\") -> Tensor");
  m.def("route(int m, int n, int k, str layout=\"nn\") -> str", &route);
  m.def("set_dispatch(str mode) -> ()", &set_dispatch);
  m.def("device() -> str", &device);
}

TORCH_LIBRARY_IMPL(kernelrl, CUDA, m) {
  m.impl("hgemm", &hgemm_cuda);
}
TORCH_LIBRARY_IMPL(kernelrl, Meta, m) {
  m.impl("hgemm", &hgemm_meta);
}
