// The exported catalog library on the GPU: a catalog built by `kernelrl catalog build` from a
// kernel directory (evaluated through the Evaluator here), exported, configured and built with
// CMake, loaded with dlopen; then hgemm on catalog shapes (the catalog kernel forced, and the
// AUTO dispatch) and on unseen shapes of both layouts (cuBLASLt autotuned), a misaligned operand
// and a CUDA-graph capture of both paths. Metric: max |C - C_ref| against the fp32 product of the
// same fp16 inputs; bound: the evaluator's, 2 * max(cuBLAS fp16 deviation on the same inputs,
// 2^-11 * max |C_ref|). Outputs are NaN-poisoned before every call. Skips without a GPU.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

#include "common/fs.h"
#include "data/families.h"
#include "gpu_test_util.h"
#include "test_util.h"

#ifdef KERNELRL_HAVE_CUDA
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace kernelrl {
namespace {

#ifdef KERNELRL_HAVE_CUDA

struct Lib {
  void* h = nullptr;
  int (*hgemm)(int64_t, int64_t, int64_t, const void*, const void*, void*, int, void*) = nullptr;
  const char* (*route)(int64_t, int64_t, int64_t, int) = nullptr;
  void (*set_dispatch)(int) = nullptr;
  const char* (*last_error)() = nullptr;
  int (*entries)() = nullptr;
  template <class F>
  void sym(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(h, name));
    ASSERT_NE(f, nullptr) << name;
  }
};

struct Shape {
  int64_t m, n, k;
  int layout;  // 0 nn, 1 tn
};

// Deviation of the library's C from the fp32 product, and the evaluator's bound for it.
struct Check {
  double dev = 0, bound = 0;
  bool finite = false;
};

Check run_and_check(Lib& lib, const Shape& s, int64_t a_offset = 0) {
  auto opt = at::TensorOptions().dtype(at::kHalf).device(at::kCUDA);
  at::Tensor a_buf = at::randn({s.m * s.k + a_offset}, opt);
  at::Tensor a = a_buf.narrow(0, a_offset, s.m * s.k).view({s.m, s.k});
  at::Tensor b = s.layout == 0 ? at::randn({s.k, s.n}, opt) : at::randn({s.n, s.k}, opt);
  at::Tensor c = at::full({s.m, s.n}, NAN, opt);
  int rc = lib.hgemm(s.m, s.n, s.k, a.data_ptr(), b.data_ptr(), c.data_ptr(), s.layout,
                     at::cuda::getCurrentCUDAStream().stream());
  EXPECT_EQ(rc, 0) << lib.last_error();
  at::globalContext().setAllowTF32CuBLAS(false);
  at::Tensor bk = s.layout == 0 ? b : b.t();
  at::Tensor ref = at::matmul(a.to(at::kFloat), bk.to(at::kFloat));
  at::Tensor blas = at::matmul(a, bk);  // cuBLAS, fp16 in and out
  Check out;
  out.finite = c.isfinite().all().item<bool>();
  out.dev = (c.to(at::kFloat) - ref).abs().max().item<double>();
  double dev_blas = (blas.to(at::kFloat) - ref).abs().max().item<double>();
  out.bound = 2.0 * std::max(dev_blas, std::ldexp(ref.abs().max().item<double>(), -11));
  return out;
}

// `kernelrl catalog export CATALOG EXPORT_ARGS --out PKG`, then the package configured (without
// the PyTorch operator) and built into BUILD. Empty on success, else what failed with its output.
std::string export_and_build(const std::string& catalog, const std::string& export_args, const std::string& pkg,
                             const std::string& build) {
  auto x = testing::run_kernelrl("catalog export " + catalog + export_args + " --out " + pkg);
  if (x.exit_code != 0) return "catalog export: " + x.output;
  auto cfg = testing::run_command("cmake -S " + pkg + " -B " + build + " -DKERNELRL_CATALOG_TORCH=OFF");
  if (cfg.exit_code != 0) return "cmake configure: " + cfg.output;
  auto bld = testing::run_command("cmake --build " + build + " -j 8");
  if (bld.exit_code != 0) return "cmake build: " + bld.output;
  return "";
}

TEST(CatalogGpu, ExportedLibraryMatchesCublasOnCatalogAndUnseenShapes) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  const std::string src = std::string(KERNELRL_SOURCE_DIR) + "/tests/data/kernels/";
  testing::write_text(dir / "k" / "wmma_ref.cu", testing::read_text(src + "gpu_hgemm_ref.cu"));
  testing::write_text(dir / "k" / "naive.cu", testing::read_text(src + "gpu_naive.cu"));
  std::string tn_source;
  for (const auto& v : hgemm_family_variants("hgemm_wmma"))
    if (v.layout == "tn" && v.acc == "f32") {
      tn_source = v.source;
      break;
    }
  ASSERT_FALSE(tn_source.empty());
  testing::write_text(dir / "k" / "wmma_tn.cu", tn_source);
  testing::write_text(dir / "grid.txt",
                      "128x128x128 nn\n192x320x448 nn\n256x256x128 tn\n64x128x192 tn\n");

  const std::string cat = (dir / "cat.json").string(), pkg = (dir / "pkg").string();
  auto b = testing::run_kernelrl(
      "catalog build --kernels " + (dir / "k").string() + " --grid " + (dir / "grid.txt").string() +
      " --out " + cat + " --backend gpu --reference lt-auto --baselines lt-auto --cache-dir " +
      (dir / "cache").string());
  ASSERT_EQ(b.exit_code, 0) << b.output;
  std::printf("%s\n", testing::run_kernelrl("catalog show " + cat).output.c_str());
  auto j = nlohmann::json::parse(testing::read_text(cat));
  ASSERT_EQ(j["entries"].size(), 4u) << j.dump(1);
  const std::string build = (dir / "build").string();
  ASSERT_EQ(export_and_build(cat, "", pkg, build), "");

  Lib lib;
  lib.h = dlopen((build + "/libkernelrl_catalog.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib.h, nullptr) << dlerror();
  lib.sym(lib.hgemm, "kernelrl_catalog_hgemm");
  lib.sym(lib.route, "kernelrl_catalog_route");
  lib.sym(lib.set_dispatch, "kernelrl_catalog_set_dispatch");
  lib.sym(lib.last_error, "kernelrl_catalog_last_error");
  lib.sym(lib.entries, "kernelrl_catalog_entries");
  EXPECT_EQ(lib.entries(), 4);

  // AUTO routes exactly the entries whose kernel beat lt-auto.
  for (const auto& e : j["entries"]) {
    const char* r = lib.route(e["m"], e["n"], e["k"], e["layout"] == "tn");
    EXPECT_EQ(r != nullptr, e["speedup"].get<double>() > 1.0) << e.dump();
    if (r) {
      EXPECT_EQ(std::string(r), e["kernel"].get<std::string>());
    }
  }
  // Every catalog kernel, forced, then the AUTO dispatch.
  for (int mode : {2, 0}) {
    lib.set_dispatch(mode);
    for (const auto& e : j["entries"]) {
      Shape s{e["m"], e["n"], e["k"], e["layout"] == "tn"};
      if (mode == 2) {
        ASSERT_NE(lib.route(s.m, s.n, s.k, s.layout), nullptr);
      }
      Check c = run_and_check(lib, s);
      EXPECT_TRUE(c.finite) << e.dump();
      EXPECT_LE(c.dev, c.bound) << "mode " << mode << " " << e.dump();
    }
  }
  // Shapes the catalog never saw: cuBLASLt, autotuned at the first call.
  lib.set_dispatch(0);
  std::vector<Shape> unseen = {{77, 131, 200, 0},   {77, 131, 200, 1},     {1000, 512, 4096, 0},
                               {64, 4096, 1024, 1}, {4096, 4096, 4096, 0}, {1, 8, 8, 1}};
  for (const auto& s : unseen) {
    ASSERT_EQ(lib.route(s.m, s.n, s.k, s.layout), nullptr);
    Check c = run_and_check(lib, s);
    EXPECT_TRUE(c.finite) << s.m << "x" << s.n << "x" << s.k << " layout " << s.layout;
    EXPECT_LE(c.dev, c.bound) << s.m << "x" << s.n << "x" << s.k << " layout " << s.layout;
  }
  // A only 2-byte aligned: never a catalog kernel (verified on aligned buffers), cuBLASLt with
  // the operands' alignment.
  lib.set_dispatch(2);
  Check mis = run_and_check(lib, {128, 128, 128, 0}, /*a_offset=*/1);
  EXPECT_TRUE(mis.finite);
  EXPECT_LE(mis.dev, mis.bound);

  // CUDA-graph capture of a catalog kernel and of cuBLASLt, after a first call outside capture.
  lib.set_dispatch(2);
  for (Shape s : {Shape{128, 128, 128, 0}, Shape{77, 131, 200, 0}}) {
    auto opt = at::TensorOptions().dtype(at::kHalf).device(at::kCUDA);
    at::Tensor a = at::randn({s.m, s.k}, opt), bm = at::randn({s.k, s.n}, opt),
               c = at::empty({s.m, s.n}, opt);
    at::cuda::CUDAStream stream = at::cuda::getStreamFromPool();
    at::cuda::CUDAStreamGuard guard(stream);
    ASSERT_EQ(
        lib.hgemm(s.m, s.n, s.k, a.data_ptr(), bm.data_ptr(), c.data_ptr(), 0, stream.stream()), 0)
        << lib.last_error();
    at::cuda::CUDAGraph graph;
    graph.capture_begin();
    int rc =
        lib.hgemm(s.m, s.n, s.k, a.data_ptr(), bm.data_ptr(), c.data_ptr(), 0, stream.stream());
    graph.capture_end();
    ASSERT_EQ(rc, 0) << lib.last_error();
    c.fill_(NAN);
    graph.replay();
    stream.synchronize();
    at::globalContext().setAllowTF32CuBLAS(false);
    at::Tensor ref = at::matmul(a.to(at::kFloat), bm.to(at::kFloat));
    double dev = (c.to(at::kFloat) - ref).abs().max().item<double>();
    double bound =
        2.0 * std::max((at::matmul(a, bm).to(at::kFloat) - ref).abs().max().item<double>(),
                       std::ldexp(ref.abs().max().item<double>(), -11));
    EXPECT_LE(dev, bound) << "graph replay " << s.m << "x" << s.n << "x" << s.k;
  }
}

// Per-device tables (issue 41): a catalog whose every entry was measured on another card (its
// device renamed "Fake GPU" here) dispatches nothing on this one: kernelrl_catalog_device() is
// "", every shape routes to cuBLASLt and matches cuBLAS within the evaluator's bound. The same
// package forced onto the fake card's table (KERNELRL_CATALOG_DEVICE, the deliberate opt-in)
// routes that table's winners, and they are still correct (same architecture). Not yet run on
// a GPU (written 2026-11-28, session 18).
TEST(CatalogGpu, AnotherCardsTableIsNotUsedUnlessForced) {
  REQUIRE_CUDA();
  testing::ScratchDir dir;
  const std::string src = std::string(KERNELRL_SOURCE_DIR) + "/tests/data/kernels/";
  testing::write_text(dir / "k" / "wmma_ref.cu", testing::read_text(src + "gpu_hgemm_ref.cu"));
  testing::write_text(dir / "k" / "naive.cu", testing::read_text(src + "gpu_naive.cu"));
  testing::write_text(dir / "grid.txt", "128x128x128 nn\n192x320x448 nn\n");
  const std::string cat = (dir / "cat.json").string(), pkg = (dir / "pkg").string();
  auto b = testing::run_kernelrl(
      "catalog build --kernels " + (dir / "k").string() + " --grid " + (dir / "grid.txt").string() +
      " --out " + cat + " --backend gpu --reference lt-auto --baselines lt-auto --cache-dir " +
      (dir / "cache").string());
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto j = nlohmann::json::parse(testing::read_text(cat));
  ASSERT_EQ(j["entries"].size(), 2u) << j.dump(1);
  for (auto& e : j["entries"]) e["device"] = "Fake GPU";
  testing::write_text(dir / "fake.json", j.dump(1));
  const std::string build = (dir / "build").string();
  ASSERT_EQ(export_and_build((dir / "fake.json").string(), " --arch sm_90a", pkg, build), "");

  for (bool forced : {false, true}) {
    SCOPED_TRACE(forced ? "KERNELRL_CATALOG_DEVICE=Fake GPU" : "this card");
    // A fresh process state for the library's per-device choice: a copy under another name, so
    // dlopen loads it again (the choice is made at its first call and cached).
    const std::string so = build + (forced ? "/forced.so" : "/plain.so");
    fs::copy_file(build + "/libkernelrl_catalog.so", so, fs::copy_options::overwrite_existing);
    if (forced) {
      setenv("KERNELRL_CATALOG_DEVICE", "Fake GPU", 1);
    } else {
      unsetenv("KERNELRL_CATALOG_DEVICE");
    }
    Lib lib;
    lib.h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib.h, nullptr) << dlerror();
    lib.sym(lib.hgemm, "kernelrl_catalog_hgemm");
    lib.sym(lib.route, "kernelrl_catalog_route");
    lib.sym(lib.set_dispatch, "kernelrl_catalog_set_dispatch");
    lib.sym(lib.last_error, "kernelrl_catalog_last_error");
    const char* (*device)() = nullptr;
    lib.sym(device, "kernelrl_catalog_device");
    lib.set_dispatch(2);  // every catalog kernel where the table has one
    for (const auto& e : j["entries"]) {
      Shape s{e["m"], e["n"], e["k"], e["layout"] == "tn"};
      const char* r = lib.route(s.m, s.n, s.k, s.layout);
      if (forced) {
        EXPECT_NE(r, nullptr) << e.dump();
      } else {
        EXPECT_EQ(r, nullptr) << "another card's winner routed: " << e.dump();
      }
      Check c = run_and_check(lib, s);
      EXPECT_TRUE(c.finite) << e.dump();
      EXPECT_LE(c.dev, c.bound) << e.dump();
    }
    EXPECT_EQ(std::string(device()), forced ? "Fake GPU" : "");
  }
  unsetenv("KERNELRL_CATALOG_DEVICE");
}

#else
TEST(CatalogGpu, ExportedLibraryMatchesCublasOnCatalogAndUnseenShapes) {
  GTEST_SKIP() << "built without CUDA";
}
TEST(CatalogGpu, AnotherCardsTableIsNotUsedUnlessForced) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace kernelrl
