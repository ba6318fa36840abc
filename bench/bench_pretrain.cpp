// Pretraining throughput of the policy: the pretrain stage's own optimizer step (lm_train_step,
// trainer/pretrain_stage.h: fp32 master weights, bf16 autocast, masked next-token loss, global
// grad-norm clip with finite checks, AdamW with decay/no-decay groups, fused on CUDA) on a random
// model of a preset shape and random token rows, W warm-up + N timed steps. Prints one JSON line:
//   {"impl": "kernelrl", "batch": 16, "seq_len": 2048, "tokens_per_s": ..., "mfu": ..., ...}
// bench/bench_pretrain.py is the PyTorch side (same fields), bench/bench_pretrain.sh runs both.
//
// Model FLOPs (the same convention in the Python bench; docs/benchmarks.md):
//   flops_per_token = 6·N_matmul + 6·n_layers·T·d_attn
// N_matmul: every weight that is a matmul operand, the LM head included (V·d, tied or not), the
// input embedding excluded (a lookup). 6 = 2 (multiply-add) × 3 (forward + two backward GEMMs).
// Attention scores QKᵀ and PV cost 2·2·T·d_attn per token per layer forward, ×3 with backward =
// 12·L·T·d_attn, halved because the causal mask skips half of the score matrix (PaLM's
// appendix B counts the full 12·L·T·d; we count what a causal kernel need compute). Activation
// checkpointing's recomputation is not counted (model FLOPs, not hardware FLOPs).
//   tokens/s = steps · batch · grad_accum · T / timed seconds (T input tokens per row)
//   MFU = flops_per_token · tokens/s / peak;  peak = dense bf16 tensor-core FLOP/s: 989.4e12 for
//   H100 SXM and H200 (same GH100 tensor cores and clocks), else --peak-tflops.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "model/device.h"
#include "model/llama.h"
#include "trainer/pretrain_stage.h"
#include "trainer/train_utils.h"

#ifdef KERNELRL_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>

#include "common/cuda_check.h"
#endif

namespace {

using namespace kernelrl;

struct DeviceInfo {
  std::string name = "cpu";
  double peak_flops = 0;  // dense bf16 FLOP/s; 0 = unknown
  double peak_memory_gib = -1;
};

// Dense bf16 peak by device name: H100 SXM and H200 989.4 TFLOP/s (the PCIe and NVL H100s are
// slower and need --peak-tflops).
double known_peak_flops(const std::string& name) {
  const bool pcie_or_nvl =
      name.find("PCIe") != std::string::npos || name.find("NVL") != std::string::npos;
  if (name.find("H200") != std::string::npos) return 989.4e12;
  if (name.find("H100") != std::string::npos && !pcie_or_nvl) return 989.4e12;
  return 0;
}

DeviceInfo device_info(const torch::Device& device) {
  DeviceInfo info;
#ifdef KERNELRL_HAVE_CUDA
  if (device.is_cuda()) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device.has_index() ? device.index() : 0));
    info.name = prop.name;
    info.peak_flops = known_peak_flops(info.name);
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(device.has_index() ? device.index() : 0);
    info.peak_memory_gib =
        static_cast<double>(
            stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
                .peak) /
        (1024.0 * 1024.0 * 1024.0);
  }
#endif
  return info;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Pretraining step throughput (tokens/s, MFU) of the pretrain stage's step"};
  std::string preset = "base", device_name = "auto", label;
  int64_t vocab = 32000, batch = 16, seq_len = 2048, grad_accum = 1, warmup = 3, steps = 20;
  int checkpointing = 0, fused_adamw = 1;
  double peak_tflops = 0, lr = 3e-4, grad_clip = 1.0;
  app.add_option("--preset", preset, "model preset: tiny | small | base");
  app.add_option("--vocab", vocab, "vocabulary size");
  app.add_option("--batch", batch, "rows per micro-batch");
  app.add_option("--seq-len", seq_len, "tokens per row (inputs; each row holds seq_len + 1)");
  app.add_option("--grad-accum", grad_accum, "micro-batches per optimizer step");
  app.add_option("--warmup", warmup, "untimed steps first");
  app.add_option("--steps", steps, "timed optimizer steps");
  app.add_option("--device", device_name, "auto | cpu | cuda");
  app.add_option("--ckpt", checkpointing, "1: activation checkpointing per decoder layer");
  app.add_option("--fused-adamw", fused_adamw, "1: at::_fused_adamw_ on CUDA; 0: the stock step");
  app.add_option("--peak-tflops", peak_tflops,
                 "dense bf16 peak for MFU (default: 989.4 on H100 SXM / H200, else no MFU)");
  app.add_option("--lr", lr, "AdamW learning rate (constant)");
  app.add_option("--grad-clip", grad_clip, "global grad-norm clip; 0 = off");
  app.add_option("--label", label, "free text copied into the JSON line");
  CLI11_PARSE(app, argc, argv);
  if (batch < 1 || seq_len < 2 || grad_accum < 1 || warmup < 1 || steps < 1) {
    std::fprintf(stderr,
                 "bench_pretrain: batch, grad-accum, warmup and steps must be >= 1 and "
                 "seq-len >= 2\n");
    return 2;
  }

  try {
    const torch::Device device = resolve_device(device_name);
    ModelShape shape = preset_shape(preset, vocab);
    shape.max_seq_len = std::max(shape.max_seq_len, seq_len);
    auto model = make_model(shape, device, torch::kFloat32, /*seed=*/1);
    model->set_activation_checkpointing(checkpointing != 0);
    model->train();
    OptimizerConfig opt_config;  // the stage's defaults (betas 0.9/0.95, eps 1e-8, decay 0.1)
    opt_config.lr = lr;
    opt_config.grad_clip = grad_clip;
    auto optimizer = make_adamw(*model, opt_config);

    // Parameter counts: total, without the input embedding, and the matmul operands.
    int64_t total = 0, projections = 0;
    for (const auto& p : model->named_parameters()) {
      total += p.value().numel();
      if (p.key().find("_proj.") != std::string::npos) projections += p.value().numel();
    }
    const int64_t embedding = shape.vocab_size * shape.d_model;
    const int64_t matmul = projections + embedding;  // + the LM head (V·d)
    const int64_t d_attn = shape.n_heads * shape.head_dim();
    const double flops_per_token = 6.0 * static_cast<double>(matmul) +
                                   6.0 * static_cast<double>(shape.n_layers * seq_len * d_attn);

    // Random rows, all on the device before timing; mask as pack_triplets makes it (position 0
    // of a row is not a target).
    auto gen = at::detail::createCPUGenerator(2);
    std::vector<std::vector<LmBatch>> data;
    for (int64_t s = 0; s < warmup + steps; ++s) {
      std::vector<LmBatch> micro;
      for (int64_t m = 0; m < grad_accum; ++m) {
        auto tokens = torch::randint(vocab, {batch, seq_len + 1}, gen, torch::kInt64);
        auto mask = torch::ones({batch, seq_len + 1}, torch::kFloat32);
        mask.select(1, 0).zero_();
        micro.push_back({tokens.to(device), mask.to(device)});
      }
      data.push_back(std::move(micro));
    }

    std::fprintf(stderr, "model %s on %s, %s steps of %lld x %lld x %lld tokens\n",
                 shape.describe().c_str(), device.str().c_str(),
                 checkpointing ? "checkpointed" : "plain", (long long)grad_accum, (long long)batch,
                 (long long)seq_len);
    double loss_first = 0, loss_last = 0;
    bool fused_ran = false;
    for (int64_t s = 0; s < warmup; ++s) {
      const auto stats = lm_train_step(model, *optimizer, data[s], grad_clip, fused_adamw != 0);
      if (s == 0) loss_first = stats.loss;
      fused_ran = stats.fused_adamw;
    }
    if (device.is_cuda()) torch::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s)
      loss_last =
          lm_train_step(model, *optimizer, data[warmup + s], grad_clip, fused_adamw != 0).loss;
    if (device.is_cuda()) torch::cuda::synchronize();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const DeviceInfo info = device_info(device);
    const double peak = peak_tflops > 0 ? peak_tflops * 1e12 : info.peak_flops;
    const double tokens_per_s = static_cast<double>(steps * grad_accum * batch * seq_len) / seconds;
    nlohmann::ordered_json out = {
        {"impl", "kernelrl"},
        {"mode", "eager"},
        {"optimizer", fused_ran ? "fused" : "stock"},
        {"preset", preset},
        {"ckpt", checkpointing != 0},
        {"batch", batch},
        {"seq_len", seq_len},
        {"grad_accum", grad_accum},
        {"params_total", total},
        {"params_non_embedding", total - embedding},
        {"params_matmul", matmul},
        {"flops_per_token", flops_per_token},
        {"warmup", warmup},
        {"steps", steps},
        {"step_ms", 1e3 * seconds / static_cast<double>(steps)},
        {"tokens_per_s", tokens_per_s},
        {"mfu", peak > 0 ? nlohmann::ordered_json(flops_per_token * tokens_per_s / peak) : nullptr},
        {"peak_tflops", peak > 0 ? nlohmann::ordered_json(peak / 1e12) : nullptr},
        {"peak_mem_gib",
         info.peak_memory_gib >= 0 ? nlohmann::ordered_json(info.peak_memory_gib) : nullptr},
        {"device", info.name},
        {"loss_first", loss_first},
        {"loss_last", loss_last},
        {"label", label}};
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pretrain: %s\n", e.what());
    return 1;
  }
  return 0;
}
