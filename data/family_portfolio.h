// Per-shape pruned variant sets for HGEMM family sweeps (`kernelrl bench --families`): for one
// task, a few variants of each family chosen by tile fit and a wave-quantization cost model,
// instead of a family's whole grid. It ranks; it does not measure (the Evaluator does).
//
// Candidates per family: hgemm_wgmma and hgemm_cutlass offer a curated list (one raster and
// cluster setting per tile/split/schedule class, ordered from the large-shape leaders down);
// other HGEMM families offer every variant of the task's layout and accumulation. A split
// deeper than 4 is a candidate only where half of it leaves SMs without a unit
// (tiles·s/2 < sms): the few-tile, long-K shapes it is for. Ranking, per
// variant with tile BM x BN x BK, split s (the k ranges it runs with: SPLITK, 1 without, at most
// one per k-block; for hgemm_wgmma also at most as many M x N fp32 partials as the 32 MiB
// workspace holds, 1 when two do not fit, and no empty range), on an M x N x K task, `sms` SMs:
//   tiles = ceil(M/BM)·ceil(N/BN),  e(bm, bn) = min(1, (bm·bn / (128·256))^0.15)
//   data-parallel:  t = ceil(tiles·s / sms) · 2·BM·BN·ceil(K/s) / (R · e(BM, BN))
//   ping-pong:      t = ceil(tiles / sms) · 2·BM·BN·K / (R · e(2·BM, BN))
//                   (two consumer warpgroups on alternate tiles keep a 2·BM x BN tile busy)
//   stream-K:       t = 1.05 · tiles · 2·BM·BN·K / (min(sms, tiles·kb) · R · e(BM, BN))
//                   (no wave tail; kb = ceil(K/BK) k-blocks per tile, the unit of work)
//   split-K (s > 1) adds the reduction pass 2·s·M·N·4 bytes / W and a second launch, 2 µs;
//   every variant adds a fixed 3 µs; R = 5.5 TFLOP/s per SM, W = 3 TB/s.
// Memory traffic is left out (every variant of a shape moves the same compulsory bytes), so
// the model orders variants by padded work and wave tails only; ties keep the list order.
// hgemm_small (latency first, every variant a candidate) has a latency model of its own,
// fitted to its measured device times on an H100 (issue 24, docs/benchmarks.md): b = blocks
// (tiles·s), kt = ceil(ceil(K/BK)/s) k-tiles per block, rounds = ceil(kt/(STAGES-1)),
//   t = 2.1 + max(0.69·(rounds-1), kt·2·BM·BN·BK / (1.65e12·(BM·BN/4096)^0.16) · max(1, b/sms))
//       + 2·b·kt·(BM+BN)·BK / 22e12 + 2·M·N / (1.6e12 direct stores, 4e12 staged)
//       + (s > 1) (1.5 + 0.71·b/100)  [cluster launch, barriers, reduction]
//       + PDL: -0.26 for b < 48 or b >= 400, +0.4 for 100 <= b < 400   [µs]
// and its class is the tile with its BK and split. The
// pick takes, per family, the best-ranked variant of each class (tile, the split it runs with,
// schedule) first, then fills up by rank, `per_family` in all (0 = the whole list, ranked).
#pragma once

#include <string>
#include <vector>

#include "data/families.h"
#include "data/tasks/task.h"

namespace kernelrl {

struct PortfolioOptions {
  int sms = 132;       // streaming multiprocessors of the device (H100 SXM / H200: 132)
  int per_family = 3;  // variants per family per shape; 0 = every candidate, ranked
};

// The model's time (µs) of `v` on `task` (see above).
double portfolio_model_us(const KernelVariant& v, const TaskSpec& task, int sms);

// The pruned set for `task`: HGEMM families in `families` whose arch runs on `device_arch`
// (families.h arch_runs), each contributing up to per_family variants of the task's layout and
// accumulation, in the order of `families`. Throws UserError for a family that is unknown or
// not an HGEMM family.
std::vector<KernelVariant> shape_portfolio(const TaskSpec& task,
                                           const std::vector<std::string>& families,
                                           const std::string& device_arch,
                                           const PortfolioOptions& options = {});

}  // namespace kernelrl
