// configs/hf-policy.yaml's path end to end on the CPU (host backend): an HF checkpoint directory
// (a tiny random Qwen2 written by export_hf, a byte-level tokenizer.json with ChatML specials and
// its tokenizer_config.json) -> `kernelrl train` with model.hf_path, LoRA and the chatml prompt
// format -> a general_rl stage whose steps update the adapters (one demonstration per group gives
// spread) with a KL to the base -> checkpoints holding only the adapters and naming the base ->
// `kernelrl export` merges them into an HF directory whose logits equal the LoRA checkpoint's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/metrics.h"
#include "model/checkpoint.h"
#include "test_util.h"

namespace kernelrl {
namespace {

using json = nlohmann::json;
using testing::run_command;
using testing::ScratchDir;

using testing::kSrc;
using testing::kBin;

// A byte-level BPE tokenizer.json with no merges: the 256 byte stand-ins (GPT-2's
// bytes_to_unicode) and three ChatML special tokens.
json byte_tokenizer() {
  json vocab = json::object();
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    vocab[s] = b;
  }
  json added = json::array();
  int id = 256;
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    added.push_back({{"id", id++},
                     {"content", t},
                     {"special", true},
                     {"normalized", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"single_word", false}});
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

torch::Tensor logits_of(LlamaModel m) {
  torch::NoGradGuard ng;
  auto t = torch::randint(259, {2, 16}, at::detail::createCPUGenerator(3), torch::kInt64);
  return m->forward(t).to(torch::kFloat32);
}

TEST(HfPolicy, RlStagesFromAnHfCheckpointWithLoraAndExport) {
  ScratchDir dir;
  ModelShape s = preset_shape("tiny", 259);
  // Byte-level tokens with no merges: a demonstration kernel is a few thousand of them.
  s.arch = "qwen2", s.qkv_bias = true, s.max_seq_len = 16384;
  auto base = make_model(s, torch::kCPU, torch::kFloat32, 11);
  testing::write_text(dir / "tok" / "tokenizer.json", byte_tokenizer().dump());
  testing::write_text(dir / "tok" / "tokenizer_config.json", R"({"eos_token": "<|im_end|>"})");
  export_hf(dir / "hf", base, dir / "tok" / "tokenizer.json");
  testing::write_text(dir / "job.yaml", R"(
run: {name: hf-cpu, seed: 0, device: cpu}
model:
  hf_path: )" + (dir / "hf").string() + R"(
  prompt_format: chatml
  lora: {rank: 4, alpha: 8, targets: [q_proj, v_proj, down_proj]}
data: {hgemm_grid: )" + kSrc + R"(/configs/grids/host.txt}
reward: {backend: host, store: )" + (dir / "store.sqlite").string() +
                                            R"(}
rollout: {group_size: 2, prompts_per_step: 1, n_exemplars: 0, seed_exemplars: 2,
          demonstrations: 1, sampling: {max_new_tokens: 24, temperature: 1.0}}
trainer:
  stages:
    - {include: )" + kSrc + R"(/configs/stages/general_rl.yaml, name: general_rl, steps: 2,
       batch_size: 2, checkpoint_every: 1, grpo: {kl_coef: 0.05}, optimizer: {lr: 1.0e-3}}
)");
  auto run = run_command("cd " + kSrc + " && " + kBin + " train " + (dir / "job.yaml").string() +
                         " --run-dir " + (dir / "run").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto recs = MetricsWriter::read_all(dir / "run" / "metrics.jsonl");
  ASSERT_EQ(recs.size(), 2u);
  int64_t updates = 0;
  for (const auto& r : recs) {
    updates += r["updates"].get<int64_t>();
    EXPECT_EQ(r["format_ok_rate"].get<double>(), 1.0);  // chat answers parse as code
  }
  EXPECT_GT(updates, 0) << recs[0].dump() << "\n" << recs[1].dump();
  EXPECT_GT(recs[1]["kl"].get<double>(), 0.0);  // the adapters moved away from the base
  const fs::path ckpt = dir / "run" / "checkpoints" / "general_rl" / "step_2";
  const auto meta = json::parse(testing::read_text(ckpt / "checkpoint.json"));
  EXPECT_EQ(meta["base"], fs::absolute(dir / "hf").lexically_normal().string());
  EXPECT_EQ(meta["lora"]["rank"], 4);
  EXPECT_EQ(meta["tokenizer"], "tokenizer.json");
  EXPECT_TRUE(fs::exists(ckpt / "adapter_model.safetensors"));
  EXPECT_FALSE(fs::exists(ckpt / "model.safetensors"));
  auto tuned = load_checkpoint(ckpt, torch::kCPU).model;
  ASSERT_TRUE(tuned->has_lora());
  const double moved = (logits_of(tuned) - logits_of(base)).abs().max().item<double>();
  EXPECT_GT(moved, 0.0);
  auto exp = run_command(kBin + " export --checkpoint " + ckpt.string() + " --out " +
                         (dir / "merged").string() + " --dtype fp32");
  ASSERT_EQ(exp.exit_code, 0) << exp.output;
  auto merged = import_hf(dir / "merged", torch::kCPU);
  EXPECT_FALSE(merged.model->has_lora());
  ASSERT_TRUE(merged.tokenizer_path.has_value());
  EXPECT_EQ(merged.tokenizer_path->filename(), "tokenizer.json");
  EXPECT_LT((logits_of(merged.model) - logits_of(tuned)).abs().max().item<double>(), 1e-5)
      << "moved by " << moved;
}

}  // namespace
}  // namespace kernelrl
