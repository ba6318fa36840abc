// What every training stage shares: the AdamW optimizer with decay/no-decay groups, the
// warmup + cosine schedule, mixed precision (fp32 master weights, bf16 autocast on CUDA),
// finite-checked gradient clipping, and stage checkpoints with exact-resume state.
// The stages themselves (pretrain, GRPO) live in their own files.
//
// Precision: a trained model keeps fp32 parameters (AdamW updates of 1e-5 vanish in bf16
// weights) and runs its forward under CUDA autocast in bf16; sampling uses a bf16 copy
// (policy_for_sampling) refreshed after each optimizer step.
//
// Checkpoint layout: checkpoints/<stage>/step_<N>/{checkpoint.json, model.safetensors,
// tokenizer.model, optimizer.pt, trainer_state.json}; checkpoints/<stage>/latest names the
// newest complete one. A checkpoint is staged in a temp dir and renamed into place, and
// `latest` is written atomically after it, so a kill at any moment leaves a loadable newest.
#pragma once

#include <torch/optim/adamw.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "trainer/trainer_config.h"

namespace kernelrl {

// Learning rate at `step` (0-based) of `total` steps:
//   warmup:  lr · (step + 1) / warmup_steps                    for step < warmup_steps
//   cosine:  lr · (r + (1 − r) · ½(1 + cos(π·p)))               p = (step − warmup)/(total − warmup)
// with r = min_lr_ratio.
double scheduled_lr(const OptimizerConfig& config, int64_t step, int64_t total);

// AdamW over the model: weight decay on matrices (dim ≥ 2), none on norms and biases.
std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model,
                                                const OptimizerConfig& config);
void set_lr(torch::optim::Optimizer& optimizer, double lr);

// Enables bf16 autocast for CUDA tensors in scope (no-op on CPU).
class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled);
  ~AutocastGuard();

 private:
  bool enabled_;
  bool previous_ = false;
};

// The gradients of the model's parameters that have one (model.parameters() order).
std::vector<torch::Tensor> parameter_grads(torch::nn::Module& model);

// Total L2 norm sqrt(Σ_p ‖g_p‖²) as a 0-dim fp32 tensor on the gradients' device, computed by
// one foreach norm (fused on CUDA) without a host sync; undefined when `grads` is empty.
torch::Tensor total_grad_norm(const std::vector<torch::Tensor>& grads);

// Scales the gradients by max_norm / (total_norm + 1e-6) when total_norm > max_norm > 0
// (torch.nn.utils.clip_grad_norm_'s coefficient), as one foreach multiply.
void clip_grads(const std::vector<torch::Tensor>& grads, double total_norm, double max_norm);

// Total gradient L2 norm, clipped to max_norm when > 0. Throws std::runtime_error when the
// norm is not finite (the step must not be taken).
double clip_grad_norm_checked(torch::nn::Module& model, double max_norm);

// optimizer.step() for make_adamw's optimizer. On CUDA (every parameter with a gradient on one
// device, floating, dense) and with `fused`: one at::_fused_adamw_ call per parameter group (the
// kernel behind torch.optim.AdamW(fused=True): the same update as the stock step, in fp32 math,
// one launch instead of ~10 per parameter) over the per-parameter AdamWParamState objects
// (exp_avg, exp_avg_sq, step) that the stock step keeps, so optimizer.pt and resume are the same
// either way. Anywhere else, the stock torch::optim::AdamW::step(). Returns whether the fused
// kernel ran.
bool adamw_step(torch::optim::AdamW& optimizer, bool fused = true);

// The model that trains: fp32 on every device.
struct TrainState {
  int64_t step = 0;           // optimizer steps done in this stage
  nlohmann::json extra;       // stage-specific state (data position, smoother windows, ...)
};

// Writes a stage checkpoint (see the layout above) and prunes all but the newest `keep`.
// `tokenizer_path` is read, then pointed at the new checkpoint's copy: a stage resumed from one
// of its own checkpoints reads its tokenizer from there, and the pruning deletes that directory
// `keep` saves later (an RL run resumed with keep_checkpoints 1 failed at its next save but one,
// 2026-11-27). The checkpoint just written is never pruned.
std::filesystem::path save_stage_checkpoint(const std::filesystem::path& checkpoints_dir,
                                            const std::string& stage, LlamaModel& model,
                                            const ModelShape& shape,
                                            std::filesystem::path* tokenizer_path,
                                            torch::optim::Optimizer& optimizer,
                                            const TrainState& state, int64_t keep);

// The newest complete checkpoint of a stage, if any.
std::optional<std::filesystem::path> latest_stage_checkpoint(
    const std::filesystem::path& checkpoints_dir, const std::string& stage);

// Loads optimizer.pt and trainer_state.json from a stage checkpoint directory.
TrainState load_train_state(const std::filesystem::path& dir, torch::optim::Optimizer& optimizer);

// Test hook emulating a kill: exits the process with 137 right after `stage` finished `step`
// when KERNELRL_DEBUG_CRASH_AT is "<stage>:<step>". Used by the resume tests.
void crash_here_if_asked(const std::string& stage, int64_t step);

// Saves / restores the global CPU (and CUDA, when present) RNG states as bytes in JSON.
nlohmann::json rng_state();
void set_rng_state(const nlohmann::json& j);

}  // namespace kernelrl
