// The one checked-call macro family for CUDA runtime, driver, cuBLAS/cuBLASLt and NVRTC calls.
// CUDA_CHECK(stmt) evaluates stmt once and, on failure, throws CudaError whose message names
// the statement, the status and file:line. Only for builds with CUDA (KERNELRL_HAVE_CUDA).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvrtc.h>

#include <stdexcept>
#include <string>

namespace kernelrl {

class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

namespace cuda_detail {

inline bool ok(cudaError_t s) { return s == cudaSuccess; }
inline bool ok(CUresult s) { return s == CUDA_SUCCESS; }
inline bool ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }
inline bool ok(nvrtcResult s) { return s == NVRTC_SUCCESS; }

inline std::string name(cudaError_t s) {
  return std::string(cudaGetErrorName(s)) + " (" + cudaGetErrorString(s) + ")";
}
inline std::string name(CUresult s) {
  const char* n = nullptr;
  const char* d = nullptr;
  cuGetErrorName(s, &n);
  cuGetErrorString(s, &d);
  return std::string(n ? n : "CUDA_ERROR_?") + " (" + (d ? d : "unknown") + ")";
}
inline std::string name(cublasStatus_t s) { return cublasGetStatusName(s); }
inline std::string name(nvrtcResult s) { return nvrtcGetErrorString(s); }

template <class Status>
inline void check(Status s, const char* stmt, const char* file, int line) {
  if (ok(s))
    return;
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + stmt + " failed: " +
                      name(s),
                  static_cast<int>(s));
}

}  // namespace cuda_detail
}  // namespace kernelrl

#define CUDA_CHECK(stmt) ::kernelrl::cuda_detail::check((stmt), #stmt, __FILE__, __LINE__)
// After a kernel launch: launch-configuration errors surface through cudaGetLastError.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
