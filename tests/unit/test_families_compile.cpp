// Kernel families compile: every file of kernels/ as it stands (nvcc for .cuh, g++ for .h), a
// sample of every CUDA family's variants with nvcc for sm_80 and sm_90a (one nvcc call per HGEMM
// family plus one for all general families together, to keep CI fast), and host variants with
// g++ -Werror. Skips the nvcc part where no CUDA toolkit is installed (and the CUTLASS family's
// where the CUTLASS headers are missing).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
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
const char* kSm90a = " -gencode arch=compute_90a,code=sm_90a";

std::string kernels_dir() {
  return std::string(KERNELRL_SOURCE_DIR) + "/kernels";
}

// Candidates include "kernel_abi.h" (the evaluator puts it on the include path; here kernels/).
void compile_cuda(const std::string& nvcc_path, const std::filesystem::path& file,
                  const std::string& extra = "", const char* archs = kArchs) {
  auto r = testing::run_command(nvcc_path + " -std=c++17 -O2 -c" + archs + extra + " -I " +
                                kernels_dir() + " -Werror all-warnings -o " + file.string() +
                                ".o " + file.string());
  EXPECT_EQ(r.exit_code, 0) << file << "\n" << r.output;
}

// Several variants in one translation unit: each distinct kernels/ body once, then each
// instance block in a namespace of its own with its entry point renamed kernelrl_launch_<i>.
std::string one_translation_unit(const std::vector<KernelVariant>& vs) {
  std::string bodies, instances;
  std::set<std::string> seen;
  for (size_t i = 0; i < vs.size(); ++i) {
    auto [body, instance] = split_instance(vs[i].source);
    if (seen.insert(body).second) bodies += body + "\n";
    const std::string id = std::to_string(i);
    instances += "namespace v" + id + " {\n#define kernelrl_launch kernelrl_launch_" + id + "\n" +
                 instance + "#undef kernelrl_launch\n}  // namespace v" + id + "\n";
  }
  return bodies + instances;
}

// The exported symbols of a shared library must be the entry points alone: the worker dlopens
// many candidates into one process, so nothing else (a weak or GNU-unique symbol such as a
// function-local static of a template) may be shared with an earlier candidate. `strong_only`:
// only strong text symbols count (CUTLASS's headers bring weak and unique symbols of libstdc++
// and libcu++ inline functions and constants, which carry no candidate state).
void expect_only_entry_points(const std::string& so, size_t n, bool strong_only = false) {
  auto syms = testing::run_command("nm -D --defined-only " + so);
  ASSERT_EQ(syms.exit_code, 0) << syms.output;
  std::istringstream lines(syms.output);
  size_t entry_points = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || (strong_only && line.find(" T ") == std::string::npos)) continue;
    EXPECT_NE(line.find(" T kernelrl_launch_"), std::string::npos) << line;
    ++entry_points;
  }
  EXPECT_EQ(entry_points, n);
}

// Every kernel file compiles as it stands, without an instance: .cuh with nvcc (sm_90a; what a
// file defines for its instances is unused on its own: diagnostic 177 off), .h with g++ -Werror
// (kernel_abi.h also as C). hgemm_cutlass.cuh needs the CUTLASS headers (skipped without them).
TEST(FamiliesCompile, EveryKernelFileCompilesAsItStands) {
  std::string nv = nvcc();
  std::vector<std::string> cutlass = resolve_include_dirs({"auto"});
  ScratchDir dir;
  int cuh = 0, h = 0;
  for (const auto& e : std::filesystem::directory_iterator(kernels_dir())) {
    const std::string f = e.path().string(), ext = e.path().extension().string();
    if (ext == ".h") {
      auto r =
          testing::run_command("g++ -std=c++17 -fsyntax-only -Wall -Wextra -Werror -x c++ " + f);
      EXPECT_EQ(r.exit_code, 0) << f << "\n" << r.output;
      ++h;
    } else if (ext == ".cuh" && !nv.empty()) {
      std::string extra = " -x cu -diag-suppress 177";
      if (e.path().filename() == "hgemm_cutlass.cuh") {
        if (cutlass.empty()) continue;
        extra += " --expt-relaxed-constexpr";
        for (const auto& d : cutlass) extra += " -I " + d;
      }
      auto r = testing::run_command(nv + " -std=c++17 -c" + kSm90a + extra +
                                    " -Werror all-warnings -o " + (dir / "x.o").string() + " " + f);
      EXPECT_EQ(r.exit_code, 0) << f << "\n" << r.output;
      ++cuh;
    }
  }
  auto r = testing::run_command("gcc -std=c99 -fsyntax-only -Wall -Wextra -Werror -x c " +
                                kernels_dir() + "/kernel_abi.h");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GE(h, 12);
  if (!nv.empty()) {
    EXPECT_GE(cuh, 14);
  }
}

// A variant's source is its kernels/ file with the files it includes from kernels/ inlined
// (each once), then the instance block: one file that needs nothing but kernel_abi.h.
TEST(Families, VariantSourcesAreTheKernelFilesFlattenedPlusAnInstance) {
  auto read = [](const std::string& name) {
    return testing::read_text(kernels_dir() + "/" + name);
  };
  for (const auto& [family, file] :
       std::vector<std::pair<std::string, std::string>>{{"hgemm_tiled", "hgemm_tiled.cuh"},
                                                        {"hgemm_wmma", "hgemm_wmma.cuh"},
                                                        {"hgemm_wgmma", "hgemm_wgmma.cuh"},
                                                        {"hgemm_cutlass", "hgemm_cutlass.cuh"},
                                                        {"hgemm_host", "hgemm_host.h"}}) {
    for (const auto& v : hgemm_family_variants(family))
      ASSERT_EQ(split_instance(v.source).first, read(file)) << v.name;
  }
  // hgemm_mma and hgemm_small share mma_sync.cuh, inlined where they include it.
  for (const std::string family : {"hgemm_mma", "hgemm_small"}) {
    auto vs = hgemm_family_variants(family);
    ASSERT_FALSE(vs.empty());
    const std::string body = split_instance(vs[0].source).first;
    std::string mma = read("mma_sync.cuh");
    mma.pop_back();  // the file's last newline
    EXPECT_NE(body.find(mma), std::string::npos) << family;
    EXPECT_EQ(body.find("#include \"mma_sync.cuh\""), std::string::npos) << family;
    EXPECT_NE(body.find("#include \"kernel_abi.h\""), std::string::npos) << family;
    for (const auto& v : vs) ASSERT_EQ(split_instance(v.source).first, body) << v.name;
  }
  EXPECT_THROW(split_instance("__global__ void k() {}"), std::invalid_argument);
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
  // One variant of every general task's op (every family, every op struct the suite uses).
  std::vector<KernelVariant> sample;
  std::set<std::string> families;
  for (const auto& t : tasks) {
    auto vs = variants_for_task(t, "cuda");
    ASSERT_FALSE(vs.empty()) << t.name;
    families.insert(vs[0].family);
    sample.push_back(vs[sample.size() % vs.size()]);
  }
  EXPECT_EQ(families.size(), 7u);
  ScratchDir dir;
  write_text(dir / "general.cu", one_translation_unit(sample));
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
  for (const auto& v : vs) ASSERT_EQ(v.arch, "sm_90a");
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
      with("tn", 128, 128, 128, 1, 1, 1), with("nn", 64, 128, 64, 1, 4, 0), vs[rng() % vs.size()]};
  ScratchDir dir;
  write_text(dir / "wgmma.cu", one_translation_unit(sample));
  const std::string so = (dir / "wgmma.so").string();
  auto r = testing::run_command(nv +
                                " -std=c++17 -O3 --expt-relaxed-constexpr -gencode "
                                "arch=compute_90a,code=sm_90a -Xptxas -warn-spills -Werror "
                                "all-warnings -Xcompiler -fPIC -shared -I " +
                                kernels_dir() + " -o " + so + " " + (dir / "wgmma.cu").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_only_entry_points(so, sample.size());
}

// hgemm_small (sm_90a: clusters, distributed shared memory, griddepcontrol): every tile at split
// 1 in both layouts (nn with the shared-memory epilogue and PDL, tn with neither) and at its
// deepest split (nn), in one translation unit, without a register spill; the entry points are
// the only exports.
TEST(FamiliesCompile, SmallSampleCompilesForSm90aWithoutSpills) {
  std::string nv = nvcc();
  if (nv.empty()) GTEST_SKIP() << "no nvcc";
  auto vs = hgemm_family_variants("hgemm_small");
  ASSERT_GE(vs.size(), 200u);
  std::map<std::string, KernelVariant> deepest;  // per tile
  std::vector<KernelVariant> sample;
  for (const auto& v : vs) {
    ASSERT_EQ(v.arch, "sm_90a");
    const bool nn = v.layout == "nn";
    if (param(v, "SPLITK") == 1 && param(v, "EPI") == nn && param(v, "PDL") == nn)
      sample.push_back(v);
    const std::string tile = std::to_string(param(v, "BM")) + "x" + std::to_string(param(v, "BN")) +
                             "x" + std::to_string(param(v, "BK"));
    auto& d = deepest[tile];
    if (nn && param(v, "PDL") == 0 && param(v, "SPLITK") > param(d, "SPLITK")) d = v;
  }
  EXPECT_EQ(sample.size(), 22u);
  for (const auto& [tile, v] : deepest) sample.push_back(v);
  ScratchDir dir;
  write_text(dir / "small.cu", one_translation_unit(sample));
  const std::string so = (dir / "small.so").string();
  auto r = testing::run_command(nv +
                                " -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a "
                                "-Xptxas -warn-spills -Werror all-warnings -Xcompiler -fPIC "
                                "-shared -I " +
                                kernels_dir() + " -o " + so + " " + (dir / "small.cu").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_only_entry_points(so, sample.size());
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
  for (const auto& v : vs) ASSERT_EQ(v.arch, "sm_90a");
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
  ScratchDir dir;
  write_text(dir / "cutlass.cu", one_translation_unit(sample));
  const std::string so = (dir / "cutlass.so").string();
  std::string cmd = nv +
                    " -O3 -std=c++17 -shared -Xcompiler -fPIC -cudart shared "
                    "--expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a "
                    "-Xptxas -warn-spills -I " +
                    kernels_dir();
  for (const auto& d : includes) cmd += " -I " + d;
  auto r = testing::run_command(cmd + " -o " + so + " " + (dir / "cutlass.cu").string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("spill"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("wgmma.mma_async instructions are serialized"), std::string::npos)
      << r.output;
  // CUTLASS's kernels and host code stay local to the candidate.
  expect_only_entry_points(so, sample.size(), /*strong_only=*/true);
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
  auto r = testing::run_command("g++ -std=c++17 -O1 -fPIC -shared -Wall -Wextra -Werror -I " +
                                kernels_dir() + " -o " + (dir / "h.so").string() + " " +
                                (dir / "h.cpp").string());
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
  // Both main loops are offered: the variant's instance picks one.
  int dbuf = 0;
  for (const auto& v : mma) {
    const bool db = param(v, "DBUF") == 1;
    dbuf += db;
    EXPECT_NE(split_instance(v.source).second.find(db ? "/*DBUF=*/true" : "/*DBUF=*/false"),
              std::string::npos)
        << v.name;
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
