// HGEMM baselines, each called the same way as a candidate (operands of one input set, the
// worker's stream): torch::matmul (task layout), cuBLAS NN and TN (cublasGemmEx, fp32 compute),
// cuBLASLt heuristic top-1 and cuBLASLt with a chosen heuristic algorithm (the autotuner in
// harness.cpp picks it), all with a real 32 MiB workspace. Host backend: torch CPU matmul only.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "reward/worker/backend.h"

namespace kernelrl::worker {

// One input set. Bnn: B as K×N row-major; Btn: B as N×K row-major (= column-major K×N).
struct HgemmOperands {
  at::Tensor A, Bnn, Btn, C;
};

class HgemmBaselines {
 public:
  HgemmBaselines(Backend& backend, at::Device device);
  ~HgemmBaselines();
  // Raw baselines this backend has: torch, cublas-nn, cublas-tn, lt-heuristic-nn/tn, lt-auto-nn/tn.
  std::vector<std::string> available() const;
  // Runs raw baseline `name` on `ops` (task layout `layout` for torch); lt-auto-* use the algo
  // index set by set_lt_algo. Returns false when the library refused (status logged in `error`).
  bool run(const std::string& name, const HgemmOperands& ops, const std::string& layout,
           std::string* error = nullptr);
  // cuBLASLt heuristic list for a shape/layout (up to 100) and running its i-th entry.
  int lt_algo_count(const std::string& layout, int64_t m, int64_t n, int64_t k);
  bool run_lt(const std::string& layout, int index, const HgemmOperands& ops);
  void set_lt_algo(const std::string& layout, int64_t m, int64_t n, int64_t k, int index);
  int lt_algo(const std::string& layout, int64_t m, int64_t n, int64_t k) const;  // -1 unknown

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelrl::worker
