#include "trainer/pretrain_stage.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/progress.h"
#include "data/families.h"
#include "data/tasks/hgemm_split.h"
#include "data/tasks/task_suite.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "rollout/prompt.h"
#include "trainer/distributed.h"
#include "trainer/grad_sync.h"
#include "trainer/stage_loop.h"
#include "trainer/train_utils.h"

namespace kernelrl {

std::string format_triplet(const Triplet& t) {
  return std::string(kInstructionMarker) + t.instruction + "\n" + kContextMarker + t.context +
         "\n" + kCodeMarker + t.code + kEndMarker;
}

PackedSequences pack_triplets(const std::vector<Triplet>& triplets, const Tokenizer& tok,
                              int64_t seq_len, bool code_only_loss) {
  std::vector<int64_t> ids;
  std::vector<float> mask;
  auto append = [&](const std::vector<int64_t>& part, float m) {
    ids.insert(ids.end(), part.begin(), part.end());
    mask.insert(mask.end(), part.size(), m);
  };
  const float prompt_mask = code_only_loss ? 0.f : 1.f;
  for (const auto& t : triplets) {
    if (tok.bos_id() >= 0) append({tok.bos_id()}, prompt_mask);
    append(tok.encode(std::string(kInstructionMarker) + t.instruction + "\n" + kContextMarker +
                      t.context + "\n" + kCodeMarker),
           prompt_mask);
    append(tok.encode(t.code + kEndMarker), 1.f);
  }
  PackedSequences out;
  out.documents = static_cast<int64_t>(triplets.size());
  const int64_t total = static_cast<int64_t>(ids.size());
  const int64_t rows = total > seq_len ? (total - 1) / seq_len : 0;
  if (rows == 0) return out;
  auto all_ids = torch::from_blob(ids.data(), {total}, torch::kInt64);
  auto all_mask = torch::from_blob(mask.data(), {total}, torch::kFloat32);
  // Row r covers tokens [r·L, r·L + L] (L+1 tokens, overlapping the next row by one).
  auto index = torch::arange(rows).unsqueeze(1) * seq_len + torch::arange(seq_len + 1).unsqueeze(0);
  out.tokens = all_ids.index({index}).clone();
  out.loss_mask = all_mask.index({index}).clone();
  out.loss_mask.select(1, 0).zero_();  // the first token of a row has no predecessor here
  return out;
}

bool has_tags(const Triplet& t, const std::vector<std::string>& tags) {
  for (const auto& tag : tags)
    if (std::find(t.tags.begin(), t.tags.end(), tag) == t.tags.end()) return false;
  return true;
}

bool is_holdout(const std::string& id, double fraction) {
  if (fraction <= 0) return false;
  return static_cast<double>(fnv1a(id) % 1000000) < fraction * 1e6;
}

void add_exemplar_context(std::vector<Triplet>& triplets, double rate,
                          const std::vector<TaskSpec>& hgemm_shapes, const std::string& device) {
  if (rate <= 0) return;
  // Family key: the family tag and the backend tag ("family", <family>, <backend>, ...).
  std::map<std::string, std::vector<size_t>> by_family;
  for (size_t i = 0; i < triplets.size(); ++i) {
    const auto& t = triplets[i];
    if (t.source.rfind("family:", 0) == 0 && t.tags.size() >= 3)
      by_family[t.tags[1] + "/" + t.tags[2]].push_back(i);
  }
  std::vector<std::string> sibling_code(triplets.size());
  for (const auto& [key, members] : by_family) {
    if (members.size() < 2) continue;
    for (size_t i : members) {
      const uint64_t h = fnv1a(triplets[i].id, 0x5bd1e995ull);
      if (static_cast<double>(h % 1000000) >= rate * 1e6) continue;
      size_t j = members[(h >> 20) % members.size()];
      if (j == i) j = members[((h >> 20) + 1) % members.size()];
      sibling_code[i] = triplets[j].code;
    }
  }
  for (size_t i = 0; i < triplets.size(); ++i) {
    if (sibling_code[i].empty()) continue;
    Triplet& t = triplets[i];
    std::string block = exemplar_block(0, sibling_code[i], /*score=*/-1);
    const std::optional<FamilyTags> family = family_tags(t);
    if (hgemm_shapes.empty() || !family || family->kind != TaskKind::hgemm) {
      t.context += "\n" + block;
      continue;
    }
    const TaskSpec& shape = hgemm_shapes[fnv1a(t.id, 0x9e3779b97f4a7c15ull) % hgemm_shapes.size()];
    const TaskSpec task = hgemm_task(shape.m, shape.n, shape.k, family->layout, family->acc);
    PromptParts parts;
    parts.backend = family->backend == "host" ? "host" : "gpu";
    parts.device = device;
    t.instruction = task_instruction(task, parts);
    block.pop_back();  // the triplet template adds the newline before the code marker
    t.context = (device.empty() ? "" : speed_aim(device) + "\n") + block;
  }
}

Tokenizer stage_tokenizer(const StageContext& ctx, const std::vector<Triplet>& triplets,
                          fs::path* path_out) {
  if (!ctx.job.data.tokenizer.empty()) {
    *path_out = ctx.job.data.tokenizer;
    return Tokenizer::load(ctx.job.data.tokenizer);
  }
  const fs::path model_path = ctx.run_dir.root() / "tokenizer.model";
  *path_out = model_path;
  if (fs::exists(model_path)) return Tokenizer::load(model_path);
  // Train on about 8 MB of formatted documents, every k-th one so the sample spans the whole
  // corpus (CUDA headers and kernel families alike); blank lines separate the documents.
  // Debian's SentencePiece 0.1.97 BPE takes ~35 s on that with 2 cores (32 MB took minutes);
  // the pieces it learns pack the families' kernels as densely as a 32 MB sample's do.
  const fs::path text = ctx.run_dir.root() / "tokenizer_corpus.txt";
  {
    constexpr size_t kSampleBytes = 8u << 20;
    size_t total = 0;
    for (const auto& t : triplets)
      total += t.instruction.size() + t.context.size() + t.code.size() + 32;
    const size_t stride = std::max<size_t>(1, (total + kSampleBytes - 1) / kSampleBytes);
    std::ofstream out(text);
    for (size_t i = 0; i < triplets.size(); i += stride) out << format_triplet(triplets[i]) << "\n\n";
  }
  KRL_LOG(info) << "training a " << ctx.job.data.tokenizer_vocab_size
                << "-token SentencePiece tokenizer on the corpus";
  TokenizerTrainOptions opts;
  opts.vocab_size = ctx.job.data.tokenizer_vocab_size;
  Tokenizer tok = Tokenizer::train(text, model_path, opts);
  fs::remove(text);
  return tok;
}

namespace {

// Data order: sample g of the stage is row perm_e[g mod N] with e = g div N, perm_e a
// permutation seeded by (seed, e). A pure function of the step, so resume needs no state.
class SequenceOrder {
 public:
  SequenceOrder(int64_t n, uint64_t seed) : n_(n), seed_(seed) {}
  int64_t row(int64_t g) {
    const int64_t epoch = g / n_;
    if (epoch != epoch_) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ * 1000003ull + epoch);
      perm_ = torch::randperm(n_, gen, torch::kInt64);
      epoch_ = epoch;
    }
    return perm_[g % n_].item<int64_t>();
  }

 private:
  int64_t n_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  torch::Tensor perm_;
};

// Masked mean next-token loss of one micro-batch (tokens, mask [B, L+1]) and the number of
// targets Σ m (fp32 0-dim), both on the device. Cross-entropy as log-softmax in fp32 then NLL.
// With denominator > 0 the loss is Σ m·nll / denominator (a shard of a data-parallel batch).
struct MaskedLoss {
  torch::Tensor loss, targets;
};
MaskedLoss lm_loss(LlamaModel& model, const torch::Tensor& tokens, const torch::Tensor& mask,
                   double denominator = 0) {
  auto inputs = tokens.slice(1, 0, -1);
  auto targets = tokens.slice(1, 1);
  auto m = mask.slice(1, 1);
  auto logits = model->forward(inputs).to(torch::kFloat32);
  auto nll = torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  auto count = m.sum();
  auto total = (nll * m.reshape({-1})).sum();
  return {denominator > 0 ? total / denominator : total / count.clamp_min(1.0), count};
}

}  // namespace

LmStepStats lm_train_step(LlamaModel& model, torch::optim::AdamW& optimizer,
                          const std::vector<LmBatch>& micro_batches, double grad_clip,
                          bool fused_adamw, GradSync* sync) {
  TORCH_CHECK(!micro_batches.empty(), "lm_train_step needs at least one micro-batch");
  const bool cuda = model->device().is_cuda();
  const int64_t k = static_cast<int64_t>(micro_batches.size());
  optimizer.zero_grad();
  std::vector<torch::Tensor> parts;  // k losses, then k target counts, then the grad norm
  std::vector<torch::Tensor> counts;
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const auto& batch = micro_batches[i];
    if (sync && i + 1 == micro_batches.size()) sync->arm();  // the last backward overlaps the all-reduce
    MaskedLoss l;
    {
      AutocastGuard ac(cuda);
      l = lm_loss(model, batch.tokens, batch.loss_mask, batch.target_count);
    }
    (l.loss / static_cast<double>(k)).backward();
    parts.push_back(l.loss.detach());
    counts.push_back(batch.target_count > 0
                         ? torch::full({}, batch.target_count, l.targets.options())
                         : l.targets);
  }
  if (sync) {
    sync->finish();
    // Each rank's loss is its share of the global micro-batch loss: their sum is the loss.
    auto losses = torch::stack(parts).to(torch::kFloat32);
    dist::group()->all_reduce_sum(losses);
    for (int64_t i = 0; i < k; ++i) parts[i] = losses[i];
  }
  parts.insert(parts.end(), counts.begin(), counts.end());
  const auto grads = parameter_grads(*model);
  parts.push_back(grads.empty() ? torch::zeros({}, parts[0].options()) : total_grad_norm(grads));
  // The step's one host sync: everything the finite checks and the log need, in one copy.
  const auto host = torch::stack(parts).to(torch::kFloat64).cpu();
  const double* v = host.data_ptr<double>();
  LmStepStats stats;
  for (int64_t i = 0; i < k; ++i) {
    if (!std::isfinite(v[i]))
      throw std::runtime_error("pretrain loss is not finite (" + std::to_string(v[i]) +
                               ") in micro-batch " + std::to_string(i + 1) + " of " +
                               std::to_string(k) + "; refusing to take the optimizer step");
    stats.loss += v[i];
    stats.target_tokens += static_cast<int64_t>(v[k + i]);
  }
  stats.loss /= static_cast<double>(k);
  stats.grad_norm = v[2 * k];
  if (!std::isfinite(stats.grad_norm))
    throw std::runtime_error("gradient norm is not finite (" + std::to_string(stats.grad_norm) +
                             "); refusing to take the optimizer step");
  clip_grads(grads, stats.grad_norm, grad_clip);
  stats.fused_adamw = adamw_step(optimizer, fused_adamw);
  return stats;
}

namespace {

// The stage's data: triplets of data.corpus (tag-filtered, split by id hash), laid out with
// exemplar context, tokenized (a tokenizer trained for this run is trained by rank 0; the
// others load it after) and packed.
struct PretrainData {
  PackedSequences train, heldout;
  Tokenizer tokenizer;
  fs::path tokenizer_path;
};

PretrainData load_pretrain_data(const StageContext& ctx) {
  const StageConfig& stage = ctx.stage;
  const JobConfig& job = ctx.job;
  std::vector<Triplet> train_docs, heldout_docs;  // data.corpus is non-empty (check_job_config)
  for (size_t i = 0; i < job.data.corpus.size(); ++i) {
    const fs::path p = job.data.corpus[i];
    if (!fs::exists(p))
      throw UserError("data.corpus[" + std::to_string(i) + "]: '" + p.string() +
                      "' not found; make it with `kernelrl data build` or `kernelrl data synth`");
    for (auto& t : read_triplets(p)) {
      if (!has_tags(t, job.data.corpus_tags)) continue;
      (is_holdout(t.id, job.data.holdout_fraction) ? heldout_docs : train_docs).push_back(t);
    }
  }
  if (train_docs.empty() && !job.data.corpus_tags.empty())
    throw UserError("data.corpus_tags: no triplet of data.corpus carries every tag of the list");
  // HGEMM family triplets shown as hgemm_rl prompts use the shapes that stage will train on
  // (its training split: held-out shapes stay unseen).
  const std::vector<TaskSpec> hgemm_shapes =
      stage.exemplar_context > 0
          ? hgemm_split_part(hgemm_grid(job.data.hgemm_grid), job.data.hgemm_heldout, /*heldout=*/false)
          : std::vector<TaskSpec>{};
  add_exemplar_context(train_docs, stage.exemplar_context, hgemm_shapes, job.rollout.prompt_device);
  add_exemplar_context(heldout_docs, stage.exemplar_context, hgemm_shapes, job.rollout.prompt_device);
  dist::Group* group = dist::group();
  fs::path tokenizer_path;
  if (group && !dist::is_main()) group->barrier();
  Tokenizer tok = stage_tokenizer(ctx, train_docs, &tokenizer_path);
  if (group && dist::is_main()) group->barrier();
  const bool code_only = stage.loss_on == "code";
  PackedSequences train = pack_triplets(train_docs, tok, stage.seq_len, code_only);
  PackedSequences heldout = pack_triplets(heldout_docs, tok, stage.seq_len, code_only);
  if (train.size() == 0)
    throw UserError("data.corpus: too little text for one sequence of " +
                    std::to_string(stage.seq_len) + " tokens");
  KRL_LOG(info) << "pretrain data: " << train.documents << " documents, " << train.size()
                << " sequences of " << stage.seq_len << " tokens (" << heldout.size()
                << " held out); vocab " << tok.vocab_size();
  return {std::move(train), std::move(heldout), std::move(tok), tokenizer_path};
}

// The pretrain step on the stage loop. Data parallel: every rank holds the whole
// (deterministic) data; rank r computes rows [r·B/W, (r+1)·B/W) of each global micro-batch of
// B rows (check_job_config made B a multiple of W).
class PretrainStage final : public StageStep {
 public:
  PretrainStage(StageContext& ctx, const std::optional<fs::path>& resume)
      : stage_(ctx.stage),
        device_(resolve_device(ctx.job.run.device)),
        cuda_(device_.is_cuda()),
        data_(load_pretrain_data(ctx)),
        order_(data_.train.size(), static_cast<uint64_t>(ctx.job.run.seed)) {
    const JobConfig& job = ctx.job;
    policy_.tokenizer_path = data_.tokenizer_path;
    policy_.shape = resolve_shape(job.model, data_.tokenizer.vocab_size());
    if (!ctx.init_checkpoint.empty()) {
      policy_.model = load_checkpoint(ctx.init_checkpoint, device_, torch::kFloat32).model;
      policy_.shape = policy_.model->shape();
    } else {
      policy_.model = make_model(policy_.shape, device_, torch::kFloat32, static_cast<uint64_t>(job.run.seed));
    }
    policy_.model->set_activation_checkpointing(job.model.activation_checkpointing);
    policy_.optimizer = make_adamw(*policy_.model, stage_.optimizer);
    if (resume) {  // the weights; the loop restores the optimizer, step and RNG
      auto ck = load_checkpoint(*resume, device_, torch::kFloat32);
      torch::NoGradGuard ng;
      auto src = ck.model->named_parameters();
      for (auto& p : policy_.model->named_parameters()) p.value().copy_(src[p.key()]);
    }
  }

  StagePolicy& policy() override { return policy_; }

  void start(const TrainState&) override {
    KRL_LOG(info) << "model " << policy_.shape.describe() << " on " << device_.str()
                  << (cuda_ ? " (bf16 autocast)" : "");
    if (dist::group()) {
      KRL_LOG(info) << "pretrain: " << stage_.batch_size / dist::world_size() << " of "
                    << stage_.batch_size << " sequences per micro-batch on each rank";
    }
    policy_.model->train();
  }

  StepLog train_step(int64_t step, GradSync* sync) override {
    const auto t0 = std::chrono::steady_clock::now();
    const double lr = scheduled_lr(stage_.optimizer, step, stage_.steps);
    set_lr(*policy_.optimizer, lr);
    const LmStepStats stats = lm_train_step(policy_.model, *policy_.optimizer, micro_batches(step),
                                            stage_.optimizer.grad_clip, /*fused_adamw=*/true, sync);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    StepLog log;
    log.metrics = {{"loss", stats.loss},
                   {"lr", lr},
                   {"grad_norm", stats.grad_norm},
                   {"tokens_per_s", rows_per_step() * stage_.seq_len / seconds},
                   {"target_tokens", stats.target_tokens}};
    const int64_t done = step + 1;
    if ((stage_.eval_every > 0 && done % stage_.eval_every == 0) || done == stage_.steps) {
      const double el = heldout_loss();
      if (std::isfinite(el)) {
        log.metrics["eval_loss"] = el;
        log.metrics["eval_ppl"] = std::exp(el);
      }
    }
    char status[96];
    std::snprintf(status, sizeof status, "loss %.4f", stats.loss);
    log.status = status;
    return log;
  }

 private:
  int64_t rows_per_step() const { return stage_.batch_size * stage_.grad_accum; }

  // Host rows to the device without a sync: pinned staging, asynchronous copy (the caching host
  // allocator keeps the staging block until the copy has run).
  torch::Tensor upload(const torch::Tensor& t) const {
    return cuda_ ? t.pin_memory().to(device_, /*non_blocking=*/true) : t.to(device_);
  }

  // The step's grad_accum micro-batches, this rank's shard of each.
  std::vector<LmBatch> micro_batches(int64_t step) {
    const int64_t world = dist::world_size(), rank = dist::rank();
    const int64_t shard = stage_.batch_size / world;
    std::vector<LmBatch> out;
    for (int64_t micro = 0; micro < stage_.grad_accum; ++micro) {
      std::vector<int64_t> idx;
      for (int64_t j = 0; j < stage_.batch_size; ++j)
        idx.push_back(order_.row(step * rows_per_step() + micro * stage_.batch_size + j));
      auto rows = torch::tensor(idx);
      LmBatch batch;
      if (dist::group()) {
        // The loss denominator: targets of the whole micro-batch, known on every rank.
        batch.target_count = data_.train.loss_mask.index({rows}).slice(1, 1).sum().item<double>();
        rows = rows.slice(0, rank * shard, (rank + 1) * shard);
      }
      batch.tokens = upload(data_.train.tokens.index({rows}));
      batch.loss_mask = upload(data_.train.loss_mask.index({rows}));
      out.push_back(std::move(batch));
    }
    return out;
  }

  // Held-out loss: the mean over eval micro-batches of each one's masked mean loss. A rank
  // sums its share of a micro-batch's rows; the sums and target counts are all-reduced.
  double heldout_loss() {
    const PackedSequences& heldout = data_.heldout;
    if (heldout.size() == 0) return NAN;
    const int64_t world = dist::world_size(), rank = dist::rank();
    LlamaModel& model = policy_.model;
    torch::NoGradGuard ng;
    AutocastGuard ac(cuda_);
    model->eval();
    std::vector<torch::Tensor> sums, counts;
    for (int64_t b = 0; b < stage_.eval_batches && b * stage_.batch_size < heldout.size(); ++b) {
      const int64_t lo = b * stage_.batch_size, hi = std::min(heldout.size(), lo + stage_.batch_size);
      const int64_t n = hi - lo, mine_lo = lo + n * rank / world, mine_hi = lo + n * (rank + 1) / world;
      if (mine_hi == mine_lo) {
        sums.push_back(torch::zeros({}, torch::TensorOptions().device(device_)));
        counts.push_back(torch::zeros({}, torch::TensorOptions().device(device_)));
        continue;
      }
      auto rows = torch::arange(mine_lo, mine_hi);
      auto l = lm_loss(model, heldout.tokens.index({rows}).to(device_),
                       heldout.loss_mask.index({rows}).to(device_), /*denominator=*/1.0);
      sums.push_back(l.loss.to(torch::kFloat32));
      counts.push_back(l.targets.to(torch::kFloat32));
    }
    auto both = torch::stack({torch::stack(sums), torch::stack(counts)}).to(torch::kFloat64);
    if (dist::Group* group = dist::group()) group->all_reduce_sum(both);
    both = both.cpu();
    model->train();
    double sum = 0;
    for (int64_t b = 0; b < both.size(1); ++b)
      sum += both[0][b].item<double>() / std::max(1.0, both[1][b].item<double>());
    return sum / static_cast<double>(both.size(1));
  }

  const StageConfig& stage_;
  torch::Device device_;
  bool cuda_;
  PretrainData data_;
  SequenceOrder order_;
  StagePolicy policy_;
};

}  // namespace

fs::path run_pretrain_stage(StageContext& ctx) {
  const std::optional<fs::path> resume = resume_checkpoint(ctx);
  PretrainStage stage(ctx, resume);
  return run_stage_loop(ctx, stage, resume);
}

}  // namespace kernelrl
