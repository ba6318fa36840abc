#include "trainer/lift.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/metrics.h"
#include "data/corpus/minhash.h"
#include "data/families.h"
#include "data/family_portfolio.h"
#include "data/tasks/hgemm_split.h"
#include "data/tasks/task_ops.h"
#include "data/tasks/task_suite.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "reward/evaluator.h"
#include "reward/screen.h"
#include "rollout/group_sampler.h"
#include "rollout/prompt.h"
#include "rollout/seed_grid.h"
#include "trainer/grpo_stage.h"
#include "trainer/job_config.h"
#include "trainer/train_utils.h"

namespace kernelrl {

// ---- speed-annotated pretraining examples -------------------------------------------------

std::vector<Triplet> speed_annotated_triplets(const std::vector<MeasuredShape>& shapes,
                                              const std::string& backend,
                                              const std::string& reference) {
  std::vector<Triplet> out;
  for (const auto& s : shapes) {
    if (s.task.holdout) continue;
    const auto ref = s.baselines_us.find(reference);
    const double ref_us = ref == s.baselines_us.end() ? 0 : ref->second;
    PromptParts parts;
    parts.backend = backend;
    parts.device = s.device;
    const std::string instruction = task_instruction(s.task, parts);
    const int64_t n = static_cast<int64_t>(s.kernels.size());
    for (int64_t r = 0; r < n; ++r) {
      const MeasuredKernel& k = s.kernels[r];
      Triplet t;
      t.id = "annotated:" + s.device + ":" + hgemm_split_key(s.task) + ":" + k.name;
      t.instruction = instruction;
      t.context = speed_annotation(r + 1, n, s.device, k.device_us, s.timing, reference, ref_us);
      t.code = k.source;
      t.source = "annotated:" + k.origin;
      t.tags = {"annotated", backend, hgemm_op().name, "layout_" + s.task.layout, "acc_" + s.task.acc,
                "rank_" + std::to_string(r + 1)};
      out.push_back(std::move(t));
    }
  }
  return out;
}

// ---- novelty ------------------------------------------------------------------------------

std::vector<std::string> novelty_tokens(const std::string& source) {
  return code_tokens(strip_comments_and_strings(source));
}

double token_edit_distance(const std::vector<std::string>& a, const std::vector<std::string>& b,
                           double cap) {
  const size_t n = a.size(), m = b.size(), longer = std::max(n, m);
  if (longer == 0) return 0;
  cap = std::clamp(cap, 0.0, 1.0);
  // Distances >= w are reported as cap: only the band |i - j| < w of the DP matters.
  const int64_t w = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(cap * static_cast<double>(longer))));
  if (static_cast<int64_t>(n > m ? n - m : m - n) >= w) return cap;
  const int64_t big = w;  // anything >= w is "too far"
  std::vector<int64_t> prev(m + 1, big), cur(m + 1, big);
  for (size_t j = 0; j <= m && static_cast<int64_t>(j) < w; ++j) prev[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= n; ++i) {
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(i) - w + 1);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(m), static_cast<int64_t>(i) + w - 1);
    std::fill(cur.begin(), cur.end(), big);
    if (lo == 0) cur[0] = std::min<int64_t>(static_cast<int64_t>(i), big);
    int64_t row_min = big;
    for (int64_t j = std::max<int64_t>(1, lo); j <= hi; ++j) {
      int64_t d = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d = std::min({d, prev[j] + 1, cur[j - 1] + 1, big});
      cur[j] = d;
      row_min = std::min(row_min, d);
    }
    if (lo == 0) row_min = std::min(row_min, cur[0]);
    if (row_min >= big) return cap;  // every path is already too far
    std::swap(prev, cur);
  }
  const int64_t d = prev[m];
  return d >= big ? cap : std::min(cap, static_cast<double>(d) / static_cast<double>(longer));
}

namespace {

// Token bags for a cheap lower bound: edit distance >= max(|A \ B|, |B \ A|) as multisets.
using Bag = std::unordered_map<std::string, int64_t>;
Bag bag_of(const std::vector<std::string>& t) {
  Bag b;
  for (const auto& x : t) ++b[x];
  return b;
}
int64_t bag_bound(const Bag& a, const Bag& b) {
  int64_t only_a = 0, only_b = 0;
  for (const auto& [k, n] : a) {
    auto it = b.find(k);
    only_a += std::max<int64_t>(0, n - (it == b.end() ? 0 : it->second));
  }
  for (const auto& [k, n] : b) {
    auto it = a.find(k);
    only_b += std::max<int64_t>(0, n - (it == a.end() ? 0 : it->second));
  }
  return std::max(only_a, only_b);
}

// The family variants of a task (its layout and accumulation, runnable on the device), as
// tokens, for the near-copy test.
struct FamilyIndex {
  struct Entry {
    std::string family, name;
    std::vector<std::string> tokens;
    Bag bag;
  };
  std::vector<Entry> entries;

  // The smallest normalized token edit distance to any variant, capped at `cap`.
  double min_distance(const std::string& source, double cap) const {
    const auto t = novelty_tokens(source);
    const Bag b = bag_of(t);
    std::vector<std::pair<double, const Entry*>> order;
    for (const auto& e : entries) {
      const double longer = static_cast<double>(std::max(t.size(), e.tokens.size()));
      const double bound = longer > 0 ? static_cast<double>(bag_bound(b, e.bag)) / longer : 0;
      if (bound < cap) order.push_back({bound, &e});
    }
    std::sort(order.begin(), order.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    double best = cap;
    for (const auto& [bound, e] : order) {
      if (bound >= best) break;
      best = std::min(best, token_edit_distance(t, e->tokens, best));
    }
    return best;
  }
};

const FamilyIndex& family_index(const TaskSpec& task, const std::string& backend, const std::string& arch) {
  static std::map<std::string, FamilyIndex> cache;
  const std::string key = backend + "|" + arch + "|" + task.layout + "|" + task.acc;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  FamilyIndex idx;
  for (const auto& v : variants_for_task(task, backend == "gpu" ? "cuda" : "host", arch)) {
    FamilyIndex::Entry e{v.family, v.name, novelty_tokens(v.source), {}};
    e.bag = bag_of(e.tokens);
    idx.entries.push_back(std::move(e));
  }
  return cache.emplace(key, std::move(idx)).first->second;
}

// "stage" or "stage/step_N" of a run -> the checkpoint directory and its step.
std::pair<fs::path, int64_t> resolve_checkpoint(const fs::path& run_dir, const std::string& spec) {
  const fs::path ck = run_dir / "checkpoints";
  const size_t slash = spec.find('/');
  fs::path dir;
  if (slash == std::string::npos) {
    auto latest = latest_stage_checkpoint(ck, spec);
    if (!latest) throw UserError("lift: stage \"" + spec + "\" has no checkpoint in " + run_dir.string());
    dir = *latest;
  } else {
    dir = ck / spec;
    if (!fs::exists(dir / "checkpoint.json"))
      throw UserError("lift: no checkpoint " + dir.string());
  }
  int64_t step = -1;
  const std::string name = fs::canonical(dir).filename().string();
  if (name.rfind("step_", 0) == 0) step = std::stoll(name.substr(5));
  return {dir, step};
}

struct Policies {
  std::string before, after;  // checkpoint specs
};

Policies default_policies(const JobConfig& job, const LiftOptions& o) {
  Policies p{o.before, o.after};
  const auto& stages = job.trainer.stages;
  int last_hgemm = -1;
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].kind == "hgemm_rl" && stages[i].enabled) last_hgemm = static_cast<int>(i);
  if (p.after.empty()) {
    if (last_hgemm < 0) throw UserError("lift: the run's job has no hgemm_rl stage; pass --after");
    p.after = stages[last_hgemm].name;
  }
  if (p.before.empty()) {
    // The policy the hgemm_rl stage started from: the newest checkpoint of the stage before it.
    for (int i = (last_hgemm < 0 ? static_cast<int>(stages.size()) : last_hgemm) - 1; i >= 0; --i)
      if (stages[i].enabled) {
        p.before = stages[i].name;
        break;
      }
    if (p.before.empty()) throw UserError("lift: no stage before hgemm_rl; pass --before");
  }
  return p;
}

double best_passed(const std::vector<const EvalResult*>& rs) {
  double best = 0;
  for (const EvalResult* r : rs)
    if (r && r->passed() && std::isfinite(r->speedup)) best = std::max(best, r->speedup);
  return best;
}

// The shapes in an order that takes one from each size bin in turn (bins ascending, each bin's
// shapes in grid order), so the first max_shapes of it cover the size range.
std::vector<TaskSpec> spread_over_bins(const std::vector<TaskSpec>& tasks) {
  std::map<int, std::vector<const TaskSpec*>> bins;
  for (const auto& t : tasks) bins[hgemm_size_bin(t)].push_back(&t);
  std::vector<TaskSpec> out;
  for (size_t round = 0; out.size() < tasks.size(); ++round)
    for (const auto& [bin, members] : bins)
      if (round < members.size()) out.push_back(*members[round]);
  return out;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

nlohmann::json to_json(const LiftShape& s) {
  return {{"task", s.task},
          {"shape", s.shape},
          {"m", s.m},
          {"n", s.n},
          {"k", s.k},
          {"layout", s.layout},
          {"acc", s.acc},
          {"before", s.before},
          {"after", s.after},
          {"sweep", s.sweep},
          {"exemplar", s.exemplar},
          {"before_passed", s.before_passed},
          {"after_passed", s.after_passed},
          {"samples", s.samples},
          {"before_novel", s.before_novel},
          {"after_novel", s.after_novel},
          {"after_min_distance", s.after_min_distance},
          {"sweep_variant", s.sweep_variant},
          {"after_kernel", s.after_kernel},
          {"after_hash", s.after_hash},
          {"after_step", s.after_step},
          {"reference", s.reference}};
}

LiftShape lift_shape_from_json(const nlohmann::json& j) {
  LiftShape s;
  s.task = j.at("task").get<std::string>();
  s.shape = j.at("shape").get<std::string>();
  s.m = j.at("m").get<int64_t>();
  s.n = j.at("n").get<int64_t>();
  s.k = j.at("k").get<int64_t>();
  s.layout = j.at("layout").get<std::string>();
  s.acc = j.at("acc").get<std::string>();
  s.before = j.at("before").get<double>();
  s.after = j.at("after").get<double>();
  s.sweep = j.at("sweep").get<double>();
  s.exemplar = j.at("exemplar").get<double>();
  s.before_passed = j.at("before_passed").get<int64_t>();
  s.after_passed = j.at("after_passed").get<int64_t>();
  s.samples = j.at("samples").get<int64_t>();
  s.before_novel = j.value("before_novel", int64_t{0});
  s.after_novel = j.value("after_novel", int64_t{0});
  s.after_min_distance = j.value("after_min_distance", 1.0);
  s.sweep_variant = j.value("sweep_variant", "");
  s.after_kernel = j.value("after_kernel", "");
  s.after_hash = j.value("after_hash", "");
  s.after_step = j.value("after_step", int64_t{-1});
  s.reference = j.value("reference", "");
  return s;
}

namespace {

// A held-out shape's prompt (its exemplars, drawn once) and the before-policy's completions:
// a line of out/prompts.jsonl, so the before side can be sampled on one machine and the after
// side measured on another with the same prompt.
struct PromptRecord {
  std::string task;
  std::vector<Exemplar> exemplars;
  std::vector<std::string> before;  // completion texts
};

nlohmann::json to_json(const PromptRecord& r) {
  nlohmann::json ex = nlohmann::json::array();
  for (const auto& e : r.exemplars) ex.push_back({{"id", e.id}, {"source", e.source}, {"score", e.score}});
  return {{"task", r.task}, {"exemplars", ex}, {"before", r.before}};
}

PromptRecord prompt_record_from_json(const nlohmann::json& j) {
  PromptRecord r;
  r.task = j.at("task").get<std::string>();
  for (const auto& e : j.at("exemplars"))
    r.exemplars.push_back({e.at("id").get<std::string>(), e.at("source").get<std::string>(),
                           e.at("score").get<double>()});
  r.before = j.at("before").get<std::vector<std::string>>();
  return r;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  if (!fs::exists(p)) return out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

void append_jsonl(const fs::path& p, const nlohmann::json& j) {
  std::ofstream out(p, std::ios::app);
  out << j.dump() << "\n";
  out.flush();
  if (!out) throw std::runtime_error("lift: cannot append to " + p.string());
}

}  // namespace

std::vector<LiftShape> measure_lift(const LiftOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const fs::path config_path = o.run_dir / "config.yaml";
  if (!fs::exists(config_path))
    throw UserError("lift: '" + o.run_dir.string() + "' holds no config.yaml (not a run directory)");
  if (o.out.empty()) throw UserError("lift: --out DIR is required");
  if (o.samples < 1) throw UserError("lift: --samples must be at least 1");
  if (o.phase != "before" && o.phase != "all")
    throw UserError("lift: --phase: expected before or all, got \"" + o.phase + "\"");
  const JobConfig job = load_job_config(config_path, o.set);
  const std::vector<TaskSpec> heldout = spread_over_bins(
      hgemm_split_part(hgemm_grid(job.data.hgemm_grid), job.data.hgemm_heldout, /*heldout=*/true));
  if (heldout.empty())
    throw UserError("lift: the run holds no HGEMM shape out (data.hgemm_heldout is " +
                    std::to_string(job.data.hgemm_heldout) + "): nothing to measure on");
  const Policies pol = default_policies(job, o);

  // What earlier calls measured (resume): rows, and prompts with the before side sampled.
  fs::create_directories(o.out / "kernels");
  const fs::path rows_path = o.out / "per_shape.jsonl", prompts_path = o.out / "prompts.jsonl";
  std::vector<LiftShape> rows;
  std::set<std::string> done;
  for (const auto& j : read_jsonl(rows_path)) {
    rows.push_back(lift_shape_from_json(j));
    done.insert(rows.back().task);
  }
  std::map<std::string, PromptRecord> prompts;
  for (const auto& j : read_jsonl(prompts_path)) {
    PromptRecord r = prompt_record_from_json(j);
    prompts[r.task] = std::move(r);
  }

  const torch::Device device = resolve_device(job.run.device);
  std::optional<Checkpoint> before, after;
  int64_t after_step = -1;
  auto load = [&](const std::string& spec, int64_t* step) {
    auto [dir, s] = resolve_checkpoint(o.run_dir, spec);
    if (step) *step = s;
    Checkpoint ck = load_checkpoint(dir, device);
    if (!ck.tokenizer_path) throw UserError("lift: checkpoint " + dir.string() + " carries no tokenizer");
    ck.model->eval();
    return ck;
  };
  if (o.phase == "all") after = load(pol.after, &after_step);
  auto before_policy = [&]() -> Checkpoint& {
    if (!before) before = load(pol.before, nullptr);
    return *before;
  };
  const Tokenizer tok = Tokenizer::load(after ? *after->tokenizer_path : *before_policy().tokenizer_path);
  const int64_t max_seq_len = after ? after->shape.max_seq_len : before_policy().shape.max_seq_len;
  Evaluator ev(job.reward, o.out / "lift.sqlite");
  const std::string backend = ev.backend();
  const std::string reference = backend == "gpu" ? "lt-auto" : "torch";
  std::vector<MeasuredShape> sweep_grid;
  if (!o.sweep_csv.empty())
    sweep_grid = read_family_grid_csv(o.sweep_csv, o.device.empty() ? ev.device_name() : o.device);
  std::vector<std::string> families;
  for (const auto& f : kernel_families())
    if (f.kind == TaskKind::hgemm && f.backends.find(backend == "gpu" ? "cuda" : "host") != std::string::npos &&
        arch_runs(f.arch, ev.arch()))
      families.push_back(f.name);
  const std::string ext = backend == "gpu" ? ".cu" : ".cpp";

  auto parts_of = [&] {
    PromptParts parts;
    parts.response_format = job.rollout.response_format;
    parts.backend = backend;
    parts.prompt_format = job.model.prompt_format;
    parts.device = job.rollout.prompt_device;
    return parts;
  };
  ExemplarFit fit(tok, max_seq_len, job.rollout.sampling.max_new_tokens);
  auto prompt_of = [&](const TaskSpec& task, const std::vector<Exemplar>& exemplars) {
    PromptParts parts = parts_of();
    parts.exemplars = exemplars;
    return make_prompt_group(task, parts, tok, max_seq_len, job.rollout.sampling.max_new_tokens);
  };
  auto sample = [&](Checkpoint& ck, const PromptGroup& group) {
    torch::NoGradGuard ng;
    return sample_groups(ck.model, tok, {group}, o.samples, job.rollout.sampling,
                         job.rollout.response_format, splitmix64(o.seed + fnv1a(group.task.name)));
  };
  // The prompt of a held-out shape: exemplars drawn from its family variants, evaluated here (a
  // held-out shape has no pool in the run), as the RL stage seeds a new task's pool; then the
  // before-policy's N samples.
  // rollout.seed_grid: as the RL stage seeds its pools (the held-out shape's own row excluded).
  const std::unique_ptr<SeedGrid> seed_grid = backend == "gpu" ? job_seed_grid(job) : nullptr;
  auto record_of = [&](const TaskSpec& task) {
    PromptRecord r;
    r.task = task.name;
    const std::vector<std::string> seeds = seed_sources(ev, task, job.rollout.seed_exemplars, seed_grid.get());
    std::vector<Exemplar> pool;
    auto rs = ev.evaluate(task, seeds);
    for (size_t i = 0; i < rs.size(); ++i)
      if (rs[i].passed()) pool.push_back({rs[i].hash, seeds[i], rs[i].reward});
    std::sort(pool.begin(), pool.end(), [](const auto& a, const auto& b) { return a.score > b.score; });
    pool = fit.filter(task, parts_of(), pool);  // as the RL stage draws: from what fits
    std::mt19937_64 erng(splitmix64(o.seed ^ fnv1a(task.name)));
    r.exemplars = sample_exemplars(pool, job.rollout.n_exemplars, job.rollout.n_buckets,
                                   job.rollout.exemplar_temperature, erng);
    for (const auto& x : sample(before_policy(), prompt_of(task, r.exemplars))) r.before.push_back(x.text);
    append_jsonl(prompts_path, to_json(r));
    return r;
  };

  int64_t measured = 0;
  for (const TaskSpec& task : heldout) {
    if (done.count(task.name)) continue;
    if (o.max_shapes > 0 && static_cast<int64_t>(o.phase == "all" ? rows.size() : prompts.size()) >= o.max_shapes)
      break;
    if (o.time_budget_s > 0 && std::chrono::duration<double>(Clock::now() - t0).count() > o.time_budget_s) {
      KRL_LOG(info) << "lift: time budget spent after " << measured << " shape(s); run again to go on";
      break;
    }
    auto have = prompts.find(task.name);
    if (have == prompts.end()) have = prompts.emplace(task.name, record_of(task)).first;
    ++measured;
    if (o.phase == "before") continue;
    const PromptRecord& rec = have->second;

    // 1. The same prompt for both policies; the after policy's N samples with the same seed.
    const PromptGroup group = prompt_of(task, rec.exemplars);
    std::vector<std::string> shown;  // the exemplars that fit the prompt
    for (const auto& e : rec.exemplars)
      if (group.prompt.find(e.source) != std::string::npos) shown.push_back(e.source);
    std::vector<ParsedResponse> b_rows, a_rows;
    for (const auto& text : rec.before) b_rows.push_back(parse_response(text, job.rollout.response_format));
    for (const auto& x : sample(*after, group)) a_rows.push_back(x.parsed);

    // 2. The sweep's best family variant at the shape: named by the sweep CSV, or the shape's
    //    family portfolio evaluated here.
    std::vector<std::pair<std::string, std::string>> sweep;  // name, source
    if (!sweep_grid.empty()) {
      for (const auto& s : sweep_grid)
        if (s.task.name == task.name && !s.kernels.empty())
          sweep.push_back({s.kernels[0].name, s.kernels[0].source});
    } else {
      PortfolioOptions po;
      po.per_family = backend == "gpu" ? 3 : 0;
      for (auto& v : shape_portfolio(task, families, ev.arch(), po)) sweep.push_back({v.name, v.source});
    }

    // 3. Everything in one evaluator batch (distinct sources once): the comparisons share a run.
    std::vector<std::string> sources;
    std::map<std::string, size_t> index;
    auto add = [&](const std::string& src) {
      if (index.emplace(src, sources.size()).second) sources.push_back(src);
    };
    for (const auto* rs : {&b_rows, &a_rows})
      for (const auto& r : *rs)
        if (r.ok) add(r.code);
    for (const auto& [name, src] : sweep) add(src);
    for (const auto& src : shown) add(src);
    std::vector<EvalItem> items;
    for (const auto& src : sources) items.push_back({task, src});
    const std::vector<EvalResult> results = ev.evaluate_batch(items);
    auto result_of = [&](const std::string& src) -> const EvalResult* {
      auto it = index.find(src);
      return it == index.end() ? nullptr : &results[it->second];
    };

    // 4. The row.
    LiftShape row;
    row.task = task.name;
    row.shape = std::to_string(task.m) + "x" + std::to_string(task.n) + "x" + std::to_string(task.k);
    row.m = task.m, row.n = task.n, row.k = task.k;
    row.layout = task.layout, row.acc = task.acc;
    row.samples = o.samples;
    row.reference = reference;
    row.after_step = after_step;
    const FamilyIndex& fam = family_index(task, backend, ev.arch());
    auto policy_side = [&](const std::vector<ParsedResponse>& rs, int64_t* passed, int64_t* novel,
                           const ParsedResponse** best) {
      std::vector<const EvalResult*> evals;
      std::map<std::string, bool> novel_of;  // distinct sources once
      double best_speedup = 0;
      for (const auto& r : rs) {
        if (!r.ok) continue;
        const EvalResult* e = result_of(r.code);
        evals.push_back(e);
        if (!e || !e->passed()) continue;
        ++*passed;
        auto it = novel_of.find(r.code);
        if (it == novel_of.end())
          it = novel_of.emplace(r.code, fam.min_distance(r.code, o.novelty_threshold) >= o.novelty_threshold).first;
        *novel += it->second;
        if (e->speedup > best_speedup) best_speedup = e->speedup, *best = &r;
      }
      return best_passed(evals);
    };
    const ParsedResponse* best_before = nullptr;
    const ParsedResponse* best_after = nullptr;
    row.before = policy_side(b_rows, &row.before_passed, &row.before_novel, &best_before);
    row.after = policy_side(a_rows, &row.after_passed, &row.after_novel, &best_after);
    double sweep_best = 0;
    std::vector<const EvalResult*> sweep_evals, shown_evals;
    for (const auto& [name, src] : sweep) {
      const EvalResult* e = result_of(src);
      sweep_evals.push_back(e);
      if (e && e->passed() && e->speedup > sweep_best) sweep_best = e->speedup, row.sweep_variant = name;
    }
    row.sweep = best_passed(sweep_evals);
    if (row.sweep <= 0)
      for (const auto& [name, src] : sweep) {
        if (const EvalResult* e = result_of(src)) {
          KRL_LOG(warn) << "lift " << task.name << ": the sweep's " << name << " did not pass: "
                        << status_name(e->status) << (e->reason.empty() ? "" : " (" + e->reason.substr(0, 300) + ")");
        }
      }
    for (const auto& src : shown) shown_evals.push_back(result_of(src));
    row.exemplar = best_passed(shown_evals);
    if (best_after) {
      row.after_min_distance = fam.min_distance(best_after->code, 2 * o.novelty_threshold);
      row.after_kernel = "kernels/" + task.name + "_after" + ext;
      row.after_hash = result_of(best_after->code)->hash;
      atomic_write(o.out / row.after_kernel, best_after->code);
    }
    if (best_before) atomic_write(o.out / "kernels" / (task.name + "_before" + ext), best_before->code);
    // Every sample's verdict, one line per shape (samples.jsonl), so that a run shows which kind of
    // sample passed and how fast, not only each side's best: status (the evaluator's, or "format"
    // for a response with no code), speedup and hash by sample index; the after side's code too
    // (the before side's is in prompts.jsonl). Written just
    // before the row: a shape measured again after a stop between the two appends has two lines,
    // and the last one counts.
    nlohmann::json verdicts = {{"task", task.name}};
    for (const auto& [side, rs] : {std::pair{"before", &b_rows}, std::pair{"after", &a_rows}}) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& r : *rs) {
        const EvalResult* e = r.ok ? result_of(r.code) : nullptr;
        nlohmann::json v = {{"status", !r.ok ? std::string("format") : e ? status_name(e->status) : "not_evaluated"},
                            {"speedup", e && e->passed() && std::isfinite(e->speedup) ? e->speedup : 0.0},
                            {"hash", e ? e->hash : ""}};
        if (std::string(side) == "after") v["code"] = r.ok ? r.code : "";
        list.push_back(std::move(v));
      }
      verdicts[side] = std::move(list);
    }
    append_jsonl(o.out / "samples.jsonl", verdicts);
    append_jsonl(rows_path, to_json(row));
    KRL_LOG(info) << "lift " << task.name << ": best of " << o.samples << " before " << row.before
                  << "x (" << row.before_passed << " passed), after " << row.after << "x ("
                  << row.after_passed << " passed, " << row.after_novel << " novel), sweep "
                  << row.sweep << "x, best exemplar " << row.exemplar << "x";
    rows.push_back(std::move(row));
  }
  return rows;
}

LiftSummary lift_summary(const std::vector<LiftShape>& rows) {
  LiftSummary s;
  s.shapes = static_cast<int64_t>(rows.size());
  if (rows.empty()) return s;
  const double n = static_cast<double>(rows.size());
  int64_t passed_after = 0, passed_before = 0, novel_after = 0, novel_before = 0;
  for (const auto& r : rows) {
    s.samples = r.samples;
    s.mean_before += r.before / n;
    s.mean_after += r.after / n;
    s.mean_sweep += r.sweep / n;
    s.mean_exemplar += r.exemplar / n;
    s.share_after_ge_1 += (r.after >= 1.0) / n;
    s.share_before_ge_1 += (r.before >= 1.0) / n;
    // A shape whose sweep variant did not pass has nothing to beat: not a win over the sweep.
    const bool swept = r.sweep > 0;
    s.sweep_missing += !swept;
    s.share_after_beats_sweep += (swept && r.after > r.sweep) / n;
    s.share_after_beats_exemplar += (r.after > r.exemplar) / n;
    s.share_after_beats_sweep_2pct += (swept && r.after >= 1.02 * r.sweep) / n;
    passed_after += r.after_passed, passed_before += r.before_passed;
    novel_after += r.after_novel, novel_before += r.before_novel;
    if (static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k) < std::ldexp(1.0, 27)) {
      ++s.small_shapes;
      s.mean_after_small += r.after;
    }
  }
  if (s.small_shapes > 0) s.mean_after_small /= static_cast<double>(s.small_shapes);
  s.novelty_after = passed_after ? static_cast<double>(novel_after) / passed_after : 0;
  s.novelty_before = passed_before ? static_cast<double>(novel_before) / passed_before : 0;
  s.lift = s.mean_before > 0 ? s.mean_after / s.mean_before - 1 : 0;
  return s;
}

nlohmann::json to_json(const LiftSummary& s) {
  return {{"shapes", s.shapes},
          {"samples", s.samples},
          {"mean_before", s.mean_before},
          {"mean_after", s.mean_after},
          {"mean_sweep", s.mean_sweep},
          {"mean_exemplar", s.mean_exemplar},
          {"share_after_ge_1", s.share_after_ge_1},
          {"share_before_ge_1", s.share_before_ge_1},
          {"share_after_beats_sweep", s.share_after_beats_sweep},
          {"share_after_beats_sweep_2pct", s.share_after_beats_sweep_2pct},
          {"share_after_beats_exemplar", s.share_after_beats_exemplar},
          {"sweep_missing", s.sweep_missing},
          {"novelty_after", s.novelty_after},
          {"novelty_before", s.novelty_before},
          {"lift", s.lift},
          {"small_shapes", s.small_shapes},
          {"mean_after_small", s.mean_after_small}};
}

std::string format_lift(const std::vector<LiftShape>& rows, const LiftSummary& s) {
  std::ostringstream out;
  char line[512];
  const std::string ref = rows.empty() ? "reference" : rows.front().reference;
  out << "Best of " << s.samples << " samples per held-out shape, speedup over " << ref
      << " (0 = none passed); sweep = the sweep's best family variant, exemplar = the best "
         "exemplar the prompt showed, all timed in one evaluator batch per shape.\n\n";
  out << "| shape | layout | acc | before | after | sweep | exemplar | passed b/a | novel a | "
         "distance | sweep variant |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "| %s | %s | %s | %.3f | %.3f | %.3f | %.3f | %lld/%lld | %lld | %.3f | %s |\n",
                  r.shape.c_str(), r.layout.c_str(), r.acc.c_str(), r.before, r.after, r.sweep,
                  r.exemplar, static_cast<long long>(r.before_passed),
                  static_cast<long long>(r.after_passed), static_cast<long long>(r.after_novel),
                  r.after_min_distance, r.sweep_variant.c_str());
    out << line;
  }
  auto mark = [](bool met) { return met ? "met" : "missed"; };
  std::snprintf(line, sizeof line,
                "\n%lld shapes. Mean best-of-%lld: before %.3fx, after %.3fx (lift %+.1f %%), "
                "sweep %.3fx, exemplar %.3fx.\nShare >= 1.0x: before %.0f %%, after %.0f %%. "
                "After beats sweep at %.0f %% (by >= 2 %% at %.0f %%), beats the exemplar at %.0f %%.\n"
                "Novelty (passing samples at token edit distance >= threshold from every family "
                "variant): after %.0f %%, before %.0f %%.\n",
                static_cast<long long>(s.shapes), static_cast<long long>(s.samples), s.mean_before,
                s.mean_after, 100 * s.lift, s.mean_sweep, s.mean_exemplar, 100 * s.share_before_ge_1,
                100 * s.share_after_ge_1, 100 * s.share_after_beats_sweep,
                100 * s.share_after_beats_sweep_2pct, 100 * s.share_after_beats_exemplar,
                100 * s.novelty_after, 100 * s.novelty_before);
  out << line;
  if (s.sweep_missing > 0)
    out << "No sweep variant passed at " << s.sweep_missing << " of " << s.shapes
        << " shapes (the evaluator log names why): those count as not beaten.\n";
  std::snprintf(line, sizeof line,
                "Targets: lift >= +10 %%: %s (%+.1f %%); RL beats the sweep by >= 2 %% at >= 10 %% of "
                "shapes: %s (%.0f %%, before re-verification); below 2^27 mean after >= 1.0x: %s "
                "(%.3fx over %lld shapes).\n",
                mark(s.lift >= 0.10), 100 * s.lift, mark(s.share_after_beats_sweep_2pct >= 0.10),
                100 * s.share_after_beats_sweep_2pct,
                s.small_shapes ? mark(s.mean_after_small >= 1.0) : "n/a", s.mean_after_small,
                static_cast<long long>(s.small_shapes));
  out << line;
  return out.str();
}

std::string lift_curves_csv(const fs::path& run_dir, const std::string& stage) {
  std::string csv = "step,reward_mean,sampled_correct_rate,correct_rate,best_speedup,updates\n";
  const fs::path metrics = run_dir / "metrics.jsonl";
  if (!fs::exists(metrics)) throw UserError("lift: " + run_dir.string() + " has no metrics.jsonl");
  char line[256];
  for (const auto& r : MetricsWriter::read_all(metrics)) {
    if (r.value("stage", "") != stage || !r.contains("reward_mean")) continue;
    std::snprintf(line, sizeof line, "%lld,%.6g,%.6g,%.6g,%.6g,%lld\n",
                  static_cast<long long>(r.value("step", int64_t{0})), r.value("reward_mean", 0.0),
                  r.value("sampled_correct_rate", r.value("correct_rate", 0.0)),
                  r.value("correct_rate", 0.0), r.value("best_speedup", 0.0),
                  static_cast<long long>(r.value("updates", int64_t{0})));
    csv += line;
  }
  return csv;
}

std::vector<Discovery> verify_discoveries(const LiftOptions& o, const std::vector<LiftShape>& rows,
                                          double margin, int family_list) {
  const JobConfig job = load_job_config(o.run_dir / "config.yaml", o.set);
  const Policies pol = default_policies(job, o);
  const std::string stage = pol.after.substr(0, pol.after.find('/'));
  std::vector<const LiftShape*> todo;
  for (const auto& r : rows)
    if (r.after > 0 && r.sweep > 0 && r.after >= margin * r.sweep && !r.after_kernel.empty())
      todo.push_back(&r);
  std::vector<Discovery> out;
  if (todo.empty()) return out;
  // A fresh evaluation: a new store (baselines re-measured, nothing reused).
  const fs::path store = o.out / "verify.sqlite";
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(store.string() + suffix);
  RewardConfig cfg = job.reward;
  cfg.refresh_baselines = true;
  Evaluator ev(cfg, store);
  std::vector<MeasuredShape> sweep_grid;
  if (!o.sweep_csv.empty())
    sweep_grid = read_family_grid_csv(o.sweep_csv, o.device.empty() ? ev.device_name() : o.device);
  for (const LiftShape* r : todo) {
    const TaskSpec task = hgemm_task(r->m, r->n, r->k, r->layout, r->acc);
    const std::string kernel = read_file(o.out / r->after_kernel, "lift kernel");
    std::string sweep_source;
    for (const auto& s : sweep_grid)
      if (s.task.name == task.name && !s.kernels.empty()) sweep_source = s.kernels[0].source;
    if (sweep_source.empty())
      for (const auto& v : variants_for_task(task, ev.backend() == "gpu" ? "cuda" : "host", ev.arch()))
        if (v.name == r->sweep_variant) sweep_source = v.source;
    if (sweep_source.empty()) {
      KRL_LOG(warn) << "lift verify " << task.name << ": the sweep variant " << r->sweep_variant
                    << " is not generated by this build; skipped";
      continue;
    }
    // The family's list at this shape, timed in the same batch (sources once each). A member
    // may be the RL kernel itself (a copy of a variant) or the sweep's variant: `members` holds
    // the indices into `sources` of every member, those two included where they are one.
    std::vector<std::string> sources = {kernel, sweep_source};
    std::vector<std::string> names = {"the RL kernel", r->sweep_variant};
    std::vector<size_t> members;
    if (family_list >= 0) {
      const std::string family = hgemm_family_of(r->sweep_variant);
      if (family.empty())
        throw UserError("lift promote: the sweep variant '" + r->sweep_variant +
                        "' is no HGEMM family's: no family list to check against");
      PortfolioOptions po;
      po.per_family = family_list;
      std::vector<KernelVariant> list = shape_portfolio(task, {family}, ev.arch(), po);
      members.push_back(1);  // the sweep's variant is one of the family's
      for (const auto& v : list) {
        const size_t at = static_cast<size_t>(std::find(sources.begin(), sources.end(), v.source) - sources.begin());
        if (at == sources.size()) {
          sources.push_back(v.source);
          names.push_back(v.name);
        } else if (at == 0) {
          names[0] = v.name + " (the RL kernel's copy)";
        }
        if (std::find(members.begin(), members.end(), at) == members.end()) members.push_back(at);
      }
    }
    const auto rs = ev.evaluate(task, sources);
    const EvalResult& k = rs[0];
    const EvalResult& sw = rs[1];
    KRL_LOG(info) << "lift verify " << task.name << ": RL kernel " << status_name(k.status) << " "
                  << k.speedup << "x, sweep " << status_name(sw.status) << " " << sw.speedup << "x";
    Discovery d;
    if (family_list >= 0) {
      // Every member's time, the RL kernel's own where it is one: a copy of a variant can never
      // beat the family's fastest by a margin above 1.
      d.family_variants = static_cast<int64_t>(members.size());
      for (size_t i : members)
        if (rs[i].passed() && rs[i].speedup > d.family_best_speedup) {
          d.family_best_speedup = rs[i].speedup;
          d.family_best_variant = names[i];
        }
      const bool copy = std::find(members.begin(), members.end(), size_t{0}) != members.end();
      KRL_LOG(info) << "lift verify " << task.name << ": the family list, " << d.family_variants
                    << " variants" << (copy ? " (the RL kernel is one of them)" : "") << ": fastest "
                    << d.family_best_variant << " " << d.family_best_speedup << "x";
    }
    if (!k.passed() || (sw.passed() && k.speedup < margin * sw.speedup)) continue;
    if (family_list >= 0 && d.family_best_speedup > 0 && k.speedup < margin * d.family_best_speedup)
      continue;
    d.sweep_speedup = sw.passed() ? sw.speedup : 0;
    d.run = fs::absolute(o.run_dir).lexically_normal().string();
    d.stage = stage;
    d.step = r->after_step;
    // The stored row (mode and settings as the evaluator wrote them).
    ev.store().for_each_result([&](const StoredResult& s) {
      if (s.result.hash == k.hash && s.result.task == task.name) d.fresh = s;
    });
    if (d.fresh.source.empty()) d.fresh = {k, kernel, ev.backend(), ev.device_name(), "", "", utc_now()};
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace kernelrl
