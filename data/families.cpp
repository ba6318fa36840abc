#include "data/families.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>
#include <stdexcept>

#include "common/error.h"
#include "data/families_internal.h"
#include "data/tasks/task_ops.h"

namespace kernelrl {

namespace families {

std::string instance_block(const std::string& what, const std::string& decls,
                           const std::string& config, const ConfigArgs& knobs,
                           const std::string& call, bool cuda) {
  std::string out = "\n// ---- instance: " + what + "\n";
  if (!decls.empty()) out += decls + "\n";
  if (!config.empty()) {
    // `using Cfg = config<...>;`, wrapped at 100 columns with 4-space continuations.
    std::string line = "using Cfg = " + config + "<";
    for (size_t i = 0; i < knobs.size(); ++i) {
      std::string arg =
          "/*" + knobs[i].first + "=*/" + knobs[i].second + (i + 1 < knobs.size() ? "," : ">;");
      if (line.size() + 1 + arg.size() > 100 && line.back() != '<') {
        out += line + "\n";
        line = "    " + arg;
      } else {
        line += (line.back() == '<' ? "" : " ") + arg;
      }
    }
    if (knobs.empty()) line += ">;";
    out += line + "\n";
  }
  out += std::string("extern \"C\" int kernelrl_launch(const kernelrl_args* args, void* ") +
         (cuda ? "stream" : "/*stream: host backend*/") + ") {\n  return " + call + ";\n}\n";
  return out;
}

std::string param_list(const std::vector<std::pair<std::string, int64_t>>& p, const char* sep) {
  std::string s;
  for (size_t i = 0; i < p.size(); ++i) {
    if (i) s += sep;
    std::string k = p[i].first;
    std::transform(k.begin(), k.end(), k.begin(), ::tolower);
    s += k + std::to_string(p[i].second);
  }
  return s;
}

std::string float_literal(double x) {
  char buf[64];
  for (int prec = 6; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, x);
    if (static_cast<float>(std::strtod(buf, nullptr)) == static_cast<float>(x)) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s + "f";
}

}  // namespace families

const std::vector<FamilyInfo>& kernel_families() {
  static const std::vector<FamilyInfo> f = {
      {"hgemm_tiled", TaskKind::hgemm, "cuda", "shared-memory SIMT tiling, per-thread register tiles", ""},
      {"hgemm_wmma", TaskKind::hgemm, "cuda", "WMMA 16x16x16 tensor-core fragments", ""},
      {"hgemm_mma", TaskKind::hgemm, "cuda",
       "mma.sync m16n8k16 + ldmatrix + multi-stage cp.async, swizzled smem, block swizzle, "
       "split-K, double-buffered fragments",
       ""},
      {"hgemm_wgmma", TaskKind::hgemm, "cuda",
       "sm_90a wgmma + TMA multistage mbarrier pipeline, producer/consumer warpgroups, "
       "persistent rastered tiles, 2-CTA multicast clusters, TMA-store epilogue, split-K",
       "sm_90a"},
      {"hgemm_small", TaskKind::hgemm, "cuda",
       "latency-first mma.sync + cp.async for small and skinny shapes: one wave of small tiles, "
       "split-K reduced inside the kernel through a cluster's distributed shared memory, "
       "optional programmatic dependent launch",
       "sm_90a"},
      {"hgemm_cutlass", TaskKind::hgemm, "cuda",
       "sm_90a CUTLASS 3.x collective builders: TMA warp-specialized cooperative and ping-pong "
       "schedules, stream-K, tile, cluster and raster knobs",
       "sm_90a"},
      {"hgemm_host", TaskKind::hgemm, "host", "cache-blocked C++ with fp16 bit conversions", ""},
      {"elementwise", TaskKind::general, "cuda,host", "activations and binary elementwise ops", ""},
      {"reduction", TaskKind::general, "cuda,host", "row/column/all reductions, argmax/argmin, cumsum", ""},
      {"softmax", TaskKind::general, "cuda,host", "row softmax, log-softmax, scaled softmax", ""},
      {"norm", TaskKind::general, "cuda,host", "layernorm, rmsnorm, l2 normalize, add+layernorm", ""},
      {"transpose", TaskKind::general, "cuda,host", "2-D and batched transposes", ""},
      {"gather_scatter", TaskKind::general, "cuda,host", "row gather, scatter-add, take-along", ""},
      {"matmul", TaskKind::general, "cuda,host", "small fp32 matmul + bias + activation, matvec, bmm", ""},
  };
  return f;
}

bool arch_runs(const std::string& needed, const std::string& device_arch) {
  return needed.empty() || device_arch.empty() || needed == device_arch;
}

std::vector<KernelVariant> variants_for_task(const TaskSpec& task, const std::string& backend,
                                             const std::string& device_arch) {
  std::vector<KernelVariant> out;
  if (task.kind == TaskKind::hgemm) {
    for (const auto& fam : kernel_families()) {
      if (fam.kind != TaskKind::hgemm || fam.backends.find(backend) == std::string::npos) continue;
      if (!arch_runs(fam.arch, device_arch)) continue;
      for (auto& v : hgemm_family_variants(fam.name))
        if (v.layout == task.layout && v.acc == task.acc) out.push_back(std::move(v));
    }
    return out;
  }
  const OpInfo* op = find_op(task.op);
  if (!op || op->kind != TaskKind::general) return out;
  std::vector<double> op_params(
      task.params.begin(), task.params.begin() + std::min(task.params.size(), op->params.size()));
  return general_family_variants(op->category, backend, task.op, op_params);
}

std::vector<KernelVariant> sample_variants(const std::string& families_arg, int64_t n,
                                           uint64_t seed, const std::vector<TaskSpec>& tasks) {
  std::vector<std::string> names;
  if (families_arg == "all") {
    for (const auto& f : kernel_families()) names.push_back(f.name);
  } else {
    std::stringstream ss(families_arg);
    std::string x;
    while (std::getline(ss, x, ',')) {
      bool known = false;
      for (const auto& f : kernel_families()) known |= f.name == x;
      if (!known) {
        std::string all;
        for (const auto& f : kernel_families()) all += (all.empty() ? "" : ", ") + f.name;
        throw UserError("--families: unknown family \"" + x + "\" (known: all, " + all + ")");
      }
      names.push_back(x);
    }
  }
  std::vector<std::vector<KernelVariant>> pools;
  for (const auto& name : names) {
    std::vector<KernelVariant> pool;
    const FamilyInfo* info = nullptr;
    for (const auto& f : kernel_families())
      if (f.name == name) info = &f;
    if (info->kind == TaskKind::hgemm) {
      pool = hgemm_family_variants(name);
    } else {
      for (const auto& t : tasks) {
        if (t.kind != TaskKind::general) continue;
        const OpInfo* op = find_op(t.op);
        if (!op || op->category != name) continue;
        std::vector<double> op_params(
            t.params.begin(), t.params.begin() + std::min(t.params.size(), op->params.size()));
        for (const std::string be : {"cuda", "host"})
          for (auto& v : general_family_variants(name, be, t.op, op_params))
            pool.push_back(std::move(v));
      }
    }
    if (!pool.empty()) pools.push_back(std::move(pool));
  }
  return round_robin_variants(std::move(pools), n, seed, /*wrap=*/true);
}

std::vector<KernelVariant> round_robin_variants(std::vector<std::vector<KernelVariant>> pools,
                                                int64_t n, uint64_t seed, bool wrap) {
  std::mt19937_64 rng(seed);
  pools.erase(std::remove_if(pools.begin(), pools.end(), [](const auto& p) { return p.empty(); }),
              pools.end());
  for (auto& pool : pools) std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<KernelVariant> out;
  for (size_t round = 0; static_cast<int64_t>(out.size()) < n; ++round) {
    bool any = false;
    for (const auto& pool : pools) {
      if (static_cast<int64_t>(out.size()) >= n) break;
      if (!wrap && round >= pool.size()) continue;
      out.push_back(pool[round % pool.size()]);
      any = true;
    }
    if (!any) break;
  }
  return out;
}

std::optional<FamilyTags> family_tags(const Triplet& t) {
  if (t.tags.size() < 4 || t.tags[0] != "family") return std::nullopt;
  FamilyTags f;
  f.family = t.tags[1];
  f.backend = t.tags[2];
  f.op = t.tags[3];
  const OpInfo* op = find_op(f.op);
  f.kind = op ? op->kind : TaskKind::general;
  for (size_t i = 4; i < t.tags.size(); ++i) {
    if (t.tags[i].rfind("layout_", 0) == 0) f.layout = t.tags[i].substr(7);
    if (t.tags[i].rfind("acc_", 0) == 0) f.acc = t.tags[i].substr(4);
  }
  return f;
}

std::pair<std::string, std::string> split_instance(const std::string& source) {
  const size_t at = source.find("\n// ---- instance:");
  if (at == std::string::npos)
    throw std::invalid_argument("variant source without an instance block");
  return {source.substr(0, at), source.substr(at)};
}

Triplet variant_triplet(const KernelVariant& v) {
  Triplet t;
  t.id = "family:" + v.name;
  t.instruction = v.instruction;
  std::ostringstream ctx;
  ctx << "Contract (kernel_abi.h): the candidate defines extern \"C\" int "
         "kernelrl_launch(const kernelrl_args* args, void* stream) and returns 0 on success; "
         "kernelrl_args holds inputs[8], outputs[4], dims[8], a workspace of 32 MiB and its "
         "size. ";
  if (v.backend == "cuda")
    ctx << "The evaluator compiles it with nvcc for the GPU, checks it against a reference on "
           "fresh inputs with poisoned outputs and guard bands, and times it with CUDA events "
           "on `stream`.";
  else
    ctx << "The host backend compiles it with g++ into a shared library and calls it with a "
           "null stream on host memory.";
  if (v.family == "hgemm_mma" || v.family == "hgemm_small")
    ctx << "\nmma.sync.aligned.m16n8k16.row.col: A fragment 4 x .b32 (rows g and g+8, k pairs "
           "2t, 2t+8), B fragment 2 x .b32 (k pairs for column g), C fragment rows g and g+8, "
           "columns 2t, 2t+1, with g = lane/4, t = lane%4. ldmatrix.x4 loads four 8x8 matrices "
           "whose row addresses come from lanes 8i..8i+7; .trans transposes each. cp.async.cg "
           "copies 16 bytes global->shared asynchronously; commit_group/wait_group N bound the "
           "copies in flight.";
  if (v.family == "hgemm_cutlass")
    ctx << "\nCUTLASS 3.x (the evaluator's CUTLASS 4.2 headers, nvcc --expt-relaxed-constexpr, "
           "sm_90a): gemm::collective::CollectiveBuilder<Arch, OpClass, ElementA, LayoutA, "
           "AlignmentA, ElementB, LayoutB, AlignmentB, ElementAccumulator, TileShape_MNK, "
           "ClusterShape_MNK, StageCount, KernelSchedule>; epilogue::collective::"
           "CollectiveBuilder<Arch, OpClass, TileShape_MNK, ClusterShape_MNK, EpilogueTile, "
           "ElementAccumulator, ElementCompute, ElementC (void: no source), LayoutC, AlignmentC, "
           "ElementD, LayoutD, AlignmentD, EpilogueSchedule>; gemm::kernel::GemmUniversal<"
           "ProblemShape, CollectiveMainloop, CollectiveEpilogue, TileScheduler>; "
           "device::GemmUniversalAdapter<Kernel>::run(arguments, workspace, stream). Strides "
           "are (rows, columns, batch) with B viewed as N x K.";
  t.context = ctx.str();
  t.code = v.source;
  t.source = "family:" + v.family;
  t.tags = {"family", v.family, v.backend, v.op};
  if (v.op == hgemm_op().name) {
    t.tags.push_back("layout_" + v.layout);
    t.tags.push_back("acc_" + v.acc);
  }
  return t;
}

}  // namespace kernelrl
