// Static screen: every rule rejects its pattern with its name, comments and strings do not
// count, include lines do, and a clean candidate passes. Hand-written sources.
#include <gtest/gtest.h>

#include "reward/screen.h"

namespace kernelrl {
namespace {

const char* kEntry = "\nextern \"C\" int kernelrl_launch(const kernelrl_args* a, void* s) { return 0; }\n";

std::string with_entry(const std::string& body) { return body + kEntry; }

TEST(RewardScreen, CleanCandidatePasses) {
  auto r = screen_source(with_entry("__global__ void k(float* x) { x[threadIdx.x] = 1; }\n"
                                    "// cudaStreamCreate in a comment is fine\n"
                                    "const char* s = \"getenv and cublasGemmEx in a string\";\n"),
                         /*hgemm=*/true);
  EXPECT_TRUE(r.ok) << r.rule << ": " << r.reason;
}

TEST(RewardScreen, EachRuleIsNamed) {
  struct Case {
    const char* code;
    const char* rule;
  };
  const Case cases[] = {
      {"cudaStream_t t; cudaStreamCreate(&t);", "creates_stream"},
      {"cudaStreamCreateWithFlags(&t, 1);", "creates_stream"},
      {"cudaEvent_t e; cudaEventCreate(&e);", "creates_event"},
      {"cudaGraph_t g; cudaGraphCreate(&g, 0);", "uses_graph"},
      {"cudaStreamBeginCapture(s, m);", "uses_graph"},
      {"std::thread t([]{});", "spawns_thread"},
      {"pthread_create(&t, 0, f, 0);", "spawns_thread"},
      {"int p = fork();", "spawns_process"},
      {"system(\"ls\");", "spawns_process"},
      {"FILE* f = fopen(\"x\", \"r\");", "touches_files"},
      {"std::ofstream o;", "touches_files"},
      {"int s = socket(1, 2, 3);", "uses_sockets"},
      {"const char* v = getenv(\"HOME\");", "touches_environment"},
      {"cudaDeviceSynchronize();", "device_sync"},
      {"cudaMemcpy(d, s, n, cudaMemcpyDeviceToDevice);", "device_sync"},
      {"void* p; cudaMalloc(&p, 16);", "allocates_memory"},
      {"cublasGemmEx(h);", "delegates_gemm"},
      {"auto c = torch::matmul(a, b);", "delegates_gemm"},
  };
  for (const auto& c : cases) {
    auto r = screen_source(with_entry(std::string("void f() { ") + c.code + " }\n"), /*hgemm=*/true);
    EXPECT_FALSE(r.ok) << c.code;
    EXPECT_EQ(r.rule, c.rule) << c.code << " -> " << r.reason;
    EXPECT_FALSE(r.reason.empty());
  }
}

TEST(RewardScreen, AsyncCopiesOnTheStreamAreAllowed) {
  auto r = screen_source(with_entry("void f(cudaStream_t s) { cudaMemcpyAsync(d, x, n, k, s); "
                                    "cudaMemsetAsync(d, 0, n, s); }"),
                         /*hgemm=*/true);
  EXPECT_TRUE(r.ok) << r.reason;
}

TEST(RewardScreen, DelegationOnlyForbiddenInHgemm) {
  std::string src = with_entry("#include <cublas_v2.h>\nvoid f() { cublasCreate(&h); }");
  EXPECT_EQ(screen_source(src, /*hgemm=*/true).rule, "delegates_gemm");
  EXPECT_TRUE(screen_source(src, /*hgemm=*/false).ok);
  // A quoted include is still an include.
  EXPECT_EQ(screen_source(with_entry("#include \"cublasLt.h\"\n"), true).rule, "delegates_gemm");
  EXPECT_EQ(screen_source(with_entry("#include <torch/torch.h>\n"), true).rule, "delegates_gemm");
}

TEST(RewardScreen, MissingEntryPoint) {
  auto r = screen_source("__global__ void k() {}\n// kernelrl_launch(args, stream) { }\n", true);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.rule, "missing_entry_point");
  // A declaration is not a definition.
  r = screen_source("extern \"C\" int kernelrl_launch(const kernelrl_args* a, void* s);\n", true);
  EXPECT_EQ(r.rule, "missing_entry_point");
}

TEST(RewardScreen, StripKeepsLengthAndLines) {
  std::string s = "a /* b\nc */ d // e\n\"f\\\"g\" 'h'\n";
  std::string t = strip_comments_and_strings(s);
  ASSERT_EQ(t.size(), s.size());
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), std::count(s.begin(), s.end(), '\n'));
  EXPECT_EQ(t.find('b'), std::string::npos);
  EXPECT_EQ(t.find('e'), std::string::npos);
  EXPECT_EQ(t.find('g'), std::string::npos);
  EXPECT_NE(t.find('d'), std::string::npos);
}

}  // namespace
}  // namespace kernelrl
