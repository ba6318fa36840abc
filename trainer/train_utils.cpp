#include "trainer/train_utils.h"

#include <ATen/autocast_mode.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <regex>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"

namespace kernelrl {

double scheduled_lr(const OptimizerConfig& c, int64_t step, int64_t total) {
  if (step < c.warmup_steps) return c.lr * static_cast<double>(step + 1) / c.warmup_steps;
  const int64_t decay = std::max<int64_t>(1, total - c.warmup_steps);
  const double p = std::min(1.0, static_cast<double>(step - c.warmup_steps) / decay);
  return c.lr * (c.min_lr_ratio + (1 - c.min_lr_ratio) * 0.5 * (1 + std::cos(M_PI * p)));
}

std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model,
                                                const OptimizerConfig& c) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : model.parameters()) {
    if (!p.requires_grad()) continue;
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  }
  auto opts = torch::optim::AdamWOptions(c.lr)
                  .betas({c.beta1, c.beta2})
                  .eps(c.eps)
                  .weight_decay(c.weight_decay);
  auto no_decay_opts = std::make_unique<torch::optim::AdamWOptions>(opts);
  no_decay_opts->weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(opts));
  groups.emplace_back(no_decay, std::move(no_decay_opts));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), opts);
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& g : optimizer.param_groups())
    static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

AutocastGuard::AutocastGuard(bool enabled) : enabled_(enabled) {
  if (!enabled_) return;
  previous_ = at::autocast::is_autocast_enabled(at::kCUDA);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(at::kCUDA, previous_);
}

std::vector<torch::Tensor> parameter_grads(torch::nn::Module& model) {
  std::vector<torch::Tensor> grads;
  for (auto& p : model.parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

torch::Tensor total_grad_norm(const std::vector<torch::Tensor>& grads) {
  if (grads.empty()) return {};
  torch::NoGradGuard no_grad;
  // Per-tensor norms in fp32 (the grads of fp32 master weights already are), then their norm.
  const bool all_fp32 = std::all_of(grads.begin(), grads.end(), [](const torch::Tensor& g) {
    return g.scalar_type() == torch::kFloat32;
  });
  std::vector<torch::Tensor> as_fp32;
  if (!all_fp32)
    for (const auto& g : grads) as_fp32.push_back(g.to(torch::kFloat32));
  return torch::stack(at::_foreach_norm(all_fp32 ? grads : as_fp32, 2)).norm();
}

void clip_grads(const std::vector<torch::Tensor>& grads, double total_norm, double max_norm) {
  if (!(max_norm > 0 && total_norm > max_norm)) return;
  torch::NoGradGuard no_grad;
  at::_foreach_mul_(grads, max_norm / (total_norm + 1e-6));
}

double clip_grad_norm_checked(torch::nn::Module& model, double max_norm) {
  const auto grads = parameter_grads(model);
  if (grads.empty()) return 0.0;
  const double total = total_grad_norm(grads).item<double>();
  if (!std::isfinite(total))
    throw std::runtime_error("gradient norm is not finite (" + std::to_string(total) +
                             "); refusing to take the optimizer step");
  clip_grads(grads, total, max_norm);
  return total;
}

namespace {

// Whether at::_fused_adamw_ can update p in place: a dense floating CUDA tensor on `device` whose
// gradient and existing moment buffers have its dtype, device and strides (the kernel's checks).
bool fused_adamw_applies(const torch::Tensor& p, const torch::Device& device,
                         const torch::optim::OptimizerParamState* state) {
  auto same_layout = [&](const torch::Tensor& t) {
    return !t.defined() || (t.device() == p.device() && t.scalar_type() == p.scalar_type() &&
                            t.layout() == torch::kStrided && t.strides() == p.strides());
  };
  const auto type = p.scalar_type();
  if (!(p.is_cuda() && p.device() == device && p.is_non_overlapping_and_dense() &&
        (type == torch::kFloat32 || type == torch::kBFloat16 || type == torch::kFloat16) &&
        same_layout(p.grad())))
    return false;
  if (!state) return true;
  const auto& s = static_cast<const torch::optim::AdamWParamState&>(*state);
  return same_layout(s.exp_avg()) && same_layout(s.exp_avg_sq()) && same_layout(s.max_exp_avg_sq());
}

}  // namespace

bool adamw_step(torch::optim::AdamW& optimizer, bool fused) {
  auto& state = optimizer.state();
  std::optional<torch::Device> device;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) {
      if (!fused || !p.grad().defined()) continue;
      if (!device) device = p.device();
      auto it = state.find(p.unsafeGetTensorImpl());
      fused = fused_adamw_applies(p, *device, it == state.end() ? nullptr : it->second.get());
    }
  if (!fused || !device) {
    optimizer.step();
    return false;
  }
  torch::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
    std::vector<int64_t> steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state[p.unsafeGetTensorImpl()];
      if (!slot) {  // as the stock step initializes it
        auto s = std::make_unique<torch::optim::AdamWParamState>();
        s->step(0);
        s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (o.amsgrad()) s->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(s);
      }
      auto& s = static_cast<torch::optim::AdamWParamState&>(*slot);
      s.step(s.step() + 1);
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      if (o.amsgrad()) max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
      steps.push_back(s.step());
    }
    if (params.empty()) continue;
    // The kernel reads each parameter's step count (for the bias corrections) from an fp32
    // device scalar: filled on the device (a host→device copy would sync), a 0-dim view each.
    const int64_t n = static_cast<int64_t>(steps.size());
    auto step_counts = torch::empty({n}, torch::TensorOptions(torch::kFloat32).device(*device));
    for (int64_t i = 0, j = 0; i < n; i = j) {
      while (j < n && steps[j] == steps[i]) ++j;
      step_counts.narrow(0, i, j - i).fill_(static_cast<double>(steps[i]));
    }
    std::vector<torch::Tensor> state_steps;
    for (int64_t i = 0; i < n; ++i) state_steps.push_back(step_counts.select(0, i));
    // p ← p − lr·λ·p;  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
    // p ← p − lr/(1−β1^t) · m / (√v / √(1−β2^t) + ε)   (the stock AdamW::step, in fp32 math)
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, o.lr(),
                      std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(),
                      o.amsgrad(), /*maximize=*/false);
  }
  return true;
}

namespace {

const std::regex kStepDir("step_([0-9]+)");

std::vector<std::pair<int64_t, fs::path>> stage_checkpoints(const fs::path& stage_dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  if (!fs::is_directory(stage_dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(stage_dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (e.is_directory() && std::regex_match(name, m, kStepDir))
      out.emplace_back(std::stoll(m[1]), e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

fs::path save_stage_checkpoint(const fs::path& checkpoints_dir, const std::string& stage,
                               LlamaModel& model, const ModelShape& shape,
                               fs::path* tokenizer_path, torch::optim::Optimizer& optimizer,
                               const TrainState& state, int64_t keep) {
  const fs::path stage_dir = checkpoints_dir / stage;
  fs::create_directories(stage_dir);
  const std::string name = "step_" + std::to_string(state.step);
  const fs::path staging =
      stage_dir / ("." + name + ".tmp." + std::to_string(::getpid()));
  fs::remove_all(staging);
  nlohmann::json extra = {{"stage", stage}, {"step", state.step}};
  const std::string tokenizer_name = save_checkpoint(staging, model, shape, *tokenizer_path, extra);
  torch::save(optimizer, (staging / "optimizer.pt").string());
  nlohmann::json ts = {{"step", state.step}, {"extra", state.extra}, {"rng", rng_state()}};
  atomic_write(staging / "trainer_state.json", ts.dump());
  const fs::path final_dir = stage_dir / name;
  fs::remove_all(final_dir);
  fs::rename(staging, final_dir);
  atomic_write(stage_dir / "latest", name + "\n");
  if (!tokenizer_name.empty()) *tokenizer_path = final_dir / tokenizer_name;  // the checkpoint's copy
  auto all = stage_checkpoints(stage_dir);
  // Oldest first; the one just written stays even when a newer step exists (a run resumed from
  // an older checkpoint), since the live tokenizer path points into it.
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i)
    if (all[i].second != final_dir) fs::remove_all(all[i].second);
  return final_dir;
}

std::optional<fs::path> latest_stage_checkpoint(const fs::path& checkpoints_dir,
                                                const std::string& stage) {
  const fs::path stage_dir = checkpoints_dir / stage;
  std::error_code ec;
  if (fs::exists(stage_dir / "latest", ec)) {
    std::string name = read_file(stage_dir / "latest", "checkpoint pointer");
    name.erase(name.find_last_not_of(" \n\r\t") + 1);
    if (fs::exists(stage_dir / name / "trainer_state.json", ec)) return stage_dir / name;
  }
  // No (or a dangling) pointer: the newest complete step directory.
  auto all = stage_checkpoints(stage_dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (fs::exists(it->second / "trainer_state.json", ec)) return it->second;
  return std::nullopt;
}

TrainState load_train_state(const fs::path& dir, torch::optim::Optimizer& optimizer) {
  TrainState s;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(dir / "trainer_state.json", "trainer state"));
    s.step = j.at("step").get<int64_t>();
    s.extra = j.value("extra", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    throw UserError("checkpoint '" + dir.string() + "': trainer_state.json is corrupted (" +
                    e.what() + ")");
  }
  // The state goes to its parameters' device: a checkpoint is written by rank 0 (cuda:0), and
  // rank 1 of a resumed NCCL job, whose parameters are on cuda:1, failed in its first AdamW step
  // when the state came back on the device it was saved from (H200 x2, 2026-11-27).
  std::optional<torch::Device> device;
  for (const auto& group : optimizer.param_groups())
    if (!group.params().empty()) {
      device = group.params().front().device();
      break;
    }
  try {
    torch::load(optimizer, (dir / "optimizer.pt").string(), device);
  } catch (const c10::Error& e) {
    throw UserError("checkpoint '" + dir.string() + "': optimizer.pt cannot be loaded");
  }
  if (j.contains("rng")) set_rng_state(j["rng"]);
  return s;
}

void crash_here_if_asked(const std::string& stage, int64_t step) {
  static const char* at = std::getenv("KERNELRL_DEBUG_CRASH_AT");
  if (at && std::string(at) == stage + ":" + std::to_string(step)) std::_Exit(137);
}

nlohmann::json rng_state() {
  auto bytes = [](const at::Tensor& t) {
    auto c = t.contiguous().to(torch::kCPU);
    const uint8_t* p = c.data_ptr<uint8_t>();
    return std::vector<uint8_t>(p, p + c.numel());
  };
  nlohmann::json j;
  j["cpu"] = bytes(at::globalContext().defaultGenerator(at::kCPU).get_state());
  if (torch::cuda::is_available())
    j["cuda"] = bytes(at::globalContext().defaultGenerator(at::Device(at::kCUDA, 0)).get_state());
  return j;
}

void set_rng_state(const nlohmann::json& j) {
  auto tensor = [](const nlohmann::json& v) {
    auto bytes = v.get<std::vector<uint8_t>>();
    return torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, torch::kUInt8)
        .clone();
  };
  auto restore = [&](at::Generator gen, const nlohmann::json& v) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(tensor(v));
  };
  if (j.contains("cpu")) restore(at::globalContext().defaultGenerator(at::kCPU), j["cpu"]);
  if (j.contains("cuda") && torch::cuda::is_available())
    restore(at::globalContext().defaultGenerator(at::Device(at::kCUDA, 0)), j["cuda"]);
}

}  // namespace kernelrl
