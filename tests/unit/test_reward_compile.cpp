// Compile pool and cache: content hashes, cache hits without recompiling, cached failures with
// trimmed logs, timeouts, parallel batches with duplicates, sources that differ only in comments
// and blanks sharing one compile (checked against g++'s preprocessor), one compile when two
// processes ask for the same source, the host-wide compiler slots, and nvcc producing a loadable
// .so for a candidate (no GPU needed to compile).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

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

// g++'s preprocessor output with every run of whitespace (newlines included) made one space: the
// token stream a compiler sees, independent of this repository's lexer.
std::string gcc_tokens(const std::string& text, const testing::ScratchDir& dir, const std::string& name) {
  auto p = dir / (name + ".cpp");
  testing::write_text(p, text);
  auto r = testing::run_command("g++ -std=c++17 -E -P -x c++ " + p.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  std::string tok, out;
  while (in >> tok) out += tok + " ";
  return out;
}

TEST(RewardCompile, NormalizedSourceKeepsTokensLinesAndLiterals) {
  const std::string a =
      "#include <stdio.h>   // the header\n"
      "/* a block comment\n   over two lines */ #define TWICE(x)  ((x) +  (x))\n"
      "#define JOIN(a, b) a \\\n   b\n"
      "static const char* kText = \"two  spaces // not a comment /* nor this */\";\n"
      "static const char kQuote = '\\'';  static const int kBig = 1'000'000;\n"
      "\t\tint   twice(int v) {   return TWICE(v);   }   // trailing\n"
      "int JOIN(join, ed) = 3; // a line comment \\\n   continued by a splice\n"
      "int after = 1;\n";
  std::string n = normalize_source(a);
  ASSERT_FALSE(n.empty());
  // Hand-derived: comments are one space (gone at a line's start or end), blank runs one space,
  // a comment's newlines at its line's end, literals and the #include line as written.
  EXPECT_EQ(n,
            "#include <stdio.h>   // the header\n"
            "#define TWICE(x) ((x) + (x))\n\n"
            "#define JOIN(a, b) a \\\n b\n"
            "static const char* kText = \"two  spaces // not a comment /* nor this */\";\n"
            "static const char kQuote = '\\''; static const int kBig = 1'000'000;\n"
            "int twice(int v) { return TWICE(v); }\n"
            "int JOIN(join, ed) = 3;\n\n"
            "int after = 1;\n");
  EXPECT_EQ(std::count(n.begin(), n.end(), '\n'), std::count(a.begin(), a.end(), '\n'));
  // The independent reference: g++ sees the same tokens in both texts.
  testing::ScratchDir dir;
  EXPECT_EQ(gcc_tokens(a, dir, "a"), gcc_tokens(n, dir, "n"));
  // Re-indented, re-commented: the same normalized text. A changed literal or token is not.
  std::string b = a;
  b.replace(b.find("// trailing"), 11, "/* other words */");
  b.replace(b.find("\t\tint"), 5, "    int");
  EXPECT_EQ(normalize_source(b), n);
  std::string c = a;
  c.replace(c.find("two  spaces"), 11, "two spaces");
  EXPECT_NE(normalize_source(c), n);
  EXPECT_NE(normalize_source("int a = b+c;\n"), normalize_source("int a = b+ +c;\n"));
  // What the lexer does not model is left to the exact key.
  EXPECT_EQ(normalize_source("const char* s = R\"(x  y)\";\n"), "");
  EXPECT_EQ(normalize_source("int line = __LINE__;\n"), "");
  EXPECT_EQ(normalize_source("/* never closed\n"), "");
  EXPECT_EQ(normalize_source("const char* s = \"open\n\";\n"), "");
  EXPECT_EQ(normalize_source("#include <a.h> /* opened here\n */\n"), "");
}

TEST(RewardCompile, SourcesThatNormalizeAlikeCompileOnce) {
  testing::ScratchDir dir;
  CompilePool pool("host", "host", dir.path(), /*jobs=*/2, /*timeout_s=*/60, {}, /*host_slots=*/2,
                   dir / "slots");
  const std::string a = std::string(kOk) + "int helper(int x) { return x + 1; }  // one\n";
  const std::string b = std::string("  ") + kOk + "int  helper(int x)  { return x + 1; } /* two */\n";
  const std::string c = std::string(kOk) + "int helper(int x) { return x + 2; }\n";
  auto ra = pool.compile(a);
  ASSERT_TRUE(ra.ok) << ra.log;
  EXPECT_FALSE(ra.cached);
  EXPECT_GT(ra.cpu_seconds, 0);
  auto rb = pool.compile(b);
  EXPECT_TRUE(rb.ok && rb.cached);
  EXPECT_EQ(rb.key, ra.key);
  EXPECT_EQ(rb.so_path, ra.so_path);
  EXPECT_NE(rb.hash, ra.hash);  // the exact identity (the results store's key) stays distinct
  EXPECT_EQ(rb.hash, pool.hash_of(b));
  auto rc = pool.compile(c);
  EXPECT_FALSE(rc.cached);
  EXPECT_NE(rc.key, ra.key);
  // In one batch: the later one copies the first's outcome under its own hash.
  testing::ScratchDir dir2;
  CompilePool fresh("host", "host", dir2.path(), 2, 60, {}, 2, dir2 / "slots");
  auto batch = fresh.compile_all({a, b});
  EXPECT_TRUE(batch[0].ok && !batch[0].cached);
  EXPECT_TRUE(batch[1].ok && batch[1].cached);
  EXPECT_EQ(batch[1].hash, fresh.hash_of(b));
  EXPECT_EQ(batch[1].so_path, batch[0].so_path);
}

TEST(RewardCompile, TwoPoolsAskingForOneSourceCompileItOnce) {
  // Two pools on one cache (as two ranks of a job): the second waits for the first's compile.
  testing::ScratchDir dir;
  const std::string slow = std::string(kOk) +
                           "constexpr long long spin() { long long s = 0; for (long long i = 0; i < 1000; ++i)"
                           " for (long long j = 0; j < 1000; ++j) s += (i ^ j) % 7; return s; }\n"
                           "static_assert(spin() > 0, \"\");\n";
  CompilePool p1("host", "host", dir.path(), 1, 120, {}, 4, dir / "slots");
  CompilePool p2("host", "host", dir.path(), 1, 120, {}, 4, dir / "slots");
  CompileOutcome r1, r2;
  std::thread t1([&] { r1 = p1.compile(slow); });
  std::thread t2([&] { r2 = p2.compile(slow); });
  t1.join();
  t2.join();
  ASSERT_TRUE(r1.ok && r2.ok) << r1.log << r2.log;
  EXPECT_EQ(r1.cached + r2.cached, 1) << "exactly one compiled";
  EXPECT_EQ(r1.so_path, r2.so_path);
}

TEST(RewardCompile, HostSlotsCapCompilersOverProcesses) {
  testing::ScratchDir dir;
  HostSlots a(dir / "slots", 2), b(dir / "slots", 2);  // two processes' views of one host
  auto h1 = a.acquire();
  auto h2 = b.acquire();
  ASSERT_TRUE(h1.held() && h2.held());
  EXPECT_FALSE(a.try_acquire().held());
  EXPECT_FALSE(b.try_acquire().held());
  { auto gone = std::move(h1); }  // released: a waiting compiler gets it
  auto h3 = b.try_acquire();
  EXPECT_TRUE(h3.held());
  // acquire() waits for a release rather than failing.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto gone = std::move(h2);
  });
  auto h4 = a.acquire();
  EXPECT_TRUE(h4.held());
  release.join();
  // Slots off: nothing to hold, nothing waits.
  HostSlots off(dir / "off", 0);
  EXPECT_FALSE(off.acquire().held());
  EXPECT_GE(host_cpus(), 1);
}

TEST(RewardCompile, CutlassSourcesStartFirst) {
  testing::ScratchDir dir;
  CompilePool pool("host", "host", dir.path(), /*jobs=*/1, 60, {}, 1, dir / "slots");
  std::vector<size_t> order;
  std::mutex mu;
  const std::string cutlass = "#include <cutlass/cutlass.h>\n" + std::string(kOk);  // fails on g++: fine
  pool.compile_all({kOk, std::string(kOk) + "// b\nint b;\n", cutlass},
                   [&](size_t i, const CompileOutcome&) {
                     std::lock_guard<std::mutex> lock(mu);
                     order.push_back(i);
                   });
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], 2u);
  EXPECT_EQ(order[1], 0u);
  EXPECT_EQ(order[2], 1u);
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
