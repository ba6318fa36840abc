// The general-kernel op vocabulary: for each reference op name, its category (which kernel
// family writes it), its size names (the order of kernelrl_args.dims), its input and output
// tensors (shapes over the size names), its scalar parameters and a default tolerance.
// A task YAML names an op and gives the sizes; the tensors follow from here. The LibTorch
// reference computations are in task_suite.cpp; the kernel generators in families_general.cpp.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kernelrl {

struct OpTensor {
  std::string name;
  std::vector<std::string> shape;  // size names, e.g. {"B", "D"}
  std::string dtype = "f32";
  std::string init = "normal";  // normal | positive | index (then `index_of` gives the bound)
  std::string index_of;         // for init=index: values in [0, size index_of)
  OpTensor(std::string n, std::vector<std::string> s, std::string dt = "f32",
           std::string in = "normal", std::string idx = "")
      : name(std::move(n)),
        shape(std::move(s)),
        dtype(std::move(dt)),
        init(std::move(in)),
        index_of(std::move(idx)) {}
};

struct OpInfo {
  std::string name;
  std::string
      category;  // elementwise | reduction | softmax | norm | transpose | gather_scatter | matmul
  std::string formula;             // what it computes, for the prompt
  std::vector<std::string> sizes;  // kernelrl_args.dims in this order
  std::vector<OpTensor> inputs, outputs;
  std::vector<std::string> params;  // scalar names, in TaskSpec.params order
  double atol = 1e-5, rtol = 1e-5;
};

const std::vector<OpInfo>& all_ops();
// nullptr when unknown.
const OpInfo* find_op(const std::string& name);

}  // namespace kernelrl
