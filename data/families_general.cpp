// General kernel families (CUDA and host): elementwise, reduction, softmax, norm, transpose,
// gather_scatter, matmul. Each category's kernels are real files in kernels/ (general_<cat>.cuh
// for CUDA, general_<cat>_host.h for the host; the ops are templates over the task's params, one
// struct per op), embedded at build time by kernels/CMakeLists.txt. A variant is the code of that
// file its op and Config use (families_source.cpp: one op's struct, one path) plus an instance
// block: the task's scalar params (`struct Task`), the op over them (`using Op`), the variant's
// knobs as a Config, and a kernelrl_launch calling the op. Sizes come from kernelrl_args.dims: the
// first input's shape, then the task params bit-cast from double (op params first, then the sizes
// the first input does not carry, see task_suite.h).
#include <cctype>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>

#include "data/families.h"
#include "data/families_internal.h"
#include "data/tasks/task_ops.h"
#include "kernels/general_elementwise_host_text.h"  // generated from kernels/ (k_<file>_text)
#include "kernels/general_elementwise_text.h"
#include "kernels/general_gather_scatter_host_text.h"
#include "kernels/general_gather_scatter_text.h"
#include "kernels/general_matmul_host_text.h"
#include "kernels/general_matmul_text.h"
#include "kernels/general_norm_host_text.h"
#include "kernels/general_norm_text.h"
#include "kernels/general_reduction_host_text.h"
#include "kernels/general_reduction_text.h"
#include "kernels/general_softmax_host_text.h"
#include "kernels/general_softmax_text.h"
#include "kernels/general_transpose_host_text.h"
#include "kernels/general_transpose_text.h"

namespace kernelrl {
namespace {

using families::ConfigArgs;
using families::float_literal;

// The kernels/ files of each family: {family, CUDA body, host body}.
struct FamilyFiles {
  const char* family;
  const char* cuda;
  const char* host;
};
constexpr FamilyFiles kFamilyFiles[] = {
    {"elementwise", k_general_elementwise_text, k_general_elementwise_host_text},
    {"reduction", k_general_reduction_text, k_general_reduction_host_text},
    {"softmax", k_general_softmax_text, k_general_softmax_host_text},
    {"norm", k_general_norm_text, k_general_norm_host_text},
    {"transpose", k_general_transpose_text, k_general_transpose_host_text},
    {"gather_scatter", k_general_gather_scatter_text, k_general_gather_scatter_host_text},
    {"matmul", k_general_matmul_text, k_general_matmul_host_text},
};

const char* body_text(const std::string& family, bool cuda) {
  for (const auto& f : kFamilyFiles)
    if (family == f.family) return cuda ? f.cuda : f.host;
  throw std::logic_error("general family: no kernel file for " + family);
}

// The op's struct in kernels/: its name in CamelCase (leaky_relu -> LeakyRelu), over the task.
std::string op_struct(const std::string& op) {
  std::string s = "general::";
  bool up = true;
  for (char c : op) {
    if (c == '_') {
      up = true;
      continue;
    }
    s += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return s + "<Task>";
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
  const std::string cat = info->category;
  if (cat != family) return {};
  std::vector<KernelVariant> out;
  const std::string task =
      "struct Task {\n  static constexpr float P0 = " + p_literal(op_params, 0) +
      ", P1 = " + p_literal(op_params, 1) + ";\n};";
  const std::string contract = op_contract(*info, op_params);
  const std::string opt = "Op";  // the instance's alias of the op's struct over the task
  // `config`: the Config type and its knobs ("" for none); `call`: kernelrl_launch's return
  // expression, using Cfg and Op.
  auto finish = [&](KernelVariant v, const std::string& config, const ConfigArgs& knobs,
                    const std::string& call, const std::string& how) {
    const bool cuda = v.backend == "cuda";
    const bool uses_op = call.find("Op>") != std::string::npos || call.rfind("Op::", 0) == 0;
    v.source = families::variant_source(
        body_text(cat, cuda),
        families::instance_block(
            info->name + " (" + info->formula + "), " + (cuda ? "CUDA" : "host C++") + ": " + how,
            task + (uses_op ? "\nusing Op = " + op_struct(op) + ";" : ""), config, knobs, call,
            cuda));
    v.instruction = std::string("Write a ") +
                    (cuda ? "CUDA kernel" : "host (CPU, plain C++17) function") +
                    " for KernelRL's kernelrl_launch contract that computes " + contract + "." +
                    (cuda ? " All work on the given stream." : " The stream argument is null.") +
                    " Approach: " + how + ".";
    out.push_back(std::move(v));
  };
  auto b = [](bool x) { return std::string(x ? "true" : "false"); };
  auto n = [](int64_t x) { return std::to_string(x); };
  using Knobs = std::vector<std::pair<std::string, int64_t>>;
  // The op's grid: its entry's (task_ops.h `grid`), else its family's. Each grid emits the
  // variants of one kernels/ entry point over that entry point's knobs.
  const std::string grid = info->grid.empty() ? cat : info->grid;
  if (backend == "host") {
    // Host grids: the entry point and, for the matmul family's tiled loop, its cache tiles; any
    // other grid is one plain variant calling the op's own `run`.
    struct HostGrid {
      std::string call;
      std::vector<int64_t> tiles;
    };
    static const std::map<std::string, HostGrid> kHostGrids = {
        {"elementwise", {"general::elementwise_host::run<Op>(args)", {0}}},
        {"matvec", {"general::matmul_host::run_matvec(args)", {0}}},
        {"matmul", {"general::matmul_host::run<Cfg, Op>(args)", {16, 64}}}};
    const auto it = kHostGrids.find(grid);
    const HostGrid host =
        it != kHostGrids.end() ? it->second : HostGrid{opt + "::run(args)", {0}};
    for (int64_t t : host.tiles) {
      auto v = base_variant(family, "host", *info, op_params, t ? Knobs{{"TILE", t}} : Knobs{});
      std::string how =
          t ? "loops blocked in " + std::to_string(t) + "-wide cache tiles over M, N and K"
            : "straightforward loops over contiguous rows";
      finish(v, t ? "general::matmul_host::Config" : "",
             t ? ConfigArgs{{"TILE", n(t)}} : ConfigArgs{}, host.call, how);
    }
    return out;
  }
  // CUDA grids, by name.
  auto rows = [&] {
    for (int block : {0, 1})
      for (int threads : {128, 256}) {
        auto v = base_variant(family, "cuda", *info, op_params,
                              {{"BLOCKROW", block}, {"THREADS", threads}});
        finish(v, "general::rows::Config", {{"THREADS", n(threads)}, {"BLOCK_PER_ROW", b(block)}},
               "general::rows::run<Cfg, " + opt + ">(args, stream)",
               block ? "one " + std::to_string(threads) +
                           "-thread block per row, warp shuffles then shared memory for the row "
                           "reductions"
                     : "one warp per row (" + std::to_string(threads / 32) +
                           " rows per block), reductions with warp shuffles");
      }
  };
  // sum_cols and sum_all: their own entry points (general::run_<op>).
  auto column_or_all = [&](const std::string& how) {
    for (int threads : {128, 256}) {
      auto v = base_variant(family, "cuda", *info, op_params, {{"THREADS", threads}});
      finish(v, "general::ColsConfig", {{"THREADS", n(threads)}},
             "general::run_" + op + "<Cfg>(args, stream)", how);
    }
  };
  auto gather_scatter = [&](const std::string& how) {
    for (int threads : {128, 256}) {
      auto v = base_variant(family, "cuda", *info, op_params, {{"THREADS", threads}});
      finish(v, "general::gather_scatter::Config", {{"THREADS", n(threads)}},
             "general::gather_scatter::run<Cfg, " + opt + ">(args, stream)", how);
    }
  };
  const std::map<std::string, std::function<void()>> grids = {
      {"elementwise",
       [&] {
         for (int threads : {128, 256, 512})
           for (int vec : {1, 4}) {
             auto v = base_variant(family, "cuda", *info, op_params,
                                   {{"THREADS", threads}, {"VEC", vec}});
             finish(v, "general::elementwise::Config", {{"THREADS", n(threads)}, {"VEC", n(vec)}},
                    "general::elementwise::run<Cfg, " + opt + ">(args, stream)",
                    "a grid-stride loop with " + std::to_string(threads) + "-thread blocks" +
                        (vec == 4 ? ", float4 loads and stores when the pointers are 16-byte "
                                    "aligned plus a scalar tail"
                                  : ", one element per thread per step"));
           }
       }},
      {"columns",
       [&] { column_or_all("one thread per column summing down the rows (coalesced reads)"); }},
      {"atomic_all",
       [&] {
         column_or_all(
             "grid-stride partial sums, warp shuffles and shared memory per block, one atomicAdd "
             "per block into the zeroed output");
       }},
      {"reduction", rows},
      {"softmax", rows},
      {"norm", rows},
      {"transpose",
       [&] {
         for (int tiled : {1, 0})
           for (int rows_per_tile : {8, 16}) {
             if (!tiled && rows_per_tile == 16) continue;
             auto v = base_variant(family, "cuda", *info, op_params,
                                   {{"TILED", tiled}, {"ROWS", rows_per_tile}});
             finish(v, "general::transpose::Config",
                    {{"TILED", b(tiled)}, {"ROWS", n(rows_per_tile)}},
                    "general::transpose::run<Cfg, " + opt + ">(args, stream)",
                    tiled ? "32x32 tiles through padded shared memory, " +
                                std::to_string(rows_per_tile) +
                                " thread rows per tile, coalesced reads and writes"
                          : "one thread per element (coalesced reads, strided writes)");
           }
       }},
      {"gather_scatter", [&] { gather_scatter("one thread per output element"); }},
      {"scatter_add",
       [&] {
         gather_scatter("zero the output, then one thread per source element with atomicAdd");
       }},
      {"matvec",
       [&] {
         for (int threads : {128, 256}) {
           auto v = base_variant(family, "cuda", *info, op_params, {{"THREADS", threads}});
           finish(v, "general::matmul::MatvecConfig", {{"THREADS", n(threads)}},
                  "general::matmul::run_matvec<Cfg>(args, stream)",
                  "one warp per row, lanes striding over K, shuffle reduction");
         }
       }},
      {"matmul",
       [&] {
         for (int tile : {16, 32}) {
           auto v = base_variant(family, "cuda", *info, op_params, {{"TILE", tile}});
           finish(v, "general::matmul::Config", {{"TILE", n(tile)}},
                  "general::matmul::run<Cfg, " + opt + ">(args, stream)",
                  std::to_string(tile) + "x" + std::to_string(tile) +
                      " shared-memory tiles of A and B, one output per thread, fp32 FMA, bias "
                      "and activation fused in the epilogue");
         }
       }},
  };
  const auto it = grids.find(grid);
  if (it == grids.end()) throw std::logic_error("general family " + cat + ": no grid " + grid);
  it->second();
  return out;
}

}  // namespace kernelrl
