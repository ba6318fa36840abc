// `kernelrl sample`: completions from a policy checkpoint (native or HF directory) with the
// KV-cache sampler (model/generate.h), or kernels for a task from a run directory
// (--run-dir/--task/--shape/--out/--evaluate, trainer/sample_run.h).
#include <cstdio>
#include <numeric>

#include "cli/commands.h"
#include "common/error.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "model/generate.h"
#include "model/tokenizer.h"
#include "trainer/sample_run.h"

namespace kernelrl::cli {

void register_sample(CLI::App& app) {
  struct Opts {
    std::string checkpoint, run_dir, prompt, task, shape, out, tokenizer, device = "auto", stage,
                                                                          layout = "nn";
    int64_t n = 4, step = -1, max_new_tokens = 128, top_k = 0, seed = 0;
    double temperature = 1.0, top_p = 1.0;
    bool evaluate = false;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("sample", "Sample completions or kernels from a policy");
  sub->add_option("--checkpoint", o->checkpoint, "policy checkpoint directory (native or HF)");
  sub->add_option("--run-dir", o->run_dir, "run directory (newest checkpoint, or --step)");
  sub->add_option("--step", o->step, "checkpoint step within --run-dir");
  sub->add_option("--prompt", o->prompt, "prompt text");
  sub->add_option("--task", o->task, "task to write a kernel for (hgemm, or a suite task name)");
  sub->add_option("--shape", o->shape, "MxNxK for hgemm");
  sub->add_option("--layout", o->layout, "nn | tn (hgemm)")->check(CLI::IsMember({"nn", "tn"}));
  sub->add_option("--stage", o->stage,
                  "stage of --run-dir whose checkpoint to use (default: last)");
  sub->add_option("-n", o->n, "completions to sample")->check(CLI::PositiveNumber);
  sub->add_option("--out", o->out, "directory for the sampled kernels");
  sub->add_flag("--evaluate", o->evaluate, "evaluate the sampled kernels");
  sub->add_option("--tokenizer", o->tokenizer, "tokenizer.model (default: the checkpoint's)");
  auto* max_new = sub->add_option("--max-new-tokens", o->max_new_tokens, "completion budget")
                      ->check(CLI::PositiveNumber);
  auto* temperature =
      sub->add_option("--temperature", o->temperature, "softmax temperature; 0 = greedy")
          ->check(CLI::Range(0.0, 100.0));
  auto* top_k =
      sub->add_option("--top-k", o->top_k, "top-k filter; 0 = off")->check(CLI::NonNegativeNumber);
  auto* top_p =
      sub->add_option("--top-p", o->top_p, "nucleus mass; 1 = off")->check(CLI::Range(1e-9, 1.0));
  sub->add_option("--seed", o->seed, "sampling seed")->check(CLI::NonNegativeNumber);
  sub->add_option("--device", o->device, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  sub->callback([=] {
    if (!o->run_dir.empty() || !o->task.empty()) {
      if (o->run_dir.empty() || o->task.empty())
        throw UserError("sample: --run-dir and --task go together (with --shape for hgemm)");
      SampleRunOptions so;
      so.run_dir = o->run_dir;
      so.stage = o->stage;
      so.step = o->step;
      so.task = o->task;
      so.shape = o->shape;
      so.layout = o->layout;
      so.n = o->n;
      so.seed = static_cast<uint64_t>(o->seed);
      if (temperature->count()) so.temperature = o->temperature;
      if (top_p->count()) so.top_p = o->top_p;
      if (top_k->count()) so.top_k = o->top_k;
      if (max_new->count()) so.max_new_tokens = o->max_new_tokens;
      so.out = o->out;
      so.evaluate = o->evaluate;
      so.device = o->device;
      sample_kernels_from_run(so);
      return;
    }
    if (o->evaluate || !o->out.empty())
      throw UserError("sample: --out and --evaluate need --run-dir and --task");
    if (o->checkpoint.empty()) throw UserError("sample: --checkpoint DIR is required");
    if (o->prompt.empty()) throw UserError("sample: --prompt TEXT is required");
    const torch::Device device = resolve_device(o->device);
    Checkpoint ckpt = load_checkpoint(o->checkpoint, device);
    std::string tok_path = o->tokenizer;
    if (tok_path.empty() && ckpt.tokenizer_path) tok_path = ckpt.tokenizer_path->string();
    if (tok_path.empty())
      throw UserError("sample: checkpoint " + o->checkpoint +
                      " carries no tokenizer.model; pass --tokenizer PATH");
    Tokenizer tok = Tokenizer::load(tok_path);
    if (tok.vocab_size() > ckpt.shape.vocab_size)
      throw UserError("sample: tokenizer has " + std::to_string(tok.vocab_size()) +
                      " pieces but the model only " + std::to_string(ckpt.shape.vocab_size));
    ckpt.model->eval();
    GenerateOptions g;
    g.max_new_tokens = o->max_new_tokens;
    g.temperature = o->temperature;
    g.top_k = o->top_k;
    g.top_p = o->top_p;
    g.seed = static_cast<uint64_t>(o->seed);
    std::vector<std::string> prompts(static_cast<size_t>(o->n), o->prompt);
    GenerationResult r = generate(ckpt.model, tok, prompts, g);
    for (size_t i = 0; i < r.text.size(); ++i) {
      const auto& lp = r.logprobs[i];
      const double mean = lp.empty() ? 0.0 : std::accumulate(lp.begin(), lp.end(), 0.0) / lp.size();
      std::printf("--- completion %zu: %zu tokens, %s, mean logprob %.3f ---\n%s\n", i + 1,
                  r.tokens[i].size(), r.finish_reason[i].c_str(), mean, r.text[i].c_str());
    }
    std::printf("--- %lld tokens in %.2f s (%s, %s) ---\n", (long long)r.generated_tokens,
                r.seconds, device.str().c_str(), ckpt.shape.describe().c_str());
  });
}

}  // namespace kernelrl::cli
