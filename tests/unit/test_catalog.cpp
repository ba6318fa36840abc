// The kernel catalog without a GPU: building from a results store picks, per (device, shape,
// layout, accumulation), the kernel with the highest median speedup over the reference and
// leaves out failed, call-mode, other-L2 and non-HGEMM evaluations; the JSON round-trips; the
// show table; export's generated files (dispatch table, kernel files, entry renaming) and its
// input errors. Every expected value below is written out by hand from the rows the test stores.
#include <gtest/gtest.h>

#include "catalog/catalog.h"
#include "catalog/export.h"
#include "catalog/package/src/device_table.h"
#include "common/error.h"
#include "common/fs.h"
#include "data/tasks/task_suite.h"
#include "reward/result_store.h"
#include "test_util.h"

namespace kernelrl {
namespace {

// One stored evaluation with chosen times: the candidate's device median and the reference's.
struct Row {
  std::string task, source;
  double cand_us, ref_us;
  std::string timing = "device", l2 = "cold";
  EvalStatus status = EvalStatus::ok;
  std::string basis = "";  // "rated": stored under the rated-clock timing key
};

void store_rows(const fs::path& path, const std::string& backend, const std::string& gpu,
                const std::vector<Row>& rows) {
  ResultStore store(path);
  const std::string ref = backend == "gpu" ? "lt-auto" : "torch";
  for (const auto& row : rows) {
    EvalResult r;
    r.hash = "h-" + row.source.substr(0, 8);
    r.task = row.task;
    r.status = row.status;
    r.cand.median_us = row.cand_us;
    r.cand.n = 10;
    r.cand.timing = row.timing;
    r.cand.call_median_us = row.timing == "device" ? row.cand_us + 5 : 0;
    TimingStats t;
    t.median_us = row.ref_us;
    t.n = 10;
    t.timing = row.timing;
    r.baselines[ref] = t;
    if (backend == "gpu") {
      t.median_us = row.ref_us * 0.9;  // lt-auto-max: the faster layout
      r.baselines["lt-auto-max"] = t;
    }
    store.add_result(r, row.source, backend, gpu,
                     row.timing + "/" + row.l2 + "/g20" + (row.basis.empty() ? "" : "/" + row.basis), "s");
  }
}

const std::string kSrcA = "// kernel A\n", kSrcB = "// kernel B\n", kSrcC = "// kernel C\n",
                  kSrcD = "// kernel D\n", kSrcE = "// kernel E\n", kSrcF = "// kernel F\n",
                  kSrcG = "// kernel G\n", kSrcH = "// kernel H\n";

std::vector<Row> host_rows() {
  return {
      // 32x40x64 nn: A 12/10 = 1.2x beats B 10/9.5 = 1.053x although B's raw time is lower.
      {"hgemm_32x40x64_nn", kSrcA, 10.0, 12.0},
      {"hgemm_32x40x64_nn", kSrcB, 9.5, 10.0},
      // Failed, call-mode and hot-L2 rows with large speedups must not count.
      {"hgemm_32x40x64_nn", kSrcE, 1.0, 12.0, "device", "cold", EvalStatus::wrong_answer},
      {"hgemm_32x40x64_nn", kSrcF, 1.0, 12.0, "call"},
      {"hgemm_32x40x64_nn", kSrcG, 1.0, 12.0, "device", "hot"},
      // Times rescaled to the rated clock (reward.clock_basis: rated) are not as-run times.
      {"hgemm_32x40x64_nn", kSrcH, 1.0, 12.0, "device", "cold", EvalStatus::ok, "rated"},
      // 64x64x64 nn: C evaluated three times (1.5x, 0.9x, 0.95x: median 0.95x) loses to D's
      // single 1.1x; C's luckiest draw does not decide.
      {"hgemm_64x64x64_nn", kSrcC, 10.0, 15.0},
      {"hgemm_64x64x64_nn", kSrcC, 10.0, 9.0},
      {"hgemm_64x64x64_nn", kSrcC, 10.0, 9.5},
      {"hgemm_64x64x64_nn", kSrcD, 20.0, 22.0},
      // The same shape with fp16 accumulation is its own key; tn only in call mode: no entry.
      {"hgemm_32x40x64_nn_acc16", kSrcB, 8.0, 10.0},
      {"hgemm_32x40x64_tn", kSrcA, 1.0, 10.0, "call"},
      // Not an HGEMM task.
      {"softmax_rows", kSrcA, 1.0, 2.0},
  };
}

TEST(Catalog, BuildPicksTheBestMedianSpeedupPerKeyAndLeavesOutWhatDoesNotCount) {
  testing::ScratchDir dir;
  store_rows(dir / "r.sqlite", "host", "host", host_rows());
  CatalogBuilder b("cold");
  b.add_store(dir / "r.sqlite");
  Catalog c = b.finish();

  ASSERT_EQ(c.entries.size(), 3u);
  // Sorted by key: 32x40x64 nn f16, 32x40x64 nn f32, 64x64x64 nn f32.
  const CatalogEntry& f16 = c.entries[0];
  EXPECT_EQ(f16.shape(), "32x40x64");
  EXPECT_EQ(f16.acc, "f16");
  EXPECT_EQ(c.sources.at(f16.kernel_id), kSrcB);
  EXPECT_DOUBLE_EQ(f16.speedup, 1.25);

  const CatalogEntry& e = c.entries[1];
  EXPECT_EQ(e.backend, "host");
  EXPECT_EQ(e.device, "host");
  EXPECT_EQ(e.m, 32);
  EXPECT_EQ(e.n, 40);
  EXPECT_EQ(e.k, 64);
  EXPECT_EQ(e.layout, "nn");
  EXPECT_EQ(e.acc, "f32");
  EXPECT_EQ(c.sources.at(e.kernel_id), kSrcA);
  EXPECT_EQ(e.reference, "torch");
  EXPECT_DOUBLE_EQ(e.speedup, 1.2);
  EXPECT_DOUBLE_EQ(e.time.device_us, 10.0);
  EXPECT_DOUBLE_EQ(e.time.call_us, 15.0);
  EXPECT_DOUBLE_EQ(e.baselines.at("torch").device_us, 12.0);
  EXPECT_EQ(e.evaluations, 1);
  EXPECT_EQ(e.competitors, 2);  // A and B; E, F, G, H never competed
  EXPECT_EQ(e.mode, "device/cold/g20");

  const CatalogEntry& d = c.entries[2];
  EXPECT_EQ(d.shape(), "64x64x64");
  EXPECT_EQ(c.sources.at(d.kernel_id), kSrcD);
  EXPECT_DOUBLE_EQ(d.speedup, 1.1);
  EXPECT_EQ(d.competitors, 2);

  EXPECT_EQ(c.sources.size(), 3u);  // only the winners' sources
  EXPECT_EQ(c.skipped.at("failed (wrong_answer)"), 1);
  EXPECT_EQ(c.skipped.at("call-mode timing (only device time counts)"), 2);
  EXPECT_EQ(c.skipped.at("L2 hot (catalog: cold)"), 1);
  EXPECT_EQ(c.skipped.at("rated-clock times (catalog: as run)"), 1);
  EXPECT_EQ(c.skipped.at("not an HGEMM task"), 1);
  ASSERT_EQ(c.inputs.size(), 1u);

  // A hot-L2 catalog of the same store holds only G's evaluation.
  CatalogBuilder hot("hot");
  hot.add_store(dir / "r.sqlite");
  Catalog h = hot.finish();
  ASSERT_EQ(h.entries.size(), 1u);
  EXPECT_EQ(h.sources.at(h.entries[0].kernel_id), kSrcG);
  EXPECT_DOUBLE_EQ(h.entries[0].speedup, 12.0);
}

TEST(Catalog, KernelsFromSeveralStoresCompeteAndTheFileRoundTrips) {
  testing::ScratchDir dir;
  store_rows(dir / "a.sqlite", "host", "host", {{"hgemm_32x40x64_nn", kSrcA, 10.0, 12.0}});
  store_rows(dir / "b.sqlite", "host", "host", {{"hgemm_32x40x64_nn", kSrcB, 10.0, 13.0}});
  CatalogBuilder b;
  b.add_store(dir / "a.sqlite");
  b.add_store(dir / "b.sqlite");
  Catalog c = b.finish();
  ASSERT_EQ(c.entries.size(), 1u);
  EXPECT_EQ(c.sources.at(c.entries[0].kernel_id), kSrcB);  // 1.3x over 1.2x
  EXPECT_EQ(c.entries[0].origin, (dir / "b.sqlite").string());

  write_catalog(dir / "cat.json", c);
  Catalog back = read_catalog(dir / "cat.json");
  ASSERT_EQ(back.entries.size(), 1u);
  EXPECT_EQ(to_json(back.entries[0]), to_json(c.entries[0]));
  EXPECT_EQ(back.sources, c.sources);
  EXPECT_EQ(back.inputs, c.inputs);

  testing::write_text(dir / "bad.json", "{\"entries\": []}");
  EXPECT_THROW(read_catalog(dir / "bad.json"), UserError);
  testing::write_text(dir / "torn.json", "{\"format\": \"kernelrl-catalog\", ");
  EXPECT_THROW(read_catalog(dir / "torn.json"), UserError);
  EXPECT_THROW(b.add_store(dir / "missing.sqlite"), UserError);
}

TEST(Catalog, ShowPrintsOneRowPerEntryWithTheReferenceAndWins) {
  testing::ScratchDir dir;
  store_rows(dir / "g.sqlite", "gpu", "NVIDIA H100 80GB HBM3",
             {{"hgemm_256x512x128_nn", kSrcA, 8.0, 10.0},
              {"hgemm_4096x4096x4096_tn", kSrcB, 200.0, 100.0}});
  CatalogBuilder b;
  b.add_store(dir / "g.sqlite");
  std::string table = format_catalog(b.finish());
  EXPECT_NE(table.find("NVIDIA H100 80GB HBM3 (gpu backend)"), std::string::npos) << table;
  EXPECT_NE(table.find("lt-auto_us"), std::string::npos) << table;
  // 256x512x128: 8 us against lt-auto 10 us = 1.25x; lt-auto-max 9 us = 1.125x.
  EXPECT_NE(table.find("256x512x128"), std::string::npos) << table;
  EXPECT_NE(table.find("8.00       10.00    1.250x       1.125x"), std::string::npos) << table;
  // 4096^3 tn: 200 us against 100 us = 0.5x.
  EXPECT_NE(table.find("200.00      100.00    0.500x"), std::string::npos) << table;
  EXPECT_NE(table.find("2 entries; the kernel beats lt-auto at 1"), std::string::npos) << table;
  // mean (1.25 + 0.5) / 2 = 0.875, geometric mean sqrt(0.625) = 0.791
  EXPECT_NE(table.find("mean 0.875x, geometric mean 0.791x"), std::string::npos) << table;
  EXPECT_NE(format_catalog(Catalog{}).find("no entries"), std::string::npos);
}

CatalogEntry gpu_entry(const std::string& device, int64_t m, const std::string& layout,
                       const std::string& acc, const std::string& id, double kernel_us,
                       double lt_us) {
  CatalogEntry e;
  e.backend = "gpu";
  e.device = device;
  e.m = e.n = e.k = m;
  e.layout = layout;
  e.acc = acc;
  e.kernel_id = id;
  e.time.device_us = kernel_us;
  e.baselines["lt-auto"] = {lt_us, 0};
  e.reference = "lt-auto";
  e.speedup = lt_us / kernel_us;
  return e;
}

TEST(Catalog, ExportWritesTheDispatchTableKernelsAndPackageFiles) {
  testing::ScratchDir dir;
  const std::string h100 = "NVIDIA H100 80GB HBM3";
  Catalog c;
  c.entries = {gpu_entry(h100, 256, "nn", "f32", "kaaaaaaaaaaaa", 10, 8),   // loses: 0.8x
               gpu_entry(h100, 128, "nn", "f32", "kbbbbbbbbbbbb", 4, 5.2),  // wins: 1.3x
               gpu_entry(h100, 128, "tn", "f32", "kbbbbbbbbbbbb", 4, 5),    // wins: 1.25x
               gpu_entry(h100, 512, "nn", "f16", "kcccccccccccc", 1, 9)};   // fp16 acc: out
  CatalogEntry host = gpu_entry("host", 64, "nn", "f32", "kdddddddddddd", 1, 2);
  host.backend = "host";
  c.entries.push_back(host);
  c.sources = {
      {"kaaaaaaaaaaaa",
       "// A\nextern \"C\" int kernelrl_launch(const kernelrl_args*, void*) { return 0; }\n"},
      {"kbbbbbbbbbbbb", "// B\n"},
      {"kcccccccccccc", "// C\n"},
      {"kdddddddddddd", "// D\n"}};

  ExportOptions o;
  o.out = dir / "pkg";
  ExportSummary s = export_catalog(c, o);
  EXPECT_EQ(s.devices, std::vector<std::string>{h100});
  EXPECT_EQ(s.arch, "sm_90a");
  EXPECT_EQ(s.entries, 3);
  EXPECT_EQ(s.wins, 2);
  EXPECT_EQ(s.kernels, 2);
  EXPECT_EQ(s.notes.size(), 2u);  // the host entry, the fp16 entry

  for (const char* f :
       {"CMakeLists.txt", "README.md", "cmake/KernelRLCatalogConfig.cmake.in",
        "include/kernelrl_catalog.h", "src/kernelrl_catalog.cpp", "src/torch_op.cpp",
        "kernels/exports.map", "kernels/kernel_abi.h", "catalog.json", "catalog.cmake"})
    EXPECT_TRUE(fs::exists(dir / "pkg" / f)) << f;
  // The package's own templates are verbatim (their @VAR@ are for the package's configure).
  EXPECT_NE(
      testing::read_text(dir / "pkg/cmake/KernelRLCatalogConfig.cmake.in").find("@PACKAGE_INIT@"),
      std::string::npos);
  std::string table = testing::read_text(dir / "pkg/src/catalog_table.inc");
  // Sorted by (device, M, N, K, layout); kernel indices in first-use order.
  EXPECT_NE(table.find("{\"kbbbbbbbbbbbb\", \"kaaaaaaaaaaaa\"}"), std::string::npos) << table;
  size_t r1 = table.find("{0, 128, 128, 128, 0, 0, 4, 5.2, true}"),
         r2 = table.find("{0, 128, 128, 128, 1, 0, 4, 5, true}"),
         r3 = table.find("{0, 256, 256, 256, 0, 1, 10, 8, false}");
  ASSERT_NE(r1, std::string::npos) << table;
  ASSERT_NE(r2, std::string::npos) << table;
  ASSERT_NE(r3, std::string::npos) << table;
  EXPECT_LT(r1, r2);
  EXPECT_LT(r2, r3);
  EXPECT_EQ(table.find("512"), std::string::npos) << table;
  EXPECT_NE(table.find("kDeviceNames = {\"NVIDIA H100 80GB HBM3\"}"), std::string::npos) << table;

  std::string cm = testing::read_text(dir / "pkg/catalog.cmake");
  EXPECT_NE(cm.find("set(KERNELRL_CATALOG_KERNELS kbbbbbbbbbbbb kaaaaaaaaaaaa)"), std::string::npos)
      << cm;
  EXPECT_NE(cm.find("set(KERNELRL_CATALOG_ARCH_DEFAULT \"90a\")"), std::string::npos) << cm;
  std::string ka = testing::read_text(dir / "pkg/kernels/kaaaaaaaaaaaa.cu");
  // The source follows the ABI include and a #line, byte for byte.
  const std::string tail =
      "#include \"kernel_abi.h\"\n#line 1 \"kaaaaaaaaaaaa.cu\"\n" + c.sources["kaaaaaaaaaaaa"];
  ASSERT_GE(ka.size(), tail.size());
  EXPECT_EQ(ka.substr(ka.size() - tail.size()), tail);
  EXPECT_FALSE(fs::exists(dir / "pkg/kernels/kcccccccccccc.cu"));
  // The exported catalog.json is a catalog of the exported entries.
  EXPECT_EQ(read_catalog(dir / "pkg/catalog.json").entries.size(), 3u);

  // Re-export over an earlier export replaces it; --only-winners drops the losing kernel.
  o.only_winners = true;
  s = export_catalog(c, o);
  EXPECT_EQ(s.kernels, 1);
  EXPECT_EQ(s.entries, 2);
  EXPECT_FALSE(fs::exists(dir / "pkg/kernels/kaaaaaaaaaaaa.cu"));
}

TEST(Catalog, ExportRefusesAmbiguousOrUnknownInput) {
  testing::ScratchDir dir;
  Catalog c;
  c.entries = {gpu_entry("NVIDIA H100 80GB HBM3", 128, "nn", "f32", "kaaaaaaaaaaaa", 4, 5),
               gpu_entry("NVIDIA A100-SXM4-80GB", 128, "nn", "f32", "kaaaaaaaaaaaa", 4, 5),
               gpu_entry("Mystery GPU", 64, "nn", "f32", "kaaaaaaaaaaaa", 4, 5)};
  c.sources = {{"kaaaaaaaaaaaa", "// A\n"}};
  ExportOptions o;
  o.out = dir / "pkg";
  EXPECT_THROW(export_catalog(c, o), UserError);  // three GPUs of different (or unknown) archs
  o.devices = {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"};
  EXPECT_THROW(export_catalog(c, o), UserError);  // sm_90a and sm_80: one package, one arch
  o.devices = {"NVIDIA B9000"};
  EXPECT_THROW(export_catalog(c, o), UserError);  // not in the catalog
  o.devices = {"Mystery GPU"};
  EXPECT_THROW(export_catalog(c, o), UserError);  // unknown arch, no --arch
  o.arch = "90a";
  EXPECT_THROW(export_catalog(c, o), UserError);  // not sm_NN
  o.devices = {"NVIDIA A100-SXM4-80GB"};
  o.arch.clear();
  EXPECT_EQ(export_catalog(c, o).arch, "sm_80");
  // A directory that is not an earlier export is never replaced.
  testing::write_text(dir / "mine" / "notes.txt", "keep");
  o.out = dir / "mine";
  EXPECT_THROW(export_catalog(c, o), UserError);
  EXPECT_TRUE(fs::exists(dir / "mine" / "notes.txt"));
  EXPECT_EQ(arch_for_device("NVIDIA H200"), "sm_90a");
  EXPECT_EQ(arch_for_device("NVIDIA GeForce GTX 1080"), "");
}

// Issue 41: an H100's winners are not an H200's. Two stores of two cards, the same shapes: each
// (device, shape, layout, acc) keeps its own fastest kernel, side by side.
TEST(Catalog, StoresOfTwoDevicesKeepEachDevicesOwnWinners) {
  testing::ScratchDir dir;
  const std::string h100 = "NVIDIA H100 80GB HBM3", h200 = "NVIDIA H200";
  // H100: A 12/10 = 1.2x beats B 11/10 = 1.1x. H200: B 13/10 = 1.3x beats A 10.5/10 = 1.05x.
  store_rows(dir / "h100.sqlite", "gpu", h100,
             {{"hgemm_256x256x256_nn", kSrcA, 10.0, 12.0},
              {"hgemm_256x256x256_nn", kSrcB, 10.0, 11.0},
              {"hgemm_512x512x512_tn", kSrcC, 10.0, 9.0}});  // H100 only: 0.9x
  store_rows(dir / "h200.sqlite", "gpu", h200,
             {{"hgemm_256x256x256_nn", kSrcA, 10.0, 10.5},
              {"hgemm_256x256x256_nn", kSrcB, 10.0, 13.0},
              {"hgemm_256x256x256_nn_acc16", kSrcD, 10.0, 20.0}});  // its own key: 2x
  CatalogBuilder b;
  b.add_store(dir / "h100.sqlite");
  b.add_store(dir / "h200.sqlite");
  Catalog c = b.finish();
  ASSERT_EQ(c.entries.size(), 4u);
  std::map<std::string, std::string> winner;  // "device shape layout acc" -> source
  for (const auto& e : c.entries)
    winner[e.device + " " + e.shape() + " " + e.layout + " " + e.acc] = c.sources.at(e.kernel_id);
  EXPECT_EQ(winner[h100 + " 256x256x256 nn f32"], kSrcA);
  EXPECT_EQ(winner[h200 + " 256x256x256 nn f32"], kSrcB);
  EXPECT_EQ(winner[h100 + " 512x512x512 tn f32"], kSrcC);
  EXPECT_EQ(winner[h200 + " 256x256x256 nn f16"], kSrcD);
  EXPECT_EQ(catalog_devices(c), (std::map<std::string, int64_t>{{h100, 2}, {h200, 2}}));

  // Merging a catalog of one card into one of the other keeps both cards' entries.
  CatalogBuilder only100, only200;
  only100.add_store(dir / "h100.sqlite");
  only200.add_store(dir / "h200.sqlite");
  Catalog merged = merge_catalogs(only100.finish(), only200.finish());
  EXPECT_EQ(catalog_devices(merged), catalog_devices(c));
  EXPECT_EQ(merged.sources.size(), 4u);  // A, B, C, D: B and A each win on one card

  // show: the devices first; --device shows one card's table, by name or by a part of it.
  std::string all = format_catalog(c);
  EXPECT_NE(all.find("2 devices, one table each"), std::string::npos) << all;
  EXPECT_NE(all.find("  NVIDIA H200: 2 entries\n"), std::string::npos) << all;
  EXPECT_NE(all.find(h100 + " (gpu backend)"), std::string::npos) << all;
  EXPECT_NE(all.find(h200 + " (gpu backend)"), std::string::npos) << all;
  EXPECT_EQ(resolve_catalog_device(c, "h200"), h200);
  EXPECT_EQ(resolve_catalog_device(c, h100), h100);
  EXPECT_THROW(resolve_catalog_device(c, "NVIDIA"), UserError);  // names both
  EXPECT_THROW(resolve_catalog_device(c, "A100"), UserError);    // names none
  std::string one = format_catalog(c, h200);
  EXPECT_EQ(one.find(h100), std::string::npos) << one;
  EXPECT_EQ(one.find("512x512x512"), std::string::npos) << one;
  EXPECT_NE(one.find(h200 + " (gpu backend)"), std::string::npos) << one;
  // 256^3 nn on the H200: B, 13/10 = 1.3x.
  EXPECT_NE(one.find("10.00       13.00    1.300x"), std::string::npos) << one;
}

// Export of two cards: one table per device in the generated source, sorted by (device, shape),
// and a kernel that wins on both compiled once.
TEST(Catalog, ExportWritesOneTablePerDeviceAndEachKernelOnce) {
  testing::ScratchDir dir;
  const std::string h100 = "NVIDIA H100 80GB HBM3", h200 = "NVIDIA H200";
  Catalog c;
  c.entries = {gpu_entry(h100, 128, "nn", "f32", "kaaaaaaaaaaaa", 4, 6),    // 1.5x
               gpu_entry(h100, 256, "nn", "f32", "kbbbbbbbbbbbb", 10, 12),  // 1.2x
               gpu_entry(h200, 128, "nn", "f32", "kbbbbbbbbbbbb", 4, 5),    // 1.25x: B here
               gpu_entry(h200, 512, "tn", "f32", "kcccccccccccc", 10, 9)};  // 0.9x: cuBLASLt
  c.sources = {{"kaaaaaaaaaaaa", "// A\n"}, {"kbbbbbbbbbbbb", "// B\n"}, {"kcccccccccccc", "// C\n"}};
  ExportOptions o;
  o.out = dir / "pkg";
  ExportSummary s = export_catalog(c, o);
  EXPECT_EQ(s.devices, (std::vector<std::string>{h100, h200}));
  EXPECT_EQ(s.arch, "sm_90a");
  EXPECT_EQ(s.entries, 4);
  EXPECT_EQ(s.wins, 3);
  EXPECT_EQ(s.device_entries, (std::vector<int>{2, 2}));
  EXPECT_EQ(s.device_wins, (std::vector<int>{2, 1}));
  EXPECT_EQ(s.kernels, 3);  // B serves both cards: one module

  std::string table = testing::read_text(dir / "pkg/src/catalog_table.inc");
  EXPECT_NE(table.find("kDeviceNames = {\"NVIDIA H100 80GB HBM3\", \"NVIDIA H200\"}"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("kKernelIds = {\"kaaaaaaaaaaaa\", \"kbbbbbbbbbbbb\", \"kcccccccccccc\"}"),
            std::string::npos)
      << table;
  size_t r1 = table.find("{0, 128, 128, 128, 0, 0, 4, 6, true}"),
         r2 = table.find("{0, 256, 256, 256, 0, 1, 10, 12, true}"),
         r3 = table.find("{1, 128, 128, 128, 0, 1, 4, 5, true}"),
         r4 = table.find("{1, 512, 512, 512, 1, 2, 10, 9, false}");
  ASSERT_NE(r1, std::string::npos) << table;
  ASSERT_NE(r2, std::string::npos) << table;
  ASSERT_NE(r3, std::string::npos) << table;
  ASSERT_NE(r4, std::string::npos) << table;
  EXPECT_LT(r1, r2);
  EXPECT_LT(r2, r3);
  EXPECT_LT(r3, r4);
  std::string cm = testing::read_text(dir / "pkg/catalog.cmake");
  EXPECT_NE(cm.find("set(KERNELRL_CATALOG_DEVICES \"NVIDIA H100 80GB HBM3;NVIDIA H200\")"),
            std::string::npos)
      << cm;
  EXPECT_NE(cm.find("set(KERNELRL_CATALOG_KERNELS kaaaaaaaaaaaa kbbbbbbbbbbbb kcccccccccccc)"),
            std::string::npos)
      << cm;
  // The dispatcher's device choice and the package's header ship with it.
  EXPECT_TRUE(fs::exists(dir / "pkg/src/device_table.h"));
  std::string header = testing::read_text(dir / "pkg/include/kernelrl_catalog.h");
  for (const char* f : {"kernelrl_catalog_device(void)", "kernelrl_catalog_device_count(void)",
                        "kernelrl_catalog_device_name(int i)", "kernelrl_catalog_table_for(",
                        "KERNELRL_CATALOG_DEVICE="})
    EXPECT_NE(header.find(f), std::string::npos) << f;
  std::string lib = testing::read_text(dir / "pkg/src/kernelrl_catalog.cpp");
  EXPECT_NE(lib.find("cudaGetDeviceProperties"), std::string::npos);

  // One card only: its table alone, and only its kernels.
  o.devices = {h200};
  s = export_catalog(c, o);
  EXPECT_EQ(s.devices, std::vector<std::string>{h200});
  EXPECT_EQ(s.kernels, 2);
  EXPECT_FALSE(fs::exists(dir / "pkg/kernels/kaaaaaaaaaaaa.cu"));
  EXPECT_EQ(read_catalog(dir / "pkg/catalog.json").entries.size(), 2u);
}

// The dispatcher's choice of table by device name (the package's src/device_table.h): exact
// names only, so that no card borrows another's winners; anything else is "none" (cuBLASLt).
TEST(Catalog, DeviceTableIsChosenByTheExactDeviceName) {
  using kernelrl_catalog_detail::device_table_for;
  const char* tables[] = {"NVIDIA H100 80GB HBM3", "NVIDIA H200"};
  EXPECT_EQ(device_table_for("NVIDIA H100 80GB HBM3", tables, 2), 0);
  EXPECT_EQ(device_table_for("NVIDIA H200", tables, 2), 1);
  EXPECT_EQ(device_table_for("  NVIDIA H200 \n", tables, 2), 1);  // stray spaces aside
  EXPECT_EQ(device_table_for("NVIDIA H100 PCIe", tables, 2), -1);  // another card
  EXPECT_EQ(device_table_for("NVIDIA H200 NVL", tables, 2), -1);   // a prefix is not a match
  EXPECT_EQ(device_table_for("NVIDIA H20", tables, 2), -1);        // nor is a part of one
  EXPECT_EQ(device_table_for("nvidia h200", tables, 2), -1);
  EXPECT_EQ(device_table_for("Fake GPU 9000", tables, 2), -1);
  EXPECT_EQ(device_table_for("", tables, 2), -1);
  EXPECT_EQ(device_table_for(nullptr, tables, 2), -1);
  EXPECT_EQ(device_table_for("NVIDIA H200", tables, 0), -1);  // a catalog with no GPU entries
}

// The GPU bench reads the llm grid from configs/grids/llm.txt; it must stay the built-in grid.
TEST(Catalog, LlmGridFileEqualsTheBuiltInGrid) {
  auto file = hgemm_grid(std::string(KERNELRL_SOURCE_DIR) + "/configs/grids/llm.txt");
  auto builtin = hgemm_grid("llm");
  ASSERT_EQ(file.size(), 30u);
  ASSERT_EQ(file.size(), builtin.size());
  for (size_t i = 0; i < file.size(); ++i) EXPECT_EQ(file[i].name, builtin[i].name);
}

}  // namespace
}  // namespace kernelrl
