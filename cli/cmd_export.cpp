// `kernelrl export`: a policy checkpoint (native, LoRA adapters over a base, or HF) written as an
// HF directory (config.json, safetensors, the tokenizer), adapters merged into the weights.
#include <cstdio>

#include "cli/commands.h"
#include "common/error.h"
#include "model/checkpoint.h"

namespace kernelrl::cli {

void register_export(CLI::App& app) {
  struct Opts {
    std::string checkpoint, out, dtype = "bf16";
    double shard_gib = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand(
      "export", "Write a policy checkpoint as an HF directory (LoRA adapters merged)");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint directory (native or HF)")->required();
  sub->add_option("--out", o->out, "HF directory to write (replaced if it exists)")->required();
  sub->add_option("--dtype", o->dtype, "bf16 | fp32 weights")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  sub->add_option("--shard-gib", o->shard_gib, "safetensors shards of at most this size; 0 = one")
      ->check(CLI::NonNegativeNumber);
  sub->callback([o] {
    const torch::Dtype dtype = o->dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32;
    Checkpoint c = load_checkpoint(o->checkpoint, torch::kCPU, dtype);
    const bool lora = c.model->has_lora();
    export_hf(o->out, c.model, c.tokenizer_path.value_or(fs::path()),
              static_cast<int64_t>(o->shard_gib * (1ull << 30)));
    std::printf("exported %s (%s%s) to %s\n", o->checkpoint.c_str(), c.shape.describe().c_str(),
                lora ? ", LoRA adapters merged" : "", o->out.c_str());
    exit_code = 0;
  });
}

}  // namespace kernelrl::cli
