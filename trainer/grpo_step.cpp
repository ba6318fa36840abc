#include "trainer/grpo_step.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "trainer/distributed.h"
#include "trainer/grad_sync.h"
#include "trainer/grpo.h"
#include "trainer/train_utils.h"

namespace kernelrl {

RlBatch make_rl_batch(const std::vector<PromptGroup>& groups, const std::vector<Rollout>& rollouts,
                      int64_t pad_id, const SamplingConfig& sampling) {
  int64_t T = 0;
  for (const auto& r : rollouts)
    T = std::max<int64_t>(T, groups.at(r.group).prompt_ids.size() + r.completion.size());
  const int64_t N = static_cast<int64_t>(rollouts.size());
  RlBatch b;
  b.temperature = sampling.temperature;
  b.max_new_tokens = sampling.max_new_tokens;
  b.tokens = torch::full({N, T}, pad_id, torch::kInt64);
  b.attention = torch::zeros({N, T}, torch::kBool);
  b.target_mask = torch::zeros({N, std::max<int64_t>(T - 1, 1)}, torch::kFloat32);
  auto tok = b.tokens.accessor<int64_t, 2>();
  auto att = b.attention.accessor<bool, 2>();
  auto msk = b.target_mask.accessor<float, 2>();
  for (int64_t i = 0; i < N; ++i) {
    const auto& p = groups[rollouts[i].group].prompt_ids;
    const auto& c = rollouts[i].completion;
    int64_t t = 0;
    for (int64_t id : p) tok[i][t] = id, att[i][t] = true, ++t;
    for (int64_t id : c) {
      tok[i][t] = id;
      att[i][t] = true;
      if (t > 0) msk[i][t - 1] = 1.f;  // log-prob index t-1 scores token t
      ++t;
    }
  }
  return b;
}

torch::Tensor rl_logprobs(LlamaModel& model, const RlBatch& batch, int64_t micro, UpdateShard shard) {
  torch::NoGradGuard ng;
  const torch::Device dev = model->device();
  AutocastGuard ac(dev.is_cuda());
  std::vector<torch::Tensor> parts;
  for (int64_t s = 0; s < batch.tokens.size(0); s += micro) {
    const int64_t e = std::min<int64_t>(batch.tokens.size(0), s + micro);
    if (!shard.mine(s / micro)) {
      parts.push_back(torch::zeros({e - s, batch.tokens.size(1) - 1}, torch::kFloat32));
      continue;
    }
    parts.push_back(token_logprobs(model, batch.tokens.slice(0, s, e).to(dev),
                                   batch.attention.slice(0, s, e).to(dev), /*entropy=*/nullptr,
                                   /*chunk_bytes=*/0, batch.temperature)
                        .to(torch::kCPU));
  }
  return torch::cat(parts);
}

GrpoUpdateStats grpo_update(LlamaModel& model, torch::optim::AdamW& optimizer, const RlBatch& batch,
                            const torch::Tensor& advantages, const torch::Tensor& valid,
                            const torch::Tensor& logp_old, const torch::Tensor& logp_ref,
                            const GrpoConfig& grpo, int64_t micro, double grad_clip,
                            bool fused_adamw, GradSync* sync, UpdateShard shard) {
  const torch::Device dev = model->device();
  const bool cuda = dev.is_cuda();
  // Rows of zero-spread groups carry no signal: out of the mask, so out of every aggregate.
  const torch::Tensor mask = batch.target_mask * valid.to(torch::kFloat32).unsqueeze(1);
  GrpoUpdateStats out;
  out.tokens = mask.sum().item<double>();  // CPU tensors: no device sync
  const double rows = (mask.sum(1) > 0).sum().item<double>();
  if (out.tokens == 0) return out;

  // Micro-batch weights, from the CPU mask: micro-batch means recombine into the batch aggregate
  //   token-mean:    Σ_mb (tokens_mb / tokens) · L_mb
  //   sequence-mean: Σ_mb (rows_mb / rows) · L_mb
  //   dr-grpo:       Σ_mb (N_mb / N) · L_mb        (N: every row, masked ones included)
  struct Micro {
    int64_t s, e;
    double w_loss, w_tokens;
    bool mine;  // this rank's (data parallel: micro-batch s/micro is rank (s/micro) mod W's)
  };
  const bool sequence_mean = grpo.loss_agg == "sequence-mean" || grpo.ratio_level == "sequence";
  const bool dr_grpo = grpo.loss_agg == "dr-grpo" && grpo.ratio_level != "sequence";
  const double all_rows = static_cast<double>(batch.tokens.size(0));
  std::vector<Micro> micros;
  for (int64_t s = 0; s < batch.tokens.size(0); s += micro) {
    const int64_t e = std::min<int64_t>(batch.tokens.size(0), s + micro);
    const auto m = mask.slice(0, s, e);
    const double mb_tokens = m.sum().item<double>();
    if (mb_tokens == 0) continue;
    const double mb_rows = (m.sum(1) > 0).sum().item<double>();
    micros.push_back({s, e,
                      dr_grpo         ? static_cast<double>(e - s) / all_rows
                      : sequence_mean ? mb_rows / rows
                                      : mb_tokens / out.tokens,
                      mb_tokens / out.tokens, shard.mine(s / micro)});
  }
  const Micro* last_mine = nullptr;  // its backward overlaps the gradient all-reduce
  for (const auto& mb : micros)
    if (mb.mine) last_mine = &mb;

  for (int64_t pass = 0; pass < grpo.updates_per_batch; ++pass) {
    optimizer.zero_grad();
    // Device-side sums of the logged numbers: [loss, clip, kl, entropy, ratio], then the norm.
    torch::Tensor sums = torch::zeros({5}, torch::TensorOptions().dtype(torch::kFloat32).device(dev));
    for (const auto& mb : micros) {
      if (!mb.mine) continue;
      if (sync && &mb == last_mine) sync->arm();
      const auto m = mask.slice(0, mb.s, mb.e).to(dev);
      torch::Tensor entropy;
      SurrogateTerms terms;
      {
        AutocastGuard ac(cuda);
        auto logp = token_logprobs(model, batch.tokens.slice(0, mb.s, mb.e).to(dev),
                                   batch.attention.slice(0, mb.s, mb.e).to(dev), &entropy,
                                   /*chunk_bytes=*/0, batch.temperature);
        terms = clipped_surrogate(
            logp, logp_old.slice(0, mb.s, mb.e).to(dev),
            logp_ref.defined() ? logp_ref.slice(0, mb.s, mb.e).to(dev) : torch::Tensor(),
            advantages.slice(0, mb.s, mb.e).to(dev), m, grpo, batch.max_new_tokens);
      }
      (terms.loss * mb.w_loss).backward();
      torch::NoGradGuard ng;
      const auto mb_entropy = (entropy.detach() * m).sum() / m.sum();
      sums += torch::stack({terms.loss.detach().to(torch::kFloat32) * mb.w_loss,
                            terms.clip_fraction.to(torch::kFloat32) * mb.w_tokens,
                            terms.kl.to(torch::kFloat32) * mb.w_tokens,
                            mb_entropy.to(torch::kFloat32) * mb.w_tokens,
                            terms.ratio_mean.to(torch::kFloat32) * mb.w_tokens});
    }
    if (sync) {  // Σ over ranks: the single-process gradient and logged sums
      sync->finish();
      dist::group()->all_reduce_sum(sums);
    }
    const auto grads = parameter_grads(*model);
    const auto norm = grads.empty() ? torch::zeros({1}, sums.options())
                                    : total_grad_norm(grads).to(torch::kFloat32).reshape({1});
    // The pass's one host sync.
    const auto host = torch::cat({sums, norm.to(sums.device())}).to(torch::kFloat64).cpu();
    const double* v = host.data_ptr<double>();
    GrpoPassStats st{v[0], v[1], v[2], v[3], v[4], v[5]};
    if (!std::isfinite(st.loss))
      throw std::runtime_error("GRPO loss is not finite (" + std::to_string(st.loss) + ") in pass " +
                               std::to_string(pass + 1) + "; refusing to take the optimizer step");
    if (!std::isfinite(st.grad_norm))
      throw std::runtime_error("gradient norm is not finite (" + std::to_string(st.grad_norm) +
                               "); refusing to take the optimizer step");
    clip_grads(grads, st.grad_norm, grad_clip);
    adamw_step(optimizer, fused_adamw);
    out.passes.push_back(st);
  }
  return out;
}

}  // namespace kernelrl
