#include "model/generate.h"

#include "common/hash.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <limits>

#include "common/error.h"
#include "model/tokenizer.h"

#ifdef KERNELRL_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace kernelrl {

torch::Tensor filter_logits(const torch::Tensor& logits, double temperature, int64_t top_k,
                            double top_p) {
  TORCH_CHECK(logits.dim() == 2, "filter_logits expects [B, V] logits");
  TORCH_CHECK(temperature > 0, "filter_logits: temperature must be > 0 (0 means greedy upstream)");
  const double neg_inf = -std::numeric_limits<double>::infinity();
  auto x = logits.to(torch::kFloat32) / temperature;
  const int64_t V = x.size(1);
  if (top_k > 0 && top_k < V) {
    auto kth = std::get<0>(x.topk(top_k, -1)).select(-1, top_k - 1).unsqueeze(-1);
    x = x.masked_fill(x < kth, neg_inf);
  }
  if (top_p < 1.0) {
    auto [sorted, order] = x.sort(-1, /*descending=*/true);
    auto probs = sorted.softmax(-1);
    // Mass strictly before each token (exclusive cumsum); drop tokens once it reaches p.
    auto before = probs.cumsum(-1) - probs;
    auto drop_sorted = before >= top_p;
    auto drop = torch::zeros_like(drop_sorted).scatter(-1, order, drop_sorted);
    x = x.masked_fill(drop, neg_inf);
  }
  return x;
}

torch::Tensor sample_from_logits(const torch::Tensor& filtered_logits, const torch::Tensor& u) {
  auto cdf = filtered_logits.softmax(-1).cumsum(-1);
  const int64_t V = cdf.size(1);
  // target ≥ FLT_MIN so that u = 0 cannot pick a leading zero-probability token.
  auto target = (u.to(cdf.scalar_type()).unsqueeze(1) * cdf.narrow(1, V - 1, 1)).clamp_min(FLT_MIN);
  return (cdf < target).sum(-1).clamp_max(V - 1);
}

namespace {

// splitmix64 of (seed, row): independent, well-spread seeds per row.
uint64_t mix_seed(uint64_t seed, uint64_t row) {
  return splitmix64(seed + 0x9E3779B97F4A7C15ull * row);
}

// Length of the shortest prefix of ids[0, len) whose text contains a stop string, or -1.
// Only tokens from `from` on are new since the last check: the text searched starts `overlap`
// tokens before them (a stop string of c characters spans at most c tokens), so a check costs
// O(new tokens), and the shortest prefix is found by bisection (containment is monotone in
// the prefix length) instead of decoding every prefix: the old scan was quadratic in the
// completion length and dominated the decode time of 2k-token kernels.
int64_t stop_prefix(const Tokenizer& tok, const std::vector<int64_t>& ids, int64_t len,
                    const std::vector<std::string>& stops, int64_t from = 0) {
  size_t longest = 0;
  for (const auto& s : stops) longest = std::max(longest, s.size());
  const int64_t start = std::max<int64_t>(0, from - static_cast<int64_t>(longest));
  auto contains = [&](int64_t n) {
    const std::string text =
        tok.decode(std::vector<int64_t>(ids.begin() + start, ids.begin() + n));
    for (const auto& s : stops)
      if (!s.empty() && text.find(s) != std::string::npos) return true;
    return false;
  };
  if (len <= start || !contains(len)) return -1;
  int64_t lo = start, hi = len;  // contains(hi) holds; find the smallest such n > lo
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (contains(mid) ? hi : lo) = mid;
  }
  return hi;
}

// Runs decode steps eagerly, or on CUDA as replays of one captured graph per batch size. The
// graph reads tokens/positions/slot from static input buffers and leaves logits in a static
// output buffer (valid until the next replay; the sampler consumes it first, in stream order).
class DecodeRunner {
 public:
  DecodeRunner(LlamaModel& model, bool use_graph) : model_(model) {
#ifdef KERNELRL_HAVE_CUDA
    use_graph_ = use_graph && model->device().is_cuda();
#else
    (void)use_graph;
#endif
  }

  torch::Tensor step(const torch::Tensor& tokens, const torch::Tensor& positions, KVCache& cache) {
#ifdef KERNELRL_HAVE_CUDA
    if (use_graph_) {
      TORCH_CHECK(cache.length < cache.capacity(), "KV cache full (", cache.capacity(), " slots)");
      if (!graph_ || batch_ != tokens.size(0)) capture(tokens, positions, cache);
      tok_in_.copy_(tokens);
      pos_in_.copy_(positions);
      slot_in_.fill_(cache.length);
      graph_->replay();
      cache.length += 1;
      return logits_out_;
    }
#endif
    return model_->decode_step(tokens, positions, cache);
  }

 private:
#ifdef KERNELRL_HAVE_CUDA
  void capture(const torch::Tensor& tokens, const torch::Tensor& positions, KVCache& cache) {
    auto current = c10::cuda::getCurrentCUDAStream();
    current
        .synchronize();  // the old graph's buffers are idle before it is freed (rare: compaction)
    graph_.reset();
    batch_ = tokens.size(0);
    tok_in_ = tokens.clone();
    pos_in_ = positions.clone();
    slot_in_ = torch::full({1}, cache.length, tokens.options());
    // Capture on a side stream (required), after everything queued so far on the current one.
    auto side = c10::cuda::getStreamFromPool();
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(side);
    {
      c10::cuda::CUDAStreamGuard guard(side);
      // Warm-up outside the capture (lazy cuBLAS/SDPA state); it writes the same K/V into the
      // same slot as the replay that follows, so it is idempotent.
      model_->decode_step_static(tok_in_, pos_in_, slot_in_, cache);
      graph_ = std::make_unique<at::cuda::CUDAGraph>();
      graph_->capture_begin();
      logits_out_ = model_->decode_step_static(tok_in_, pos_in_, slot_in_, cache);
      graph_->capture_end();
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(current);
  }
  bool use_graph_ = false;
  int64_t batch_ = -1;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  torch::Tensor tok_in_, pos_in_, slot_in_, logits_out_;
#endif
  LlamaModel& model_;
};

}  // namespace

GenerationResult generate(LlamaModel& model, const std::vector<std::vector<int64_t>>& prompts,
                          const GenerateOptions& o, const Tokenizer* tokenizer) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t N = static_cast<int64_t>(prompts.size());
  GenerationResult r;
  r.tokens.resize(N);
  r.logprobs.resize(N);
  r.text.resize(N);
  r.finish_reason.resize(N);
  if (N == 0) return r;
  if (o.max_new_tokens < 1) throw UserError("generate: max_new_tokens must be ≥ 1");
  if (o.temperature < 0) throw UserError("generate: temperature must be ≥ 0 (0 = greedy)");
  if (o.top_k < 0) throw UserError("generate: top_k must be ≥ 0 (0 = off)");
  if (!(o.top_p > 0 && o.top_p <= 1)) throw UserError("generate: top_p must be in (0, 1]");
  if (o.sync_interval < 1) throw UserError("generate: sync_interval must be ≥ 1");
  if (!o.stop_strings.empty() && !tokenizer)
    throw UserError("generate: stop strings need a tokenizer");

  const ModelShape& shape = model->shape();
  const int64_t V = shape.vocab_size;
  std::vector<int64_t> eos = o.eos_ids;
  if (eos.empty() && tokenizer && tokenizer->eos_id() >= 0) eos.push_back(tokenizer->eos_id());
  const int64_t pad = o.pad_id >= 0 ? o.pad_id : tokenizer ? tokenizer->pad_id() : 0;
  int64_t P = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (prompts[i].empty()) throw UserError("generate: prompt " + std::to_string(i) + " is empty");
    for (int64_t id : prompts[i])
      if (id < 0 || id >= V)
        throw UserError("generate: prompt " + std::to_string(i) + " has token id " +
                        std::to_string(id) + " outside the vocabulary of " + std::to_string(V));
    P = std::max<int64_t>(P, prompts[i].size());
    r.prompt_tokens += prompts[i].size();
  }
  const int64_t T = o.max_new_tokens;
  if (P + T > shape.max_seq_len)
    throw UserError("generate: prompt (" + std::to_string(P) + " tokens) + max_new_tokens (" +
                    std::to_string(T) + ") exceeds the model's max_seq_len " +
                    std::to_string(shape.max_seq_len));

  torch::NoGradGuard no_grad;
  const torch::Device dev = model->device();
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  // Left padding: every row's last prompt token sits in slot P-1, so all rows write slot P+t.
  auto host_tokens = torch::full({N, P}, pad, i64);
  auto host_mask = torch::zeros({N, P}, i64.dtype(torch::kBool));
  for (int64_t i = 0; i < N; ++i) {
    const int64_t n = prompts[i].size();
    std::copy(prompts[i].begin(), prompts[i].end(), host_tokens[i].data_ptr<int64_t>() + (P - n));
    host_mask[i].narrow(0, P - n, n).fill_(true);
  }
  auto tokens = host_tokens.to(dev);
  auto mask = host_mask.to(dev);

  // Row i's uniforms come from its own generator, seeded by mix(seed, i): a row's draws do not
  // depend on how many rows share the batch.
  auto host_u = torch::empty({T, N}, torch::TensorOptions().dtype(torch::kFloat32));
  for (int64_t i = 0; i < N; ++i) {
    auto gen = at::detail::createCPUGenerator(mix_seed(o.seed, o.row_offset + static_cast<uint64_t>(i)));
    host_u.select(1, i).copy_(torch::rand({T}, gen, torch::TensorOptions().dtype(torch::kFloat32)));
  }
  auto uniforms = host_u.to(dev);

  KVCache cache = model->new_cache(N, P + T);
  DecodeRunner runner(model, o.cuda_graph);
  auto logits = model->prefill(tokens, mask, cache);  // [N, V]
  auto positions = mask.sum(1).to(torch::kInt64);     // next position = real tokens so far

  auto opts = torch::TensorOptions().device(dev);
  auto out_tok = torch::full({N, T}, pad, opts.dtype(torch::kInt64));
  auto out_lp = torch::zeros({N, T}, opts.dtype(torch::kFloat32));
  auto done_at = torch::full({N}, T, opts.dtype(torch::kInt64));  // completion length
  auto row_ids = torch::arange(N, opts.dtype(torch::kInt64));     // batch row -> prompt index
  auto finished = torch::zeros({N}, opts.dtype(torch::kBool));
  auto eos_t = torch::tensor(eos.empty() ? std::vector<int64_t>{-1} : eos, i64).to(dev);
  std::vector<int64_t> stop_len(N, -1);

  int64_t steps = 0;
  for (int64_t t = 0; t < T; ++t) {
    auto lf = logits.to(torch::kFloat32);
    torch::Tensor tok;
    if (o.temperature == 0) {
      tok = lf.argmax(-1);
    } else {
      tok = sample_from_logits(filter_logits(lf, o.temperature, o.top_k, o.top_p),
                               uniforms[t].index_select(0, row_ids));
    }
    tok = torch::where(finished, torch::full_like(tok, pad), tok);
    // The logprob GRPO needs: log softmax(logits / T), the tempered distribution before
    // top-k/top-p, as token_logprobs(..., temperature) computes it (greedy: T = 1).
    auto lp = (o.temperature > 0 && o.temperature != 1.0 ? lf / o.temperature : lf)
                  .log_softmax(-1)
                  .gather(1, tok.unsqueeze(1))
                  .squeeze(1)
                  .masked_fill(finished, 0.0);
    out_tok.select(1, t).index_copy_(0, row_ids, tok);
    out_lp.select(1, t).index_copy_(0, row_ids, lp);
    if (!eos.empty()) {
      auto newly = torch::isin(tok, eos_t) & finished.logical_not();
      done_at.index_copy_(
          0, row_ids,
          torch::where(newly, torch::full_like(tok, t + 1), done_at.index_select(0, row_ids)));
      finished = finished | newly;
    }
    steps = t + 1;
    if (t + 1 == T) break;

    if ((t + 1) % o.sync_interval == 0) {  // the one host sync of this interval
      auto fin = finished.to(torch::kCPU);
      auto rows = row_ids.to(torch::kCPU);
      const int64_t B = fin.size(0);
      bool changed = false;
      if (!o.stop_strings.empty()) {
        std::vector<int64_t> open;
        for (int64_t b = 0; b < B; ++b)
          if (!fin[b].item<bool>()) open.push_back(b);
        if (!open.empty()) {
          auto open_t = torch::tensor(open, i64);
          auto ids = out_tok.index_select(0, rows.index_select(0, open_t).to(dev))
                         .narrow(1, 0, t + 1)
                         .to(torch::kCPU)
                         .contiguous();
          for (size_t j = 0; j < open.size(); ++j) {
            const int64_t* p = ids[j].data_ptr<int64_t>();
            std::vector<int64_t> v(p, p + t + 1);
            // Tokens before the previous check held no stop string (the row was still open).
            int64_t cut = stop_prefix(*tokenizer, v, t + 1, o.stop_strings,
                                      /*from=*/std::max<int64_t>(0, t + 1 - o.sync_interval));
            if (cut >= 0) {
              stop_len[rows[open[j]].item<int64_t>()] = cut;
              fin[open[j]] = true;
              changed = true;
            }
          }
        }
      }
      if (changed) finished = fin.to(dev);
      const int64_t alive = B - fin.sum().item<int64_t>();
      if (alive == 0) break;
      if (o.compact && alive * 4 <= B * 3) {  // drop finished rows once a quarter is done
        auto keep = fin.logical_not().nonzero().squeeze(1).to(dev);
        cache.select_rows(keep);
        tok = tok.index_select(0, keep);
        positions = positions.index_select(0, keep);
        finished = finished.index_select(0, keep);
        row_ids = row_ids.index_select(0, keep);
      }
    }
    logits = runner.step(tok, positions, cache);
    positions = positions + 1;
  }

  auto host_tok = out_tok.to(torch::kCPU);
  auto host_lp = out_lp.to(torch::kCPU);
  auto host_done = done_at.to(torch::kCPU);
  for (int64_t i = 0; i < N; ++i) {
    int64_t len = std::min<int64_t>(host_done[i].item<int64_t>(), steps);
    const int64_t* tp = host_tok[i].data_ptr<int64_t>();
    const float* lpp = host_lp[i].data_ptr<float>();
    std::vector<int64_t> ids(tp, tp + len);
    std::string reason = "length";
    if (stop_len[i] >= 0) {
      len = std::min(len, stop_len[i]);
      reason = "stop";
    } else if (!o.stop_strings.empty()) {
      int64_t cut = stop_prefix(*tokenizer, ids, len, o.stop_strings);
      if (cut >= 0) len = cut, reason = "stop";
    }
    ids.resize(len);
    if (reason != "stop" && len > 0 && std::find(eos.begin(), eos.end(), ids.back()) != eos.end())
      reason = "eos";
    r.tokens[i] = ids;
    r.logprobs[i].assign(lpp, lpp + len);
    r.finish_reason[i] = reason;
    if (tokenizer) r.text[i] = tokenizer->decode(ids);
    r.generated_tokens += len;
  }
  r.decode_steps = steps;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

GenerationResult generate(LlamaModel& model, const Tokenizer& tokenizer,
                          const std::vector<std::string>& prompts, const GenerateOptions& options) {
  std::vector<std::vector<int64_t>> ids;
  ids.reserve(prompts.size());
  for (const auto& p : prompts) ids.push_back(tokenizer.encode(p, /*add_bos=*/true));
  return generate(model, ids, options, &tokenizer);
}

}  // namespace kernelrl
