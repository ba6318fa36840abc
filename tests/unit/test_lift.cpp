// The lift machinery's pure parts against hand-derived values (issue 25): the held-out split of
// an HGEMM grid, the normalized token edit distance behind novelty, the family-grid CSV reader
// and the speed-annotated triplets, the summary's means and shares, the RL learning summary,
// and the catalog's provenance (JSON round trip, merge, the exemplar table lookup); issue 39's
// novelty classes (listed, new tuple, new body), the bootstrap and best-of-k statistics against
// tests/golden/lift_stats_golden.py, and the proof's pass rates, gains and targets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <tuple>

#include "catalog/catalog.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/metrics.h"
#include "data/families.h"
#include "data/speed_annotation.h"
#include "data/tasks/hgemm_split.h"
#include "data/tasks/task_suite.h"
#include "rollout/exemplar_store.h"
#include "rollout/prompt.h"
#include "rollout/seed_grid.h"
#include "test_util.h"
#include "trainer/lift.h"
#include "trainer/rl_summary.h"

namespace kernelrl {
namespace {

TEST(HgemmSplit, HoldsOutATenthOfEveryBinFixedByTheHash) {
  const auto grid = hgemm_grid("full");
  ASSERT_EQ(grid.size(), 1000u);
  const auto split = split_hgemm_shapes(grid, 0.1);
  std::map<int, std::pair<int, int>> bins;  // bin -> (shapes, held out)
  for (const auto& t : split) {
    ++bins[hgemm_size_bin(t)].first;
    bins[hgemm_size_bin(t)].second += t.holdout;
  }
  int held = 0;
  for (const auto& [bin, c] : bins) {
    SCOPED_TRACE("bin " + std::to_string(bin));
    held += c.second;
    if (c.first >= 2) {
      EXPECT_GE(c.second, 1);
      EXPECT_LE(std::abs(c.second - 0.1 * c.first), 0.5 + 1e-9);  // round(0.1 n), at least 1
    } else {
      EXPECT_EQ(c.second, 0);  // a bin of one shape stays in training
    }
  }
  EXPECT_NEAR(held, 100, 5);
  // Bins of 3 in log2(MNK): 64^3 = 2^18 is bin 6, 16384^3 = 2^42 bin 14.
  EXPECT_EQ(hgemm_size_bin(hgemm_task(64, 64, 64)), 6);
  EXPECT_EQ(hgemm_size_bin(hgemm_task(64, 64, 256)), 6);  // 2^20
  EXPECT_EQ(hgemm_size_bin(hgemm_task(128, 128, 128)), 7);  // 2^21
  EXPECT_EQ(hgemm_size_bin(hgemm_task(16384, 16384, 16384)), 14);
  // Fixed: the same grid in another order holds the same shapes out; fraction 0 holds none.
  auto reversed = grid;
  std::reverse(reversed.begin(), reversed.end());
  std::set<std::string> a, b;
  for (const auto& t : split) if (t.holdout) a.insert(t.name);
  for (const auto& t : split_hgemm_shapes(reversed, 0.1)) if (t.holdout) b.insert(t.name);
  EXPECT_EQ(a, b);
  for (const auto& t : split_hgemm_shapes(grid, 0.0)) EXPECT_FALSE(t.holdout);
  EXPECT_EQ(hgemm_split_part(grid, 0.1, true).size() + hgemm_split_part(grid, 0.1, false).size(), 1000u);
}

TEST(Novelty, TokenEditDistanceMatchesHandCountedEdits) {
  const std::vector<std::string> a = {"a", "b", "c", "d"}, b = {"a", "x", "c", "d", "e"};
  // substitute b->x, insert e: 2 edits over the longer length 5.
  EXPECT_DOUBLE_EQ(token_edit_distance(a, b), 0.4);
  EXPECT_DOUBLE_EQ(token_edit_distance(b, a), 0.4);
  EXPECT_DOUBLE_EQ(token_edit_distance(a, a), 0.0);
  EXPECT_DOUBLE_EQ(token_edit_distance({}, {}), 0.0);
  EXPECT_DOUBLE_EQ(token_edit_distance(a, {}), 1.0);
  // Capped: at or above the cap the answer is the cap (the banded computation stops early).
  EXPECT_DOUBLE_EQ(token_edit_distance(a, b, 0.3), 0.3);
  EXPECT_DOUBLE_EQ(token_edit_distance(a, b, 0.5), 0.4);
  // Comments and string contents do not count; identifiers and numbers are one token each.
  EXPECT_EQ(novelty_tokens("int x = 42; // note\n/* c */ f(\"s\");"),
            (std::vector<std::string>{"int", "x", "=", "42", ";", "f", "(", "\"", "\"", ")", ";"}));
  // A family variant and the same variant with another tile are near copies.
  const auto vs = hgemm_family_variants("hgemm_host");
  ASSERT_GE(vs.size(), 2u);
  const double d = token_edit_distance(novelty_tokens(vs[0].source), novelty_tokens(vs[1].source));
  EXPECT_GT(d, 0.0);
  EXPECT_LT(d, 0.05);
}

// A variant's source with the first argument of its `using Cfg = ...<...>` replaced by `value`.
std::string with_first_tile(const std::string& source, const std::string& value) {
  const size_t cfg = source.rfind("using Cfg = ");
  EXPECT_NE(cfg, std::string::npos);
  const size_t open = source.find('<', cfg);
  size_t at = open + 1;
  if (source.compare(at, 2, "/*") == 0) at = source.find("*/", at) + 2;  // the /*NAME=*/ label
  size_t end = at;
  while (end < source.size() && std::isdigit(static_cast<unsigned char>(source[end]))) ++end;
  EXPECT_GT(end, at) << source.substr(cfg, 120);
  return source.substr(0, at) + value + source.substr(end);
}

TEST(NoveltyClasses, ListedNewTupleAndNewBodyAgainstTheFamilyList) {
  std::vector<KernelVariant> list;
  for (const auto& v : hgemm_family_variants("hgemm_host"))
    if (v.layout == "nn" && v.acc == "f32") list.push_back(v);
  ASSERT_GE(list.size(), 2u);
  const NoveltyClassifier classes(list);
  EXPECT_EQ(classes.variants(), list.size());
  const KernelVariant& v = list.front();
  // Exactly a family variant, and the same with comments and whitespace changed: listed.
  SampleClass c = classes.classify(v.source);
  EXPECT_EQ(c.cls, "listed");
  EXPECT_EQ(c.family, "hgemm_host");
  EXPECT_FALSE(c.tuple.empty());
  EXPECT_EQ(classes.classify("// mine\n" + v.source + "\n\n").cls, "listed");
  // Every variant of the list is listed.
  for (const auto& w : list) EXPECT_EQ(classes.classify(w.source).cls, "listed") << w.name;
  // One tile number changed to a value no variant lists: the family's body, a new tuple.
  const std::string tuple_changed = with_first_tile(v.source, "48");
  ASSERT_NE(tuple_changed, v.source);
  c = classes.classify(tuple_changed);
  EXPECT_EQ(c.cls, "new_tuple") << c.tuple;
  EXPECT_EQ(c.family, "hgemm_host");
  EXPECT_DOUBLE_EQ(c.body_distance, 0);
  // The old novelty could not see that (issue 39): its token edit distance is ~1 token.
  EXPECT_LT(token_edit_distance(novelty_tokens(v.source), novelty_tokens(tuple_changed)), 0.01);
  // The first argument of another listed variant is no new tuple when the whole tuple is listed:
  // its own source is listed above; the tuple split keeps every argument.
  const ParamSplit ps = split_parameters(novelty_tokens(v.source));
  EXPECT_NE(std::find(ps.body.begin(), ps.body.end(), "#"), ps.body.end());
  EXPECT_EQ(split_parameters(novelty_tokens(tuple_changed)).body, ps.body);
  // A body change (a statement added before the instance): a new body, near the family's.
  const size_t inst = v.source.rfind("using Cfg = ");
  const std::string body_changed =
      v.source.substr(0, inst) + "static int kernelrl_extra_counter = 3;\n" + v.source.substr(inst);
  c = classes.classify(body_changed);
  EXPECT_EQ(c.cls, "new_body");
  EXPECT_EQ(c.family, "hgemm_host");
  EXPECT_GT(c.body_distance, 0.0);
  EXPECT_LT(c.body_distance, 0.02);
  // Unrelated code: a new body, far from every family body (capped at 0.5).
  c = classes.classify("extern \"C\" int kernelrl_launch(const kernelrl_args* a, void* s) { return 0; }");
  EXPECT_EQ(c.cls, "new_body");
  EXPECT_DOUBLE_EQ(c.body_distance, 0.5);
  EXPECT_TRUE(c.tuple.empty());
  EXPECT_TRUE(is_new_class("new_tuple"));
  EXPECT_TRUE(is_new_class("new_body"));
  EXPECT_FALSE(is_new_class("listed"));
  EXPECT_FALSE(is_new_class("compile_error"));
}

TEST(NoveltyClasses, EveryCudaFamilyVariantIsListedWithItsOwnFamilyAndATuple) {
  // Each HGEMM family's instance block is a `using Cfg = ...<...>;` the tuple split reads: every
  // variant (nn, f32) of every CUDA family is listed, as its own family, with a tuple.
  std::vector<KernelVariant> list;
  for (const auto& f : kernel_families())
    if (f.kind == TaskKind::hgemm && f.backends.find("cuda") != std::string::npos)
      for (const auto& v : hgemm_family_variants(f.name))
        if (v.layout == "nn" && v.acc == "f32") list.push_back(v);
  ASSERT_GT(list.size(), 50u);
  const NoveltyClassifier classes(list);
  std::set<std::string> families;
  for (const auto& v : list) {
    const SampleClass c = classes.classify(v.source);
    EXPECT_EQ(c.cls, "listed") << v.name;
    EXPECT_EQ(c.family, v.family) << v.name;
    EXPECT_FALSE(c.tuple.empty()) << v.name;
    families.insert(v.family);
  }
  EXPECT_GE(families.size(), 4u);
}

TEST(NoveltyClasses, TheTupleSpansNestedTemplateArguments) {
  const auto t = novelty_tokens("using Cfg = ns::Config<cute::Shape<_128, _64>, 3, true>;\nint x = 5;");
  const ParamSplit ps = split_parameters(t);
  EXPECT_EQ(ps.tuple, "cute :: Shape < _128 , _64 > , 3 , true");
  EXPECT_EQ(ps.body, (std::vector<std::string>{"using", "Cfg", "=", "ns", "::", "Config", "<", "#", "::", "#",
                                               "<", "#", ",", "#", ">", ",", "#", ",", "#", ">", ";", "int",
                                               "x", "=", "5", ";"}));
  // `>>` closing both levels (the lexer's maximal munch).
  const ParamSplit nested = split_parameters(novelty_tokens("using Cfg = C<S<1, 2>>;\nint y;"));
  EXPECT_EQ(nested.tuple, "S < 1 , 2");
  EXPECT_EQ(nested.body, (std::vector<std::string>{"using", "Cfg", "=", "C", "<", "#", "<", "#", ",", "#", ">>",
                                                   ";", "int", "y", ";"}));
  // No instance block: no tuple, the body is the tokens.
  const auto u = novelty_tokens("int y = 1;");
  EXPECT_EQ(split_parameters(u).body, u);
  EXPECT_TRUE(split_parameters(u).tuple.empty());
}

// Golden values: tests/golden/lift_stats_golden.py (plain Python splitmix64 and an enumeration
// of every k-subset), run 2026-11-28. Metric: absolute difference; 1e-12 (the same sums in the
// same order: the bootstrap should agree to the last bit).
TEST(LiftStats, BootstrapMatchesTheIndependentPythonComputation) {
  const std::vector<double> x = {0.02, -0.01, 0.05, 0.03, 0.0, 0.04, -0.02, 0.06, 0.01, 0.03};
  Interval a = bootstrap_mean(x, 1000, 0);
  EXPECT_NEAR(a.mean, 0.020999999999999998, 1e-12);
  EXPECT_NEAR(a.lo, 0.005, 1e-12);
  EXPECT_NEAR(a.hi, 0.034999999999999996, 1e-12);
  EXPECT_EQ(a.n, 10);
  EXPECT_EQ(a.resamples, 1000);
  Interval b = bootstrap_mean(x, 10000, 7);
  EXPECT_NEAR(b.lo, 0.005999999999999999, 1e-12);
  EXPECT_NEAR(b.hi, 0.036, 1e-12);
  // Seeded: the same call gives the same interval; another seed another one.
  EXPECT_EQ(bootstrap_mean(x, 1000, 0).lo, a.lo);
  // No items: nothing, not a crash; one item: a point.
  EXPECT_EQ(bootstrap_mean({}, 1000, 0).n, 0);
  Interval one = bootstrap_mean({1.5}, 100, 3);
  EXPECT_DOUBLE_EQ(one.lo, 1.5);
  EXPECT_DOUBLE_EQ(one.hi, 1.5);
}

TEST(LiftStats, BestOfKMatchesAnEnumerationOfEverySubset) {
  const std::vector<double> v = {0.0, 1.2, 0.0, 0.9, 1.05, 0.0, 1.3};  // 0 = failed
  const std::vector<std::tuple<int64_t, double, double>> golden = {
      {1, 0.5714285714285714, 0.6357142857142858}, {2, 0.8571428571428571, 0.985714285714286},
      {3, 0.9714285714285714, 1.1571428571428568}, {5, 1.0, 1.2642857142857147}, {7, 1.0, 1.3}};
  for (const auto& [k, pass, combined] : golden) {
    const BestOfK b = best_of_k(v, k);
    EXPECT_NEAR(b.pass, pass, 1e-12) << k;
    EXPECT_NEAR(b.combined, combined, 1e-12) << k;
    EXPECT_NEAR(b.speed, combined / pass, 1e-12) << k;
  }
  EXPECT_NEAR(best_of_k(v, 1).speed, (1.2 + 0.9 + 1.05 + 1.3) / 4, 1e-12);  // k = 1: the passing mean
  EXPECT_NEAR(best_of_k(v, 99).combined, 1.3, 1e-12);  // k above n: n
  const BestOfK none = best_of_k({0, 0, 0}, 2);
  EXPECT_EQ(none.pass, 0);
  EXPECT_EQ(none.speed, 0);  // no passing sample: a pass rate of 0, never a speed of 0 averaged in
}

TEST(LiftProof, PassRatesBesideSpeedsGainsOverTheBestControlAndTargets) {
  testing::ScratchDir dir;
  // One seed, grid split with exemplars, three shapes: at the third nothing of the after arm
  // passed (a pass-rate entry, not a 0 in its speed mean).
  auto row = [](int64_t m, double before, double after, double bon, double ex, double sweep) {
    LiftShape r;
    r.task = "hgemm_" + std::to_string(m) + "x64x64_nn", r.shape = std::to_string(m) + "x64x64";
    r.m = m, r.n = 64, r.k = 64, r.layout = "nn", r.acc = "f32";
    r.run_seed = 3, r.samples = 2;
    r.before = before, r.after = after, r.best_of_n = bon, r.exemplar = ex, r.sweep = sweep;
    r.best_of_n_samples = 4, r.after_passed = after > 0 ? 2 : 0, r.after_new_tuple = after > 0;
    r.after_class = after > 0 ? "new_tuple" : "";
    return r;
  };
  const std::vector<LiftShape> rows = {row(64, 1.0, 1.10, 1.0, 1.05, 1.0), row(128, 1.0, 1.2, 1.1, 1.0, 1.0),
                                       row(192, 0.5, 0, 0.6, 0.9, 0.9)};
  std::string lines, samples;
  for (const auto& r : rows) {
    lines += to_json(r).dump() + "\n";
    const double a = r.after;
    samples += nlohmann::json{{"task", r.task}, {"samples", 2},
                              {"before", {{{"speedup", r.before}}, {{"speedup", 0.0}}, {{"speedup", r.best_of_n}}, {{"speedup", 0.0}}}},
                              {"after", {{{"speedup", a}}, {{"speedup", a * 0.9}}}}}
                   .dump() + "\n";
  }
  fs::create_directories(dir / "lift");
  testing::write_text(dir / "lift/per_shape.jsonl", lines);
  testing::write_text(dir / "lift/samples.jsonl", samples);
  testing::write_text(dir / "lift/rl.json", R"({"steps": 200, "step_s": 1500.0, "candidates": 6400})");
  ProofOptions o;
  o.lift_dirs = {dir / "lift"};
  o.resamples = 1000;
  o.min_shapes = 2;
  const ProofReport rep = lift_proof(o);
  const auto& s = rep.summary["groups"]["grid/exemplars"]["seeds"]["3"];
  // after: passed at 2 of 3 shapes, speed over those two only.
  EXPECT_NEAR(s["arms"]["after"]["pass"].get<double>(), 2.0 / 3, 1e-12);
  EXPECT_NEAR(s["arms"]["after"]["speed"].get<double>(), (1.10 + 1.2) / 2, 1e-12);
  EXPECT_NEAR(s["arms"]["after"]["combined"].get<double>(), (1.10 + 1.2) / 3, 1e-12);
  // Gains over the best control per shape (max of exemplar, best-of-N, sweep): 1.10/1.05, 1.2/1.1.
  const auto& g = s["gains"]["best_control"];
  EXPECT_EQ(g["shapes"], 2);
  EXPECT_EQ(g["control_only"], 1);
  EXPECT_NEAR(g["mean"].get<double>(), (1.10 / 1.05 - 1 + 1.2 / 1.1 - 1) / 2, 1e-12);
  EXPECT_EQ(s["novel"]["share"].get<double>(), 0.5);  // 2 new of 4 passing after-RL samples
  // One seed: a target met in it is still missed for the issue (>= 3 seeds).
  EXPECT_NE(rep.markdown.find("- seed 3: gain over the best control met"), std::string::npos) << rep.markdown;
  EXPECT_NE(rep.markdown.find("fewer than 3 seeds"), std::string::npos) << rep.markdown;
  EXPECT_NE(rep.markdown.find("RL 200 steps in 1500 s (met)"), std::string::npos) << rep.markdown;
  // Curves: before uses its first `samples` (2) samples, best_of_n all 4; k = 1..2 and 1..4.
  EXPECT_NE(rep.curves_csv.find("grid/exemplars,3,before,2,"), std::string::npos) << rep.curves_csv;
  EXPECT_EQ(rep.curves_csv.find("grid/exemplars,3,before,3,"), std::string::npos) << rep.curves_csv;
  EXPECT_NE(rep.curves_csv.find("grid/exemplars,3,best_of_n,4,"), std::string::npos) << rep.curves_csv;
  // k = 1 of after: pass 2/3 (shapes 1-2 pass both samples), speed the mean of the samples there.
  EXPECT_NE(rep.curves_csv.find("grid/exemplars,3,after,1,0.666667,"), std::string::npos) << rep.curves_csv;
  EXPECT_EQ(std::count(rep.per_shape_csv.begin(), rep.per_shape_csv.end(), '\n'), 4);
  // A second directory with the same split, prompt mode and seed is refused, not pooled.
  fs::create_directories(dir / "lift2");
  testing::write_text(dir / "lift2/per_shape.jsonl", lines);
  o.lift_dirs = {dir / "lift", dir / "lift2"};
  EXPECT_THROW(lift_proof(o), UserError);
}

TEST(SpeedAnnotation, ReadsAFamilySweepCsvAndWordsEachKernelLikeTheRlPrompt) {
  testing::ScratchDir dir;
  const auto vs = hgemm_family_variants("hgemm_host");
  std::string v32, v64;
  for (const auto& v : vs)
    if (v.layout == "nn" && v.acc == "f32") (v.params[0].second == 32 ? v32 : v64) = v.name;
  ASSERT_FALSE(v32.empty());
  // The sweep CSV names one best variant per family per shape (one family here).
  testing::write_text(dir / "grid.csv",
                      "M,N,K,layout,acc,log2_mnk,variants,passed,best_family,best_variant,best_us,"
                      "torch_us,speedup_torch,hgemm_host_us,hgemm_host_variant,failures,eval_s\n"
                      "64,64,64,nn,f32,18,2,2,hgemm_host," + v64 + ",10,20,2,10," + v64 + ",,1\n"
                      "128,64,64,nn,f32,19,2,2,hgemm_host," + v32 + ",30,15,0.5,30," + v32 + ",,1\n"
                      "64,128,64,nn,f32,19,2,0,,,,,,,,,1\n");
  auto shapes = read_family_grid_csv(dir / "grid.csv", "host");
  ASSERT_EQ(shapes.size(), 2u);  // the row with no passing variant adds nothing
  EXPECT_EQ(shapes[0].task.name, "hgemm_64x64x64_nn");
  EXPECT_DOUBLE_EQ(shapes[0].baselines_us.at("torch"), 20);
  ASSERT_EQ(shapes[0].kernels.size(), 1u);
  EXPECT_EQ(shapes[0].kernels[0].name, v64);
  // A second kernel at the first shape (a catalog entry), faster: it ranks first.
  add_measured(shapes, shapes[0], {"kabc", "", "// a catalog kernel\n", 8.0, "cat.json"});
  rank_measured(shapes);
  ASSERT_EQ(shapes[0].kernels.size(), 2u);
  EXPECT_EQ(shapes[0].kernels[0].name, "kabc");
  shapes[1].task.holdout = true;  // held out: no examples
  const auto ts = speed_annotated_triplets(shapes, "host", "torch");
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(ts[0].code, "// a catalog kernel\n");
  EXPECT_NE(ts[0].instruction.find("Target device: host."), std::string::npos) << ts[0].instruction;
  EXPECT_NE(ts[0].instruction.find("M=64, N=64, K=64"), std::string::npos);
  EXPECT_EQ(ts[0].context,
            "Rank 1 of the variants measured at this shape on host. 2 measured; device time 8.00 us "
            "(device/cold/g20); torch 20.00 us, speedup 2.500x.");
  EXPECT_EQ(ts[1].context.rfind("Rank 2 of the variants measured at this shape on host. 2 measured", 0), 0u);
  EXPECT_EQ(ts[1].tags.back(), "rank_2");
  // The RL prompt's aim line is the rank-1 annotation's first sentence.
  EXPECT_EQ(ts[0].context.rfind(speed_aim("host"), 0), 0u);
  EXPECT_THROW(read_family_grid_csv(dir / "missing.csv", "host"), UserError);
}

TEST(SpeedAnnotation, ReadsAPerVariantCsvAndRanksEveryVariantOfAShape) {
  testing::ScratchDir dir;
  const auto vs = hgemm_family_variants("hgemm_host");
  std::vector<const KernelVariant*> nn;
  for (const auto& v : vs)
    if (v.layout == "nn" && v.acc == "f32") nn.push_back(&v);
  ASSERT_GE(nn.size(), 2u);
  // Two variants at one shape (the slower first in the file), one at another, a row without a
  // passing time, and a baseline column.
  testing::write_text(dir / "variants.csv",
                      "M,N,K,layout,acc,variant,device_us,lt-auto_us\n"
                      "64,64,64,nn,f32," + nn[0]->name + ",12.5,10\n"
                      "64,64,64,nn,f32," + nn[1]->name + ",9.5,10\n"
                      "128,64,64,nn,f32," + nn[1]->name + ",20,18\n"
                      "128,64,64,nn,f32," + nn[0]->name + ",,18\n");
  auto shapes = read_variant_times_csv(dir / "variants.csv", "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].task.name, "hgemm_64x64x64_nn");
  EXPECT_EQ(shapes[0].device, "NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(shapes[0].baselines_us.at("lt-auto"), 10);
  ASSERT_EQ(shapes[0].kernels.size(), 2u);
  EXPECT_EQ(shapes[0].kernels[0].name, nn[1]->name);  // ranked: the faster first
  EXPECT_EQ(shapes[0].kernels[0].family, "hgemm_host");
  EXPECT_EQ(shapes[0].kernels[0].source, nn[1]->source);
  EXPECT_DOUBLE_EQ(shapes[0].kernels[1].device_us, 12.5);
  ASSERT_EQ(shapes[1].kernels.size(), 1u);  // the empty time added nothing
  const auto ts = speed_annotated_triplets(shapes, "gpu", "lt-auto");
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[1].context.rfind("Rank 2 of the variants measured at this shape", 0), 0u) << ts[1].context;
  // Bad input: a name no family generates, a missing column, a non-number.
  testing::write_text(dir / "bad_name.csv", "M,N,K,layout,acc,variant,device_us\n64,64,64,nn,f32,hgemm_host_nope,1\n");
  EXPECT_THROW(read_variant_times_csv(dir / "bad_name.csv", "x"), UserError);
  testing::write_text(dir / "no_col.csv", "M,N,K,layout,acc,device_us\n64,64,64,nn,f32,1\n");
  EXPECT_THROW(read_variant_times_csv(dir / "no_col.csv", "x"), UserError);
  testing::write_text(dir / "nan.csv", "M,N,K,layout,acc,variant,device_us\n64,64,six,nn,f32," + nn[0]->name + ",1\n");
  EXPECT_THROW(read_variant_times_csv(dir / "nan.csv", "x"), UserError);
}

TEST(LiftSummary, MeansAndSharesOverTheRows) {
  auto row = [](int64_t m, double before, double after, double sweep, double exemplar,
                int64_t passed, int64_t novel) {
    LiftShape r;
    r.m = m, r.n = 64, r.k = 64;
    r.before = before, r.after = after, r.sweep = sweep, r.exemplar = exemplar;
    r.samples = 4, r.after_passed = passed, r.before_passed = 2, r.after_novel = novel;
    return r;
  };
  // 64x64x64 = 2^18 (small), 65536x64x64 = 2^28 (not small).
  const std::vector<LiftShape> rows = {row(64, 0.5, 1.1, 1.0, 0.9, 4, 1),
                                       row(65536, 1.0, 0.9, 1.0, 0.8, 2, 0)};
  const LiftSummary s = lift_summary(rows);
  EXPECT_EQ(s.shapes, 2);
  EXPECT_DOUBLE_EQ(s.mean_before, 0.75);
  EXPECT_DOUBLE_EQ(s.mean_after, 1.0);
  EXPECT_DOUBLE_EQ(s.lift, 1.0 / 0.75 - 1);
  EXPECT_DOUBLE_EQ(s.share_after_ge_1, 0.5);
  EXPECT_DOUBLE_EQ(s.share_after_beats_sweep, 0.5);
  EXPECT_DOUBLE_EQ(s.share_after_beats_sweep_2pct, 0.5);  // 1.1 >= 1.02 x 1.0
  EXPECT_DOUBLE_EQ(s.share_after_beats_exemplar, 1.0);
  EXPECT_DOUBLE_EQ(s.novelty_after, 1.0 / 6);
  EXPECT_EQ(s.small_shapes, 1);
  EXPECT_DOUBLE_EQ(s.mean_after_small, 1.1);
  EXPECT_EQ(s.sweep_missing, 0);
  const std::string md = format_lift(rows, s);
  EXPECT_NE(md.find("lift >= +10 %: met"), std::string::npos) << md;
  EXPECT_NE(md.find("below 2^27 mean after >= 1.0x: met"), std::string::npos) << md;
  // A row round-trips through its JSON line.
  LiftShape back = lift_shape_from_json(to_json(rows[0]));
  EXPECT_EQ(back.after, 1.1);
  EXPECT_EQ(back.after_novel, 1);
}

TEST(LiftSummary, AShapeWithoutAPassingSweepVariantIsNotBeaten) {
  // The sweep's variant failed at the second shape (sweep 0): the after policy's 0.03x there is
  // no win over the sweep, though 0.03 > 0.
  LiftShape a, b;
  a.m = b.m = 64, a.n = b.n = 64, a.k = b.k = 64;
  a.before = 0.5, a.after = 1.2, a.sweep = 1.0;
  b.before = 0.02, b.after = 0.03, b.sweep = 0;
  const LiftSummary s = lift_summary({a, b});
  EXPECT_EQ(s.sweep_missing, 1);
  EXPECT_DOUBLE_EQ(s.share_after_beats_sweep, 0.5);
  EXPECT_DOUBLE_EQ(s.share_after_beats_sweep_2pct, 0.5);
  const std::string md = format_lift({a, b}, s);
  EXPECT_NE(md.find("No sweep variant passed at 1 of 2 shapes"), std::string::npos) << md;
}

TEST(RlLearning, HalvesOfTheStageFromTheMetrics) {
  testing::ScratchDir dir;
  {
    MetricsWriter w(dir / "metrics.jsonl", -1);
    w.write(1, {{"stage", "pretrain"}, {"loss", 1.0}});
    const double correct[] = {0.2, 0.3, 0.5, 0.6, 0.7};
    for (int i = 0; i < 5; ++i)
      w.write(i + 1, {{"stage", "hgemm_rl"}, {"reward_mean", correct[i]}, {"sampled_correct_rate", correct[i]},
                      {"sampled_reward_mean", correct[i] - 1}, {"updates", i == 0 ? 0 : 1}});
  }
  const RlLearning l = rl_learning(dir / "metrics.jsonl", "hgemm_rl");
  EXPECT_EQ(l.steps, 5);
  EXPECT_EQ(l.updates, 4);
  EXPECT_EQ(l.steps_with_updates, 4);
  EXPECT_DOUBLE_EQ(l.correct_first, 0.2);
  EXPECT_DOUBLE_EQ(l.correct_last, 0.7);
  EXPECT_DOUBLE_EQ(l.correct_early, 0.25);  // steps 1-2; step 3 is the middle
  EXPECT_DOUBLE_EQ(l.correct_late, 0.65);   // steps 4-5
  EXPECT_NEAR(l.reward_late - l.reward_early, 0.4, 1e-12);
  EXPECT_TRUE(l.improved());
  EXPECT_NE(format_rl_learning(l).find("the policy learned"), std::string::npos);
  EXPECT_EQ(rl_learning(dir / "metrics.jsonl", "general_rl").steps, 0);
  // A rise of a few points is not learning: 7 % -> 11 % with the reward up.
  RlLearning small = l;
  small.correct_early = 0.07, small.correct_late = 0.11;
  EXPECT_FALSE(small.improved());
  EXPECT_NE(format_rl_learning(small).find("no improvement"), std::string::npos);
}

TEST(RlLearning, TheFixedProbeJudgesWhenTheStageHasOne) {
  testing::ScratchDir dir;
  // The per-step rates fall (the prompt draw), the probe's rise from 14 to 20 of 32.
  const double correct[] = {0.8, 0.7, 0.3, 0.2};
  auto write = [&](const fs::path& path, double after, bool last) {
    MetricsWriter w(path, -1);
    for (int i = 0; i < 4; ++i) {
      nlohmann::json r = {{"stage", "hgemm_rl"}, {"reward_mean", 0.0}, {"sampled_correct_rate", correct[i]},
                          {"sampled_reward_mean", correct[i] - 1}, {"updates", 1}};
      if (i == 0)
        r.update({{"probe_before_rows", 32}, {"probe_before_correct_rate", 14 / 32.0},
                  {"probe_before_compiled_rate", 1.0}, {"probe_before_reward_mean", -0.3}});
      if (i == 3 && last)
        r.update({{"probe_after_rows", 32}, {"probe_after_correct_rate", after},
                  {"probe_after_compiled_rate", 31 / 32.0}, {"probe_after_reward_mean", 0.1}});
      w.write(i + 1, r);
    }
  };
  write(dir / "rise.jsonl", 20 / 32.0, true);
  const RlLearning l = rl_learning(dir / "rise.jsonl", "hgemm_rl");
  EXPECT_EQ(l.probe_rows, 32);
  EXPECT_DOUBLE_EQ(l.probe_correct_before, 0.4375);
  EXPECT_DOUBLE_EQ(l.probe_correct_after, 0.625);
  EXPECT_DOUBLE_EQ(l.probe_compiled_after, 31 / 32.0);
  EXPECT_DOUBLE_EQ(l.probe_reward_before, -0.3);
  EXPECT_DOUBLE_EQ(l.probe_reward_after, 0.1);
  EXPECT_LT(l.correct_late, l.correct_early);  // the halves alone would say no
  EXPECT_TRUE(l.improved());
  const std::string text = format_rl_learning(l);
  EXPECT_NE(text.find("fixed probe (32 samples"), std::string::npos) << text;
  EXPECT_NE(text.find("correct 44% -> 62%"), std::string::npos) << text;
  EXPECT_NE(text.find("the policy learned"), std::string::npos) << text;
  // 14 -> 17 of 32 (9.4 points) is short of 10; 14 -> 17.2 would pass, exactly 10 points.
  write(dir / "small.jsonl", 17 / 32.0, true);
  const RlLearning small = rl_learning(dir / "small.jsonl", "hgemm_rl");
  EXPECT_FALSE(small.improved());
  EXPECT_NE(format_rl_learning(small).find("the fixed probe's correct rate did not rise"), std::string::npos);
  RlLearning edge = small;
  edge.probe_correct_after = edge.probe_correct_before + RlLearning::kMinRise;
  EXPECT_TRUE(edge.improved());
  edge.updates = 0;
  EXPECT_FALSE(edge.improved());
  // No after-probe (the stage stopped early): no probe verdict, the halves judge.
  write(dir / "cut.jsonl", 1.0, false);
  const RlLearning cut = rl_learning(dir / "cut.jsonl", "hgemm_rl");
  EXPECT_EQ(cut.probe_rows, 0);
  EXPECT_FALSE(cut.improved());
  EXPECT_EQ(format_rl_learning(cut).find("fixed probe"), std::string::npos);
}

TEST(CatalogProvenance, RoundTripsMergesAndComesFromTheExemplarTable) {
  CatalogEntry e;
  e.backend = "host", e.device = "host", e.m = e.n = e.k = 64, e.kernel_id = "k1", e.reference = "torch";
  e.speedup = 1.5;
  e.provenance = {"rl", "/runs/lift", "hgemm_rl", 12, true};
  CatalogEntry back = catalog_entry_from_json(to_json(e));
  EXPECT_TRUE(back.provenance.rl());
  EXPECT_EQ(back.provenance.run, "/runs/lift");
  EXPECT_EQ(back.provenance.step, 12);
  EXPECT_EQ(back.provenance.describe(), "rl hgemm_rl@12 (reverified)");
  CatalogEntry plain = e;
  plain.provenance = {};
  EXPECT_FALSE(to_json(plain).contains("provenance"));
  EXPECT_EQ(plain.provenance.describe(), "-");

  // Merge: per key the higher speedup; sources of dropped entries go.
  Catalog base, extra;
  plain.kernel_id = "k0", plain.speedup = 1.2;
  base.entries = {plain};
  base.sources = {{"k0", "old"}};
  extra.entries = {e};
  extra.sources = {{"k1", "new"}};
  Catalog m = merge_catalogs(base, extra);
  ASSERT_EQ(m.entries.size(), 1u);
  EXPECT_EQ(m.entries[0].kernel_id, "k1");
  EXPECT_EQ(m.sources, (std::map<std::string, std::string>{{"k1", "new"}}));
  EXPECT_NE(format_catalog(m).find("rl hgemm_rl@12 (reverified)"), std::string::npos);
  EXPECT_NE(format_catalog(m).find("1 written by an RL policy"), std::string::npos);
  extra.entries[0].speedup = 1.0;  // slower than the base's: the base's stays
  EXPECT_EQ(merge_catalogs(base, extra).entries[0].kernel_id, "k0");

  // The exemplar table: a policy's kernel (step >= 1) is rl; a seed (step 0) is not, even where
  // a policy wrote it again in another stage.
  testing::ScratchDir dir;
  {
    ExemplarStore rl(dir / "s.sqlite", "hgemm_rl");
    rl.add("t", {"seed", "s", 1.0}, 0);
    rl.add("t", {"mine", "m", 1.1}, 3);
    rl.add("t", {"mine", "m", 1.1}, 5);  // ignored: already there
    ExemplarStore other(dir / "s.sqlite", "hgemm_rl2");
    other.add("t", {"seed", "s", 1.0}, 2);
    other.add("t", {"mine", "m", 1.1}, 1);
  }
  const auto origins = ExemplarStore::policy_origins(dir / "s.sqlite");
  ASSERT_EQ(origins.size(), 1u);
  EXPECT_EQ(origins.at("mine").step, 1);
  EXPECT_EQ(origins.at("mine").scope, "hgemm_rl2");
}


// rollout.seed_grid: a new task's pool is seeded with the variants measured best at the nearest
// training shape of the same layout and accumulation, fastest first; held-out rows lend nothing.
TEST(SeedGrid, SeedsFromTheNearestTrainingShapeFastestFirstAndNeverFromAHeldOutRow) {
  testing::ScratchDir dir;
  auto first_nn_f32 = [](const std::string& family, int skip) {
    for (const auto& v : hgemm_family_variants(family))
      if (v.layout == "nn" && v.acc == "f32" && skip-- == 0) return v;
    ADD_FAILURE() << family << " has no nn f32 variant";
    return KernelVariant{};
  };
  const KernelVariant t0 = first_nn_f32("hgemm_tiled", 0), t1 = first_nn_f32("hgemm_tiled", 1);
  const KernelVariant w0 = first_nn_f32("hgemm_wmma", 0);
  // Row 1 (64^3): tiled 12 us, wmma 9 us -> wmma first. Row 2 (4096^3): tiled only.
  // Row 3 (64^3, tn): another layout. Row 4 (256x64x64): wmma faster again, but held out below.
  const std::string head = "M,N,K,layout,acc,hgemm_tiled_us,hgemm_tiled_variant,hgemm_wmma_us,hgemm_wmma_variant\n";
  testing::write_text(dir / "grid.csv",
                      head + "64,64,64,nn,f32,12," + t0.name + ",9," + w0.name + "\n" +
                          "4096,4096,4096,nn,f32,900," + t1.name + ",,\n" +
                          "64,64,64,tn,f32,,,,\n" +
                          "256,64,64,nn,f32,20," + t1.name + ",30," + w0.name + "\n");
  const SeedGrid all(dir / "grid.csv", {});
  EXPECT_EQ(all.rows(), 3u);  // the tn row had no passing variant
  // 128x64x64: |log2| distance 1 to 64^3 and to 256x64x64 (a tie: the CSV's first row wins),
  // 57 to 4096^3.
  EXPECT_EQ(all.nearest_shape(hgemm_task(128, 64, 64, "nn", "f32")), "64x64x64");
  EXPECT_EQ(all.sources(hgemm_task(128, 64, 64, "nn", "f32"), 4),
            (std::vector<std::string>{w0.source, t0.source}));
  EXPECT_EQ(all.sources(hgemm_task(128, 64, 64, "nn", "f32"), 1), (std::vector<std::string>{w0.source}));
  EXPECT_EQ(all.nearest_shape(hgemm_task(2048, 4096, 8192, "nn", "f32")), "4096x4096x4096");
  EXPECT_EQ(all.sources(hgemm_task(2048, 4096, 8192, "nn", "f32"), 4), (std::vector<std::string>{t1.source}));
  EXPECT_TRUE(all.sources(hgemm_task(128, 64, 64, "tn", "f32"), 4).empty());  // no tn row passed
  EXPECT_TRUE(all.sources(hgemm_task(128, 64, 64, "nn", "f16"), 4).empty());  // no f16 row
  // 200x64x64 is nearest to 256x64x64 (its tiled variant at 20 us first); held out, that row is
  // never used and 64^3 lends its variants instead.
  EXPECT_EQ(all.sources(hgemm_task(200, 64, 64, "nn", "f32"), 4),
            (std::vector<std::string>{t1.source, w0.source}));
  const SeedGrid split(dir / "grid.csv", {hgemm_split_key(hgemm_task(256, 64, 64, "nn", "f32"))});
  EXPECT_EQ(split.rows(), 2u);
  EXPECT_EQ(split.nearest_shape(hgemm_task(200, 64, 64, "nn", "f32")), "64x64x64");
  EXPECT_EQ(split.sources(hgemm_task(256, 64, 64, "nn", "f32"), 4),
            (std::vector<std::string>{w0.source, t0.source}));
  EXPECT_THROW({ SeedGrid missing(dir / "missing.csv", {}); }, UserError);
}

}  // namespace
}  // namespace kernelrl
