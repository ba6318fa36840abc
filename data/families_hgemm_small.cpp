// HGEMM kernel family hgemm_small: every variant is the code of kernels/hgemm_small.cuh (with
// mma_sync.cuh; embedded at build time by kernels/CMakeLists.txt) that its Config uses
// (families_source.cpp), followed by an instance block that picks a Config and defines
// kernelrl_launch. fp32 accumulation only. sm_90a (thread-block clusters,
// distributed shared memory and griddepcontrol need Hopper; mma.sync and cp.async would not).
#include <sstream>

#include "data/families.h"
#include "data/families_internal.h"
#include "data/tasks/task_ops.h"
#include "kernels/hgemm_small_text.h"  // k_hgemm_small_text (generated)

namespace kernelrl {
namespace families {
namespace {

struct SmallKnobs {
  int bm, bn, bk, stages, split, epi, pdl;
};

std::string small_instruction(const SmallKnobs& k, const std::string& contract_text, bool tn) {
  std::ostringstream s;
  s << "Write a CUDA HGEMM kernel for KernelRL's kernelrl_launch contract: " << contract_text
    << ". Latency first, for small and skinny shapes where a call costs a few microseconds: one "
       "launch of 4-warp blocks on "
    << k.bm << "x" << k.bn << " output tiles, mma.sync.aligned.m16n8k16 (fp32 accumulators) fed "
    << "by ldmatrix.x4" << (tn ? "" : " (.trans for the row-major B tile)")
    << " from XOR-swizzled shared memory that a " << k.stages << "-stage cp.async pipeline of "
    << k.bk
    << "-deep k-tiles fills (16-byte copies, zero-fill past M and N), no persistent "
       "scheduler, no TMA, no second kernel";
  if (k.split > 1)
    s << "; split-K over the " << k.split
      << " blocks of a thread-block cluster (cudaLaunchKernelEx with a cluster dimension): each "
         "block writes its fp32 partial tile to its shared memory, a cluster barrier, then block "
         "r sums its "
      << k.bm / k.split
      << " rows of every block's partial through distributed shared memory "
         "(cluster.map_shared_rank) and stores them as fp16, a second cluster barrier before "
         "exit (no workspace, no atomics, no memset)";
  else if (k.epi)
    s << "; the epilogue stages the fp16 tile through the drained pipeline's shared memory (rows "
         "padded by 8 halves) and writes it with 16-byte coalesced stores";
  else
    s << "; the epilogue stores fp16 pairs straight from the accumulator registers";
  if (k.pdl)
    s << "; programmatic dependent launch (cudaLaunchAttributeProgrammaticStreamSerialization): "
         "griddepcontrol.launch_dependents at the start so the next kernel of the stream is "
         "scheduled early, and griddepcontrol.wait before the first global load";
  s << ". Calls only enqueue on the stream (CUDA-graph capturable).";
  return s.str();
}

std::string instance_text(const SmallKnobs& k, bool tn) {
  std::ostringstream what;
  what << k.bm << "x" << k.bn << "x" << k.bk << " tiles, " << k.stages << " stages, split-K "
       << k.split << (k.split > 1 ? " (cluster)" : "")
       << (k.split > 1 ? ""
           : k.epi     ? ", shared-memory epilogue"
                       : ", direct stores")
       << ", PDL " << (k.pdl ? "on" : "off") << ", layout " << (tn ? "tn" : "nn");
  ConfigArgs knobs = {{"BM", std::to_string(k.bm)},         {"BN", std::to_string(k.bn)},
                      {"BK", std::to_string(k.bk)},         {"STAGES", std::to_string(k.stages)},
                      {"SPLIT_K", std::to_string(k.split)}, {"EPI", k.epi ? "true" : "false"},
                      {"PDL", k.pdl ? "true" : "false"},    {"B_COL_MAJOR", tn ? "true" : "false"}};
  return instance_block(what.str(), "", "hgemm_small::Config", knobs,
                        "hgemm_small::run<Cfg>(args, stream)", /*cuda=*/true);
}

}  // namespace

std::vector<KernelVariant> hgemm_small_variants() {
  // {BM, BN, BK, STAGES}: 4 warps of (BM/2)x(BN/2); shared memory STAGES * (BM + BN) * BK * 2
  // bytes or the fp32 partial tile, whichever is larger. Measured on an H100 (docs/benchmarks.md,
  // issue 24): below ~2^26 the 32x32, 32x64 and 64x32 tiles with the whole of a short K in one
  // or two stages led (one dependent DRAM round trip per call); BK 128 puts twice the K in
  // flight per stage. Split-K (2-16 blocks of one cluster, BM divisible by it) costs ~1.3 us of
  // cluster launch and reduction and pays only on long K. EPI: with split 1 only (the split-K
  // reduction always writes 16-byte chunks). PDL helped grids of a few dozen blocks (~0.2 us)
  // and cost as much on grids of a few hundred.
  const int tiles[][4] = {{32, 32, 64, 4},  {32, 32, 128, 3}, {32, 64, 64, 4},  {32, 64, 128, 3},
                          {64, 32, 64, 4},  {64, 32, 128, 3}, {64, 64, 64, 3},  {64, 64, 64, 4},
                          {64, 128, 32, 4}, {128, 64, 32, 4}, {128, 128, 32, 3}};
  std::vector<SmallKnobs> grid;
  for (auto& t : tiles)
    for (int split : {1, 2, 4, 8, 16})
      for (int epi : {1, 0})
        for (int pdl : {1, 0}) {
          if (t[0] % split || (split > 1 && !epi)) continue;
          grid.push_back({t[0], t[1], t[2], t[3], split, epi, pdl});
        }
  std::vector<KernelVariant> out;
  for (const std::string layout : {"nn", "tn"})
    for (const auto& k : grid) {
      const bool tn = layout == "tn";
      KernelVariant v;
      v.family = "hgemm_small";
      v.backend = "cuda";
      v.op = hgemm_op().name;
      v.layout = layout;
      v.acc = "f32";
      v.arch = "sm_90a";
      v.params = {{"BM", k.bm},        {"BN", k.bn},   {"BK", k.bk},  {"STAGES", k.stages},
                  {"SPLITK", k.split}, {"EPI", k.epi}, {"PDL", k.pdl}};
      v.name = v.family + "_" + layout + "_accf32_" + param_list(v.params, "_");
      v.instruction = small_instruction(k, hgemm_contract(layout, "f32"), tn);
      v.source = variant_source(k_hgemm_small_text, instance_text(k, tn));
      out.push_back(std::move(v));
    }
  return out;
}

}  // namespace families
}  // namespace kernelrl
