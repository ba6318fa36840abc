// HF tokenizer.json (model/tokenizer_hf.h) against the `tokenizers` library: three byte-level
// BPE tokenizers (Qwen2, Llama 3 and GPT-2 styles) trained by tests/golden/tokenizer_hf/
// hf_tokenizers.py on the repository's own sources and docs (~1.5 MB) plus hand-written Unicode,
// whitespace and special-token cases; every encoding must equal tokenizers' exactly (metric:
// number of documents whose ids differ; threshold 0), decodings of random id sequences too.
// Refusals (one line, naming the key) and loading through Tokenizer::load are checked by hand.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/checkpoint.h"
#include "model/tokenizer.h"
#include "test_util.h"

// This file's own namespace: the unit tests compile in unity batches (tests/CMakeLists.txt),
// where two files' helpers in one anonymous namespace would clash.
namespace kernelrl::tokenizer_hf_test {
using kernelrl::testing::ScratchDir;
using json = nlohmann::json;

namespace {

template <class F>
void expect_user_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning \"" << needle << "\"";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "multi-line: " << e.what();
  }
}

std::string show(const std::vector<int64_t>& ids, size_t from, size_t n = 12) {
  std::string s;
  for (size_t i = from; i < ids.size() && i < from + n; ++i) s += std::to_string(ids[i]) + " ";
  return s;
}

// A minimal byte-level tokenizer.json: bytes a, b, c, space stand-in Ġ; merges "a b", "ab c".
json tiny_tokenizer_json() {
  return json::parse(R"({
    "version": "1.0", "added_tokens": [
      {"id": 6, "content": "<|end|>", "special": true, "normalized": false,
       "lstrip": false, "rstrip": false, "single_word": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null, "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false,
              "ignore_merges": false,
              "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "abc": 5},
              "merges": ["a b", ["ab", "c"]]}})");
}

}  // namespace

// Hand-computed: "abc ab" -> pre-tokens "abc", " ab" -> [abc] [Ġ, ab]; merges by rank.
TEST(HfTokenizer, TinyModelEncodesByHand) {
  auto tok = Tokenizer::from_hf_json(tiny_tokenizer_json().dump(), "", "tiny");
  EXPECT_TRUE(tok.is_hf());
  EXPECT_EQ(tok.encode("abc ab"), (std::vector<int64_t>{5, 3, 4}));
  EXPECT_EQ(tok.encode("cab<|end|>a"), (std::vector<int64_t>{2, 4, 6, 0}));
  EXPECT_EQ(tok.decode({5, 3, 4, 6}), "abc ab");  // the special token is dropped
  EXPECT_EQ(tok.vocab_size(), 7);
  EXPECT_EQ(tok.piece_to_id("<|end|>"), 6);
  EXPECT_EQ(tok.piece_to_id("zz"), -1);  // no unk token
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_EQ(tok.eos_id(), -1);
  EXPECT_EQ(tok.pad_id(), 0);
  // tokenizer_config.json gives eos and pad.
  auto with_config = Tokenizer::from_hf_json(tiny_tokenizer_json().dump(),
                                             R"({"eos_token": {"content": "<|end|>"}})", "tiny");
  EXPECT_EQ(with_config.eos_id(), 6);
  EXPECT_EQ(with_config.pad_id(), 6);
  EXPECT_EQ(with_config.encode("ab", /*add_bos=*/true, /*add_eos=*/true),
            (std::vector<int64_t>{4, 6}));
}

TEST(HfTokenizer, UnsupportedFilesAreOneLineErrorsNamingTheKey) {
  auto refused = [](json j, const std::string& key) {
    expect_user_error([&] { Tokenizer::from_hf_json(j.dump(), "", "t.json"); }, "\"" + key + "\"");
  };
  json j = tiny_tokenizer_json();
  j["model"]["type"] = "WordPiece";
  refused(j, "model.type");
  j = tiny_tokenizer_json();
  j["model"]["byte_fallback"] = true;
  refused(j, "model.byte_fallback");
  j = tiny_tokenizer_json();
  j["model"]["dropout"] = 0.1;
  refused(j, "model.dropout");
  j = tiny_tokenizer_json();
  j["model"]["merges"].push_back("a zz");
  refused(j, "model.merges");
  j = tiny_tokenizer_json();
  j["normalizer"] = {{"type", "Lowercase"}};
  refused(j, "normalizer.type");
  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  refused(j, "pre_tokenizer.type");
  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}};
  refused(j, "pre_tokenizer.pattern");
  j = tiny_tokenizer_json();
  j["decoder"] = {{"type", "Metaspace"}};
  refused(j, "decoder.type");
  j = tiny_tokenizer_json();
  j["post_processor"] = {{"type", "BertProcessing"}};
  refused(j, "post_processor.type");
  expect_user_error([] { Tokenizer::from_hf_json("[1, 2]", "", "t.json"); }, "not a JSON object");
  expect_user_error(
      [] {
        Tokenizer::from_hf_json(tiny_tokenizer_json().dump(), R"({"eos_token": "<nope>"})", "t");
      },
      "\"eos_token\"");
}

// An HF checkpoint's tokenizer.json travels with it: import_hf finds it, a native checkpoint
// and an HF export copy it with its tokenizer_config.json; a SentencePiece-style tokenizer.json
// beside a tokenizer.model falls back to the latter.
TEST(HfTokenizer, TravelsWithCheckpointsAndExports) {
  ScratchDir dir;
  ModelShape s = preset_shape("tiny", 7);
  auto model = make_model(s, torch::kCPU, torch::kFloat32, 1);
  kernelrl::testing::write_text(dir / "tok" / "tokenizer.json", tiny_tokenizer_json().dump());
  kernelrl::testing::write_text(dir / "tok" / "tokenizer_config.json",
                                R"({"eos_token": "<|end|>"})");
  export_hf(dir / "hf", model, dir / "tok" / "tokenizer.json");
  auto c = import_hf(dir / "hf", torch::kCPU);
  ASSERT_TRUE(c.tokenizer_path.has_value());
  EXPECT_EQ(c.tokenizer_path->filename(), "tokenizer.json");
  EXPECT_EQ(Tokenizer::load(*c.tokenizer_path).eos_id(), 6);
  save_checkpoint(dir / "native", c.model, c.shape, *c.tokenizer_path, {{"step", 1}});
  auto n = load_checkpoint(dir / "native", torch::kCPU);
  ASSERT_TRUE(n.tokenizer_path.has_value());
  auto tok = Tokenizer::load(*n.tokenizer_path);
  EXPECT_TRUE(tok.is_hf());
  EXPECT_EQ(tok.eos_id(), 6);  // tokenizer_config.json came along
  EXPECT_EQ(tok.encode("abc ab"), (std::vector<int64_t>{5, 3, 4}));
  // Fallback: an unsupported tokenizer.json with a tokenizer.model beside it.
  auto meta = tiny_tokenizer_json();
  meta["pre_tokenizer"] = {{"type", "Metaspace"}};
  kernelrl::testing::write_text(dir / "sp" / "tokenizer.json", meta.dump());
  TokenizerTrainOptions o;
  o.vocab_size = 300;
  kernelrl::testing::write_text(dir / "corpus.txt",
                                "__global__ void k(float* x) { x[0] = 1; }\n\n");
  Tokenizer::train(dir / "corpus.txt", dir / "sp" / "tokenizer.model", o);
  EXPECT_FALSE(Tokenizer::load(dir / "sp").is_hf());
  EXPECT_THROW(Tokenizer::load(dir / "hf" / "config.json"), UserError);  // not a tokenizer
}

// Parity with `tokenizers` on ~1.5 MB of the repository's text (see the file comment).
TEST(HfTokenizer, EncodeAndDecodeMatchTheTokenizersLibrary) {
  const std::string py = KERNELRL_PYTHON;
  const std::string script =
      std::string(KERNELRL_SOURCE_DIR) + "/tests/golden/tokenizer_hf/hf_tokenizers.py";
  if (py.empty()) GTEST_SKIP() << "KERNELRL_PYTHON not set at configure time: no tokenizers";
  auto probe = kernelrl::testing::run_command(py + " " + script + " probe");
  if (probe.exit_code != 0)
    GTEST_SKIP() << "tokenizers not importable by " << py << ": " << probe.output;
  ScratchDir dir;
  auto made = kernelrl::testing::run_command(py + " " + script + " make " + KERNELRL_SOURCE_DIR +
                                             " " + dir.path().string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  std::cout << made.output;
  for (const char* name : {"qwen2", "llama3", "gpt2"}) {
    SCOPED_TRACE(name);
    // Loading by directory picks tokenizer.json and its tokenizer_config.json.
    auto tok = Tokenizer::load(dir / name);
    ASSERT_TRUE(tok.is_hf());
    std::ifstream cases(dir / name / "cases.jsonl");
    std::string line;
    int64_t texts = 0, bytes = 0, mismatched = 0, decodes = 0, bad_decodes = 0, with_specials = 0;
    double encode_s = 0;
    while (std::getline(cases, line)) {
      const json c = json::parse(line);
      if (c.contains("decode")) {
        const auto ids = c["decode"].get<std::vector<int64_t>>();
        ++decodes;
        const std::string got = tok.decode(ids), want = c["text"].get<std::string>();
        if (got != want && ++bad_decodes <= 3)
          ADD_FAILURE() << "decode of " << c["decode"].dump() << ": got " << json(got).dump()
                        << " want " << json(want).dump();
        continue;
      }
      const std::string text = c["text"].get<std::string>();
      if (c.contains("ids_with_specials")) {  // add_special_tokens=True: bos from the template
        ++with_specials;
        EXPECT_EQ(tok.encode(text, /*add_bos=*/true),
                  c["ids_with_specials"].get<std::vector<int64_t>>())
            << json(text).dump();
        continue;
      }
      const auto want = c["ids"].get<std::vector<int64_t>>();
      const auto t0 = std::chrono::steady_clock::now();
      const auto got = tok.encode(text);
      encode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++texts;
      bytes += static_cast<int64_t>(text.size());
      if (got != want) {
        size_t k = 0;
        while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
        if (++mismatched <= 3)
          ADD_FAILURE() << "text " << texts << " (" << text.size() << " bytes, "
                        << json(text.substr(0, 80)).dump() << "...): first difference at id " << k
                        << ": got " << show(got, k) << "| want " << show(want, k) << "| after "
                        << json(tok.decode(std::vector<int64_t>(
                                    want.begin() + static_cast<std::ptrdiff_t>(k > 8 ? k - 8 : 0),
                                    want.begin() + static_cast<std::ptrdiff_t>(k))))
                               .dump();
      }
    }
    std::printf(
        "%s: %lld texts (%.2f MB) encoded in %.2f s, %lld differ; %lld decodes, %lld "
        "differ; %lld with specials\n",
        name, (long long)texts, bytes / 1e6, encode_s, (long long)mismatched, (long long)decodes,
        (long long)bad_decodes, (long long)with_specials);
    EXPECT_GT(texts, 100);
    EXPECT_GT(bytes, 1000000);
    EXPECT_EQ(decodes, 300);
    EXPECT_EQ(mismatched, 0);
    EXPECT_EQ(bad_decodes, 0);
    // Negative control: a different tokenizer of the same corpus gives different ids.
    if (std::string(name) == "gpt2") {
      auto other = Tokenizer::load(dir / "qwen2" / "tokenizer.json");
      EXPECT_NE(other.encode(" int main() { return 0; }"), tok.encode(" int main() { return 0; }"));
    }
  }
}

}  // namespace kernelrl::tokenizer_hf_test
