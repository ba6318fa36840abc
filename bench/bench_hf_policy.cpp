// A pretrained-shape policy from an HF directory (bench/hf_policy_ref.py makes one with random
// weights): one process loads it once (import_hf, bf16 on CUDA) and measures
//   parity:   logits on the reference tokens against transformers' (same dtype): max and mean
//             |Δ|, max |logit|, argmax agreement, mean KL(HF ‖ ours) over positions;
//   generate: tokens/s of the KV-cache sampler (CUDA-graph decode) at --batch/--prompt/--new,
//             random prompts, every row decoding the full budget, after a 16-token warm-up;
//   grpo:     one GRPO step with LoRA (--lora-rank > 0; rank 0 = full fine-tuning): sample
//             --grpo-rows completions of --grpo-new tokens after --grpo-prompt prompt tokens
//             (groups of --grpo-group), random rewards -> group advantages, π_old and the KL
//             reference (adapters off) by rl_logprobs, then grpo_update (activation
//             checkpointing, chunked log-softmax) with its time and the peak CUDA memory.
// The reward evaluation of a real step (compile, check, time the kernels) is not part of it.
// Prints one JSON object; --out also writes it to a file.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/checkpoint.h"
#include "model/device.h"
#include "model/generate.h"
#include "trainer/grpo.h"
#include "trainer/grpo_step.h"
#include "trainer/train_utils.h"

#ifdef KERNELRL_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace {

using namespace kernelrl;
using json = nlohmann::json;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

// Peak CUDA memory of the caching allocator since the last reset_peak (empty on the CPU).
json memory_stats(const torch::Device& d) {
#ifdef KERNELRL_HAVE_CUDA
  if (d.is_cuda()) {
    const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(d.has_index() ? d.index() : 0);
    const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return {{"peak_allocated_gib", s.allocated_bytes[all].peak / double(1 << 30)},
            {"peak_reserved_gib", s.reserved_bytes[all].peak / double(1 << 30)}};
  }
#endif
  return json::object();
}

void reset_peak(const torch::Device& d) {
#ifdef KERNELRL_HAVE_CUDA
  if (d.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(d.has_index() ? d.index() : 0);
#endif
}

std::vector<std::vector<int64_t>> random_prompts(int64_t rows, int64_t len, int64_t vocab,
                                                 uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < rows; ++i) {
    auto t = torch::randint(vocab, {len}, gen, torch::kInt64);
    out.emplace_back(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + len);
  }
  return out;
}

json parity(LlamaModel& model, const std::string& ref_path) {
  auto ref = read_safetensors(ref_path);
  torch::NoGradGuard ng;
  auto got = model->forward(ref.at("tokens").to(model->device())).to(torch::kFloat32).cpu();
  auto want = ref.at("logits");
  auto diff = (got - want).abs();
  auto lp_hf = want.log_softmax(-1), lp_ours = got.log_softmax(-1);
  auto kl = (lp_hf.exp() * (lp_hf - lp_ours)).sum(-1);
  return {{"max_abs_diff", diff.max().item<double>()},
          {"mean_abs_diff", diff.mean().item<double>()},
          {"max_abs_logit", want.abs().max().item<double>()},
          {"argmax_agree",
           (got.argmax(-1) == want.argmax(-1)).to(torch::kFloat32).mean().item<double>()},
          {"mean_kl", kl.mean().item<double>()},
          {"positions", want.size(0) * want.size(1)}};
}

json generation(LlamaModel& model, int64_t batch, int64_t prompt, int64_t new_tokens) {
  const auto prompts = random_prompts(batch, prompt, model->shape().vocab_size, 2);
  GenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.temperature = 1.0;
  o.cuda_graph = model->device().is_cuda();
  o.eos_ids = {-1};  // no EOS: every row decodes the full budget
  GenerateOptions warm = o;
  warm.max_new_tokens = 16;
  generate(model, prompts, warm);
  reset_peak(model->device());
  auto r = generate(model, prompts, o);
  json j = {{"batch", batch},
            {"prompt", prompt},
            {"new", new_tokens},
            {"seconds", r.seconds},
            {"tokens_per_s", r.generated_tokens / r.seconds}};
  j.update(memory_stats(model->device()));
  return j;
}

json grpo_step(LlamaModel& model, int64_t rows, int64_t group, int64_t prompt, int64_t new_tokens,
               int64_t micro) {
  const torch::Device dev = model->device();
  const bool lora = model->has_lora();
  reset_peak(dev);
  json out = {{"rows", rows},      {"group", group},       {"prompt", prompt},
              {"new", new_tokens}, {"micro_batch", micro}, {"lora", lora}};
  // 1. Sample (the policy itself: with LoRA the base is bf16 and adapters apply live).
  const double t0 = now_s();
  model->eval();
  std::vector<PromptGroup> groups(rows / group);
  for (size_t g = 0; g < groups.size(); ++g)
    groups[g].prompt_ids = random_prompts(1, prompt, model->shape().vocab_size, 10 + g)[0];
  std::vector<std::vector<int64_t>> prompts;
  for (const auto& g : groups)
    for (int64_t i = 0; i < group; ++i) prompts.push_back(g.prompt_ids);
  GenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.temperature = 1.0;
  o.cuda_graph = dev.is_cuda();
  o.eos_ids = {-1};
  auto res = generate(model, prompts, o);
  std::vector<Rollout> rollouts(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    rollouts[i].group = i / static_cast<size_t>(group);
    rollouts[i].completion = res.tokens[i];
  }
  sync(dev);
  const double t1 = now_s();
  // 2. Rewards (random here; the evaluator's in a real step) -> group advantages.
  auto rewards = torch::rand({rows}, at::detail::createCPUGenerator(7));
  GroupAdvantages adv = group_advantages(rewards, group, "group", 1e-6);
  // 3. π_old, the KL reference (adapters off), the update.
  GrpoConfig cfg;
  cfg.kl_coef = 0.01;
  OptimizerConfig oc;
  oc.lr = 1e-4;
  auto opt = make_adamw(*model, oc);
  model->train();
  SamplingConfig sampled;  // as generated above
  sampled.temperature = o.temperature;
  sampled.max_new_tokens = o.max_new_tokens;
  RlBatch batch = make_rl_batch(groups, rollouts, /*pad_id=*/0, sampled);
  torch::Tensor logp_old = rl_logprobs(model, batch, micro);
  torch::Tensor logp_ref;
  if (lora) {
    LoraOff base(model);
    logp_ref = rl_logprobs(model, batch, micro);
  }
  sync(dev);
  const double t2 = now_s();
  auto st = grpo_update(model, *opt, batch, adv.advantages, adv.valid, logp_old, logp_ref, cfg,
                        micro, /*grad_clip=*/1.0, /*fused_adamw=*/dev.is_cuda());
  sync(dev);
  const double t3 = now_s();
  int64_t trainable = 0;
  for (const auto& p : model->parameters()) trainable += p.requires_grad() ? p.numel() : 0;
  out.update({{"sample_s", t1 - t0},
              {"logprobs_s", t2 - t1},
              {"update_s", t3 - t2},
              {"step_s", t3 - t0},
              {"tokens", batch.tokens.numel()},
              {"trainable_params", trainable},
              {"passes", st.passes.size()},
              {"loss", st.passes.empty() ? 0.0 : st.passes[0].loss},
              {"kl", st.passes.empty() ? 0.0 : st.passes[0].kl},
              {"grad_norm", st.passes.empty() ? 0.0 : st.passes[0].grad_norm}});
  out.update(memory_stats(dev));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A pretrained-shape policy: parity, generation and a LoRA GRPO step"};
  std::string hf, ref, out_path, device_name = "auto";
  int64_t batch = 64, prompt = 512, new_tokens = 512;
  int64_t lora_rank = 16, grpo_rows = 32, grpo_group = 8, grpo_prompt = 4096, grpo_new = 512,
          micro = 4;
  bool skip_generate = false, skip_grpo = false;
  app.add_option("--hf", hf, "HF checkpoint directory")->required();
  app.add_option("--ref", ref, "reference logits (hf_policy_ref.py's ref.safetensors)");
  app.add_option("--out", out_path, "also write the JSON here");
  app.add_option("--device", device_name);
  app.add_option("--batch", batch);
  app.add_option("--prompt", prompt);
  app.add_option("--new", new_tokens);
  app.add_option("--lora-rank", lora_rank, "0: full fine-tuning");
  app.add_option("--grpo-rows", grpo_rows);
  app.add_option("--grpo-group", grpo_group);
  app.add_option("--grpo-prompt", grpo_prompt);
  app.add_option("--grpo-new", grpo_new);
  app.add_option("--micro", micro, "micro-batch rows of the update");
  app.add_flag("--skip-generate", skip_generate);
  app.add_flag("--skip-grpo", skip_grpo);
  CLI11_PARSE(app, argc, argv);

  const torch::Device device = resolve_device(device_name);
  json out = {{"hf", hf}, {"device", device.str()}};
  // LoRA keeps the base in the sampling dtype; full fine-tuning keeps fp32 master weights
  // (and then samples with that fp32 model here, unlike the RL stage's bf16 copy).
  const double t0 = now_s();
  auto ck = import_hf(hf, device, resolve_dtype("auto", device));
  sync(device);
  out["load_s"] = now_s() - t0;
  LlamaModel model = ck.model;
  out["model"] = model->shape().describe();
  std::fprintf(stderr, "loaded %s in %.0f s\n", model->shape().describe().c_str(),
               out["load_s"].get<double>());
  if (!ref.empty()) out["parity"] = parity(model, ref);
  if (!skip_generate) out["generate"] = generation(model, batch, prompt, new_tokens);
  if (!skip_grpo) {
    model->set_activation_checkpointing(true);
    if (lora_rank > 0) {
      LoraConfig lc;
      lc.rank = lora_rank;
      lc.alpha = 2.0 * lora_rank;
      lc.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
      add_lora_adapters(model, lc, /*seed=*/1, hf);
    } else {
      model->to(torch::kFloat32);
    }
    out["grpo"] = grpo_step(model, grpo_rows, grpo_group, grpo_prompt, grpo_new, micro);
  }
  const std::string text = out.dump();
  std::printf("%s\n", text.c_str());
  if (!out_path.empty()) std::ofstream(out_path) << text << "\n";
  return 0;
}
