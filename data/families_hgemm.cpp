// HGEMM kernel families hgemm_tiled, hgemm_wmma, hgemm_mma (CUDA) and hgemm_host (C++): every
// variant is the code of its family's file in kernels/ (hgemm_tiled.cuh, hgemm_wmma.cuh,
// hgemm_mma.cuh with mma_sync.cuh, hgemm_host.h; embedded at build time by kernels/
// CMakeLists.txt) that its Config uses (families_source.cpp), followed by an instance block that
// sets the variant's knobs as the family's Config and defines kernelrl_launch.
#include <map>
#include <mutex>
#include <sstream>

#include "data/families.h"
#include "data/families_internal.h"
#include "data/tasks/task_ops.h"
#include "kernels/hgemm_host_text.h"  // k_hgemm_host_text (generated, as the three below)
#include "kernels/hgemm_mma_text.h"
#include "kernels/hgemm_tiled_text.h"
#include "kernels/hgemm_wmma_text.h"

namespace kernelrl {
namespace {

using families::ConfigArgs;
using families::instance_block;

std::string contract(const std::string& layout, const std::string& acc) {
  return families::hgemm_contract(layout, acc);
}

}  // namespace

std::string families::hgemm_contract(const std::string& layout, const std::string& acc) {
  return std::string("C[M,N] = A[M,K] * B[K,N] with A row-major fp16, B ") +
         (layout == "nn" ? "row-major (KxN)" : "column-major (KxN, i.e. NxK row-major)") +
         " fp16 and C row-major fp16, " + (acc == "f32" ? "fp32" : "fp16") +
         " accumulation; inputs[0]=A, inputs[1]=B, outputs[0]=C, dims={M,N,K}; every launch on "
         "the given stream; M, N and K are multiples of 64";
}

namespace {

std::string layout_word(const std::string& layout) {
  return layout == "nn" ? "B row-major (nn)" : "B column-major (tn)";
}

KernelVariant make(const std::string& family, const std::string& backend, const std::string& layout,
                   const std::string& acc, std::vector<std::pair<std::string, int64_t>> params) {
  KernelVariant v;
  v.family = family;
  v.backend = backend;
  v.op = hgemm_op().name;
  v.layout = layout;
  v.acc = acc;
  v.params = std::move(params);
  v.name = family + "_" + layout + "_acc" + acc + "_" + families::param_list(v.params, "_");
  return v;
}

// The variant's knobs as Config arguments, in the order of `names`, then the layout and
// accumulation flags.
ConfigArgs knobs(const KernelVariant& v, std::initializer_list<const char*> names) {
  ConfigArgs out;
  for (const char* n : names) {
    int64_t x = 0;
    for (const auto& [k, val] : v.params)
      if (k == n) x = val;
    out.push_back({n, std::to_string(x)});
  }
  out.push_back({"B_COL_MAJOR", v.layout == "tn" ? "true" : "false"});
  out.push_back({"ACC_F16", v.acc == "f16" ? "true" : "false"});
  return out;
}

std::string flag(int64_t x) {
  return x ? "true" : "false";
}

void finish_tiled(KernelVariant& v) {
  auto p = [&](const char* k) {
    for (auto& [n, x] : v.params)
      if (n == k) return x;
    return int64_t{0};
  };
  std::ostringstream s;
  s << "block tile " << p("BM") << "x" << p("BN") << "x" << p("BK") << ", thread tile " << p("TM")
    << "x" << p("TN") << ", " << layout_word(v.layout) << ", " << v.acc << " accumulation";
  v.source = families::variant_source(
      k_hgemm_tiled_text,
      instance_block(s.str(), "", "hgemm_tiled::Config", knobs(v, {"BM", "BN", "BK", "TM", "TN"}),
                     "hgemm_tiled::run<Cfg>(args, stream)", /*cuda=*/true));
  v.instruction = "Write a CUDA HGEMM kernel for KernelRL's kernelrl_launch contract: " +
                  contract(v.layout, v.acc) +
                  ". Use a classic shared-memory tiled SIMT kernel (no tensor cores): each block "
                  "computes a " +
                  std::to_string(p("BM")) + "x" + std::to_string(p("BN")) + " tile of C, staging " +
                  std::to_string(p("BK")) +
                  "-deep slices of A and B in shared memory (k-major, padded), and each thread "
                  "accumulates a " +
                  std::to_string(p("TM")) + "x" + std::to_string(p("TN")) +
                  " register tile; rows and columns past M and N are zero-filled on load and "
                  "skipped on store.";
}

void finish_wmma(KernelVariant& v) {
  auto p = [&](const char* k) {
    for (auto& [n, x] : v.params)
      if (n == k) return x;
    return int64_t{0};
  };
  std::ostringstream s;
  s << "block tile " << p("BM") << "x" << p("BN") << "x32, warp tile " << p("WM") << "x" << p("WN")
    << ", " << layout_word(v.layout) << ", " << v.acc << " accumulation";
  v.source = families::variant_source(
      k_hgemm_wmma_text,
      instance_block(s.str(), "", "hgemm_wmma::Config", knobs(v, {"BM", "BN", "WM", "WN"}),
                     "hgemm_wmma::run<Cfg>(args, stream)", /*cuda=*/true));
  int warps = static_cast<int>((p("BM") / p("WM")) * (p("BN") / p("WN")));
  v.instruction = "Write a CUDA HGEMM kernel for KernelRL's kernelrl_launch contract: " +
                  contract(v.layout, v.acc) +
                  ". Use the WMMA API (nvcuda::wmma, 16x16x16 fp16 fragments" +
                  (v.acc == "f16" ? std::string(", fp16 accumulator fragments")
                                  : std::string(", fp32 accumulator fragments")) +
                  "): a " + std::to_string(p("BM")) + "x" + std::to_string(p("BN")) +
                  " block tile with " + std::to_string(warps) + " warps of " +
                  std::to_string(p("WM")) + "x" + std::to_string(p("WN")) +
                  " each, 32-deep k slices loaded with 16-byte vector loads into padded shared "
                  "memory, " +
                  (v.layout == "tn" ? "col_major B fragments" : "row_major B fragments") +
                  ", and an epilogue that stages each fragment through shared memory to convert "
                  "to fp16 with bounds checks.";
}

void finish_mma(KernelVariant& v) {
  auto p = [&](const char* k) {
    for (auto& [n, x] : v.params)
      if (n == k) return x;
    return int64_t{0};
  };
  std::ostringstream s;
  s << "block tile " << p("BM") << "x" << p("BN") << "x" << p("BK") << ", warp tile " << p("WM")
    << "x" << p("WN") << ", " << p("STAGES") << " stages, split-K " << p("SPLITK")
    << ", block-swizzle group " << p("GROUP") << ", " << p("VEC") * 2 << "-byte cp.async, "
    << (p("EPI") ? "shared-memory epilogue, " : "") << "min blocks/SM " << p("MINB") << ", "
    << (p("DBUF") ? "double-buffered fragments, " : "") << layout_word(v.layout) << ", " << v.acc
    << " accumulation";
  ConfigArgs kn = knobs(v, {"BM", "BN", "BK", "WM", "WN", "STAGES", "SPLITK", "GROUP", "VEC"});
  kn[6].first = "SPLIT_K";
  kn[7].first = "GROUP_M";
  kn.push_back({"EPI_SMEM", flag(p("EPI"))});
  kn.push_back({"MIN_BLOCKS", std::to_string(p("MINB"))});
  kn.push_back({"DBUF", flag(p("DBUF"))});
  v.source = families::variant_source(
      k_hgemm_mma_text, instance_block(s.str(), "", "hgemm_mma::Config", kn,
                                       "hgemm_mma::run<Cfg>(args, stream)", /*cuda=*/true));
  int warps = static_cast<int>((p("BM") / p("WM")) * (p("BN") / p("WN")));
  std::ostringstream ins;
  ins << "Write a CUDA HGEMM kernel for KernelRL's kernelrl_launch contract: "
      << contract(v.layout, v.acc) << ". Use mma.sync.aligned.m16n8k16 tensor-core instructions ("
      << (v.acc == "f16" ? "fp16" : "fp32") << " accumulators) fed by ldmatrix.x4"
      << (v.layout == "nn" ? " (.trans for the row-major B tile)" : "") << " from shared memory, a "
      << p("STAGES") << "-stage cp.async pipeline (" << p("VEC") * 2
      << "-byte copies, zero-fill past M and N) and XOR-swizzled shared memory so ldmatrix is "
         "bank-conflict free. Block tile "
      << p("BM") << "x" << p("BN") << "x" << p("BK") << " with " << warps << " warps of " << p("WM")
      << "x" << p("WN") << "; grouped block rasterization with groups of " << p("GROUP")
      << " block rows for L2 reuse";
  if (p("SPLITK") > 1)
    ins << "; split-K into " << p("SPLITK")
        << " slices accumulated in fp32 in the workspace with atomics, then converted to fp16 "
           "(falling back to one slice when M*N*4 bytes exceed the workspace)";
  if (p("EPI"))
    ins << "; the epilogue stages C through the idle pipeline shared memory (rows padded by 8 "
           "halves) and writes it with 16-byte coalesced stores";
  if (p("MINB") > 1)
    ins << "; __launch_bounds__(" << 32 * warps << ", " << p("MINB") << ") so " << p("MINB")
        << " blocks fit per SM";
  if (p("DBUF"))
    ins << "; fragments double-buffered in registers: each 16-deep k-step's mma.sync runs on "
           "fragments loaded during the step before, while the next step's ldmatrix loads (across "
           "the k-tile boundary too) go to the other buffer, with the pipeline's wait and barrier "
           "before a tile's last k-step; each thread walks its cp.async copies with one pointer "
           "from the tile corner to save registers";
  ins << ". Opt in to the dynamic shared memory it needs ("
      << p("STAGES") * (p("BM") * p("BK") + p("BK") * p("BN")) * 2 / 1024 << " KiB).";
  v.instruction = ins.str();
}

void finish_host(KernelVariant& v) {
  int64_t tile = v.params[0].second;
  std::string summary = "cache blocks of " + std::to_string(tile) + ", " + layout_word(v.layout) +
                        ", " + v.acc + " accumulation";
  ConfigArgs kn = knobs(v, {"TILE"});
  v.source = families::variant_source(
      k_hgemm_host_text, instance_block(summary, "", "hgemm_host::Config", kn,
                                        "hgemm_host::run<Cfg>(args)", /*cuda=*/false));
  v.instruction =
      "Write a host (CPU, plain C++17) HGEMM for KernelRL's kernelrl_launch contract "
      "(the stream argument is null and ignored): " +
      contract(v.layout, v.acc) +
      ". fp16 values are raw 16-bit patterns: convert them to float and back with "
      "round-to-nearest-even by bit manipulation; block the loops in " +
      std::to_string(tile) + "x" + std::to_string(tile) + " tiles of C and K for cache reuse" +
      (v.acc == "f16" ? ", rounding the running sums to fp16 after every k block." : ".");
}

std::vector<KernelVariant> make_variants(const std::string& family) {
  if (family == "hgemm_wgmma") return families::hgemm_wgmma_variants();
  if (family == "hgemm_cutlass") return families::hgemm_cutlass_variants();
  if (family == "hgemm_small") return families::hgemm_small_variants();
  std::vector<KernelVariant> out;
  for (const std::string layout : {"nn", "tn"})
    for (const std::string acc : {"f32", "f16"}) {
      if (family == "hgemm_tiled") {
        const int tiles[][5] = {
            {64, 64, 16, 4, 4}, {128, 128, 16, 8, 8}, {64, 128, 16, 4, 8}, {128, 64, 32, 8, 4}};
        for (auto& t : tiles) {
          auto v = make(family, "cuda", layout, acc,
                        {{"BM", t[0]}, {"BN", t[1]}, {"BK", t[2]}, {"TM", t[3]}, {"TN", t[4]}});
          finish_tiled(v);
          out.push_back(v);
        }
      } else if (family == "hgemm_wmma") {
        const int tiles[][4] = {{64, 64, 32, 32},
                                {128, 128, 64, 64},
                                {128, 64, 64, 32},
                                {64, 128, 32, 64},
                                {128, 128, 32, 64}};
        for (auto& t : tiles) {
          auto v = make(family, "cuda", layout, acc,
                        {{"BM", t[0]}, {"BN", t[1]}, {"WM", t[2]}, {"WN", t[3]}});
          finish_wmma(v);
          out.push_back(v);
        }
      } else if (family == "hgemm_mma") {
        // {BM, BN, BK, WM, WN, STAGES}
        const int tiles[][6] = {{128, 128, 32, 64, 64, 3}, {128, 128, 32, 64, 64, 4},
                                {128, 256, 32, 64, 64, 3}, {128, 256, 32, 64, 64, 4},
                                {256, 128, 32, 64, 64, 3}, {128, 128, 64, 64, 64, 3},
                                {128, 256, 64, 64, 64, 3}, {64, 128, 32, 32, 64, 4},
                                {64, 64, 64, 32, 32, 3},   {128, 128, 32, 32, 64, 4}};
        for (auto& t : tiles)
          for (int split : {1, 2, 4})
            for (int group : {1, 8, 16})
              for (int vec : {8, 4})
                for (int epi : {0, 1})
                  for (int minb : {1, 3}) {
                    const int warps = (t[0] / t[3]) * (t[1] / t[4]);
                    // Keep the grid moderate: the extra knobs on the default raster only.
                    if (vec == 4 && (split != 1 || group != 8 || epi || minb > 1)) continue;
                    if ((epi || minb > 1) && (split != 1 || group != 8)) continue;
                    if (minb > 1 && warps != 4) continue;  // 3 x 4 warps: <= 170 registers
                    if (split > 1 && t[0] * t[1] > 128 * 128) continue;  // split-K: small C
                    auto v = make(family, "cuda", layout, acc,
                                  {{"BM", t[0]},
                                   {"BN", t[1]},
                                   {"BK", t[2]},
                                   {"WM", t[3]},
                                   {"WN", t[4]},
                                   {"STAGES", t[5]},
                                   {"SPLITK", split},
                                   {"GROUP", group},
                                   {"VEC", vec},
                                   {"EPI", epi},
                                   {"MINB", minb}});
                    finish_mma(v);
                    out.push_back(v);
                  }
        // Fragments double-buffered in registers (DBUF): the shared-memory epilogue on the
        // default raster for every tile, groups of 16 for the 8-warp tiles, split-K for the
        // small tiles. {BM, BN, BK, WM, WN, STAGES}
        const int dbuf_tiles[][6] = {
            {128, 128, 32, 64, 64, 3}, {128, 128, 32, 64, 64, 4}, {128, 128, 64, 64, 64, 3},
            {128, 256, 32, 64, 64, 3}, {128, 256, 32, 64, 64, 4}, {128, 256, 64, 64, 64, 3},
            {256, 128, 32, 64, 64, 3}, {256, 128, 32, 64, 64, 4}, {256, 128, 64, 64, 64, 3},
            {64, 128, 32, 32, 64, 4},  {128, 64, 32, 64, 32, 4},  {64, 64, 32, 32, 32, 4},
            {64, 64, 64, 32, 32, 3}};
        for (auto& t : dbuf_tiles)
          for (int split : {1, 2, 4})
            for (int group : {8, 16}) {
              const int warps = (t[0] / t[3]) * (t[1] / t[4]);
              if (group == 16 && (warps != 8 || split != 1)) continue;
              if (split > 1 && t[0] * t[1] > 128 * 64) continue;
              auto v = make(family, "cuda", layout, acc,
                            {{"BM", t[0]},
                             {"BN", t[1]},
                             {"BK", t[2]},
                             {"WM", t[3]},
                             {"WN", t[4]},
                             {"STAGES", t[5]},
                             {"SPLITK", split},
                             {"GROUP", group},
                             {"VEC", 8},
                             {"EPI", split == 1 ? 1 : 0},
                             {"MINB", 1},
                             {"DBUF", 1}});
              finish_mma(v);
              out.push_back(v);
            }
      } else if (family == "hgemm_host") {
        for (int tile : {32, 64}) {
          auto v = make(family, "host", layout, acc, {{"TILE", tile}});
          finish_host(v);
          out.push_back(v);
        }
      }
    }
  return out;
}

}  // namespace

std::vector<KernelVariant> hgemm_family_variants(const std::string& family) {
  // Made once per process (each variant's text is specialized from its body; callers ask per
  // task).
  static std::mutex mutex;
  static std::map<std::string, std::vector<KernelVariant>> made;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = made.find(family);
  if (it == made.end()) it = made.emplace(family, make_variants(family)).first;
  return it->second;
}

std::string hgemm_family_of(const std::string& variant_name) {
  std::string best;  // the longest HGEMM family name the variant's name starts with, then "_"
  for (const auto& f : kernel_families())
    if (f.kind == TaskKind::hgemm && f.name.size() > best.size() &&
        variant_name.rfind(f.name + "_", 0) == 0)
      best = f.name;
  return best;
}

}  // namespace kernelrl
