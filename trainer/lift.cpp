#include "trainer/lift.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

#include "common/cpp_lexer.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/metrics.h"
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
  return cpp::similarity_tokens(source);
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

std::string join_tokens(const std::vector<std::string>& t, char sep) {
  std::string s;
  for (const auto& x : t) {
    if (!s.empty()) s += sep;
    s += x;
  }
  return s;
}

bool word_token(const std::string& t) {
  return !t.empty() && (std::isalnum(static_cast<unsigned char>(t[0])) || t[0] == '_');
}

}  // namespace

ParamSplit split_parameters(const std::vector<std::string>& tokens) {
  ParamSplit out;
  out.body = tokens;
  // The last `using Cfg =` (the instance block closes the file).
  size_t at = tokens.size();
  for (size_t i = 0; i + 2 < tokens.size(); ++i)
    if (tokens[i] == "using" && tokens[i + 1] == "Cfg" && tokens[i + 2] == "=") at = i + 3;
  if (at == tokens.size()) return out;
  size_t open = at;
  while (open < tokens.size() && tokens[open] != "<" && tokens[open] != ";") ++open;
  if (open >= tokens.size() || tokens[open] != "<") return out;
  std::vector<std::string> args;
  int depth = 1;
  size_t i = open + 1;
  for (; i < tokens.size(); ++i) {
    if (tokens[i] == "<") ++depth;
    // The lexer keeps `>>` one token (maximal munch): it closes two levels.
    if (tokens[i] == ">" && --depth == 0) break;
    if (tokens[i] == ">>" && (depth -= 2) <= 0) break;
    if (tokens[i] == ";") return out;  // unbalanced: no tuple
    args.push_back(tokens[i]);
  }
  if (i >= tokens.size()) return out;
  for (size_t j = open + 1; j < i; ++j)
    if (word_token(out.body[j])) out.body[j] = "#";
  out.tuple = join_tokens(args, ' ');
  return out;
}

bool is_new_class(const std::string& cls) { return cls == "new_tuple" || cls == "new_body"; }

NoveltyClassifier::NoveltyClassifier(const std::vector<KernelVariant>& variants) {
  for (const auto& v : variants) {
    ParamSplit ps = split_parameters(novelty_tokens(v.source));
    const std::string key = join_tokens(ps.body, '\x1f');
    if (!body_index_.count(key)) {
      body_index_[key] = bodies_.size();
      Body b{v.family, std::move(ps.body), {}};
      b.bag = bag_of(b.tokens);
      bodies_.push_back(std::move(b));
    }
    listed_.insert({v.family, ps.tuple});
    ++variants_;
  }
}

SampleClass NoveltyClassifier::classify(const std::string& source, double cap) const {
  ParamSplit ps = split_parameters(novelty_tokens(source));
  SampleClass c;
  c.tuple = ps.tuple;
  auto it = body_index_.find(join_tokens(ps.body, '\x1f'));
  if (it != body_index_.end()) {
    c.family = bodies_[it->second].family;
    c.cls = listed_.count({c.family, ps.tuple}) ? "listed" : "new_tuple";
    return c;
  }
  // A new body: how far from the nearest family body (cheap bag bounds first, nearest first).
  c.cls = "new_body";
  const Bag bag = bag_of(ps.body);
  std::vector<std::pair<double, const Body*>> order;
  for (const auto& b : bodies_) {
    const double longer = static_cast<double>(std::max(ps.body.size(), b.tokens.size()));
    order.push_back({longer > 0 ? static_cast<double>(bag_bound(bag, b.bag)) / longer : 0, &b});
  }
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  double best = cap;
  c.family = order.empty() ? "" : order.front().second->family;
  for (const auto& [bound, b] : order) {
    if (bound >= best) break;
    const double d = token_edit_distance(ps.body, b->tokens, best);
    if (d < best) best = d, c.family = b->family;
  }
  c.body_distance = best;
  return c;
}

// ---- statistics -----------------------------------------------------------------------------

Interval bootstrap_mean(const std::vector<double>& x, int64_t resamples, uint64_t seed, double level) {
  Interval r;
  r.n = static_cast<int64_t>(x.size());
  r.resamples = resamples;
  if (x.empty() || resamples < 1) return r;
  double sum = 0;
  for (double v : x) sum += v;
  r.mean = sum / static_cast<double>(x.size());
  std::vector<double> means(static_cast<size_t>(resamples));
  uint64_t c = 0;
  const uint64_t n = x.size();
  for (auto& m : means) {
    double s = 0;
    for (uint64_t j = 0; j < n; ++j) s += x[splitmix64(seed + c++) % n];
    m = s / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  const int64_t lo = std::clamp<int64_t>(std::llround((1 - level) / 2 * static_cast<double>(resamples)), 0,
                                         resamples - 1);
  r.lo = means[static_cast<size_t>(lo)];
  r.hi = means[static_cast<size_t>(resamples - 1 - lo)];
  return r;
}

BestOfK best_of_k(std::vector<double> v, int64_t k) {
  BestOfK r;
  const int64_t n = static_cast<int64_t>(v.size());
  if (n == 0 || k < 1) return r;
  k = std::min(k, n);
  std::sort(v.begin(), v.end());
  // log C(a, b) through lgamma; C(a, b) = 0 for b > a.
  auto log_choose = [](int64_t a, int64_t b) {
    return std::lgamma(static_cast<double>(a) + 1) - std::lgamma(static_cast<double>(b) + 1) -
           std::lgamma(static_cast<double>(a - b) + 1);
  };
  const double log_total = log_choose(n, k);
  int64_t passing = 0;
  for (double x : v) passing += x > 0;
  const int64_t failing = n - passing;
  r.pass = failing < k ? 1.0 : 1.0 - std::exp(log_choose(failing, k) - log_total);
  for (int64_t i = k; i <= n; ++i)  // v_(i) is the max of C(i - 1, k - 1) of the subsets
    if (v[i - 1] > 0) r.combined += v[i - 1] * std::exp(log_choose(i - 1, k - 1) - log_total);
  r.speed = r.pass > 0 ? r.combined / r.pass : 0;
  return r;
}

namespace {

// The family list, indexed for the classes: every HGEMM variant of the backend that runs on the
// arch, both layouts and accumulations (a policy may write an fp16-accumulating variant for an
// fp32 task, and it passes there: a listed variant, not a new body). Once per (backend, arch).
const NoveltyClassifier& classifier_for(const TaskSpec& /*task*/, const std::string& backend,
                                        const std::string& arch) {
  static std::map<std::string, NoveltyClassifier> cache;
  const std::string key = backend + "|" + arch;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const std::string be = backend == "gpu" ? "cuda" : "host";
  std::vector<KernelVariant> all;
  for (const auto& f : kernel_families())
    if (f.kind == TaskKind::hgemm && f.backends.find(be) != std::string::npos && arch_runs(f.arch, arch))
      for (auto& v : hgemm_family_variants(f.name))
        if (v.backend == be && arch_runs(v.arch, arch)) all.push_back(std::move(v));
  return cache.emplace(key, NoveltyClassifier(all)).first->second;
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

std::string hex64(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
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
          {"split", s.split},
          {"prompt_mode", s.prompt_mode},
          {"run_seed", s.run_seed},
          {"before", s.before},
          {"after", s.after},
          {"sweep", s.sweep},
          {"exemplar", s.exemplar},
          {"best_of_n", s.best_of_n},
          {"family_list", s.family_list},
          {"before_passed", s.before_passed},
          {"after_passed", s.after_passed},
          {"samples", s.samples},
          {"best_of_n_passed", s.best_of_n_passed},
          {"best_of_n_samples", s.best_of_n_samples},
          {"family_list_variants", s.family_list_variants},
          {"exemplars_shown", s.exemplars_shown},
          {"before_novel", s.before_novel},
          {"after_novel", s.after_novel},
          {"before_new_tuple", s.before_new_tuple},
          {"before_new_body", s.before_new_body},
          {"after_new_tuple", s.after_new_tuple},
          {"after_new_body", s.after_new_body},
          {"after_class", s.after_class},
          {"after_min_distance", s.after_min_distance},
          {"sweep_variant", s.sweep_variant},
          {"family_list_variant", s.family_list_variant},
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
  // Rows of earlier runs (issue 25) lack the fields below: their defaults.
  s.split = j.value("split", "grid");
  s.prompt_mode = j.value("prompt_mode", "exemplars");
  s.run_seed = j.value("run_seed", uint64_t{0});
  s.best_of_n = j.value("best_of_n", 0.0);
  s.family_list = j.value("family_list", 0.0);
  s.best_of_n_passed = j.value("best_of_n_passed", int64_t{0});
  s.best_of_n_samples = j.value("best_of_n_samples", int64_t{0});
  s.family_list_variants = j.value("family_list_variants", int64_t{0});
  s.exemplars_shown = j.value("exemplars_shown", int64_t{0});
  s.before_novel = j.value("before_novel", int64_t{0});
  s.after_novel = j.value("after_novel", int64_t{0});
  s.before_new_tuple = j.value("before_new_tuple", int64_t{0});
  s.before_new_body = j.value("before_new_body", int64_t{0});
  s.after_new_tuple = j.value("after_new_tuple", int64_t{0});
  s.after_new_body = j.value("after_new_body", int64_t{0});
  s.after_class = j.value("after_class", "");
  s.after_min_distance = j.value("after_min_distance", 0.0);
  s.sweep_variant = j.value("sweep_variant", "");
  s.family_list_variant = j.value("family_list_variant", "");
  s.after_kernel = j.value("after_kernel", "");
  s.after_hash = j.value("after_hash", "");
  s.after_step = j.value("after_step", int64_t{-1});
  s.reference = j.value("reference", "");
  return s;
}

RlBudget rl_budget(const fs::path& run_dir, const std::string& stage, int64_t training_shapes) {
  RlBudget b;
  b.training_shapes = training_shapes;
  const fs::path metrics = run_dir / "metrics.jsonl";
  if (!fs::exists(metrics)) return b;
  // By step, the last row counting (a resumed stage may log a step again).
  std::map<int64_t, nlohmann::json> by_step;
  for (const auto& r : MetricsWriter::read_all(metrics))
    if (r.value("stage", "") == stage && r.contains("candidates")) by_step[r.value("step", int64_t{0})] = r;
  for (const auto& [step, r] : by_step) {
    ++b.steps;
    b.candidates += r.value("candidates", int64_t{0});
    b.step_s += r.value("step_s", 0.0);
  }
  return b;
}

nlohmann::json to_json(const RlBudget& b) {
  return {{"steps", b.steps},
          {"candidates", b.candidates},
          {"training_shapes", b.training_shapes},
          {"per_shape", b.per_shape()},
          {"step_s", b.step_s}};
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
  if (o.prompt_mode != "exemplars" && o.prompt_mode != "zero_shot")
    throw UserError("lift: --prompt-mode: expected exemplars or zero_shot, got \"" + o.prompt_mode + "\"");
  const JobConfig job = load_job_config(config_path, o.set);
  const std::vector<TaskSpec> split_all =
      split_hgemm_shapes(hgemm_grid(job.data.hgemm_grid), job.data.hgemm_heldout);
  std::set<std::string> training;
  for (const auto& t : split_all)
    if (!t.holdout) training.insert(t.name);
  const bool heldout_split = o.shapes == "heldout";
  const std::string split = !o.split.empty() ? o.split : heldout_split ? "grid" : "offgrid";
  const std::vector<TaskSpec> measured_shapes =
      spread_over_bins(heldout_split ? hgemm_split_part(hgemm_grid(job.data.hgemm_grid), job.data.hgemm_heldout,
                                                        /*heldout=*/true)
                                     : hgemm_grid(o.shapes));
  if (measured_shapes.empty())
    throw UserError(heldout_split ? "lift: the run holds no HGEMM shape out (data.hgemm_heldout is " +
                                        std::to_string(job.data.hgemm_heldout) + "): nothing to measure on"
                                  : "lift: --shapes " + o.shapes + " lists no shape");
  // Held out means never trained on: no measured shape is a training shape of the job, and the
  // run's RL store holds no candidate at one (the store the hgemm_rl stage wrote).
  for (const auto& t : measured_shapes)
    if (training.count(t.name))
      throw UserError("lift: " + t.name + " (--shapes " + o.shapes + ") is a training shape of the run's job " +
                      "(data.hgemm_grid " + job.data.hgemm_grid + "): not held out");
  const fs::path rl_store =
      job.reward.store.empty() ? o.run_dir / "results.sqlite" : fs::path(job.reward.store);
  if (fs::exists(rl_store)) {
    std::set<std::string> names;
    for (const auto& t : measured_shapes) names.insert(t.name);
    ResultStore store(rl_store);
    store.for_each_result([&](const StoredResult& r) {
      if (names.count(r.result.task))
        throw UserError("lift: the run's store " + rl_store.string() + " holds a candidate at " + r.result.task +
                        ": the shape was trained on, not held out");
    });
  }
  // Nor did pretraining read one: no speed-annotated example of the corpus (its id names the
  // shape: "annotated:<device>:<MxNxK layout acc>:<kernel>", speed_annotated_triplets) is at a
  // measured shape. Paths as the run's job names them (relative to where it was started).
  {
    std::set<std::string> keys;
    for (const auto& t : measured_shapes) keys.insert(":" + hgemm_split_key(t) + ":");
    for (const auto& path : job.data.corpus) {
      std::ifstream in(path);
      for (std::string line; in && std::getline(in, line);) {
        for (size_t at = line.find("\"annotated:"); at != std::string::npos; at = line.find("\"annotated:", at + 1)) {
          const size_t end = line.find('"', at + 1);
          const std::string id = line.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
          for (const auto& k : keys)
            if (id.find(k) != std::string::npos)
              throw UserError("lift: the run's corpus " + path + " holds " + id +
                              ": a speed-annotated example at a measured shape, so the shape is not held out");
        }
      }
    }
  }
  const Policies pol = default_policies(job, o);
  const std::string rl_stage = pol.after.substr(0, pol.after.find('/'));
  const RlBudget budget = rl_budget(o.run_dir, rl_stage, static_cast<int64_t>(training.size()));
  // The before policy's samples per shape: the before arm's `samples`, then the best-of-N
  // control's extra ones (drawn with another seed, only in phase all once the RL budget is known).
  const int64_t before_total =
      o.best_of_n > 0 ? std::max(o.samples, o.best_of_n)
                      : o.samples + (o.best_of_n < 0 && budget.steps > 0 ? budget.per_shape() : 0);

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
  if (o.phase == "all") {
    nlohmann::json rl = to_json(budget);
    rl["stage"] = rl_stage;
    rl["before_samples"] = before_total;
    rl["samples"] = o.samples;
    rl["run_seed"] = job.run.seed;
    atomic_write(o.out / "rl.json", rl.dump(2) + "\n");
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
  std::vector<MeasuredShape> list_grid;
  if (!o.family_list_csv.empty())
    list_grid = read_family_grid_csv(o.family_list_csv, o.device.empty() ? ev.device_name() : o.device);
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
    // The job's completion mode: an edit-mode job's policies answer with SEARCH/REPLACE blocks
    // against the last exemplar shown, as in its RL prompts (rollout/prompt.h).
    parts.completion = job.rollout.completion;
    return parts;
  };
  ExemplarFit fit(tok, max_seq_len, job.rollout.sampling.max_new_tokens);
  auto prompt_of = [&](const TaskSpec& task, const std::vector<Exemplar>& exemplars) {
    PromptParts parts = parts_of();
    parts.exemplars = exemplars;
    return make_prompt_group(task, parts, tok, max_seq_len, job.rollout.sampling.max_new_tokens);
  };
  auto sample = [&](Checkpoint& ck, const PromptGroup& group, int64_t n, uint64_t salt) {
    torch::NoGradGuard ng;
    return sample_groups(ck.model, tok, {group}, n, job.rollout.sampling, job.rollout.response_format,
                         splitmix64(o.seed + fnv1a(group.task.name) + salt));
  };
  // The prompt of a measured shape: exemplars drawn from its family seed variants as the RL stage
  // seeds a new task's pool (rollout.seed_grid: the nearest training shape's best, the shape's
  // own row never; else round-robin over the families). With exemplars: the seeds evaluated
  // here, those that passed shown with their score here. Zero-shot: the seeds shown in that
  // order with no score, nothing measured at the shape before sampling. Then the before
  // policy's samples.
  // The seed grid never lends a measured shape's row (nor a held-out row of the job's grid):
  // a shape measured here may be in the CSV though outside the job's grid (the full grid's
  // held-out shapes above 2^27 beside an RL grid below it), and its own row would show the
  // sweep's best at the shape itself.
  std::unique_ptr<SeedGrid> seed_grid;
  if (backend == "gpu" && !job.rollout.seed_grid.empty()) {
    std::set<std::string> excluded;
    for (const auto& t : hgemm_split_part(hgemm_grid(job.data.hgemm_grid), job.data.hgemm_heldout, true))
      excluded.insert(hgemm_split_key(t));
    for (const auto& t : measured_shapes) excluded.insert(hgemm_split_key(t));
    seed_grid = std::make_unique<SeedGrid>(job.rollout.seed_grid, excluded);
  }
  auto record_of = [&](const TaskSpec& task) {
    PromptRecord r;
    r.task = task.name;
    const std::vector<std::string> seeds = seed_sources(ev, task, job.rollout.seed_exemplars, seed_grid.get());
    std::vector<Exemplar> pool;
    if (o.prompt_mode == "zero_shot") {
      for (const auto& src : seeds) pool.push_back({hex64(fnv1a(src)), src, /*score=*/-1});
      pool = fit.filter(task, parts_of(), pool);
      if (static_cast<int64_t>(pool.size()) > job.rollout.n_exemplars) pool.resize(job.rollout.n_exemplars);
      r.exemplars = pool;
    } else {
      auto rs = ev.evaluate(task, seeds);
      for (size_t i = 0; i < rs.size(); ++i)
        if (rs[i].passed()) pool.push_back({rs[i].hash, seeds[i], rs[i].reward});
      std::sort(pool.begin(), pool.end(), [](const auto& a, const auto& b) { return a.score > b.score; });
      pool = fit.filter(task, parts_of(), pool);  // as the RL stage draws: from what fits
      std::mt19937_64 erng(splitmix64(o.seed ^ fnv1a(task.name)));
      r.exemplars = sample_exemplars(pool, job.rollout.n_exemplars, job.rollout.n_buckets,
                                     job.rollout.exemplar_temperature, erng);
    }
    for (const auto& x : sample(before_policy(), prompt_of(task, r.exemplars), o.samples, 0))
      r.before.push_back(x.text);
    append_jsonl(prompts_path, to_json(r));
    return r;
  };

  int64_t measured = 0;
  for (const TaskSpec& task : measured_shapes) {
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
    PromptRecord& rec = have->second;

    // 1. The same prompt for both policies; the after policy's N samples with the same seed;
    //    the best-of-N control's extra samples of the before policy (another seed), kept in the
    //    record so a resumed call reuses them.
    const PromptGroup group = prompt_of(task, rec.exemplars);
    if (static_cast<int64_t>(rec.before.size()) < before_total) {
      const int64_t extra = before_total - static_cast<int64_t>(rec.before.size());
      for (const auto& x : sample(before_policy(), group, extra, /*salt=*/0xb0fb0f + rec.before.size()))
        rec.before.push_back(x.text);
      append_jsonl(prompts_path, to_json(rec));  // the last line of a task counts
    }
    std::vector<std::string> shown;  // the exemplars that fit the prompt
    for (const auto& e : rec.exemplars)
      if (group.prompt.find(e.source) != std::string::npos) shown.push_back(e.source);
    std::vector<ParsedResponse> b_rows, a_rows;
    for (size_t i = 0; i < rec.before.size() && static_cast<int64_t>(i) < before_total; ++i)
      b_rows.push_back(parse_response(rec.before[i], job.rollout.response_format, group.edit_base));
    for (const auto& x : sample(*after, group, o.samples, 0)) a_rows.push_back(x.parsed);

    // 2. The sweep's best family variant at the shape: named by the sweep CSV, or (no CSV, or
    //    no row for the shape: an off-grid shape) the shape's family portfolio evaluated here.
    std::vector<std::pair<std::string, std::string>> sweep;  // name, source
    for (const auto& s : sweep_grid)
      if (s.task.name == task.name && !s.kernels.empty()) sweep.push_back({s.kernels[0].name, s.kernels[0].source});
    if (sweep.empty()) {
      PortfolioOptions po;
      po.per_family = backend == "gpu" ? 3 : 0;
      for (auto& v : shape_portfolio(task, families, ev.arch(), po)) sweep.push_back({v.name, v.source});
    }
    // The family-list arm: the portfolio's whole list at the shape (family_list per family).
    std::vector<std::pair<std::string, std::string>> listed;
    for (const auto& s : list_grid)
      if (s.task.name == task.name)
        for (const auto& k : s.kernels) listed.push_back({k.name, k.source});
    if (listed.empty() && (o.family_list >= 0 || !list_grid.empty())) {
      PortfolioOptions po;
      po.per_family = std::max(0, o.family_list);
      for (auto& v : shape_portfolio(task, families, ev.arch(), po)) listed.push_back({v.name, v.source});
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
    for (const auto& [name, src] : listed) add(src);
    for (const auto& src : shown) add(src);
    std::vector<EvalItem> items;
    for (const auto& src : sources) items.push_back({task, src});
    const std::vector<EvalResult> results = ev.evaluate_batch(items);
    auto result_of = [&](const std::string& src) -> const EvalResult* {
      auto it = index.find(src);
      return it == index.end() ? nullptr : &results[it->second];
    };

    // 4. Every sample's class (distinct sources once), then the row.
    const NoveltyClassifier& classes = classifier_for(task, backend, ev.arch());
    std::map<std::string, SampleClass> class_memo;
    auto class_of = [&](const ParsedResponse& r) -> SampleClass {
      if (!r.ok) return {"format", "", "", 0};
      const EvalResult* e = result_of(r.code);
      if (!e) return {"not_evaluated", "", "", 0};
      if (!e->passed()) return {status_name(e->status), "", "", 0};
      auto it = class_memo.find(r.code);
      if (it == class_memo.end()) it = class_memo.emplace(r.code, classes.classify(r.code)).first;
      return it->second;
    };
    LiftShape row;
    row.task = task.name;
    row.shape = std::to_string(task.m) + "x" + std::to_string(task.n) + "x" + std::to_string(task.k);
    row.m = task.m, row.n = task.n, row.k = task.k;
    row.layout = task.layout, row.acc = task.acc;
    row.split = split;
    row.prompt_mode = o.prompt_mode;
    row.run_seed = job.run.seed;
    row.samples = o.samples;
    row.reference = reference;
    row.after_step = after_step;
    row.exemplars_shown = static_cast<int64_t>(shown.size());
    struct Side {
      double best = 0;
      int64_t passed = 0, new_tuple = 0, new_body = 0;
      const ParsedResponse* best_row = nullptr;
    };
    auto side_of = [&](const std::vector<ParsedResponse>& rs, size_t n) {
      Side s;
      for (size_t i = 0; i < rs.size() && i < n; ++i) {
        const auto& r = rs[i];
        const EvalResult* e = r.ok ? result_of(r.code) : nullptr;
        if (!e || !e->passed() || !std::isfinite(e->speedup)) continue;
        ++s.passed;
        const SampleClass c = class_of(r);
        s.new_tuple += c.cls == "new_tuple";
        s.new_body += c.cls == "new_body";
        if (e->speedup > s.best) s.best = e->speedup, s.best_row = &r;
      }
      return s;
    };
    const Side b = side_of(b_rows, static_cast<size_t>(o.samples));
    const Side a = side_of(a_rows, a_rows.size());
    const Side n_side = side_of(b_rows, b_rows.size());
    row.before = b.best, row.before_passed = b.passed;
    row.before_new_tuple = b.new_tuple, row.before_new_body = b.new_body;
    row.before_novel = b.new_tuple + b.new_body;
    row.after = a.best, row.after_passed = a.passed;
    row.after_new_tuple = a.new_tuple, row.after_new_body = a.new_body;
    row.after_novel = a.new_tuple + a.new_body;
    row.best_of_n = n_side.best, row.best_of_n_passed = n_side.passed;
    row.best_of_n_samples = static_cast<int64_t>(b_rows.size());
    auto best_named = [&](const std::vector<std::pair<std::string, std::string>>& list, std::string* name) {
      double best = 0;
      for (const auto& [n, src] : list)
        if (const EvalResult* e = result_of(src); e && e->passed() && std::isfinite(e->speedup) && e->speedup > best)
          best = e->speedup, *name = n;
      return best;
    };
    row.sweep = best_named(sweep, &row.sweep_variant);
    row.family_list = best_named(listed, &row.family_list_variant);
    row.family_list_variants = static_cast<int64_t>(listed.size());
    if (row.sweep <= 0 && heldout_split)
      for (const auto& [name, src] : sweep) {
        if (const EvalResult* e = result_of(src)) {
          KRL_LOG(warn) << "lift " << task.name << ": the sweep's " << name << " did not pass: "
                        << status_name(e->status) << (e->reason.empty() ? "" : " (" + e->reason.substr(0, 300) + ")");
        }
      }
    std::vector<const EvalResult*> shown_evals;
    for (const auto& src : shown) shown_evals.push_back(result_of(src));
    row.exemplar = best_passed(shown_evals);
    if (a.best_row) {
      const SampleClass c = class_of(*a.best_row);
      row.after_class = c.cls;
      row.after_min_distance = c.body_distance;
      row.after_kernel = "kernels/" + task.name + "_after" + ext;
      row.after_hash = result_of(a.best_row->code)->hash;
      atomic_write(o.out / row.after_kernel, a.best_row->code);
    }
    if (b.best_row) atomic_write(o.out / "kernels" / (task.name + "_before" + ext), b.best_row->code);
    // Every sample's verdict, one line per shape (samples.jsonl): status (the evaluator's, or
    // "format" for a response with no code or, in edit mode, blocks that did not apply, named by
    // `failure`), speedup (0 unless it passed), hash and class by
    // sample index; the before list holds the best-of-N control's samples, its first `samples`
    // being the before arm; the after side's code too (the before side's is in prompts.jsonl);
    // the shown exemplars', the sweep's and the family list's verdicts. Written just before the
    // row: a shape measured again after a stop between the two appends has two lines, and the
    // last one counts.
    nlohmann::json verdicts = {{"task", task.name}, {"split", split}, {"prompt_mode", o.prompt_mode},
                               {"run_seed", job.run.seed}, {"samples", o.samples}};
    for (const auto& [side, rs] : {std::pair{"before", &b_rows}, std::pair{"after", &a_rows}}) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& r : *rs) {
        const EvalResult* e = r.ok ? result_of(r.code) : nullptr;
        const SampleClass c = class_of(r);
        nlohmann::json v = {{"status", !r.ok ? std::string("format") : e ? status_name(e->status) : "not_evaluated"},
                            {"speedup", e && e->passed() && std::isfinite(e->speedup) ? e->speedup : 0.0},
                            {"hash", e ? e->hash : ""},
                            {"class", c.cls}};
        if (is_new_class(c.cls) || c.cls == "listed") v["family"] = c.family;
        if (c.cls == "new_body") v["body_distance"] = c.body_distance;
        if (std::string(side) == "after") v["code"] = r.ok ? r.code : "";
        if (!r.ok && !r.failure.empty()) v["failure"] = r.failure;  // format_no_code, edit_no_match, ...
        list.push_back(std::move(v));
      }
      verdicts[side] = std::move(list);
    }
    auto named_verdicts = [&](const std::vector<std::pair<std::string, std::string>>& list) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& [n, src] : list) {
        const EvalResult* e = result_of(src);
        out.push_back({{"name", n},
                       {"status", e ? status_name(e->status) : "not_evaluated"},
                       {"speedup", e && e->passed() && std::isfinite(e->speedup) ? e->speedup : 0.0}});
      }
      return out;
    };
    verdicts["sweep"] = named_verdicts(sweep);
    verdicts["family_list"] = named_verdicts(listed);
    nlohmann::json ex = nlohmann::json::array();
    for (const auto* e : shown_evals)
      ex.push_back({{"status", e ? status_name(e->status) : "not_evaluated"},
                    {"speedup", e && e->passed() && std::isfinite(e->speedup) ? e->speedup : 0.0}});
    verdicts["exemplars"] = std::move(ex);
    append_jsonl(o.out / "samples.jsonl", verdicts);
    append_jsonl(rows_path, to_json(row));
    KRL_LOG(info) << "lift " << task.name << " (" << split << ", " << o.prompt_mode << "): best of " << o.samples
                  << " before " << row.before << "x (" << row.before_passed << " passed), after " << row.after
                  << "x (" << row.after_passed << " passed, " << row.after_new_tuple << " new tuple, "
                  << row.after_new_body << " new body), best of " << row.best_of_n_samples << " before "
                  << row.best_of_n << "x, sweep " << row.sweep << "x, family list " << row.family_list << "x of "
                  << row.family_list_variants << ", best exemplar " << row.exemplar << "x";
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
    s.mean_best_of_n += r.best_of_n / n;
    s.mean_family_list += r.family_list / n;
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
          {"mean_best_of_n", s.mean_best_of_n},
          {"mean_family_list", s.mean_family_list},
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
      << " (0 = none passed); best-of-N = the before policy's N samples (the control at the "
         "after arm's evaluations), sweep = the sweep's best family variant, family list = the "
         "fastest of the whole list at the shape (0 when not measured), exemplar = the best "
         "exemplar the prompt showed, all timed in one evaluator batch per shape; new a = after-RL "
         "passing samples with a new tuple / a new body; class = the best after-RL kernel's.\n\n";
  out << "| shape | split | prompt | before | after | best-of-N | sweep | family list | exemplar | "
         "passed b/a | new a (tuple/body) | class | sweep variant |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line,
                  "| %s %s | %s | %s | %.3f | %.3f | %.3f (%lld) | %.3f | %.3f | %.3f | %lld/%lld | %lld/%lld | %s | %s |\n",
                  r.shape.c_str(), r.layout.c_str(), r.split.c_str(), r.prompt_mode.c_str(), r.before, r.after,
                  r.best_of_n, static_cast<long long>(r.best_of_n_samples), r.sweep, r.family_list, r.exemplar,
                  static_cast<long long>(r.before_passed), static_cast<long long>(r.after_passed),
                  static_cast<long long>(r.after_new_tuple), static_cast<long long>(r.after_new_body),
                  r.after_class.empty() ? "-" : r.after_class.c_str(), r.sweep_variant.c_str());
    out << line;
  }
  auto mark = [](bool met) { return met ? "met" : "missed"; };
  std::snprintf(line, sizeof line,
                "\n%lld shapes. Mean best-of-%lld: before %.3fx, after %.3fx (lift %+.1f %%), "
                "sweep %.3fx, exemplar %.3fx.\nShare >= 1.0x: before %.0f %%, after %.0f %%. "
                "After beats sweep at %.0f %% (by >= 2 %% at %.0f %%), beats the exemplar at %.0f %%.\n"
                "New (passing samples whose parameter tuple or body no family variant has): "
                "after %.0f %%, before %.0f %%.\n",
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

// ---- the proof ------------------------------------------------------------------------------

namespace {

struct ProofGroupSeed {
  std::vector<LiftShape> rows;
  std::map<std::string, nlohmann::json> samples;  // task -> its samples.jsonl line (the last)
  nlohmann::json rl;                              // rl.json ({} when absent)
  std::set<std::string> discoveries;              // tasks re-verified by lift promote
};

double arm_value(const LiftShape& r, const std::string& arm) {
  if (arm == "before") return r.before;
  if (arm == "after") return r.after;
  if (arm == "best_of_n") return r.best_of_n;
  if (arm == "exemplar") return r.exemplar;
  if (arm == "sweep") return r.sweep;
  if (arm == "family_list") return r.family_list;
  if (arm == "best_control") return std::max({r.exemplar, r.best_of_n, r.sweep});
  throw std::logic_error("lift proof: unknown arm " + arm);
}

std::string speed_cell(const Interval& ci) {
  if (ci.n == 0) return "- (none passed)";
  char b[96];
  std::snprintf(b, sizeof b, "%.3fx [%.3f, %.3f]", ci.mean, ci.lo, ci.hi);
  return b;
}

std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f %%", 100 * x);
  return b;
}

}  // namespace

ProofReport lift_proof(const ProofOptions& o) {
  if (o.lift_dirs.empty()) throw UserError("lift proof: give at least one --lift directory");
  // group ("split/prompt_mode") -> seed -> data
  std::map<std::string, std::map<uint64_t, ProofGroupSeed>> groups;
  std::map<std::string, std::string> owner;  // "split/mode/seed" -> its lift directory
  ProofReport rep;
  rep.per_shape_csv =
      "run_seed,split,prompt_mode,shape,layout,before,after,best_of_n,best_of_n_samples,sweep,family_list,"
      "family_list_variants,exemplar,before_passed,after_passed,samples,after_new_tuple,after_new_body,"
      "after_class,sweep_variant,family_list_variant\n";
  for (const auto& dir : o.lift_dirs) {
    const auto lines = read_jsonl(dir / "per_shape.jsonl");
    if (lines.empty()) throw UserError("lift proof: " + dir.string() + " has no measured row (per_shape.jsonl)");
    std::map<std::string, nlohmann::json> samples;
    for (const auto& j : read_jsonl(dir / "samples.jsonl")) samples[j.at("task").get<std::string>()] = j;
    nlohmann::json rl = fs::exists(dir / "rl.json") ? nlohmann::json::parse(read_file(dir / "rl.json", "rl budget"))
                                                    : nlohmann::json::object();
    std::set<std::string> disc;
    for (const auto& j : read_jsonl(dir / "discoveries.jsonl")) disc.insert(j.at("task").get<std::string>());
    std::map<std::string, LiftShape> last;  // a shape measured twice: the last row counts
    for (const auto& j : lines) {
      LiftShape r = lift_shape_from_json(j);
      last[r.task] = std::move(r);
    }
    for (auto& [task, r] : last) {
      // One directory per (split, prompt mode, seed): two would pool two runs' shapes as one.
      const std::string key = r.split + "/" + r.prompt_mode + "/" + std::to_string(r.run_seed);
      if (auto [it, fresh] = owner.emplace(key, dir.string()); !fresh && it->second != dir.string())
        throw UserError("lift proof: " + it->second + " and " + dir.string() + " both hold " + key +
                        " (split/prompt mode/run seed): pass one directory per seed");
      ProofGroupSeed& g = groups[r.split + "/" + r.prompt_mode][r.run_seed];
      if (auto it = samples.find(task); it != samples.end()) g.samples[task] = it->second;
      if (g.rl.is_null() || g.rl.empty()) g.rl = rl;
      g.discoveries.insert(disc.begin(), disc.end());
      char line[1024];
      std::snprintf(line, sizeof line,
                    "%llu,%s,%s,%s,%s,%.6g,%.6g,%.6g,%lld,%.6g,%.6g,%lld,%.6g,%lld,%lld,%lld,%lld,%lld,%s,%s,%s\n",
                    static_cast<unsigned long long>(r.run_seed), r.split.c_str(), r.prompt_mode.c_str(),
                    r.shape.c_str(), r.layout.c_str(), r.before, r.after, r.best_of_n,
                    static_cast<long long>(r.best_of_n_samples), r.sweep, r.family_list,
                    static_cast<long long>(r.family_list_variants), r.exemplar,
                    static_cast<long long>(r.before_passed), static_cast<long long>(r.after_passed),
                    static_cast<long long>(r.samples), static_cast<long long>(r.after_new_tuple),
                    static_cast<long long>(r.after_new_body), r.after_class.c_str(), r.sweep_variant.c_str(),
                    r.family_list_variant.c_str());
      rep.per_shape_csv += line;
      g.rows.push_back(std::move(r));
    }
  }

  std::ostringstream md;
  char line[1024];
  md << "Issue 39's proof: " << o.lift_dirs.size() << " lift directories. Speeds are means of each arm's best "
     << "speedup over the shapes where it passed, with a bootstrap 95 % interval over those shapes ("
     << o.resamples << " resamples, seed " << o.seed << "); pass = the share of shapes where the arm passed; "
     << "combined = pass x speed (a failed shape counting 0). Gains: after / control - 1 per shape where both "
     << "passed; best control = the fastest of {exemplar, best-of-N, sweep} at each shape.\n";
  rep.curves_csv = "group,run_seed,arm,k,pass,combined,speed\n";
  nlohmann::json jgroups = nlohmann::json::object();
  const std::vector<std::string> arms = {"before", "after", "best_of_n", "exemplar", "sweep", "family_list"};
  const std::vector<std::string> controls = {"best_control", "exemplar", "best_of_n", "sweep", "family_list"};
  for (const auto& [gname, seeds] : groups) {
    md << "\n## " << gname << " (" << seeds.size() << " seed" << (seeds.size() == 1 ? "" : "s") << ")\n\n";
    md << "| seed | arm | shapes | pass | speed [95 % CI] | combined |\n|---|---|---|---|---|---|\n";
    nlohmann::json jseeds = nlohmann::json::object();
    int64_t gain_met = 0, novel_met = 0, disc_met = 0, steps_met = 0;
    std::ostringstream gains_md, targets_md;
    gains_md << "\n| seed | control | shapes both passed | after only | control only | gain [95 % CI] |\n"
                "|---|---|---|---|---|---|\n";
    for (const auto& [seed, g] : seeds) {
      nlohmann::json js;
      const double n = static_cast<double>(g.rows.size());
      for (const auto& arm : arms) {
        std::vector<double> passing;
        for (const auto& r : g.rows)
          if (arm_value(r, arm) > 0) passing.push_back(arm_value(r, arm));
        const bool measured = arm == "family_list"
                                  ? std::any_of(g.rows.begin(), g.rows.end(), [](const auto& r) { return r.family_list_variants > 0; })
                                  : arm == "best_of_n"
                                        ? std::any_of(g.rows.begin(), g.rows.end(), [](const auto& r) { return r.best_of_n_samples > r.samples; })
                                        : true;
        if (!measured) continue;
        const Interval ci = bootstrap_mean(passing, o.resamples, o.seed);
        const double pass = static_cast<double>(passing.size()) / n;
        js["arms"][arm] = {{"pass", pass}, {"speed", ci.mean}, {"lo", ci.lo}, {"hi", ci.hi},
                           {"passing_shapes", ci.n}, {"combined", pass * ci.mean}};
        std::snprintf(line, sizeof line, "| %llu | %s | %zu | %.0f %% | %s | %.3f |\n",
                      static_cast<unsigned long long>(seed), arm.c_str(), g.rows.size(), 100 * pass,
                      speed_cell(ci).c_str(),
                      pass * ci.mean);
        md << line;
      }
      // Gains of after RL over each control.
      for (const auto& c : controls) {
        if (c == "family_list" && !js["arms"].contains("family_list")) continue;
        if (c == "best_of_n" && !js["arms"].contains("best_of_n")) continue;
        std::vector<double> gain;
        int64_t after_only = 0, control_only = 0;
        for (const auto& r : g.rows) {
          const double a = r.after, v = arm_value(r, c);
          if (a > 0 && v > 0) gain.push_back(a / v - 1);
          after_only += a > 0 && v <= 0;
          control_only += a <= 0 && v > 0;
        }
        const Interval ci = bootstrap_mean(gain, o.resamples, o.seed);
        js["gains"][c] = {{"mean", ci.mean}, {"lo", ci.lo}, {"hi", ci.hi}, {"shapes", ci.n},
                          {"after_only", after_only}, {"control_only", control_only}};
        gains_md << "| " << seed << " | " << c << " | " << ci.n << " | " << after_only << " | " << control_only
                 << " | " << (ci.n ? pct(ci.mean) + " [" + pct(ci.lo) + ", " + pct(ci.hi) + "]" : "-") << " |\n";
      }
      // Targets, per seed.
      const auto& bc = js["gains"]["best_control"];
      const bool measurable = bc["shapes"].get<int64_t>() >= o.min_shapes;
      const bool t_gain = measurable && bc["mean"].get<double>() >= o.target_gain && bc["lo"].get<double>() > 0;
      int64_t passed = 0, novel = 0, tuple = 0, body = 0, discovered = 0, reverified = 0;
      for (const auto& r : g.rows) {
        passed += r.after_passed, tuple += r.after_new_tuple, body += r.after_new_body;
        const bool beats = is_new_class(r.after_class) && r.family_list > 0 && r.after >= 1.02 * r.family_list;
        discovered += beats;
        reverified += beats && g.discoveries.count(r.task);
      }
      novel = tuple + body;
      const double novel_share = passed ? static_cast<double>(novel) / static_cast<double>(passed) : 0;
      const double disc_share = static_cast<double>(reverified) / n;
      const int64_t steps = g.rl.value("steps", int64_t{0});
      const double rl_s = g.rl.value("step_s", 0.0);
      js["novel"] = {{"passing", passed}, {"new_tuple", tuple}, {"new_body", body}, {"share", novel_share}};
      js["discoveries"] = {{"same_batch", discovered}, {"reverified", reverified}, {"share", disc_share}};
      js["rl"] = g.rl;
      js["shapes"] = g.rows.size();
      gain_met += t_gain, novel_met += novel_share >= o.target_novel, disc_met += disc_share >= o.target_discovery;
      steps_met += steps >= o.target_steps && rl_s <= o.target_rl_s;
      std::snprintf(line, sizeof line,
                    "- seed %llu: gain over the best control %s (%s [%s, %s] over %lld shapes, %lld after only, "
                    "%lld control only); new %s (%lld of %lld passing after-RL samples: %lld new tuple, %lld new "
                    "body); re-verified new kernels >= 2 %% over the family list at %s of shapes (%lld; %lld in "
                    "the measure's batch); RL %lld steps in %.0f s %s.\n",
                    static_cast<unsigned long long>(seed), !measurable ? "not measurable" : t_gain ? "met" : "missed",
                    pct(bc["mean"].get<double>()).c_str(), pct(bc["lo"].get<double>()).c_str(),
                    pct(bc["hi"].get<double>()).c_str(), static_cast<long long>(bc["shapes"].get<int64_t>()),
                    static_cast<long long>(bc["after_only"].get<int64_t>()),
                    static_cast<long long>(bc["control_only"].get<int64_t>()),
                    novel_share >= o.target_novel ? "met" : "missed", static_cast<long long>(novel),
                    static_cast<long long>(passed), static_cast<long long>(tuple), static_cast<long long>(body),
                    pct(disc_share).substr(1).c_str(), static_cast<long long>(reverified),
                    static_cast<long long>(discovered), static_cast<long long>(steps), rl_s,
                    steps >= o.target_steps && rl_s <= o.target_rl_s ? "(met)" : "(missed)");
      targets_md << line;
      // Best-of-k curves from the samples.
      for (const auto& arm : {"before", "after", "best_of_n"}) {
        for (int64_t k = 1; k <= o.max_k; ++k) {
          double pass = 0, combined = 0, speed = 0;
          int64_t shapes = 0, with_pass = 0;
          for (const auto& [task, sj] : g.samples) {
            const std::string side = std::string(arm) == "after" ? "after" : "before";
            if (!sj.contains(side)) continue;
            const int64_t limit = std::string(arm) == "before" ? sj.value("samples", int64_t{0})
                                                               : static_cast<int64_t>(sj[side].size());
            std::vector<double> v;
            for (const auto& x : sj[side]) {
              if (static_cast<int64_t>(v.size()) >= limit) break;
              v.push_back(x.value("speedup", 0.0));
            }
            if (static_cast<int64_t>(v.size()) < k) continue;  // fewer samples than k: no point
            const BestOfK b = best_of_k(v, k);
            ++shapes;
            pass += b.pass, combined += b.combined;
            if (b.pass > 0) speed += b.speed, ++with_pass;
          }
          if (shapes == 0) continue;
          std::snprintf(line, sizeof line, "%s,%llu,%s,%lld,%.6g,%.6g,%.6g\n", gname.c_str(),
                        static_cast<unsigned long long>(seed), arm, static_cast<long long>(k),
                        pass / static_cast<double>(shapes), combined / static_cast<double>(shapes),
                        with_pass ? speed / static_cast<double>(with_pass) : 0.0);
          rep.curves_csv += line;
        }
      }
      jseeds[std::to_string(seed)] = js;
    }
    md << gains_md.str() << "\nTargets (issue 39), per seed:\n" << targets_md.str();
    const int64_t ns = static_cast<int64_t>(seeds.size());
    auto verdict = [&](int64_t met) {
      return ns >= 3 && met == ns ? std::string("met") : "missed (" + std::to_string(met) + " of " + std::to_string(ns) +
                                                              " seeds" + (ns < 3 ? ", fewer than 3 seeds" : "") + ")";
    };
    md << "\n" << gname << ": after RL >= " << pct(o.target_gain).substr(1) << " over the best control with the "
       << "interval above 0 in every seed: " << verdict(gain_met) << "; new share >= "
       << pct(o.target_novel).substr(1) << ": " << verdict(novel_met) << "; re-verified discoveries at >= "
       << pct(o.target_discovery).substr(1) << " of shapes: " << verdict(disc_met) << "; >= " << o.target_steps
       << " RL steps within " << o.target_rl_s / 60 << " minutes: " << verdict(steps_met) << ".\n";
    jgroups[gname] = {{"seeds", jseeds},
                      {"targets",
                       {{"gain", verdict(gain_met)}, {"novel", verdict(novel_met)},
                        {"discoveries", verdict(disc_met)}, {"steps", verdict(steps_met)}}}};
  }
  rep.summary = {{"groups", jgroups}, {"resamples", o.resamples}, {"bootstrap_seed", o.seed},
                 {"lift_dirs", o.lift_dirs.size()}};
  rep.markdown = md.str();
  return rep;
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
