// Generation throughput of the policy's KV-cache sampler (model/generate.h): a random model of
// a preset shape, random prompts of one length, every row decoding exactly --new tokens (no
// EOS), temperature 1 sampling. Prints one JSON line per timed run:
//   {"impl": "kernelrl", "batch": 64, "prompt": 512, "new": 512, "seconds": ..., "tokens_per_s":
//   ...}
// tokens_per_s counts generated tokens only (batch × new / wall seconds, prefill included).
// The HF side of the comparison is bench/bench_generate_hf.py.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "model/device.h"
#include "model/generate.h"

int main(int argc, char** argv) {
  using namespace kernelrl;
  CLI::App app{"Generation throughput of the KV-cache sampler"};
  int64_t batch = 64, prompt = 512, new_tokens = 512, vocab = 32000, repeats = 2, sync = 16;
  std::string preset = "base", device_name = "auto";
  int cuda_graph = 1;
  app.add_option("--batch", batch);
  app.add_option("--prompt", prompt);
  app.add_option("--new", new_tokens);
  app.add_option("--vocab", vocab);
  app.add_option("--preset", preset);
  app.add_option("--repeats", repeats);
  app.add_option("--sync-interval", sync);
  app.add_option("--device", device_name);
  app.add_option("--cuda-graph", cuda_graph, "1: decode step as a CUDA graph replay; 0: eager");
  CLI11_PARSE(app, argc, argv);

  const torch::Device device = resolve_device(device_name);
  const torch::Dtype dtype = resolve_dtype("auto", device);
  ModelShape shape = preset_shape(preset, vocab);
  shape.max_seq_len = std::max(shape.max_seq_len, prompt + new_tokens);
  auto model = make_model(shape, device, dtype, /*seed=*/1);
  model->eval();
  auto gen = at::detail::createCPUGenerator(2);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < batch; ++i) {
    auto t = torch::randint(vocab, {prompt}, gen, torch::kInt64);
    prompts.emplace_back(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + prompt);
  }
  GenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.temperature = 1.0;
  o.sync_interval = sync;
  o.cuda_graph = cuda_graph != 0;
  o.eos_ids = {-1};  // no EOS: every row decodes the full budget, as HF with min_new_tokens
  // Warm-up: kernels, allocator, cuBLAS handles.
  {
    GenerateOptions w = o;
    w.max_new_tokens = 16;
    generate(model, prompts, w);
  }
  std::fprintf(stderr, "model %s on %s (%s)\n", shape.describe().c_str(), device.str().c_str(),
               c10::toString(dtype));
  for (int64_t r = 0; r < repeats; ++r) {
    o.seed = static_cast<uint64_t>(r);
    if (device.is_cuda()) torch::cuda::synchronize();
    GenerationResult res = generate(model, prompts, o);  // ends with a host copy: synced
    std::printf(
        "{\"impl\": \"kernelrl\", \"cuda_graph\": %d, \"preset\": \"%s\", \"batch\": %lld, "
        "\"prompt\": %lld, "
        "\"new\": %lld, \"generated\": %lld, \"seconds\": %.3f, \"tokens_per_s\": %.0f}\n",
        cuda_graph, preset.c_str(), (long long)batch, (long long)prompt, (long long)new_tokens,
        (long long)res.generated_tokens, res.seconds, res.generated_tokens / res.seconds);
    std::fflush(stdout);
  }
  return 0;
}
