// Compile pool and cache: content hashes, cache hits without recompiling, cached failures with
// trimmed logs, timeouts, parallel batches with duplicates, and nvcc producing a loadable .so
// for a candidate (no GPU needed to compile).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "reward/compile.h"
#include "test_util.h"

namespace kernelrl {
namespace {

const char* kOk = "extern \"C\" int kernelrl_launch(const kernelrl_args* a, void* s) { return a->n_dims; }\n";

TEST(RewardCompile, ContentHashIsStableAndSensitive) {
  EXPECT_EQ(content_hash("abc"), content_hash("abc"));
  EXPECT_NE(content_hash("abc"), content_hash("abd"));
  EXPECT_EQ(content_hash("").size(), 32u);
}

TEST(RewardCompile, TrimmedLog) {
  std::string log;
  for (int i = 0; i < 100; ++i) log += "/tmp/x/candidate.cu(" + std::to_string(i) + "): error: bad\n";
  auto t = trim_compiler_log(log, "/tmp/x/", 5, 4000);
  EXPECT_EQ(t.find("/tmp/x/"), std::string::npos);
  EXPECT_NE(t.find("candidate.cu(0): error: bad"), std::string::npos);
  EXPECT_NE(t.find("95 more lines"), std::string::npos) << t;
}

TEST(RewardCompile, HostCacheHitFailureAndDuplicates) {
  testing::ScratchDir dir;
  CompilePool pool("host", "host", dir.path(), /*jobs=*/2, /*timeout_s=*/60);
  auto first = pool.compile(kOk);
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cached);
  EXPECT_TRUE(std::filesystem::exists(first.so_path));
  // The .so exports the C-linkage entry point (the ABI header was prepended).
  void* h = dlopen(first.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_NE(dlsym(h, "kernelrl_launch"), nullptr);
  dlclose(h);
  auto mtime = std::filesystem::last_write_time(first.so_path);
  auto again = pool.compile(kOk);
  EXPECT_TRUE(again.ok && again.cached);
  EXPECT_EQ(again.hash, first.hash);
  EXPECT_EQ(std::filesystem::last_write_time(again.so_path), mtime);  // not rebuilt

  std::string bad = "extern \"C\" int kernelrl_launch(const kernelrl_args* a, void* s) { return undefined_name; }\n";
  auto b1 = pool.compile(bad);
  EXPECT_FALSE(b1.ok);
  EXPECT_NE(b1.log.find("undefined_name"), std::string::npos) << b1.log;
  EXPECT_EQ(b1.log.find(dir.path().string()), std::string::npos) << b1.log;  // no temp paths
  auto b2 = pool.compile(bad);
  EXPECT_TRUE(b2.cached && !b2.ok);
  EXPECT_EQ(b2.log, b1.log);

  // A batch: duplicates compile once and share the outcome, order is kept.
  std::string other = std::string(kOk) + "// other\n";
  auto batch = pool.compile_all({other, bad, other, kOk});
  ASSERT_EQ(batch.size(), 4u);
  EXPECT_TRUE(batch[0].ok);
  EXPECT_FALSE(batch[1].ok);
  EXPECT_EQ(batch[2].hash, batch[0].hash);
  EXPECT_TRUE(batch[2].cached);
  EXPECT_EQ(batch[3].hash, first.hash);
}

TEST(RewardCompile, HostTimeout) {
  testing::ScratchDir dir;
  CompilePool pool("host", "host", dir.path(), 1, /*timeout_s=*/1.0);
  // Constant evaluation that takes far longer than a second: nested loops stay under GCC's
  // per-loop iteration limit (262144), so the compiler grinds through ~10^10 operations
  // (tens of seconds before -fconstexpr-ops-limit) instead of failing at once.
  std::string slow = std::string(kOk) +
                     "constexpr long long spin() { long long s = 0; for (long long i = 0; i < 100000; ++i)"
                     " for (long long j = 0; j < 100000; ++j) s += (i ^ j) % 7; return s; }\n"
                     "static_assert(spin() > 0, \"\");\n";
  auto r = pool.compile(slow);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.timed_out) << r.log;
}

TEST(RewardCompile, NvccBuildsASharedObject) {
  if (system((find_nvcc() + " --version > /dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "no nvcc";
  testing::ScratchDir dir;
  CompilePool pool("gpu", "sm_90a", dir.path(), 1, 300);
  std::string src =
      "__global__ void fill(half* c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = __float2half(1.f); }\n"
      "extern \"C\" int kernelrl_launch(const kernelrl_args* a, void* stream) {\n"
      "  int n = (int)(a->dims[0] * a->dims[1]);\n"
      "  fill<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>((half*)a->outputs[0], n);\n"
      "  return cudaGetLastError() == cudaSuccess ? 0 : 1;\n}\n";
  auto r = pool.compile("#include <cuda_fp16.h>\n" + src);
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_NE(pool.toolkit_version().find("release"), std::string::npos) << pool.toolkit_version();
  auto bad = pool.compile("__global__ void k() { undefined_fn(); }\n" + src);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.log.find("undefined_fn"), std::string::npos) << bad.log;
  // Hash covers arch: the same source for another arch is another entry.
  CompilePool other("gpu", "sm_80", dir.path(), 1, 300);
  EXPECT_NE(other.hash_of(src), pool.hash_of(src));
}

}  // namespace
}  // namespace kernelrl
