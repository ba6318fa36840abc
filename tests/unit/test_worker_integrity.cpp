// The pieces of reward integrity that need no GPU (docs/sandbox.md): the description of a
// captured call that the runner sends (reward/worker/graph_image.h) survives the channel as
// sent, a malformed one is refused, and the ranges it writes and the words it passes are what
// the worker checks against the call's buffers; the worker finds a candidate's device code in
// its shared object (reward/worker/fatbin.h) without loading it, built here by the real nvcc,
// and refuses files that are not what they claim to be.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "reward/worker/fatbin.h"
#include "reward/worker/graph_image.h"
#include "test_util.h"

namespace kernelrl::worker {
namespace {

namespace fs = std::filesystem;

GraphImage sample_image() {
  GraphImage g;
  NodeImage k;
  k.type = NodeImage::Type::kernel;
  k.kernel.name = "_Z6kernelPKfPfi";
  k.kernel.grid[0] = 12;
  k.kernel.block[0] = 128;
  k.kernel.shared_bytes = 1024;
  const uint64_t a = 0x7f0000001000, c = 0x7f0000002000;
  k.kernel.param_bytes.resize(24);
  std::memcpy(k.kernel.param_bytes.data(), &a, 8);
  std::memcpy(k.kernel.param_bytes.data() + 8, &c, 8);
  k.kernel.params = {{0, 8}, {8, 8}, {16, 4}};
  k.kernel.cluster[0] = 2, k.kernel.cluster[1] = 1, k.kernel.cluster[2] = 1;
  k.kernel.max_dynamic_shared = 200000;
  NodeImage m;
  m.type = NodeImage::Type::memset;
  m.memset = {0x7f0000003000, 256, 64, 4, 0, 4};  // 4 rows of 64 4-byte words, pitch 256
  NodeImage cp;
  cp.type = NodeImage::Type::memcpy;
  cp.memcpy.src = 0x7f0000004000;
  cp.memcpy.dst = 0x7f0000005000;
  cp.memcpy.width_bytes = 512;
  g.nodes = {k, m, cp, NodeImage{}};
  g.edges = {{0, 1, 0, 0, 0}, {1, 2, 1, 2, 3}, {2, 3, 0, 0, 0}};
  return g;
}

TEST(GraphImage, SurvivesTheChannelAsSent) {
  const GraphImage g = sample_image();
  const GraphImage back = graph_image_from_json(nlohmann::json::parse(to_json(g).dump()));
  EXPECT_EQ(to_json(back), to_json(g));
  ASSERT_EQ(back.nodes.size(), 4u);
  EXPECT_EQ(back.nodes[0].kernel.param_bytes, g.nodes[0].kernel.param_bytes);
  EXPECT_EQ(back.nodes[0].kernel.cluster[0], 2u);
  EXPECT_EQ(back.edges[1].type, 1);
  EXPECT_EQ(back.edges[1].to_port, 3);
}

TEST(GraphImage, WrittenRangesAndParameterWordsAreWhatTheWorkerChecks) {
  const GraphImage g = sample_image();
  const auto w = g.written_ranges();
  ASSERT_EQ(w.size(), 2u);
  // memset: 3 full pitches and one row of 64 words.
  EXPECT_EQ(w[0].first, 0x7f0000003000u);
  EXPECT_EQ(w[0].second, 0x7f0000003000u + 3 * 256 + 64 * 4);
  EXPECT_EQ(w[1].first, 0x7f0000005000u);
  EXPECT_EQ(w[1].second, 0x7f0000005000u + 512);
  const auto words = g.parameter_words();
  // The kernel's three 8-byte words (the last holds the int and padding) and the copy's source.
  ASSERT_EQ(words.size(), 4u);
  EXPECT_EQ(words[0].word, 0x7f0000001000u);
  EXPECT_EQ(words[1].word, 0x7f0000002000u);
  EXPECT_EQ(words[3].word, 0x7f0000004000u);
  // Where each sits: node and byte offset (the copy's source has none).
  EXPECT_EQ(words[1].node, 0u);
  EXPECT_EQ(words[1].offset, 8);
  EXPECT_EQ(words[2].offset, 16);
  EXPECT_EQ(words[3].node, 2u);
  EXPECT_EQ(words[3].offset, -1);
}

TEST(GraphImage, MalformedDescriptionsAreRefused) {
  const nlohmann::json good = to_json(sample_image());
  auto broken = [&](const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json j = good;
    f(j);
    return j;
  };
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"odd hex", broken([](nlohmann::json& j) { j["nodes"][0]["param_bytes"] = "abc"; })},
      {"not hex", broken([](nlohmann::json& j) { j["nodes"][0]["param_bytes"] = "zz"; })},
      {"param outside", broken([](nlohmann::json& j) { j["nodes"][0]["params"][2] = {20, 8}; })},
      {"unknown node", broken([](nlohmann::json& j) { j["nodes"][3]["type"] = "host"; })},
      {"edge to nowhere", broken([](nlohmann::json& j) { j["edges"][0] = {0, 9, 0, 0, 0}; })},
      {"grid of two", broken([](nlohmann::json& j) { j["nodes"][0]["grid"] = {1, 1}; })},
      {"memset of 3 bytes", broken([](nlohmann::json& j) { j["nodes"][1]["element_size"] = 3; })},
      {"missing key", broken([](nlohmann::json& j) { j["nodes"][2].erase("dst"); })},
      {"not a list", broken([](nlohmann::json& j) { j["nodes"] = 7; })},
  };
  for (const auto& [what, j] : cases) EXPECT_ANY_THROW(graph_image_from_json(j)) << what;
}

// A candidate-like .cu built by the real nvcc (the evaluator's flags): its .so's fatbins hold
// the kernel, found without loading the library.
TEST(Fatbin, FoundInACompiledCandidateWithoutLoadingIt) {
  const char* nvcc = "/usr/local/cuda/bin/nvcc";
  if (!fs::exists(nvcc)) GTEST_SKIP() << "no nvcc";
  testing::ScratchDir dir;
  {
    std::ofstream f(dir / "k.cu");
    f << "extern \"C\" __global__ void kernelrl_probe_kernel(float* x) { x[threadIdx.x] += 1; }\n"
         "extern \"C\" int kernelrl_launch(const void*, void* s) {\n"
         "  kernelrl_probe_kernel<<<1, 32, 0, (cudaStream_t)s>>>(nullptr); return 0; }\n";
  }
  const std::string cmd = std::string(nvcc) + " -O3 -std=c++17 -shared -Xcompiler -fPIC -cudart shared "
                          "-gencode=arch=compute_90a,code=sm_90a " + (dir / "k.cu").string() + " -o " +
                          (dir / "k.so").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto fatbins = read_fatbins(dir / "k.so");
  ASSERT_GE(fatbins.size(), 1u);
  bool named = false;
  for (const auto& b : fatbins) {
    ASSERT_GE(b.size(), 16u);
    uint32_t magic;
    std::memcpy(&magic, b.data(), 4);
    EXPECT_EQ(magic, 0xBA55ED50u);
    const std::string text(b.begin(), b.end());
    named = named || text.find("kernelrl_probe_kernel") != std::string::npos;
  }
  EXPECT_TRUE(named) << "no fatbin names the kernel";

  // Cut short: the section runs past the end of the file.
  std::ifstream in(dir / "k.so", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  {
    std::ofstream out(dir / "short.so", std::ios::binary);
    out << bytes.substr(0, bytes.size() / 3);
  }
  EXPECT_ANY_THROW(read_fatbins(dir / "short.so"));
}

TEST(Fatbin, FilesWithoutDeviceCodeAreNamed) {
  testing::ScratchDir dir;
  {
    std::ofstream f(dir / "text.so");
    f << "not an ELF file at all, but long enough to have a header's worth of bytes in it....\n";
  }
  try {
    read_fatbins(dir / "text.so");
    ADD_FAILURE() << "a text file was read as ELF";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("text.so: not a 64-bit"), std::string::npos) << e.what();
  }
  {
    std::ofstream f(dir / "h.cpp");
    f << "extern \"C\" int kernelrl_launch(const void*, void*) { return 0; }\n";
  }
  const std::string cmd = "g++ -shared -fPIC " + (dir / "h.cpp").string() + " -o " + (dir / "h.so").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  try {
    read_fatbins(dir / "h.so");
    ADD_FAILURE() << "a host library was read as device code";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no .nv_fatbin section"), std::string::npos) << e.what();
  }
  EXPECT_ANY_THROW(read_fatbins(dir / "missing.so"));
}

}  // namespace
}  // namespace kernelrl::worker
