// The HGEMM op: C[M,N] = A[M,K] · B[K,N] in fp16, with the task's layout (nn: B row-major KxN;
// tn: B column-major, stored NxK) and accumulation (f32 | f16) as variables. Its tasks come from
// the HGEMM grids (task_suite.h hgemm_task / hgemm_grid); every family of kind hgemm writes it.
#include <ATen/ATen.h>

#include <sstream>

#include "data/tasks/task_ops.h"
#include "data/tasks/task_suite.h"

namespace kernelrl {
namespace {

std::string hgemm_prompt(const TaskSpec& task, bool host) {
  std::ostringstream s;
  s << "Write a " << (host ? "C++ (CPU)" : "CUDA") << " HGEMM kernel: C = A * B with M=" << task.m
    << ", N=" << task.n << ", K=" << task.k << ". A is MxK row-major fp16 (inputs[0]); B is "
    << (task.layout == "tn" ? "KxN stored column-major (NxK row-major)" : "KxN row-major")
    << " fp16 (inputs[1]); C is MxN row-major fp16 (outputs[0]); dims = {M, N, K}. "
    << "Accumulate in " << (task.acc == "f16" ? "fp16" : "fp32") << ".\n";
  return s.str();
}

std::string hgemm_shape(const TaskSpec& t) {
  return std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k);
}

std::vector<TensorSpec> hgemm_inputs(const TaskSpec& t) {
  return {{"A", {t.m, t.k}, "f16", "normal"},
          {"B", t.layout == "nn" ? std::vector<int64_t>{t.k, t.n} : std::vector<int64_t>{t.n, t.k},
           "f16", "normal"}};
}

}  // namespace

at::Tensor hgemm_reference_fp32(const TaskSpec& t, const at::Tensor& a, const at::Tensor& b) {
  // True fp32 products and sums (no TF32), whatever the global matmul precision says.
  at::Tensor bf = t.layout == "nn" ? b.to(at::kFloat) : b.to(at::kFloat).t();
  at::Tensor af = a.to(at::kFloat);
  if (af.is_cuda()) {
    bool tf32 = at::globalContext().allowTF32CuBLAS();
    at::globalContext().setAllowTF32CuBLAS(false);
    at::Tensor c = at::matmul(af, bf);
    at::globalContext().setAllowTF32CuBLAS(tf32);
    return c;
  }
  return at::matmul(af, bf);
}

std::vector<OpInfo> hgemm_ops() {
  OpInfo op{"hgemm", "", "C = A * B in fp16, fp32 or fp16 accumulation", {"M", "N", "K"},
            // B's stored shape follows the layout (hgemm_task); its symbols name the nn layout.
            {{"A", {"M", "K"}, "f16"}, {"B", {"K", "N"}, "f16"}}, {{"C", {"M", "N"}, "f16"}}, {},
            // The check's bound is the worker's (reward/worker/task_kind.cpp), not a tolerance.
            0, 0,
            [](const OpCall& c) { return hgemm_reference_fp32(c.task, c.in.at(0), c.in.at(1)); }};
  op.kind = TaskKind::hgemm;
  op.prompt = hgemm_prompt;
  op.shape = hgemm_shape;
  op.input_specs = hgemm_inputs;
  op.prompt_names_device = true;
  return {op};
}

}  // namespace kernelrl
