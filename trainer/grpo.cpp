#include "trainer/grpo.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

namespace kernelrl {

GroupAdvantages group_advantages(const torch::Tensor& rewards, int64_t group_size,
                                 const std::string& norm, double eps) {
  TORCH_CHECK(rewards.dim() == 1, "rewards must be 1-D, got ", rewards.sizes());
  TORCH_CHECK(group_size >= 1 && rewards.size(0) % group_size == 0,
              "rewards (", rewards.size(0), ") must be a multiple of group_size (", group_size, ")");
  auto r = rewards.to(torch::kFloat64).view({-1, group_size});  // [B, G]
  auto mean = r.mean(1, /*keepdim=*/true);
  auto centred = r - mean;
  // Unbiased std; a group of one has no spread.
  auto std = group_size > 1 ? r.std(1, /*unbiased=*/true, /*keepdim=*/true)
                            : torch::zeros_like(mean);
  auto spread = std >= 1e-8;  // [B,1]
  torch::Tensor adv;
  if (norm == "group") {
    adv = centred / (std + eps);
  } else if (norm == "none") {
    adv = centred;
  } else if (norm == "batch") {
    double batch_std = rewards.numel() > 1 ? rewards.to(torch::kFloat64).std().item<double>() : 0;
    adv = centred / (batch_std + eps);
  } else {
    TORCH_CHECK(false, "unknown advantage_norm '", norm, "'");
  }
  auto valid = spread.expand_as(r);
  adv = torch::where(valid, adv, torch::zeros_like(adv));
  GroupAdvantages out;
  out.advantages = adv.reshape({-1}).to(torch::kFloat32).to(rewards.device());
  out.valid = valid.reshape({-1}).to(rewards.device());
  out.zero_spread_groups = (~spread).sum().item<int64_t>();
  return out;
}

SurrogateTerms clipped_surrogate(const torch::Tensor& logp, const torch::Tensor& logp_old,
                                 const torch::Tensor& logp_ref, const torch::Tensor& advantages,
                                 const torch::Tensor& mask, const GrpoConfig& config,
                                 int64_t max_completion_tokens) {
  TORCH_CHECK(logp.sizes() == logp_old.sizes() && logp.sizes() == mask.sizes(),
              "logp, logp_old and mask must have one shape");
  TORCH_CHECK(advantages.dim() == 1 && advantages.size(0) == logp.size(0),
              "advantages must be [N] with N = logp.size(0)");
  auto m = mask.to(logp.dtype());
  auto a = advantages.to(logp.dtype()).unsqueeze(1);          // [N,1]
  auto log_ratio = logp - logp_old.detach();
  auto ratio = torch::exp(log_ratio);
  auto clipped = torch::clamp(ratio, 1.0 - config.clip_eps_low, 1.0 + config.clip_eps_high);
  auto per_token = -torch::min(ratio * a, clipped * a);        // [N,T]
  torch::Tensor kl = torch::zeros_like(per_token);
  if (logp_ref.defined() && config.kl_coef > 0) {
    auto d = logp_ref.detach() - logp;
    kl = torch::exp(d) - d - 1.0;
    per_token = per_token + config.kl_coef * kl;
  }
  const auto tokens = m.sum().clamp_min(1.0);
  SurrogateTerms out;
  if (config.ratio_level == "sequence") {
    // GSPO: one ratio per sequence, the geometric mean of its token ratios; clipped per sequence.
    auto row_tokens = m.sum(1);
    auto rows = (row_tokens > 0).to(logp.dtype());
    auto s = torch::exp((log_ratio * m).sum(1) / row_tokens.clamp_min(1.0));      // [N]
    auto s_clipped = torch::clamp(s, 1.0 - config.clip_eps_low, 1.0 + config.clip_eps_high);
    auto a1 = a.squeeze(1);
    auto row_loss = -torch::min(s * a1, s_clipped * a1);
    if (logp_ref.defined() && config.kl_coef > 0)
      row_loss = row_loss + config.kl_coef * (kl * m).sum(1) / row_tokens.clamp_min(1.0);
    out.loss = (row_loss * rows).sum() / rows.sum().clamp_min(1.0);
    torch::NoGradGuard no_grad;
    auto active = (((a1 > 0) & (s > 1.0 + config.clip_eps_high)) |
                   ((a1 < 0) & (s < 1.0 - config.clip_eps_low))).to(logp.dtype());
    out.clip_fraction = (active * row_tokens).sum() / tokens;
    out.kl = (kl * m).sum() / tokens;
    out.ratio_mean = (ratio * m).sum() / tokens;
    return out;
  }
  if (config.loss_agg == "token-mean") {
    out.loss = (per_token * m).sum() / tokens;
  } else if (config.loss_agg == "dr-grpo") {
    // Dr.GRPO: a constant normalizer N·L_max, so a row's weight does not depend on its length
    // (TRL: loss.sum() / (size(0) · max_completion_length)).
    TORCH_CHECK(max_completion_tokens > 0, "loss_agg dr-grpo needs max_completion_tokens > 0");
    out.loss = (per_token * m).sum() /
               (static_cast<double>(logp.size(0)) * static_cast<double>(max_completion_tokens));
  } else {  // sequence-mean over rows that have tokens
    auto row_tokens = m.sum(1);
    auto rows = (row_tokens > 0).to(logp.dtype());
    auto row_loss = (per_token * m).sum(1) / row_tokens.clamp_min(1.0);
    out.loss = (row_loss * rows).sum() / rows.sum().clamp_min(1.0);
  }
  torch::NoGradGuard no_grad;
  auto active = ((a > 0) & (ratio > 1.0 + config.clip_eps_high)) |
                ((a < 0) & (ratio < 1.0 - config.clip_eps_low));
  out.clip_fraction = (active.to(logp.dtype()) * m).sum() / tokens;
  out.kl = (kl * m).sum() / tokens;
  out.ratio_mean = (ratio * m).sum() / tokens;
  return out;
}

std::vector<double> turn_returns(const std::vector<double>& rewards, int64_t turns, double gamma) {
  TORCH_CHECK(turns >= 1 && rewards.size() % static_cast<size_t>(turns) == 0,
              "rewards must hold `turns` equal blocks");
  std::vector<double> ret = rewards;
  const size_t n = rewards.size() / static_cast<size_t>(turns);
  for (int64_t k = turns - 2; k >= 0; --k)
    for (size_t j = 0; j < n; ++j) ret[k * n + j] += gamma * ret[(k + 1) * n + j];
  return ret;
}

double overlong_penalty(int64_t length, int64_t max_len, int64_t buffer) {
  if (buffer <= 0 || length <= max_len - buffer) return 0.0;
  if (length > max_len) return -1.0;
  return static_cast<double>((max_len - buffer) - length) / static_cast<double>(buffer);
}

double shaped_reward(double reward, bool passed, int64_t length, int64_t max_len, int64_t buffer,
                     double failed_reward) {
  const double r = reward + overlong_penalty(length, max_len, buffer);
  return passed ? std::max(r, failed_reward) : r;
}

std::vector<double> RewardSmoother::smooth(const std::vector<std::string>& tasks,
                                           const std::vector<double>& rewards) const {
  TORCH_CHECK(tasks.size() == rewards.size(), "one task per reward");
  std::vector<double> out(rewards);
  if (config_.smoothing_window <= 0) return out;
  // Bounds per task from the windows as they are (before this step):
  //   μ ± k·max(σ, σ_min), σ the sample std (n − 1).
  std::map<std::string, std::pair<double, double>> bounds;
  for (const auto& task : tasks) {
    if (bounds.count(task)) continue;
    const auto it = windows_.find(task);
    if (it == windows_.end() || static_cast<int64_t>(it->second.size()) < kSmoothingMinRewards) {
      bounds[task] = {-INFINITY, INFINITY};
      continue;
    }
    const auto& w = it->second;
    double mean = 0, var = 0;
    for (double x : w) mean += x;
    mean /= static_cast<double>(w.size());
    for (double x : w) var += (x - mean) * (x - mean);
    const double sd =
        std::max(std::sqrt(var / static_cast<double>(w.size() - 1)), config_.smoothing_min_std);
    bounds[task] = {mean - config_.smoothing_sigmas * sd, mean + config_.smoothing_sigmas * sd};
  }
  for (size_t i = 0; i < rewards.size(); ++i) {
    const auto [lo, hi] = bounds.at(tasks[i]);
    out[i] = std::clamp(rewards[i], lo, hi);
  }
  return out;
}

std::vector<double> RewardSmoother::apply_step(const std::vector<std::string>& tasks,
                                               const std::vector<double>& rewards) {
  std::vector<double> out = smooth(tasks, rewards);
  if (config_.smoothing_window <= 0) return out;
  for (size_t i = 0; i < rewards.size(); ++i) {
    auto& w = windows_[tasks[i]];
    w.push_back(rewards[i]);
    while (static_cast<int64_t>(w.size()) > config_.smoothing_window) w.pop_front();
  }
  return out;
}

nlohmann::json RewardSmoother::state() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [task, w] : windows_) j[task] = std::vector<double>(w.begin(), w.end());
  return j;
}

void RewardSmoother::load_state(const nlohmann::json& j) {
  windows_.clear();
  for (const auto& [task, w] : j.items()) {
    auto v = w.get<std::vector<double>>();
    windows_[task] = std::deque<double>(v.begin(), v.end());
  }
}

}  // namespace kernelrl
