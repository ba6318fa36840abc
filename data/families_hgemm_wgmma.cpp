// HGEMM kernel family hgemm_wgmma (sm_90a only): every variant is the code of
// kernels/hgemm_wgmma.cuh (embedded at build time by kernels/CMakeLists.txt) that its Config uses
// (families_source.cpp), followed by an instance block that picks a Config and defines
// kernelrl_launch. fp32 accumulation only.
#include <sstream>

#include "data/families.h"
#include "data/families_internal.h"
#include "data/tasks/task_ops.h"
#include "kernels/hgemm_wgmma_text.h"  // k_hgemm_wgmma_text (generated)

namespace kernelrl {
namespace families {
namespace {

struct WgmmaKnobs {
  int bm, bn, bk, stages, consumers, cluster, raster, swizzle, split, epi;
};

std::string instance_block(const WgmmaKnobs& k, bool tn) {
  std::ostringstream s;
  s << "\n// ---- instance: " << k.bm << "x" << k.bn << "x" << k.bk << " tiles, " << k.stages
    << " stages, " << k.consumers << " consumer warpgroup(s), cluster " << k.cluster
    << ", raster " << k.raster << "/" << k.swizzle << ", split-K " << k.split << ", "
    << (k.epi ? "TMA-store" : "direct-store") << " epilogue, layout " << (tn ? "tn" : "nn")
    << "\n"
    << "using Cfg = hgemm_wgmma::Config</*BM=*/" << k.bm << ", /*BN=*/" << k.bn << ", /*BK=*/"
    << k.bk << ", /*STAGES=*/" << k.stages << ", /*CONSUMERS=*/" << k.consumers
    << ", /*CLUSTER=*/" << k.cluster << ", /*B_KMAJOR=*/" << (tn ? "true" : "false")
    << ", /*RASTER=*/" << k.raster << ", /*SWIZZLE=*/" << k.swizzle << ", /*SPLIT_K=*/" << k.split
    << ", /*EPI=*/" << k.epi << ">;\n"
    << "extern \"C\" int kernelrl_launch(const kernelrl_args* args, void* stream) {\n"
    << "  return hgemm_wgmma::run<Cfg>(args, stream);\n"
    << "}\n";
  return s.str();
}

std::string instruction(const WgmmaKnobs& k, const std::string& contract_text, bool tn) {
  std::ostringstream s;
  s << "Write a CUDA HGEMM kernel for KernelRL's kernelrl_launch contract: " << contract_text
    << ". Target Hopper (sm_90a): wgmma.mma_async m64n" << k.bn
    << "k16 (fp16 in, fp32 accumulators in registers) reading A and B from 128B-swizzled "
       "shared memory"
    << (tn ? " (both K-major)" : " (A K-major, B N-major: the transposed-B descriptor)")
    << ", filled by TMA (cp.async.bulk.tensor, tensor maps encoded on the host through "
       "cudaGetDriverEntryPointByVersion) through a "
    << k.stages << "-stage mbarrier pipeline (full/empty barriers, expect_tx). " << k.bm << "x"
    << k.bn << "x" << k.bk << " block tiles; warp-specialized: one producer warpgroup (one "
    << "thread issues the loads) and " << k.consumers << " consumer warpgroup(s) of "
    << k.bm / k.consumers << " rows"
    << (k.consumers == 2 ? ", registers moved to the consumers with setmaxnreg (40/232)" : "")
    << "; persistent: one CTA per SM walks the tiles in bands of " << k.swizzle
    << (k.raster == 0 ? " tile columns" : " tile rows") << " for L2 reuse";
  if (k.cluster > 1)
    s << "; 2-CTA clusters on vertically adjacent tiles, each CTA loading half of the shared B "
         "tile with TMA multicast and releasing a stage to both CTAs' empty barriers";
  if (k.split > 1)
    s << "; split-K into up to " << k.split
      << " k ranges writing fp32 partial tiles to the workspace and a second kernel summing "
         "them into C (no more ranges than k-blocks or than the workspace holds partials for, "
         "none empty; one range when two do not fit)";
  s << (k.epi ? "; epilogue: fp16 64x64 boxes through 128B-swizzled shared memory "
                "(conflict-free) and TMA stores, two buffers per consumer"
              : "; epilogue: fp16 pairs stored straight from the accumulator registers");
  s << ". Calls only enqueue on the stream (CUDA-graph capturable).";
  return s.str();
}

}  // namespace

std::vector<KernelVariant> hgemm_wgmma_variants() {
  // {BM, BN, BK, STAGES, CONSUMERS}; shared memory STAGES * (BM + BN) * BK * 2 bytes + 16 KiB of
  // TMA-store buffers per consumer stays under 227 KiB. Measured on an H100 (docs/benchmarks.md):
  // 128x256 with 4 stages and bands of 16 tile rows led at 4096^3 and 8192^3; the small tiles
  // and split-K are for shapes with fewer tiles than SMs. Split-K 2 and 4 for every mid and
  // small tile; 8, 16 and 32 for the few-tile, long-K shapes (M, N 64-256, K 12288-16384, where
  // split 4 left 4-16 CTAs of 132 working) on the 128x128 tiles without clusters and the 64x128
  // and 128x64 tiles, one raster each.
  const int big[][5] = {{128, 256, 64, 4, 2}, {128, 256, 64, 3, 2}, {256, 128, 64, 4, 2},
                        {256, 128, 64, 3, 2}};
  const int mid[][5] = {{128, 128, 64, 6, 2}, {128, 128, 64, 4, 2}};
  const int small[][5] = {{128, 128, 64, 6, 1}, {64, 128, 64, 8, 1}, {64, 256, 64, 4, 1},
                          {128, 64, 64, 8, 2}};
  const std::pair<int, int> rasters[] = {{1, 16}, {1, 8}, {0, 8}, {0, 16}};
  std::vector<WgmmaKnobs> grid;
  for (auto& t : big) {
    for (int cluster : {1, 2})
      for (auto [raster, swz] : rasters)
        grid.push_back({t[0], t[1], t[2], t[3], t[4], cluster, raster, swz, 1, 1});
    grid.push_back({t[0], t[1], t[2], t[3], t[4], 1, 1, 16, 1, 0});  // direct stores
  }
  const int deep_splits[] = {8, 16, 32};
  for (auto& t : mid) {
    for (int cluster : {1, 2})
      for (int split : {1, 2, 4})
        for (auto [raster, swz] : {rasters[0], rasters[2]})
          grid.push_back({t[0], t[1], t[2], t[3], t[4], cluster, raster, swz, split,
                          split == 1 ? 1 : 0});  // split-K: fp32 partials, direct stores
    for (int split : deep_splits)
      grid.push_back({t[0], t[1], t[2], t[3], t[4], 1, 1, 16, split, 0});
  }
  grid.push_back({128, 192, 64, 4, 2, 1, 1, 16, 1, 1});
  grid.push_back({128, 128, 128, 3, 2, 1, 0, 8, 1, 1});
  for (auto& t : small) {
    for (int split : {1, 2, 4})
      for (int epi : {1, 0}) {
        if (split > 1 && epi) continue;  // split-K writes fp32 partials, no TMA store
        grid.push_back({t[0], t[1], t[2], t[3], t[4], 1, 0, 8, split, epi});
      }
    if (t[0] * t[1] == 64 * 128)  // 64x128 and 128x64
      for (int split : deep_splits)
        grid.push_back({t[0], t[1], t[2], t[3], t[4], 1, 0, 8, split, 0});
  }
  std::vector<KernelVariant> out;
  for (const std::string layout : {"nn", "tn"})
    for (const auto& k : grid) {
      const bool tn = layout == "tn";
      KernelVariant v;
      v.family = "hgemm_wgmma";
      v.backend = "cuda";
      v.op = hgemm_op().name;
      v.layout = layout;
      v.acc = "f32";
      v.arch = "sm_90a";
      v.params = {{"BM", k.bm},          {"BN", k.bn},         {"BK", k.bk},
                  {"STAGES", k.stages},  {"CONSUMERS", k.consumers}, {"CLUSTER", k.cluster},
                  {"RASTER", k.raster},  {"SWIZZLE", k.swizzle}, {"SPLITK", k.split},
                  {"EPI", k.epi}};
      v.name = v.family + "_" + layout + "_accf32_" + param_list(v.params, "_");
      v.instruction = instruction(k, hgemm_contract(layout, "f32"), tn);
      v.source = variant_source(k_hgemm_wgmma_text, instance_block(k, tn));
      out.push_back(std::move(v));
    }
  return out;
}

}  // namespace families
}  // namespace kernelrl
