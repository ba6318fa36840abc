// `kernelrl catalog build|show|export` end to end without a GPU: a kernel directory evaluated on
// the host backend (the fast kernel wins every shape; wrong kernels are left out), and a GPU
// catalog (from a store written here, standing in for GPU measurements) exported as a package
// that configures, builds and installs with CMake + nvcc, whose kernel modules export only their
// renamed entry point, and which a find_package consumer links and queries (dispatch routes).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "common/fs.h"
#include "reward/result_store.h"
#include "test_util.h"

namespace kernelrl {
namespace {

std::string fixture(const std::string& name) {
  return testing::read_text(std::string(KERNELRL_SOURCE_DIR) + "/tests/data/kernels/" + name);
}

// host_hgemm_ok.cpp with its whole computation repeated 20 times: correct and ~20x slower.
std::string slow_host_kernel() {
  std::string s = fixture("host_hgemm_ok.cpp");
  const std::string loop = "  for (int64_t i = 0; i < M; ++i) {";
  size_t at = s.find(loop);
  EXPECT_NE(at, std::string::npos);
  s.replace(at, loop.size(), "  for (int rep = 0; rep < 20; ++rep)\n" + loop);
  return s;
}

TEST(CatalogCli, BuildFromAHostKernelDirectoryKeepsTheFastestCorrectKernel) {
  testing::ScratchDir dir;
  const std::string fast = fixture("host_hgemm_ok.cpp");
  testing::write_text(dir / "k" / "fast.cpp", fast);
  testing::write_text(dir / "k" / "slow.cpp", slow_host_kernel());
  testing::write_text(dir / "k" / "wrong.cpp", fixture("host_shrink_k.cpp"));
  testing::write_text(dir / "k" / "16_24_64.cpp",
                      fixture("host_unwritten.cpp"));  // this shape only
  testing::write_text(dir / "grid.txt", "16x24x64\n32x16x64\n");
  auto r =
      testing::run_kernelrl("catalog build --kernels " + (dir / "k").string() + " --grid " +
                            (dir / "grid.txt").string() + " --out " + (dir / "cat.json").string() +
                            " --backend host --l2 hot --cache-dir " + (dir / "cache").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("7 kernel/shape pairs evaluated on host, 4 passed"), std::string::npos)
      << r.output;
  auto j = nlohmann::json::parse(testing::read_text(dir / "cat.json"));
  ASSERT_EQ(j["entries"].size(), 2u) << j.dump(1);
  for (const auto& e : j["entries"]) {
    EXPECT_EQ(j["kernels"][e["kernel"].get<std::string>()], fast) << e.dump();
    EXPECT_EQ(e["competitors"], 2);  // fast and slow; the wrong ones never competed
    EXPECT_GT(e["speedup"].get<double>(), 0);
    EXPECT_EQ(e["backend"], "host");
  }
  EXPECT_EQ(j["entries"][0]["m"], 16);
  EXPECT_EQ(j["entries"][1]["m"], 32);
  EXPECT_EQ(j["skipped"]["failed (wrong_answer)"], 3) << j["skipped"].dump();

  auto show = testing::run_kernelrl("catalog show " + (dir / "cat.json").string());
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("host (host backend)"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("16x24x64"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("torch_us"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("3  failed (wrong_answer)"), std::string::npos) << show.output;

  // Bad input: one line, exit 2.
  auto none = testing::run_kernelrl("catalog build --out " + (dir / "x.json").string());
  EXPECT_EQ(none.exit_code, 2) << none.output;
  auto missing = testing::run_kernelrl("catalog show " + (dir / "nope.json").string());
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  fs::create_directories(dir / "empty");
  auto not_store = testing::run_kernelrl("catalog build --from " + (dir / "empty").string() +
                                         " --out " + (dir / "x.json").string());
  EXPECT_EQ(not_store.exit_code, 2) << not_store.output;
  EXPECT_NE(not_store.output.find("neither a results store"), std::string::npos)
      << not_store.output;
}

// gpu_naive.cu with a 32x8 block: a different kernel under the same external name hgemm_naive.
std::string naive_32x8() {
  std::string s = fixture("gpu_naive.cu");
  const std::string from = "dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);";
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos);
  s.replace(at, from.size(), "dim3 block(32, 8), grid((N + 31) / 32, (M + 7) / 8);");
  return s;
}

void add_gpu_row(ResultStore& store, const std::string& task, const std::string& source,
                 double cand_us, double lt_us, const std::string& gpu = "NVIDIA H100 80GB HBM3") {
  EvalResult r;
  r.hash = "h" + std::to_string(source.size());
  r.task = task;
  r.status = EvalStatus::ok;
  r.cand = {cand_us, cand_us, cand_us, cand_us, 0.01, 20, "device", cand_us + 6};
  r.baselines["lt-auto"] = {lt_us, lt_us, lt_us, lt_us, 0.01, 20, "device", lt_us + 9};
  store.add_result(r, source, "gpu", gpu, "device/cold/g20", "s");
}

TEST(CatalogCli, ExportedPackageBuildsInstallsAndAConsumerFindsIt) {
#ifndef KERNELRL_HAVE_CUDA
  GTEST_SKIP() << "built without a CUDA toolkit: the package needs nvcc and cuBLASLt";
#endif
  testing::ScratchDir dir;
  const std::string k1 = fixture("gpu_naive.cu"), k2 = naive_32x8();
  {
    ResultStore store(dir / "gpu.sqlite");
    add_gpu_row(store, "hgemm_128x128x128_nn", k1, 4.0, 6.0);    // 1.5x: dispatched
    add_gpu_row(store, "hgemm_256x256x256_nn", k2, 5.0, 6.0);    // 1.2x: dispatched
    add_gpu_row(store, "hgemm_512x512x512_nn", k1, 20.0, 10.0);  // 0.5x: cuBLASLt
  }
  {
    // A second card, its own store: k2 wins 128^3 there (1.4x over k1's 1.1x); 512^3 goes to k1.
    ResultStore store(dir / "h200.sqlite");
    add_gpu_row(store, "hgemm_128x128x128_nn", k1, 5.0, 5.5, "NVIDIA H200");
    add_gpu_row(store, "hgemm_128x128x128_nn", k2, 5.0, 7.0, "NVIDIA H200");
    add_gpu_row(store, "hgemm_512x512x512_nn", k1, 8.0, 10.0, "NVIDIA H200");
  }
  const std::string cat = (dir / "cat.json").string(), pkg = (dir / "pkg").string();
  auto b = testing::run_kernelrl("catalog build --from " + (dir / "gpu.sqlite").string() +
                                 " --from " + (dir / "h200.sqlite").string() + " --out " + cat);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("  NVIDIA H200: 2 entries\n"), std::string::npos) << b.output;
  auto sh = testing::run_kernelrl("catalog show " + cat + " --device h200");
  ASSERT_EQ(sh.exit_code, 0) << sh.output;
  EXPECT_EQ(sh.output.find("H100"), std::string::npos) << sh.output;
  EXPECT_NE(sh.output.find("NVIDIA H200 (gpu backend)"), std::string::npos) << sh.output;
  auto bad = testing::run_kernelrl("catalog show " + cat + " --device A100");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("names none of the catalog's devices"), std::string::npos)
      << bad.output;
  auto x = testing::run_kernelrl("catalog export " + cat + " --out " + pkg);
  ASSERT_EQ(x.exit_code, 0) << x.output;
  // Both cards' tables; k1 and k2 serve both, compiled once each.
  EXPECT_NE(x.output.find("5 entries for NVIDIA H100 80GB HBM3 + NVIDIA H200, 4 dispatch to "
                          "their kernel, 2 kernel module(s) for sm_90a"),
            std::string::npos)
      << x.output;
  // Kernel ids by source, from the exported catalog.
  auto j = nlohmann::json::parse(testing::read_text(dir / "pkg" / "catalog.json"));
  std::string id1, id2;
  for (auto it = j["kernels"].begin(); it != j["kernels"].end(); ++it)
    (it.value() == k1 ? id1 : id2) = it.key();
  ASSERT_FALSE(id1.empty());
  ASSERT_FALSE(id2.empty());

  const std::string build = (dir / "build").string(), prefix = (dir / "prefix").string();
  auto cfg =
      testing::run_command("cmake -S " + pkg + " -B " + build + " -DKERNELRL_CATALOG_TORCH=OFF");
  ASSERT_EQ(cfg.exit_code, 0) << cfg.output;
  EXPECT_NE(cfg.output.find("2 kernel(s) for sm_90a, PyTorch operators: OFF; tables for: NVIDIA "
                            "H100 80GB HBM3, NVIDIA H200"),
            std::string::npos)
      << cfg.output;
  auto bld = testing::run_command("cmake --build " + build + " -j 2");
  ASSERT_EQ(bld.exit_code, 0) << bld.output;  // both kernels define hgemm_naive: no clash
  auto ins = testing::run_command("cmake --install " + build + " --prefix " + prefix);
  ASSERT_EQ(ins.exit_code, 0) << ins.output;

  // Each module's dynamic symbol table defines exactly its renamed entry point.
  for (const auto& id : {id1, id2}) {
    auto nm = testing::run_command("nm -D --defined-only " + prefix +
                                   "/lib/kernelrl_catalog_kernels/" + id + ".so");
    ASSERT_EQ(nm.exit_code, 0) << nm.output;
    EXPECT_NE(nm.output.find(" T kernelrl_catalog_" + id + "\n"), std::string::npos) << nm.output;
    EXPECT_EQ(nm.output.find("hgemm_naive"), std::string::npos) << nm.output;
    EXPECT_EQ(nm.output.find("kernelrl_launch"), std::string::npos) << nm.output;
    size_t lines = std::count(nm.output.begin(), nm.output.end(), '\n');
    EXPECT_EQ(lines, 1u) << nm.output;
  }

  // A consumer: find_package, link, query the dispatch (no GPU needed), and a refused call.
  testing::write_text(dir / "use" / "CMakeLists.txt",
                      "cmake_minimum_required(VERSION 3.22)\nproject(use CXX)\n"
                      "find_package(KernelRLCatalog REQUIRED)\nadd_executable(use use.cpp)\n"
                      "target_link_libraries(use KernelRLCatalog::kernelrl_catalog)\n");
  testing::write_text(dir / "use" / "use.cpp", R"(#include <kernelrl_catalog.h>
#include <cstdio>
static const char* r(const char* x) { return x ? x : "cublaslt"; }
int main() {
  std::printf("devices %d: %s | %s | %s\n", kernelrl_catalog_device_count(),
              kernelrl_catalog_device_name(0), kernelrl_catalog_device_name(1),
              kernelrl_catalog_device_name(2) ? "?" : "null");
  std::printf("table_for H200 %d, H100 PCIe %d\n", kernelrl_catalog_table_for("NVIDIA H200"),
              kernelrl_catalog_table_for("NVIDIA H100 PCIe"));
  std::printf("entries %d wins %d arch %s device [%s]\n", kernelrl_catalog_entries(), kernelrl_catalog_wins(),
              kernelrl_catalog_arch(), kernelrl_catalog_device());
  std::printf("128nn %s\n", r(kernelrl_catalog_route(128, 128, 128, KERNELRL_LAYOUT_NN)));
  std::printf("256nn %s\n", r(kernelrl_catalog_route(256, 256, 256, KERNELRL_LAYOUT_NN)));
  std::printf("512nn %s\n", r(kernelrl_catalog_route(512, 512, 512, KERNELRL_LAYOUT_NN)));
  std::printf("128tn %s\n", r(kernelrl_catalog_route(128, 128, 128, KERNELRL_LAYOUT_TN)));
  std::printf("100nn %s\n", r(kernelrl_catalog_route(100, 100, 100, KERNELRL_LAYOUT_NN)));
  kernelrl_catalog_set_dispatch(KERNELRL_DISPATCH_CATALOG);
  std::printf("catalog 512nn %s\n", r(kernelrl_catalog_route(512, 512, 512, KERNELRL_LAYOUT_NN)));
  kernelrl_catalog_set_dispatch(KERNELRL_DISPATCH_CUBLASLT);
  std::printf("cublaslt 128nn %s\n", r(kernelrl_catalog_route(128, 128, 128, KERNELRL_LAYOUT_NN)));
  try {
    kernelrl_catalog::hgemm(8, 8, 8, nullptr, nullptr, nullptr);
  } catch (const std::exception& e) {
    std::printf("refused: %s\n", e.what());
  }
  return 0;
}
)");
  const std::string ubuild = (dir / "use-build").string();
  auto ucfg = testing::run_command("cmake -S " + (dir / "use").string() + " -B " + ubuild +
                                   " -DCMAKE_PREFIX_PATH=" + prefix);
  ASSERT_EQ(ucfg.exit_code, 0) << ucfg.output;
  auto ubld = testing::run_command("cmake --build " + ubuild);
  ASSERT_EQ(ubld.exit_code, 0) << ubld.output;
  // No GPU here: no device table, every shape to cuBLASLt, unless KERNELRL_CATALOG_DEVICE
  // forces one (the test machine may have a GPU: then its own name decides, not an H100's).
  auto plain = testing::run_command("env -u KERNELRL_CATALOG_DEVICE CUDA_VISIBLE_DEVICES= " +
                                    ubuild + "/use");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("devices 2: NVIDIA H100 80GB HBM3 | NVIDIA H200 | null"),
            std::string::npos)
      << plain.output;
  EXPECT_NE(plain.output.find("table_for H200 1, H100 PCIe -1"), std::string::npos)
      << plain.output;
  EXPECT_NE(plain.output.find("entries 0 wins 0 arch sm_90a device []"), std::string::npos)
      << plain.output;
  EXPECT_NE(plain.output.find("128nn cublaslt\n"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("catalog 512nn cublaslt\n"), std::string::npos) << plain.output;
  auto h200 = testing::run_command("KERNELRL_CATALOG_DEVICE='NVIDIA H200' " + ubuild + "/use");
  ASSERT_EQ(h200.exit_code, 0) << h200.output;
  EXPECT_NE(h200.output.find("entries 2 wins 2 arch sm_90a device [NVIDIA H200]"),
            std::string::npos)
      << h200.output;
  EXPECT_NE(h200.output.find("128nn " + id2 + "\n"), std::string::npos) << h200.output;
  EXPECT_NE(h200.output.find("256nn cublaslt\n"), std::string::npos) << h200.output;
  EXPECT_NE(h200.output.find("512nn " + id1 + "\n"), std::string::npos) << h200.output;
  auto other = testing::run_command("KERNELRL_CATALOG_DEVICE='NVIDIA A100-SXM4-80GB' " + ubuild +
                                    "/use 2>&1");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find("is none of the catalog's devices"), std::string::npos)
      << other.output;
  EXPECT_NE(other.output.find("128nn cublaslt\n"), std::string::npos) << other.output;
  auto run = testing::run_command("KERNELRL_CATALOG_DEVICE='NVIDIA H100 80GB HBM3' " + ubuild +
                                  "/use");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("entries 3 wins 2 arch sm_90a device [NVIDIA H100 80GB HBM3]"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("128nn " + id1 + "\n"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("256nn " + id2 + "\n"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("512nn cublaslt\n"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("128tn cublaslt\n"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("100nn cublaslt\n"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("catalog 512nn " + id1 + "\n"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("cublaslt 128nn cublaslt\n"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("refused: kernelrl_catalog::hgemm: null operand"), std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace kernelrl
