// The SentencePiece tokenizer: training from JSONL and plain text, section markers as single
// pieces, bos/eos/pad ids, encode/decode round trips (whitespace, unseen characters via byte
// fallback), load errors, the CLI, and SentencePiece working while LibTorch runs in the same
// process (Debian's libsentencepiece carries its own protobuf-lite; STYLE.md).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "model/tokenizer.h"
#include "test_util.h"

// This file's own namespace: the unit tests compile in unity batches (tests/CMakeLists.txt),
// where two files' helpers in one anonymous namespace would clash.
namespace kernelrl::tokenizer_test {
using kernelrl::testing::ScratchDir;

namespace {

void write_jsonl_corpus(const std::filesystem::path& p, int n) {
  std::ofstream out(p);
  for (int i = 0; i < n; ++i) {
    out << R"({"instruction": "Write a CUDA kernel that scales a vector by )" << i
        << R"(.", "context": "float* out, const float* in, int n", "code": "__global__ void scale_)"
        << i
        << R"((float* out, const float* in, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = in[i] * )"
        << i << R"(.0f;\n}\n"})"
        << "\n";
  }
}

}  // namespace

TEST(Tokenizer, TrainFromJsonlMarkersAndRoundTrip) {
  ScratchDir dir;
  write_jsonl_corpus(dir / "corpus.jsonl", 200);
  TokenizerTrainOptions o;
  o.vocab_size = 500;
  auto tok = Tokenizer::train(dir / "corpus.jsonl", dir / "tok.model", o);
  EXPECT_TRUE(std::filesystem::exists(dir / "tok.model"));
  EXPECT_LE(tok.vocab_size(), 500);
  EXPECT_GT(tok.vocab_size(), 256 + 10);
  EXPECT_EQ(tok.unk_id(), 0);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.pad_id(), 3);
  // Markers: one piece each, ids 4.. in section_markers() order.
  for (size_t i = 0; i < section_markers().size(); ++i) {
    const std::string& m = section_markers()[i];
    auto ids = tok.encode(m);
    ASSERT_EQ(ids.size(), 1u) << m;
    EXPECT_EQ(ids[0], static_cast<int64_t>(4 + i)) << m;
    EXPECT_EQ(tok.id_to_piece(ids[0]), m);
  }
  const std::string text =
      std::string(kInstructionMarker) + "Scale by 7." + kCodeMarker +
      "__global__ void k(float* o) {\n    o[0]  =  1.0f;\t// two  spaces\n}\n" + kEndMarker;
  auto ids = tok.encode(text);
  EXPECT_EQ(tok.decode(ids), text);  // identity normalization keeps whitespace runs and tabs
  // Characters never seen in training come back through byte fallback, not <unk>.
  const std::string unseen = "λ → 核函数 €";
  auto uids = tok.encode(unseen);
  for (int64_t id : uids) EXPECT_NE(id, tok.unk_id());
  EXPECT_EQ(tok.decode(uids), unseen);
  auto with = tok.encode("abc", /*add_bos=*/true, /*add_eos=*/true);
  EXPECT_EQ(with.front(), 1);
  EXPECT_EQ(with.back(), 2);
  EXPECT_EQ(tok.decode(with), "abc");  // specials decode to nothing
  // Loading the written file gives the same tokenizer.
  auto again = Tokenizer::load(dir / "tok.model");
  EXPECT_EQ(again.encode(text), ids);
  EXPECT_EQ(again.serialized(), tok.serialized());
}

TEST(Tokenizer, PlainTextInputAndErrors) {
  ScratchDir dir;
  {
    std::ofstream out(dir / "corpus.txt");
    for (int i = 0; i < 200; ++i) out << "int main() { return " << i << "; }  // plain text line\n";
  }
  TokenizerTrainOptions o;
  o.vocab_size = 400;
  auto tok = Tokenizer::train(dir / "corpus.txt", dir / "t.model", o);
  EXPECT_EQ(tok.decode(tok.encode("int main() { return 3; }")), "int main() { return 3; }");
  EXPECT_THROW(Tokenizer::load(dir / "missing.model"), UserError);
  kernelrl::testing::write_text(dir / "junk.model", "this is not a protobuf");
  EXPECT_THROW(Tokenizer::load(dir / "junk.model"), UserError);
  kernelrl::testing::write_text(dir / "bad.jsonl", "{\"text\": \"ok\"}\n{broken\n");
  EXPECT_THROW(Tokenizer::train(dir / "bad.jsonl", dir / "x.model", o), UserError);
  o.vocab_size = 100;
  EXPECT_THROW(Tokenizer::train(dir / "corpus.txt", dir / "x.model", o), UserError);
}

// SentencePiece (own protobuf-lite) and LibTorch in one process, at the same time.
TEST(Tokenizer, TrainsAndEncodesWhileTorchRuns) {
  ScratchDir dir;
  write_jsonl_corpus(dir / "c.jsonl", 100);
  std::atomic<bool> stop{false};
  double checksum = 0;
  std::thread torch_work([&] {
    auto a = torch::randn({64, 64});
    while (!stop) checksum += torch::matmul(a, a).sum().item<double>();
  });
  TokenizerTrainOptions o;
  o.vocab_size = 400;
  auto tok = Tokenizer::train(dir / "c.jsonl", dir / "t.model", o);
  auto ids = tok.encode("__global__ void f() {}");
  stop = true;
  torch_work.join();
  EXPECT_EQ(tok.decode(ids), "__global__ void f() {}");
  auto t = torch::tensor(ids);
  EXPECT_EQ(t.numel(), static_cast<int64_t>(ids.size()));
  EXPECT_TRUE(std::isfinite(checksum));
}

// `kernelrl tokenizer train` (runs the binary when it has been built next to the tests).
TEST(Tokenizer, CliTrain) {
  if (!std::filesystem::exists(KERNELRL_BIN)) GTEST_SKIP() << "kernelrl binary not built";
  ScratchDir dir;
  write_jsonl_corpus(dir / "c.jsonl", 100);
  auto r = kernelrl::testing::run_kernelrl("tokenizer train --input " + (dir / "c.jsonl").string() +
                                           " --vocab-size 400 --out " +
                                           (dir / "o" / "tok.model").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("vocabulary"), std::string::npos) << r.output;
  auto tok = Tokenizer::load(dir / "o" / "tok.model");
  EXPECT_EQ(tok.encode(kCodeMarker).size(), 1u);
  auto bad =
      kernelrl::testing::run_kernelrl("tokenizer train --input " + (dir / "nope.jsonl").string() +
                                      " --out " + (dir / "x.model").string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

}  // namespace kernelrl::tokenizer_test
