#include "data/family_portfolio.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "common/error.h"

namespace kernelrl {
namespace {

int64_t param(const KernelVariant& v, const char* name, int64_t fallback) {
  for (const auto& [k, x] : v.params)
    if (k == name) return x;
  return fallback;
}

int64_t cdiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Curated candidates: the knobs that must match, in the order of preference among equals.
using Knobs = std::vector<std::pair<const char*, int64_t>>;

const std::vector<Knobs>& curated(const std::string& family) {
  // hgemm_wgmma: the leaders of docs/benchmarks.md at 4096^3 / 8192^3 first, then the mid and
  // small tiles with and without split-K, then the deep splits (8-32) for one to a few output
  // tiles over a long K.
  static const std::vector<Knobs> wgmma = [] {
    const int64_t rows[][10] = {
        // BM, BN, BK, STAGES, CONSUMERS, CLUSTER, RASTER, SWIZZLE, SPLITK, EPI
        {128, 256, 64, 4, 2, 1, 1, 16, 1, 1}, {128, 256, 64, 4, 2, 2, 1, 16, 1, 1},
        {128, 256, 64, 3, 2, 1, 1, 16, 1, 1}, {256, 128, 64, 4, 2, 1, 1, 16, 1, 1},
        {128, 128, 64, 6, 2, 1, 1, 16, 1, 1}, {128, 128, 64, 6, 2, 1, 1, 16, 2, 0},
        {128, 128, 64, 6, 2, 1, 1, 16, 4, 0}, {64, 256, 64, 4, 1, 1, 0, 8, 1, 1},
        {128, 64, 64, 8, 2, 1, 0, 8, 1, 1},   {128, 64, 64, 8, 2, 1, 0, 8, 2, 0},
        {64, 128, 64, 8, 1, 1, 0, 8, 1, 1},   {64, 128, 64, 8, 1, 1, 0, 8, 4, 0},
        {128, 128, 64, 6, 2, 1, 1, 16, 8, 0}, {128, 128, 64, 6, 2, 1, 1, 16, 16, 0},
        {128, 64, 64, 8, 2, 1, 0, 8, 8, 0},   {128, 64, 64, 8, 2, 1, 0, 8, 16, 0},
        {128, 64, 64, 8, 2, 1, 0, 8, 32, 0},  {64, 128, 64, 8, 1, 1, 0, 8, 8, 0},
        {64, 128, 64, 8, 1, 1, 0, 8, 16, 0},  {64, 128, 64, 8, 1, 1, 0, 8, 32, 0}};
    const char* names[] = {"BM",      "BN",     "BK",      "STAGES", "CONSUMERS",
                           "CLUSTER", "RASTER", "SWIZZLE", "SPLITK", "EPI"};
    std::vector<Knobs> out;
    for (const auto& r : rows) {
      Knobs k;
      for (int i = 0; i < 10; ++i) k.push_back({names[i], r[i]});
      out.push_back(k);
    }
    return out;
  }();
  // hgemm_cutlass: SCHED 0 cooperative, 1 ping-pong, 2 stream-K; CUTLASS's raster heuristic.
  static const std::vector<Knobs> cutlass = [] {
    const int64_t rows[][6] = {// BM, BN, CM, CN, SCHED
                               {128, 256, 1, 1, 0}, {128, 256, 2, 1, 0}, {256, 128, 1, 1, 0},
                               {128, 256, 1, 1, 2}, {128, 128, 1, 1, 0}, {128, 128, 1, 1, 1},
                               {128, 128, 1, 1, 2}, {64, 256, 1, 1, 1},  {128, 64, 1, 1, 1},
                               {128, 64, 1, 1, 2},  {64, 128, 1, 1, 1},  {64, 64, 1, 1, 1}};
    std::vector<Knobs> out;
    for (const auto& r : rows)
      out.push_back({{"BM", r[0]},
                     {"BN", r[1]},
                     {"BK", 64},
                     {"CM", r[2]},
                     {"CN", r[3]},
                     {"SCHED", r[4]},
                     {"RASTER", 0},
                     {"SWIZZLE", 1}});
    return out;
  }();
  static const std::vector<Knobs> none;
  if (family == "hgemm_wgmma") return wgmma;
  if (family == "hgemm_cutlass") return cutlass;
  return none;
}

bool matches(const KernelVariant& v, const Knobs& k) {
  for (const auto& [name, x] : k)
    if (param(v, name, -1) != x) return false;
  return true;
}

// The number of k ranges `v` splits `t` into. hgemm_wgmma's run<> (kernels/hgemm_wgmma.cuh):
// at most one per k-block, at most as many fp32 M x N partials as the evaluator's 32 MiB
// workspace holds (one range when two do not fit), then no empty range (ceil(kb / ceil(kb / s))).
// Other families: at most one per k-block.
int64_t run_split(const KernelVariant& v, const TaskSpec& t) {
  constexpr int64_t kWorkspaceBytes = 32 << 20;  // reward/worker/harness.cpp
  const int64_t k_blocks = cdiv(t.k, param(v, "BK", 64));
  int64_t s = std::min(std::max<int64_t>(1, param(v, "SPLITK", 1)), k_blocks);
  if (v.family != "hgemm_wgmma") return s;
  s = std::min(s, kWorkspaceBytes / std::max<int64_t>(1, t.m * t.n * 4));
  return s < 2 ? 1 : cdiv(k_blocks, cdiv(k_blocks, s));
}

// Whether `v` is a candidate on `t` at all: a deep split (more than 4) only where no shallower
// power of two already gives each of `sms` SMs a unit (ceil(M/BM)·ceil(N/BN)·s/2 < sms). Past
// that a split only trims the wave tail, and the model overrates it where the tiles are many:
// it leaves out the operand traffic that bounds those shapes (64x8192x8192 on an H100: the
// family's measured best ran without split-K, at the operands' bandwidth floor; a 64x128 split
// 8 ranked second, ahead of it). Splits 2 and 4 keep their tail trimming (256x12288x16384:
// 192 tiles of 128x128, split 2 measured best of the family).
bool split_fits(const KernelVariant& v, const TaskSpec& t, int sms) {
  const int64_t split = run_split(v, t);
  const int64_t tiles = cdiv(t.m, param(v, "BM", 128)) * cdiv(t.n, param(v, "BN", 128));
  return split <= 4 || tiles * (split / 2) < sms;
}

// The class a variant stands for in the first (diverse) pass: tile, the split it runs with on
// this task, and schedule.
std::string class_of(const KernelVariant& v, const TaskSpec& t) {
  const int64_t split = run_split(v, t);
  return std::to_string(param(v, "BM", 0)) + "x" + std::to_string(param(v, "BN", 0)) +
         (v.family == "hgemm_small" ? "x" + std::to_string(param(v, "BK", 0)) : "") + "/" +
         std::to_string(split) + "/" + std::to_string(param(v, "SCHED", 0));
}

// A family's variants, generated once per process (a sweep asks for them once per shape).
const std::vector<KernelVariant>& family_variants(const std::string& family) {
  static std::mutex mu;
  static std::map<std::string, std::vector<KernelVariant>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(family);
  if (it == cache.end()) it = cache.emplace(family, hgemm_family_variants(family)).first;
  return it->second;
}

// hgemm_small's latency model (header), fitted to 2,533 device times of its variants at 80
// shapes on an H100 (issue 24; mean |log(model / measured)| 0.13).
double small_model_us(const KernelVariant& v, const TaskSpec& t, int sms) {
  constexpr double kBaseUs = 2.1,  // a launch and one cold DRAM round trip (touch floor 1.71)
      kRoundUs = 0.69,             // each further round of STAGES-1 k-tiles in flight
      kClusterUs = 1.5,            // split-K: cluster launch, barriers, the DSMEM reduction ...
      kClusterPer100Us = 0.71,     // ... and per 100 blocks of clusters
      kPdlGainUs = 0.26,           // PDL under 48 blocks or from 400 on
      kPdlLossUs = 0.4,            // PDL from 100 to 400 blocks
      kRate = 1.65e12,             // FLOP/s of a 64x64 block's mma.sync chain, x (tile/64^2)^0.16
      kL2Bandwidth = 22e12, kStoreBandwidth = 1.6e12, kStoreStagedBandwidth = 4e12;
  const int64_t bm = param(v, "BM", 64), bn = param(v, "BN", 64), bk = param(v, "BK", 64);
  const int64_t stages = param(v, "STAGES", 3), split = param(v, "SPLITK", 1);
  const int64_t blocks = cdiv(t.m, bm) * cdiv(t.n, bn) * split;
  const int64_t kt = cdiv(cdiv(t.k, bk), split);  // k-tiles per block
  const int64_t rounds = cdiv(kt, stages - 1);
  const double chain_us = (rounds - 1) * kRoundUs;
  const double rate = kRate * std::pow(bm * bn / 4096.0, 0.16);
  const double compute_us =
      kt * 2.0 * bm * bn * bk / rate * 1e6 * std::max<double>(1, static_cast<double>(blocks) / sms);
  const double l2_bytes = 2.0 * blocks * kt * (bm + bn) * bk;
  const double c_bytes = 2.0 * t.m * t.n;
  const bool staged = split > 1 || param(v, "EPI", 0) == 1;
  double us = kBaseUs + std::max(chain_us, compute_us) + l2_bytes / kL2Bandwidth * 1e6 +
              c_bytes / (staged ? kStoreStagedBandwidth : kStoreBandwidth) * 1e6;
  if (split > 1) us += kClusterUs + kClusterPer100Us * blocks / 100.0;
  if (param(v, "PDL", 0) == 1)
    us += blocks < 48 || blocks >= 400 ? -kPdlGainUs : blocks >= 100 ? kPdlLossUs : 0.0;
  return us;
}

}  // namespace

double portfolio_model_us(const KernelVariant& v, const TaskSpec& t, int sms) {
  if (v.family == "hgemm_small") return small_model_us(v, t, sms);
  constexpr double kRate = 5.5e12, kBandwidth = 3e12, kFixedUs = 3, kLaunchUs = 2;
  const int64_t bm = param(v, "BM", 128), bn = param(v, "BN", 128);
  const int64_t k_blocks = cdiv(t.k, param(v, "BK", 64));
  const int64_t split = run_split(v, t);
  const int64_t sched = v.family == "hgemm_cutlass" ? param(v, "SCHED", 0) : 0;
  auto e = [](double a, double b) {
    return std::min(1.0, std::pow(a * b / (128.0 * 256.0), 0.15));
  };
  const double tiles = static_cast<double>(cdiv(t.m, bm) * cdiv(t.n, bn));
  const double tile_flop = 2.0 * bm * bn * t.k;
  double s;
  if (sched == 1) {  // ping-pong: two consumer warpgroups on alternate tiles of one CTA
    s = std::ceil(tiles / sms) * tile_flop / (kRate * e(2.0 * bm, bn));
  } else if (sched == 2) {  // stream-K: k-block units spread over up to every SM
    const double workers = std::min<double>(sms, tiles * k_blocks);
    s = 1.05 * tiles * tile_flop / (workers * kRate * e(bm, bn));
  } else {
    s = std::ceil(tiles * split / sms) * 2.0 * bm * bn * cdiv(t.k, split) / (kRate * e(bm, bn));
    if (split > 1) s += 2.0 * split * t.m * t.n * 4 / kBandwidth + kLaunchUs * 1e-6;
  }
  return s * 1e6 + kFixedUs;
}

std::vector<KernelVariant> shape_portfolio(const TaskSpec& task,
                                           const std::vector<std::string>& families,
                                           const std::string& device_arch,
                                           const PortfolioOptions& o) {
  std::vector<KernelVariant> out;
  for (const auto& fam : families) {
    const FamilyInfo* info = nullptr;
    for (const auto& f : kernel_families())
      if (f.name == fam) info = &f;
    if (!info || info->kind != TaskKind::hgemm)
      throw UserError("--families: \"" + fam + "\" is not an HGEMM kernel family");
    if (!arch_runs(info->arch, device_arch)) continue;
    std::vector<KernelVariant> pool;
    const std::vector<KernelVariant>& all = family_variants(fam);
    const auto& list = curated(fam);
    if (list.empty()) {
      for (const auto& v : all)
        if (v.layout == task.layout && v.acc == task.acc) pool.push_back(v);
    } else {
      for (const auto& k : list)
        for (const auto& v : all)
          if (v.layout == task.layout && v.acc == task.acc && matches(v, k)) {
            if (split_fits(v, task, o.sms)) pool.push_back(v);
            break;
          }
    }
    // Rank (stable: the list order breaks ties), then the best of each class, then by rank.
    std::vector<std::pair<double, size_t>> rank;
    for (size_t i = 0; i < pool.size(); ++i)
      rank.push_back({portfolio_model_us(pool[i], task, o.sms), i});
    std::stable_sort(rank.begin(), rank.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const size_t want =
        o.per_family > 0 ? std::min<size_t>(o.per_family, pool.size()) : pool.size();
    std::vector<size_t> picked;
    std::set<std::string> classes;
    for (const auto& [us, i] : rank)
      if (picked.size() < want && classes.insert(class_of(pool[i], task)).second)
        picked.push_back(i);
    for (const auto& [us, i] : rank)
      if (picked.size() < want && std::find(picked.begin(), picked.end(), i) == picked.end())
        picked.push_back(i);
    for (size_t i : picked) out.push_back(pool[i]);
  }
  return out;
}

}  // namespace kernelrl
