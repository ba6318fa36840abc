// HGEMM kernel family hgemm_cutlass (sm_90a only): every variant is the code of
// kernels/hgemm_cutlass.cuh (CUTLASS 3.x collective builders; embedded at build time by
// kernels/CMakeLists.txt) that its Config uses (families_source.cpp), followed by an instance
// block that picks a Config and defines kernelrl_launch. The evaluator compiles
// candidates with the CUTLASS headers of reward.include_dirs. fp32 accumulation only.
#include <sstream>

#include "data/families.h"
#include "data/families_internal.h"
#include "data/tasks/task_ops.h"
#include "kernels/hgemm_cutlass_text.h"  // k_hgemm_cutlass_text (generated)

namespace kernelrl {
namespace families {
namespace {

// SCHED as in the body's enum Sched: 0 cooperative, 1 ping-pong, 2 cooperative + stream-K.
struct CutlassKnobs {
  int bm, bn, bk, cm, cn, sched, raster, swizzle;
};

const char* kSchedEnum[] = {"kCooperative", "kPingpong", "kStreamK"};
const char* kSchedName[] = {"cooperative", "ping-pong", "stream-K"};

std::string cutlass_instance_block(const CutlassKnobs& k, bool tn) {
  std::ostringstream s;
  s << "\n// ---- instance: " << k.bm << "x" << k.bn << "x" << k.bk << " tile, cluster " << k.cm
    << "x" << k.cn << ", " << kSchedName[k.sched] << ", raster " << k.raster << " swizzle "
    << k.swizzle << ", layout " << (tn ? "tn" : "nn") << "\n"
    << "using Cfg = hgemm_cutlass::Config<" << k.bm << ", " << k.bn << ", " << k.bk << ", " << k.cm
    << ", " << k.cn << ", hgemm_cutlass::" << kSchedEnum[k.sched] << ", /*B_KMAJOR=*/"
    << (tn ? "true" : "false") << ", /*RASTER=*/" << k.raster << ", /*SWIZZLE=*/" << k.swizzle
    << ">;\n"
    << "extern \"C\" int kernelrl_launch(const kernelrl_args* args, void* stream) {\n"
    << "  return hgemm_cutlass::run<Cfg>(args, stream);\n"
    << "}\n";
  return s.str();
}

std::string cutlass_instruction(const CutlassKnobs& k, const std::string& contract_text, bool tn) {
  std::ostringstream s;
  s << "Write a CUDA HGEMM kernel for KernelRL's kernelrl_launch contract: " << contract_text
    << ". Target Hopper (sm_90a) with CUTLASS 3.x (the evaluator puts the CUTLASS/CuTe headers "
       "on the include path): build the mainloop with cutlass::gemm::collective::"
       "CollectiveBuilder (Sm90, OpClassTensorOp, half_t A row-major and B "
    << (tn ? "column-major" : "row-major")
    << ", alignment 8, float accumulators) and the epilogue with cutlass::epilogue::collective::"
       "CollectiveBuilder (void source C, half_t D row-major: D = acc), a "
    << k.bm << "x" << k.bn << "x" << k.bk << " CTA tile, a " << k.cm << "x" << k.cn << " cluster";
  if (k.cm * k.cn > 1) s << " (TMA multicast of the shared operand tile)";
  s << ", stages from the shared memory the epilogue leaves (StageCountAutoCarveout), the "
    << (k.sched == 1 ? "KernelTmaWarpSpecializedPingpong schedule (two consumer warpgroups on "
                       "alternate tiles, one's epilogue overlapping the other's mainloop)"
                     : "KernelTmaWarpSpecializedCooperative schedule (two consumer warpgroups "
                       "splitting each tile)")
    << " in a persistent GemmUniversal kernel with "
    << (k.sched == 2 ? "the stream-K tile scheduler (partial tiles reduced through the "
                       "provided workspace)"
                     : "the persistent tile scheduler");
  s << ", rasterized "
    << (k.raster == 1   ? "along M"
        : k.raster == 2 ? "along N"
                        : "in CUTLASS's heuristic order");
  if (k.swizzle > 1) s << " in swizzles of " << k.swizzle << " tiles";
  s << ". Run it through GemmUniversalAdapter on the given stream (capturable: only enqueues "
       "work). Define NDEBUG before the includes so that no device assert splits the wgmma "
       "pipeline.";
  return s.str();
}

}  // namespace

std::vector<KernelVariant> hgemm_cutlass_variants() {
  // Cooperative tiles need BM a multiple of 128 (two consumer warpgroups split M); ping-pong
  // tiles hold the whole tile's accumulators in one warpgroup (BM * BN <= 128 * 128); stream-K
  // runs with the cooperative kernel only (CUTLASS rejects it for ping-pong).
  const int coop[][3] = {
      {128, 64, 64}, {128, 128, 64}, {128, 192, 64}, {128, 256, 64}, {256, 128, 64}};
  const int pingpong[][3] = {
      {64, 64, 64}, {64, 128, 64}, {64, 256, 64}, {128, 64, 64}, {128, 128, 64}};
  const int streamk[][3] = {{128, 64, 64}, {128, 128, 64}, {128, 256, 64}, {256, 128, 64}};
  const std::pair<int, int> clusters[] = {{1, 1}, {2, 1}, {1, 2}};
  std::vector<CutlassKnobs> grid;
  auto add = [&](const int(&t)[3], int sched) {
    for (auto [cm, cn] : clusters) grid.push_back({t[0], t[1], t[2], cm, cn, sched, 0, 1});
  };
  for (auto& t : coop) add(t, 0);
  for (auto& t : pingpong) add(t, 1);
  for (auto& t : streamk) add(t, 2);
  // Raster order and swizzle (L2 reuse) for the large tiles, where they matter at large shapes.
  for (auto& t : {coop[3], coop[4]})
    for (auto [cm, cn] : {clusters[0], clusters[1]})
      for (int raster : {1, 2})
        for (int swizzle : {2, 8}) grid.push_back({t[0], t[1], t[2], cm, cn, 0, raster, swizzle});
  std::vector<KernelVariant> out;
  for (const std::string layout : {"nn", "tn"})
    for (const auto& k : grid) {
      const bool tn = layout == "tn";
      KernelVariant v;
      v.family = "hgemm_cutlass";
      v.backend = "cuda";
      v.op = hgemm_op().name;
      v.layout = layout;
      v.acc = "f32";
      v.arch = "sm_90a";
      v.params = {{"BM", k.bm}, {"BN", k.bn},       {"BK", k.bk},         {"CM", k.cm},
                  {"CN", k.cn}, {"SCHED", k.sched}, {"RASTER", k.raster}, {"SWIZZLE", k.swizzle}};
      v.name = v.family + "_" + layout + "_accf32_" + param_list(v.params, "_");
      v.instruction = cutlass_instruction(k, hgemm_contract(layout, "f32"), tn);
      v.source = variant_source(k_hgemm_cutlass_text, cutlass_instance_block(k, tn));
      out.push_back(std::move(v));
    }
  return out;
}

}  // namespace families
}  // namespace kernelrl
