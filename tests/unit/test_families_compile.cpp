// Kernel families compile: a sample of every CUDA family with nvcc for sm_80 and sm_90a (one
// nvcc call per HGEMM family plus one for all general families together, to keep CI fast), and
// host variants with g++ -Werror. Skips the nvcc part where no CUDA toolkit is installed (and
// the CUTLASS family's where the CUTLASS headers are missing).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <sstream>

#include "common/error.h"
#include "data/families.h"
#include "data/task_suite.h"
#include "reward/compile.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using testing::ScratchDir;
using testing::write_text;

std::string nvcc() {
  for (const char* p : {"/usr/local/cuda/bin/nvcc"})
    if (std::filesystem::exists(p)) return p;
  auto r = testing::run_command("command -v nvcc");
  return r.exit_code == 0 ? r.output.substr(0, r.output.find('\n')) : "";
}

const char* kArchs = " -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a";

void compile_cuda(const std::string& nvcc_path, const std::filesystem::path& file,
                  const std::string& extra = "") {
  auto r =
      testing::run_command(nvcc_path + " -std=c++17 -O2 -c" + kArchs + extra +
                           " -Werror all-warnings -o " + file.string() + ".o " + file.string());
  EXPECT_EQ(r.exit_code, 0) << file << "\n" << r.output;
}

int64_t param(const KernelVariant& v, const char* name) {
  for (const auto& [k, x] : v.params)
    if (k == name) return x;
  return 0;
}

TEST(FamiliesCompile, HgemmSampleCompilesWithNvccForSm80AndSm90a) {
  std::string nv = nvcc();
  if (nv.empty()) GTEST_SKIP() << "no nvcc";
  ScratchDir dir;
  std::mt19937_64 rng(2026);
  for (const std::string fam : {"hgemm_tiled", "hgemm_wmma", "hgemm_mma"}) {
    auto vs = hgemm_family_variants(fam);
    ASSERT_FALSE(vs.empty());
    // One random variant per family (seeded: the same in every run, a different one per family).
    const auto& v = vs[rng() % vs.size()];
    write_text(dir / (v.name + ".cu"), v.source);
    compile_cuda(nv, dir / (v.name + ".cu"));
  }
}

TEST(FamiliesCompile, DoubleBufferedMmaVariantsDoNotSpillRegisters) {
  // The double-buffered main loop keeps 128 fp32 accumulators and two fragment buffers per
  // thread beside the copy addresses: a spill would put local-memory traffic into the loop.
  // ptxas -warn-spills plus -Werror makes any spill a compile error. One 8-warp and one 4-warp
  // tile (the largest register footprints), both layouts.
  std::string nv = nvcc();
  if (nv.empty()) GTEST_SKIP() << "no nvcc";
  ScratchDir dir;
  int n = 0;
  for (const auto& v : hgemm_family_variants("hgemm_mma")) {
    if (param(v, "DBUF") != 1 || v.acc != "f32" || param(v, "GROUP") != 8) continue;
    const bool wide = v.layout == "nn" && param(v, "BM") == 128 && param(v, "BN") == 256 &&
                      param(v, "BK") == 32 && param(v, "STAGES") == 4;
    const bool deep =
        v.layout == "tn" && param(v, "BM") == 128 && param(v, "BN") == 128 && param(v, "BK") == 64;
    if (!wide && !deep) continue;
    write_text(dir / (v.name + ".cu"), v.source);
    compile_cuda(nv, dir / (v.name + ".cu"), " -Xptxas -warn-spills");
    ++n;
  }
  EXPECT_EQ(n, 2);
}

TEST(FamiliesCompile, GeneralCudaSampleCompilesInOneTranslationUnit) {
  std::string nv = nvcc();
  if (nv.empty()) GTEST_SKIP() << "no nvcc";
  auto tasks = load_task_suite(std::string(KERNELRL_SOURCE_DIR) + "/configs/tasks/general.yaml");
  // One variant of every general family: each in its own namespace with a renamed entry point.
  std::string tu =
      "#include <cuda_runtime.h>\n#include <cmath>\n#include <cstddef>\n#include <cstdint>\n"
      "#include <cstring>\n" +
      kernel_abi_prelude();
  std::set<std::string> seen;
  int i = 0;
  for (const auto& t : tasks) {
    auto vs = variants_for_task(t, "cuda");
    ASSERT_FALSE(vs.empty()) << t.name;
    if (!seen.insert(vs[0].family).second) continue;
    const auto& v = vs[i % vs.size()];
    tu += "#define kernelrl_launch kernelrl_launch_" + std::to_string(i) + "\nnamespace v" +
          std::to_string(i) + " {\n" + v.source + "\n}\n#undef kernelrl_launch\n";
    ++i;
  }
  EXPECT_EQ(seen.size(), 7u);
  ScratchDir dir;
  write_text(dir / "general.cu", tu);
  compile_cuda(nv, dir / "general.cu");
}

// hgemm_wgmma (sm_90a only): a sample compiles with nvcc for sm_90a without a register spill
// (ptxas -warn-spills under -Werror). One nvcc call for CI's sake: the body once, then each
// sampled variant's instance block with its own Config name and entry point. The sample holds
// the largest accumulator footprints (128x256 and 256x128 with two consumers), a 2-CTA cluster,
// both epilogues, BK 128, split-K, both layouts, and one seeded random variant.
TEST(FamiliesCompile, WgmmaSampleCompilesForSm90aWithoutSpills) {
  std::string nv = nvcc();
  if (nv.empty()) GTEST_SKIP() << "no nvcc";
  auto vs = hgemm_family_variants("hgemm_wgmma");
  ASSERT_GE(vs.size(), 150u);
  // Every variant is kernels/hgemm_wgmma.cuh verbatim plus its instance block.
  const std::string body =
      testing::read_text(std::string(KERNELRL_SOURCE_DIR) + "/kernels/hgemm_wgmma.cuh");
  const std::string marker = "\n// ---- instance:";
  for (const auto& v : vs) {
    ASSERT_EQ(v.arch, "sm_90a");
    ASSERT_EQ(v.source.find(body), kernel_abi_prelude().size()) << v.name;
    ASSERT_NE(v.source.find(marker), std::string::npos) << v.name;
  }
  auto with = [&](const std::string& layout, int bm, int bn, int bk, int cluster, int split,
                  int epi) {
    for (const auto& v : vs)
      if (v.layout == layout && param(v, "BM") == bm && param(v, "BN") == bn &&
          param(v, "BK") == bk && param(v, "CLUSTER") == cluster && param(v, "SPLITK") == split &&
          param(v, "EPI") == epi)
        return v;
    ADD_FAILURE() << "no hgemm_wgmma variant " << layout << " " << bm << "x" << bn << "x" << bk;
    return vs[0];
  };
  std::mt19937_64 rng(2026);
  std::vector<KernelVariant> sample = {
      with("nn", 128, 256, 64, 2, 1, 1), with("tn", 256, 128, 64, 1, 1, 0),
      with("tn", 128, 128, 128, 1, 1, 1), with("nn", 64, 128, 64, 1, 4, 0),
      vs[rng() % vs.size()]};
  std::string tu = vs[0].source.substr(0, vs[0].source.find(marker));
  for (size_t i = 0; i < sample.size(); ++i) {
    std::string inst = sample[i].source.substr(sample[i].source.find(marker));
    const std::string id = std::to_string(i);
    for (auto [from, to] : {std::pair<std::string, std::string>{"using Cfg =", "using Cfg" + id + " ="},
                            {"run<Cfg>", "run<Cfg" + id + ">"},
                            {"kernelrl_launch(", "kernelrl_launch_" + id + "("}}) {
      ASSERT_NE(inst.find(from), std::string::npos) << sample[i].name;
      inst.replace(inst.find(from), from.size(), to);
    }
    tu += inst;
  }
  ScratchDir dir;
  write_text(dir / "wgmma.cu", tu);
  const std::string so = (dir / "wgmma.so").string();
  auto r = testing::run_command(nv + " -std=c++17 -O3 --expt-relaxed-constexpr -gencode "
                                "arch=compute_90a,code=sm_90a -Xptxas -warn-spills -Werror "
                                "all-warnings -Xcompiler -fPIC -shared -o " + so + " " +
                                (dir / "wgmma.cu").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The evaluator's worker dlopens many candidates into one process: a candidate exports its
  // entry point and nothing else. (A weak or GNU-unique symbol, e.g. a function-local static
  // of a template, would be shared with an earlier candidate of the same Config.)
  auto syms = testing::run_command("nm -D --defined-only " + so);
  ASSERT_EQ(syms.exit_code, 0) << syms.output;
  std::istringstream lines(syms.output);
  int entry_points = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    EXPECT_NE(line.find(" T kernelrl_launch_"), std::string::npos) << line;
    ++entry_points;
  }
  EXPECT_EQ(entry_points, static_cast<int>(sample.size()));
}

// hgemm_cutlass (sm_90a only): three variants, one per schedule (cooperative with a 1x2
// cluster nn, ping-pong tn, stream-K with a 2x1 cluster tn), compile as one translation unit with
// the evaluator's CUTLASS headers and flags, without a register spill and without the ptxas
// advisory that wgmma was serialized (what a device assert in the mainloop causes). nvcc spends
// ~80 s of one core per CUTLASS sm90 kernel, so the sample stays at three.
TEST(FamiliesCompile, CutlassSampleCompilesForSm90aWithUnserializedWgmma) {
  std::string nv = nvcc();
  if (nv.empty()) GTEST_SKIP() << "no nvcc";
  std::vector<std::string> includes = resolve_include_dirs({"auto"});
  if (includes.empty()) GTEST_SKIP() << "no CUTLASS headers (nvidia-cutlass wheel in .venv)";
  auto vs = hgemm_family_variants("hgemm_cutlass");
  ASSERT_GE(vs.size(), 100u);
  const std::string body =
      testing::read_text(std::string(KERNELRL_SOURCE_DIR) + "/kernels/hgemm_cutlass.cuh");
  const std::string marker = "\n// ---- instance:";
  for (const auto& v : vs) {
    ASSERT_EQ(v.arch, "sm_90a");
    ASSERT_EQ(v.source.find(body), kernel_abi_prelude().size()) << v.name;
    ASSERT_NE(v.source.find(marker), std::string::npos) << v.name;
  }
  auto with = [&](const std::string& layout, int bm, int bn, int cm, int cn, int sched) {
    for (const auto& v : vs)
      if (v.layout == layout && param(v, "BM") == bm && param(v, "BN") == bn &&
          param(v, "CM") == cm && param(v, "CN") == cn && param(v, "SCHED") == sched &&
          param(v, "SWIZZLE") == 1)
        return v;
    ADD_FAILURE() << "no hgemm_cutlass variant " << layout << " " << bm << "x" << bn;
    return vs[0];
  };
  std::vector<KernelVariant> sample = {with("nn", 128, 256, 1, 2, 0), with("tn", 64, 128, 1, 1, 1),
                                       with("tn", 128, 128, 2, 1, 2)};
  std::string tu = vs[0].source.substr(0, vs[0].source.find(marker));
  for (size_t i = 0; i < sample.size(); ++i) {
    std::string inst = sample[i].source.substr(sample[i].source.find(marker));
    const std::string id = std::to_string(i);
    for (auto [from, to] :
         {std::pair<std::string, std::string>{"using Cfg =", "using Cfg" + id + " ="},
          {"run<Cfg>", "run<Cfg" + id + ">"},
          {"kernelrl_launch(", "kernelrl_launch_" + id + "("}}) {
      ASSERT_NE(inst.find(from), std::string::npos) << sample[i].name;
      inst.replace(inst.find(from), from.size(), to);
    }
    tu += inst;
  }
  ScratchDir dir;
  write_text(dir / "cutlass.cu", tu);
  const std::string so = (dir / "cutlass.so").string();
  std::string cmd = nv +
                    " -O3 -std=c++17 -shared -Xcompiler -fPIC -cudart shared "
                    "--expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a "
                    "-Xptxas -warn-spills";
  for (const auto& d : includes) cmd += " -I " + d;
  auto r = testing::run_command(cmd + " -o " + so + " " + (dir / "cutlass.cu").string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("spill"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("wgmma.mma_async instructions are serialized"), std::string::npos)
      << r.output;
  // The entry points are the only strong exports; CUTLASS's kernels and host code stay local
  // to the candidate (the worker dlopens many candidates into one process).
  auto syms = testing::run_command("nm -D --defined-only " + so);
  ASSERT_EQ(syms.exit_code, 0) << syms.output;
  std::istringstream lines(syms.output);
  int entry_points = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" T ") == std::string::npos) continue;
    EXPECT_NE(line.find(" T kernelrl_launch_"), std::string::npos) << line;
    ++entry_points;
  }
  EXPECT_EQ(entry_points, static_cast<int>(sample.size()));
}

TEST(Families, WgmmaVariantsOnlyWhereTheDeviceIsSm90a) {
  const TaskSpec t = hgemm_task(256, 256, 256, "tn");
  auto count = [&](const std::string& backend, const std::string& arch) {
    int n = 0;
    for (const auto& v : variants_for_task(t, backend, arch)) n += v.family == "hgemm_wgmma";
    return n;
  };
  EXPECT_GT(count("cuda", "sm_90a"), 0);
  EXPECT_EQ(count("cuda", ""), count("cuda", "sm_90a"));  // no arch given: every variant
  EXPECT_EQ(count("cuda", "sm_80"), 0);
  EXPECT_EQ(count("cuda", "sm_100a"), 0);
  EXPECT_EQ(count("host", "host"), 0);
  EXPECT_GT(variants_for_task(t, "cuda", "sm_80").size(), 0u);  // the other families stay
  EXPECT_TRUE(arch_runs("", "sm_80"));
  EXPECT_FALSE(arch_runs("sm_90a", "sm_90"));
}

TEST(FamiliesCompile, HostHgemmVariantCompilesAloneWithGxx) {
  ScratchDir dir;
  auto vs = hgemm_family_variants("hgemm_host");
  ASSERT_EQ(vs.size(), 8u);
  write_text(dir / "h.cpp", vs[3].source);
  auto r = testing::run_command("g++ -std=c++17 -O1 -fPIC -shared -Wall -Wextra -Werror -o " +
                                (dir / "h.so").string() + " " + (dir / "h.cpp").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(Families, VariantsCarryInstructionsAndDistinctNames) {
  std::set<std::string> names;
  size_t total = 0;
  for (const auto& f : kernel_families()) {
    if (f.kind != "hgemm") continue;
    for (const auto& v : hgemm_family_variants(f.name)) {
      ++total;
      names.insert(v.name);
      EXPECT_NE(v.source.find("kernelrl_launch"), std::string::npos);
      EXPECT_NE(v.instruction.find(v.layout == "nn" ? "row-major (KxN)" : "column-major"),
                std::string::npos);
    }
  }
  EXPECT_EQ(names.size(), total);
  auto mma = hgemm_family_variants("hgemm_mma");
  EXPECT_GE(mma.size(), 100u);
  // Both main loops are offered; each variant carries only its own.
  int dbuf = 0;
  for (const auto& v : mma) {
    const bool db = param(v, "DBUF") == 1;
    dbuf += db;
    EXPECT_EQ(v.source.find("load_fragments(") != std::string::npos, db) << v.name;
  }
  EXPECT_GE(dbuf, 100);
  EXPECT_THAT(mma[0].instruction, ::testing::HasSubstr("ldmatrix"));
  EXPECT_THAT(mma[0].instruction, ::testing::HasSubstr("cp.async"));
  EXPECT_THAT(mma[0].instruction, ::testing::HasSubstr("XOR-swizzled"));
  auto tasks = load_task_suite(std::string(KERNELRL_SOURCE_DIR) + "/configs/tasks/general.yaml");
  auto sample = sample_variants("all", 40, 1, tasks);
  ASSERT_EQ(sample.size(), 40u);
  std::set<std::string> fams;
  for (const auto& v : sample) fams.insert(v.family);
  EXPECT_EQ(fams.size(), kernel_families().size());
  auto t = variant_triplet(sample[0]);
  EXPECT_FALSE(t.instruction.empty() || t.context.empty() || t.code.empty());
  EXPECT_THROW(sample_variants("hgemm_mma,nope", 3, 1, tasks), UserError);
}

}  // namespace
}  // namespace kernelrl
