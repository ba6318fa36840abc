#include "reward/evaluator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <tuple>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <future>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "reward/compile.h"
#include "reward/reward_formula.h"
#include "reward/screen.h"
#include "reward/subprocess.h"
#include "reward/task_json.h"
#include "reward/task_kinds.h"
#include "reward/worker_client.h"

namespace kernelrl {

namespace fs = std::filesystem;

const std::vector<std::string>& report_baseline_names() {
  static const std::vector<std::string> names = {"torch",        "cublas-nn",        "cublas-tn",
                                                 "cublas-max",   "lt-heuristic",     "lt-heuristic-max",
                                                 "lt-auto",      "lt-auto-max"};
  return names;
}

std::vector<std::string> raw_baselines_for(const std::string& name, const std::string& layout) {
  if (name == "torch" || name == "cublas-nn" || name == "cublas-tn") return {name};
  if (name == "cublas-max") return {"cublas-nn", "cublas-tn"};
  if (name == "lt-heuristic" || name == "lt-auto") return {name + "-" + layout};
  if (name == "lt-heuristic-max") return {"lt-heuristic-nn", "lt-heuristic-tn"};
  if (name == "lt-auto-max") return {"lt-auto-nn", "lt-auto-tn"};
  throw ConfigError("reward.baseline: unknown baseline \"" + name + "\"; allowed: torch, cublas-nn, "
                    "cublas-tn, cublas-max, lt-heuristic, lt-heuristic-max, lt-auto, lt-auto-max");
}

namespace {

using Clock = std::chrono::steady_clock;

// The faster of the raw baselines behind a report name (the "-max" variants pick the best).
bool pick(const std::map<std::string, TimingStats>& raw, const std::vector<std::string>& names,
          TimingStats& out) {
  bool found = false;
  for (const auto& n : names) {
    auto it = raw.find(n);
    if (it == raw.end() || !it->second.valid()) continue;
    if (!found || it->second.median_us < out.median_us) out = it->second;
    found = true;
  }
  return found;
}

// ncu metrics for a prompt: throughput, occupancy, L2 hit rate, duration.
const char* kNcuMetrics =
    "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,"
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,"
    "sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,"
    "dram__throughput.avg.pct_of_peak_sustained_elapsed";

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool q = false;
  for (char c : line) {
    if (c == '"') q = !q;
    else if (c == ',' && !q) {
      out.push_back(cur);
      cur.clear();
    } else
      cur += c;
  }
  out.push_back(cur);
  return out;
}

// What plan_baselines decided for one evaluate() call: the reference, which raw baselines are
// timed beside each candidate, and the shape's clean rows.
struct BaselinePlan {
  std::string reference;                      // the reward's reference baseline (a report name)
  std::vector<std::string> ref_raw;           // the raw baselines behind it
  std::vector<std::string> report;            // the report names this task kind shows
  BaselineKey key;                            // where the shape's rows are stored
  std::string key_id;                         // layout/MxNxK: refresh and re-check bookkeeping
  std::map<std::string, BaselineRow> cached;  // the shape's clean rows (baselines-only requests)
  bool ref_stored = false;                    // the reference may be taken from the store
  std::vector<std::string> beside;            // raw baselines timed beside each candidate
  nlohmann::json lt_algo = nlohmann::json::object();  // known cuBLASLt autotune picks
};

// One candidate's raw baselines as timed beside it, interleaved (the worker's JSON).
using InterleavedTimes = std::map<std::string, nlohmann::json>;

// What merge_baselines decided: the shape's clean table and, per candidate, the reference
// times it is scored against.
struct MergedBaselines {
  std::map<std::string, TimingStats> table;
  std::vector<std::map<std::string, TimingStats>> believed;
};

}  // namespace

struct Evaluator::Impl {
  RewardConfig cfg;
  bool in_batch = false;  // evaluate() called by evaluate_batch, which logs the batch's summary
  std::string settings_yaml;  // every reward.* field, as each worker request carries it
  std::unique_ptr<ResultStore> store;
  fs::path cache_dir;
  std::vector<std::unique_ptr<WorkerClient>> workers;
  std::unique_ptr<CompilePool> pool;
  std::string backend, device, driver, arch, sandbox, sandbox_parts;
  std::vector<std::string> include_dirs;  // resolved reward.include_dirs (CUTLASS/CuTe)
  bool ready = false;
  int first_device = 0;  // GPU of worker 0; worker i runs on first_device + i
  std::vector<int> devices;  // reward.gpus: worker i on devices[i] (empty: first_device + i)
  std::atomic<int64_t> evaluations{0};  // candidates sent to a worker (run_candidate)
  int device_of(size_t i) const { return devices.empty() ? first_device + static_cast<int>(i) : devices[i]; }
  std::mt19937_64 seeds{std::random_device{}()};

  void ensure_ready() {
    if (ready) return;
    const double silence = 2 * cfg.call_timeout_s + 5;
    // Each worker's scratch directory: the only place its (sandboxed) candidates may write.
    auto scratch = [&](int dev) {
      return cache_dir / "scratch" / ("worker-" + std::to_string(dev) + "-" + std::to_string(::getpid()));
    };
    workers.push_back(std::make_unique<WorkerClient>(cfg.backend, device_of(0), silence, cache_dir / "logs"));
    workers[0]->set_sandbox(cfg.sandbox, scratch(device_of(0)));
    workers[0]->set_capture(cfg.capture);
    const WorkerInfo& info = workers[0]->info();
    backend = info.backend;
    device = info.device;
    driver = info.driver;
    arch = info.arch;
    sandbox = info.sandbox;
    sandbox_parts = info.sandbox_parts;
    if (cfg.backend == "gpu" && backend != "gpu")
      throw NotAvailableError("reward.backend: gpu was asked for but no GPU is visible");
    int n = static_cast<int>(cfg.workers);
    if (backend == "gpu") n = std::max(1, std::min(n, info.device_count - first_device));
    if (!devices.empty()) n = static_cast<int>(devices.size());  // checked by evaluation_gpus()
    for (int i = 1; i < n; ++i) {
      // Host workers are all "device 0" unless reward.gpus names them.
      const int dev = backend == "gpu" || !devices.empty() ? device_of(i) : 0;
      workers.push_back(std::make_unique<WorkerClient>(backend, dev, silence, cache_dir / "logs"));
      workers.back()->set_sandbox(cfg.sandbox, scratch(device_of(i)));
      workers.back()->set_capture(cfg.capture);
    }
    for (auto& w : workers) w->set_quiet(cfg.quiet);
    include_dirs = resolve_include_dirs(cfg.include_dirs);
    pool = std::make_unique<CompilePool>(backend, arch, cache_dir / "compile", static_cast<int>(cfg.compile_jobs),
                                         cfg.compile_timeout_s, include_dirs);
    ready = true;
    KRL_LOG(info) << "evaluator: backend " << backend << " on " << device << " (" << driver << "), "
                  << workers.size() << " worker(s), compiler " << pool->toolkit_version()
                  << ", timing " << cfg.timing << "/" << cfg.l2
                  << (include_dirs.empty() ? std::string(", no CUTLASS headers")
                                           : ", CUTLASS " + cutlass_version(include_dirs[0]))
                  << ", sandbox " << sandbox;
    if (sandbox_parts == "off") {
      KRL_LOG(warn) << "sandbox: " << sandbox;
    }
  }

  std::map<std::string, int64_t> evals_since_check;  // per baseline key: for re-checks
  std::set<std::string> refreshed;                    // shapes re-measured under refresh_baselines

  // A worker request: the settings every measurement depends on, fresh input seeds, the raw
  // baselines to time and the known cuBLASLt autotune picks.
  nlohmann::json request(const std::string& op, const TaskSpec& task, const std::vector<std::string>& baselines,
                         const nlohmann::json& lt_algo) {
    nlohmann::json req = {{"op", op},
                          {"settings", settings_yaml},
                          {"task", task_to_json(task)},
                          {"lt_algo", lt_algo},
                          {"baselines", baselines}};
    static std::mutex seed_mu;
    std::lock_guard<std::mutex> lock(seed_mu);
    req["seed_base"] = seeds() >> 1;  // fresh inputs for every evaluation
    return req;
  }

  // The baselines `names` of `task` timed alone by worker 0 (no candidate in that request), into
  // the store and `rows`. The only way baseline rows enter the store.
  void measure_baselines(const TaskSpec& task, const BaselineKey& key, const std::vector<std::string>& names,
                         std::map<std::string, BaselineRow>& rows) {
    nlohmann::json known = nlohmann::json::object();
    if (!cfg.refresh_baselines)
      for (const std::string lay : {"nn", "tn"}) {
        auto it = rows.find("lt-auto-" + lay);
        if (it != rows.end() && it->second.algo >= 0) known[lay] = it->second.algo;
      }
    nlohmann::json res;
    try {
      res = workers[0]->evaluate(request("baselines", task, names, known));
    } catch (const std::exception& e) {
      res = {{"status", "internal_error"}, {"reason", e.what()}};
    }
    if (res.value("status", "") != "ok" || !res.contains("baselines")) {
      KRL_LOG(warn) << "evaluator: baselines of " << task.name << " could not be measured: "
                    << res.value("reason", std::string("?"));
      return;
    }
    for (auto it = res["baselines"].begin(); it != res["baselines"].end(); ++it) {
      BaselineRow row;
      row.stats = timing_from_json(it.value());
      row.algo = it.value().value("algo", int64_t{-1});
      row.max_abs_dev = it.value().value("max_abs_dev", 0.0);
      if (!row.stats.valid()) continue;
      rows[it.key()] = row;
      store->put_baseline(key, it.key(), row);
    }
  }
  // The timing settings baselines are stored under (reward_config.h).
  std::string timing_key() const { return baseline_timing_key(cfg); }

  nlohmann::json profile(const fs::path& so, const TaskSpec& task, int dev) {
    nlohmann::json m = nlohmann::json::object();
    std::vector<std::string> run_once = {find_worker_binary(), "--run-once", so.string(), "--task",
                                         task_to_json(task).dump(), "--calls", "1", "--backend",
                                         backend, "--device", std::to_string(dev)};
    if (cfg.ncu) {
      std::vector<std::string> cmd = {"ncu", "--clock-control", "none", "--profile-from-start", "off",
                                      "--csv", "--metrics", kNcuMetrics};
      cmd.insert(cmd.end(), run_once.begin(), run_once.end());
      RunResult r = run_process(cmd, 300);
      nlohmann::json ncu = nlohmann::json::object();
      std::istringstream in(r.output);
      std::vector<std::string> header;
      int kernels = 0;
      std::set<std::string> ids;
      for (std::string line; std::getline(in, line);) {
        if (line.rfind("\"ID\"", 0) == 0) {
          header = split_csv_line(line);
          continue;
        }
        if (header.empty() || line.empty() || line[0] != '"') continue;
        auto f = split_csv_line(line);
        auto col = [&](const char* name) -> std::string {
          for (size_t i = 0; i < header.size() && i < f.size(); ++i)
            if (header[i] == name) return f[i];
          return "";
        };
        std::string id = col("ID"), metric = col("Metric Name"), value = col("Metric Value");
        if (ids.insert(id).second) ++kernels;
        if (metric.empty()) continue;
        std::string v = value;
        v.erase(std::remove(v.begin(), v.end(), ','), v.end());
        try {
          ncu["kernels"][col("Kernel Name")][metric] = std::stod(v);
        } catch (...) {
          ncu["kernels"][col("Kernel Name")][metric] = value;
        }
      }
      ncu["kernel_launches"] = kernels;
      if (r.exit_code != 0) ncu["error"] = trim_compiler_log(r.output, "", 10, 1500);
      m["ncu"] = ncu;
    }
    if (cfg.sanitizer) {
      std::vector<std::string> cmd = {"compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "9"};
      cmd.insert(cmd.end(), run_once.begin(), run_once.end());
      RunResult r = run_process(cmd, 600);
      m["sanitizer"] = {{"ok", r.exit_code == 0},
                        {"exit_code", r.exit_code},
                        {"log", trim_compiler_log(r.output, "", 30, 3000)}};
    }
    return m;
  }

  // Fills `r` from the worker's answer.
  void absorb(EvalResult& r, const nlohmann::json& res, std::map<std::string, nlohmann::json>& raw_seen) {
    r.status = status_from_name(res.value("status", "internal_error"));
    r.check = res.value("check", "");
    r.reason = res.value("reason", "");
    r.max_abs_dev = res.value("max_abs_dev", 0.0);
    r.dev_bound = res.value("dev_bound", 0.0);
    if (res.contains("candidate")) r.cand = timing_from_json(res["candidate"]);
    if (res.contains("metrics") && res["metrics"].is_object())
      for (auto it = res["metrics"].begin(); it != res["metrics"].end(); ++it) r.metrics[it.key()] = it.value();
    if (res.contains("baselines"))
      for (auto it = res["baselines"].begin(); it != res["baselines"].end(); ++it)
        raw_seen[it.key()] = it.value();
  }

  // The phases of Evaluator::evaluate, in order (each below, with its rules).
  std::vector<size_t> screen(const TaskSpec& task, const TaskKindRules& rules,
                             const std::vector<std::string>& sources, std::vector<EvalResult>& out);
  BaselinePlan plan_baselines(const TaskSpec& task, const TaskKindRules& rules, bool any_screened);
  std::vector<InterleavedTimes> compile_and_run(const TaskSpec& task, const BaselinePlan& plan,
                                                const std::vector<std::string>& sources,
                                                const std::vector<size_t>& screened,
                                                std::vector<EvalResult>& out);
  void prewarm(size_t w, size_t candidates);
  void run_candidate(size_t w, const TaskSpec& task, const BaselinePlan& plan, const fs::path& so,
                     EvalResult& r, InterleavedTimes& interleaved);
  MergedBaselines merge_baselines(const TaskSpec& task, BaselinePlan& plan,
                                  const std::vector<InterleavedTimes>& interleaved,
                                  std::vector<EvalResult>& out);
  void score(const TaskSpec& task, const TaskKindRules& rules, const BaselinePlan& plan,
             const MergedBaselines& merged, const std::vector<std::string>& sources,
             const std::string& settings, Clock::time_point t0, std::vector<EvalResult>& out);
};

Evaluator::Evaluator(const RewardConfig& cfg, const fs::path& store_path, int first_device)
    : impl_(std::make_unique<Impl>()) {
  impl_->cfg = cfg;
  impl_->settings_yaml = reward_config_yaml(cfg);
  impl_->first_device = first_device;
  check_reward_config(cfg);
  impl_->store = std::make_unique<ResultStore>(store_path);
  impl_->cache_dir = cfg.cache_dir.empty() ? default_cache_dir() : fs::path(cfg.cache_dir);
}

Evaluator::Evaluator(const RewardConfig& cfg, const fs::path& store_path, std::vector<int> devices)
    : Evaluator(cfg, store_path, devices.empty() ? 0 : devices[0]) {
  impl_->devices = std::move(devices);
}

Evaluator::~Evaluator() = default;

std::vector<int> Evaluator::worker_devices() {
  impl_->ensure_ready();
  std::vector<int> out;
  for (size_t i = 0; i < impl_->workers.size(); ++i)
    out.push_back(impl_->backend == "gpu" || !impl_->devices.empty() ? impl_->device_of(i) : 0);
  return out;
}

int64_t Evaluator::worker_evaluations() const { return impl_->evaluations.load(); }

const std::string& Evaluator::backend() {
  impl_->ensure_ready();
  return impl_->backend;
}
const std::string& Evaluator::device_name() {
  impl_->ensure_ready();
  return impl_->device;
}
const std::string& Evaluator::sandbox() {
  impl_->ensure_ready();
  return impl_->sandbox;
}
const std::string& Evaluator::arch() {
  impl_->ensure_ready();
  return impl_->arch;
}
ResultStore& Evaluator::store() { return *impl_->store; }
const RewardConfig& Evaluator::config() const { return impl_->cfg; }
int Evaluator::worker_restarts() const {
  int n = 0;
  for (const auto& w : impl_->workers) n += w->restarts();
  return n;
}
std::string Evaluator::hash_of(const std::string& source) {
  impl_->ensure_ready();
  return impl_->pool->hash_of(source);
}

EvalResult Evaluator::evaluate_one(const TaskSpec& task, const std::string& source) {
  return evaluate(task, {source}).at(0);
}

int Evaluator::precompile(const std::vector<std::string>& sources) {
  impl_->ensure_ready();
  // The workers start the runners these candidates will take while the pool compiles them.
  std::vector<std::future<void>> spares;
  for (size_t w = 0; w < impl_->workers.size(); ++w)
    spares.push_back(std::async(std::launch::async, [this, w, n = sources.size()] { impl_->prewarm(w, n); }));
  int ok = 0;
  for (const auto& c : impl_->pool->compile_all(sources)) ok += c.ok;
  for (auto& f : spares) f.get();
  return ok;
}

std::string Evaluator::settings_fingerprint() const {
  impl_->ensure_ready();  // the sandbox in force is known once the worker is up
  return kernelrl::settings_fingerprint(impl_->cfg, impl_->sandbox_parts);
}

std::optional<EvalResult> Evaluator::cached_result(const TaskSpec& task, const std::string& source) {
  impl_->ensure_ready();
  return impl_->store->find_result(impl_->pool->hash_of(source), task.name, impl_->backend,
                                   impl_->device, settings_fingerprint());
}

namespace {
void log_disagreements(const std::vector<EvalResult>& results);
}

std::vector<EvalResult> Evaluator::evaluate_batch(const std::vector<EvalItem>& items) {
  // Compile every source of the batch in parallel first; then each task's candidates load from
  // the cache and are timed (with the compile pool idle, so timing is quiet anyway).
  std::vector<std::string> all;
  for (const auto& it : items) all.push_back(it.source);
  precompile(all);
  std::vector<EvalResult> out(items.size());
  std::map<std::string, std::vector<size_t>> by_task;
  std::vector<std::string> order;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!by_task.count(items[i].task.name)) order.push_back(items[i].task.name);
    by_task[items[i].task.name].push_back(i);
  }
  for (const auto& name : order) {
    const auto& idx = by_task[name];
    std::vector<std::string> srcs;
    for (size_t i : idx) srcs.push_back(items[i].source);
    impl_->in_batch = true;
    std::vector<EvalResult> rs;
    try {
      rs = evaluate(items[idx[0]].task, srcs);
    } catch (...) {
      impl_->in_batch = false;
      throw;
    }
    impl_->in_batch = false;
    for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = std::move(rs[j]);
  }
  log_disagreements(out);
  return out;
}

namespace {
void log_disagreements(const std::vector<EvalResult>& results) {
  size_t disagreed = 0, timed = 0;
  std::set<std::string> tasks;
  for (const auto& r : results) {
    if (!r.passed()) continue;
    ++timed;
    if (r.metrics.value("baseline_disagreed", false)) {
      ++disagreed;
      tasks.insert(r.task);
    }
  }
  if (disagreed == 0) return;
  KRL_LOG(warn) << "evaluator: the reference timed beside " << disagreed << " of " << timed
                << " passing candidates (" << tasks.size() << " tasks) disagreed with a clean re-measurement by more "
                << "than reward.baseline_drift; they were scored against the clean time (metrics.baseline_disagreed; "
                << "a busy host does this)";
}
}  // namespace

std::vector<EvalResult> Evaluator::evaluate(const TaskSpec& task, const std::vector<std::string>& sources) {
  Impl& im = *impl_;
  im.ensure_ready();
  const TaskKindRules& rules = task_kind_rules(task);
  const std::string settings = settings_fingerprint();
  std::vector<EvalResult> out(sources.size());
  const Clock::time_point t0 = Clock::now();

  const std::vector<size_t> screened = im.screen(task, rules, sources, out);
  BaselinePlan plan = im.plan_baselines(task, rules, /*any_screened=*/!screened.empty());
  const std::vector<InterleavedTimes> interleaved = im.compile_and_run(task, plan, sources, screened, out);
  const MergedBaselines merged = im.merge_baselines(task, plan, interleaved, out);
  im.score(task, rules, plan, merged, sources, settings, t0, out);
  if (!im.in_batch) log_disagreements(out);
  return out;
}

// 1. Static screen: the indices of the sources that passed it; the others' results say why.
std::vector<size_t> Evaluator::Impl::screen(const TaskSpec& task, const TaskKindRules& rules,
                                            const std::vector<std::string>& sources,
                                            std::vector<EvalResult>& out) {
  std::vector<size_t> screened;
  for (size_t i = 0; i < sources.size(); ++i) {
    EvalResult& r = out[i];
    r.task = task.name;
    r.shape = task_shape(task);
    r.hash = pool->hash_of(sources[i]);
    auto s = screen_source(sources[i], rules.forbids_delegation());
    if (!s.ok) {
      r.status = EvalStatus::screen_rejected;
      r.check = s.rule;
      r.reason = s.reason;
    } else {
      screened.push_back(i);
    }
  }
  return screened;
}

// 2. Baselines (docs/sandbox.md). The store holds only clean measurements: the baselines timed
//    alone, by a request that runs no candidate. A shape's missing rows (all of them with
//    reward.refresh_baselines) are measured that way first, when any candidate passed the
//    screen. The reference is also timed beside each candidate, interleaved in the same rounds
//    (unless reward.baseline_recheck_every > 0 says to take it from the store and re-time it
//    beside a candidate every N-th evaluation of the shape); an interleaved time is believed
//    only within reward.baseline_drift of the clean one (merge_baselines).
BaselinePlan Evaluator::Impl::plan_baselines(const TaskSpec& task, const TaskKindRules& rules,
                                             bool any_screened) {
  const bool gpu = backend == "gpu";
  BaselinePlan p;
  p.reference = rules.reference(cfg, gpu);
  p.ref_raw = rules.raw(p.reference, task, gpu);
  std::vector<std::string> wanted;
  for (const auto& b : cfg.baselines) {
    if (b == "all") wanted = report_baseline_names();
    else wanted.push_back(b);
  }
  p.report = rules.report_names(gpu);
  std::vector<std::string> all_raw = p.ref_raw;
  for (const auto& b : wanted)
    if (std::find(p.report.begin(), p.report.end(), b) != p.report.end())
      for (const auto& rb : rules.raw(b, task, gpu))
        if (std::find(all_raw.begin(), all_raw.end(), rb) == all_raw.end()) all_raw.push_back(rb);
  p.key = rules.key(task, device, driver, timing_key());
  p.key_id = p.key.layout + "/" + std::to_string(p.key.m) + "x" + std::to_string(p.key.n) + "x" +
             std::to_string(p.key.k);
  p.cached = store->baselines(p.key);
  {
    std::vector<std::string> missing;
    for (const auto& rb : all_raw)
      if (cfg.refresh_baselines || !p.cached.count(rb) || !p.cached[rb].stats.valid()) missing.push_back(rb);
    if (!missing.empty() && any_screened) {
      // refresh_baselines re-measures every row once per Evaluator and shape, not per batch.
      if (cfg.refresh_baselines && !refreshed.insert(p.key_id).second) missing.clear();
      if (!missing.empty()) measure_baselines(task, p.key, all_raw, p.cached);
    }
  }
  p.ref_stored = cfg.baseline_recheck_every > 0;
  for (const auto& rb : p.ref_raw) p.ref_stored = p.ref_stored && p.cached.count(rb) && p.cached[rb].stats.valid();
  bool recheck = false;
  if (p.ref_stored) {
    int64_t& n = evals_since_check[p.key_id];
    recheck = ++n >= cfg.baseline_recheck_every;
    if (recheck) n = 0;
  }
  p.beside = p.ref_stored && !recheck ? std::vector<std::string>{} : p.ref_raw;
  for (const std::string lay : {"nn", "tn"}) {
    auto it = p.cached.find("lt-auto-" + lay);
    if (it != p.cached.end() && it->second.algo >= 0) p.lt_algo[lay] = it->second.algo;
  }
  return p;
}

// Spare runners on worker `w` for its share of `candidates` (reward.spare_runners at most,
// counting those it has): a runner's start, its CUDA context, happens here, while the pool
// compiles, instead of before each candidate. No worker times during it. A worker that fails
// here is restarted by its next request, as after any failure.
void Evaluator::Impl::prewarm(size_t w, size_t candidates) {
  if (cfg.spare_runners <= 0 || candidates == 0 || w >= workers.size()) return;
  const size_t share = (candidates + workers.size() - 1) / workers.size();
  const size_t count = std::min<size_t>(share, static_cast<size_t>(cfg.spare_runners));
  try {  // (runs on a worker's thread: nothing may escape it)
    const nlohmann::json res = workers[w]->evaluate({{"op", "prewarm"}, {"count", count}});
    if (res.value("status", "") != "ok") {
      KRL_LOG(debug) << "reward: spare runners on worker " << w << ": " << res.value("status", "") << " ("
                     << res.value("reason", "") << ")";
    }
  } catch (const std::exception& e) {
    KRL_LOG(debug) << "reward: spare runners on worker " << w << ": " << e.what();
  }
}

// 3. Compile in the pool while the workers (one thread each) take compiled candidates from a
//    queue; a worker's timing stops the pool's compilers (quiet windows). Returns each
//    candidate's baselines as timed beside it.
std::vector<InterleavedTimes> Evaluator::Impl::compile_and_run(const TaskSpec& task, const BaselinePlan& plan,
                                                               const std::vector<std::string>& sources,
                                                               const std::vector<size_t>& screened,
                                                               std::vector<EvalResult>& out) {
  std::vector<std::string> to_compile;
  for (size_t i : screened) to_compile.push_back(sources[i]);
  std::vector<InterleavedTimes> interleaved(sources.size());
  std::mutex qmu;
  std::condition_variable qcv;
  std::deque<std::pair<size_t, fs::path>> queue;
  bool compiling = true;
  auto on_compiled = [&](size_t j, const CompileOutcome& c) {
    EvalResult& r = out[screened[j]];
    r.compile_log = c.log;
    r.compile_cached = c.cached;
    r.metrics["compile_s"] = c.seconds;
    if (c.ok) {
      std::lock_guard<std::mutex> lock(qmu);
      queue.emplace_back(screened[j], c.so_path);
      qcv.notify_one();
    } else {
      r.status = c.timed_out ? EvalStatus::compile_timeout : EvalStatus::compile_error;
      r.check = c.timed_out ? "compile_timeout" : "compile_error";
      r.reason = c.timed_out ? "the compiler ran past " + std::to_string(cfg.compile_timeout_s) + " s"
                             : "compilation failed (see compile_log)";
    }
  };
  auto work = [&](size_t w) {
    prewarm(w, to_compile.size());  // while the pool compiles (none left from precompile)
    for (;;) {
      size_t i;
      fs::path so;
      {
        std::unique_lock<std::mutex> lock(qmu);
        qcv.wait(lock, [&] { return !queue.empty() || !compiling; });
        if (queue.empty()) return;
        std::tie(i, so) = queue.front();
        queue.pop_front();
      }
      run_candidate(w, task, plan, so, out[i], interleaved[i]);
    }
  };
  auto stop_workers = [&](std::vector<std::thread>& threads) {
    {
      std::lock_guard<std::mutex> lock(qmu);
      compiling = false;
    }
    qcv.notify_all();
    for (auto& t : threads) t.join();
  };
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers.size() && w < std::max<size_t>(1, to_compile.size()); ++w)
    threads.emplace_back(work, w);
  try {
    pool->compile_all(to_compile, on_compiled);
  } catch (...) {
    stop_workers(threads);
    throw;
  }
  stop_workers(threads);
  return interleaved;
}

// One compiled candidate on worker `w`: checked and timed beside plan.beside, then profiled
// (ncu, compute-sanitizer) when it passed and the settings ask for it.
void Evaluator::Impl::run_candidate(size_t w, const TaskSpec& task, const BaselinePlan& plan,
                                    const fs::path& so, EvalResult& r, InterleavedTimes& interleaved) {
  const bool gpu = backend == "gpu";
  auto started = Clock::now();
  nlohmann::json req = request("eval", task, plan.beside, plan.lt_algo);
  req["so"] = so.string();
  nlohmann::json res;
  try {
    ++evaluations;
    res = workers[w]->evaluate(req);
  } catch (const std::exception& e) {
    res = {{"status", "internal_error"}, {"check", "worker"}, {"reason", e.what()}};
  }
  absorb(r, res, interleaved);
  r.metrics["seed_base"] = req["seed_base"];
  r.metrics["worker_s"] = std::chrono::duration<double>(Clock::now() - started).count();
  if (r.passed() && gpu && (cfg.ncu || cfg.sanitizer)) {
    auto extra = profile(so, task, device_of(w));
    for (auto it = extra.begin(); it != extra.end(); ++it) r.metrics[it.key()] = it.value();
    if (extra.contains("sanitizer") && !extra["sanitizer"]["ok"].get<bool>()) {
      r.status = EvalStatus::wrong_answer;
      r.check = "sanitizer_memcheck";
      r.reason = "compute-sanitizer memcheck reported errors (see metrics.sanitizer.log)";
    }
  }
}

// 4. The reference each candidate is scored against. Its interleaved time (the ratio of times
//    measured in the same rounds cancels the device's drift) is believed when it lies within
//    reward.baseline_drift of the clean stored one. Otherwise the reference is re-measured
//    alone, now: if the clean time agrees with the interleaved one the device drifted (the
//    stored row is replaced); if not, the candidate is scored against the clean time.
MergedBaselines Evaluator::Impl::merge_baselines(const TaskSpec& task, BaselinePlan& plan,
                                                 const std::vector<InterleavedTimes>& interleaved,
                                                 std::vector<EvalResult>& out) {
  MergedBaselines m;
  std::map<std::string, TimingStats>& table_stats = m.table;
  for (const auto& [name, row] : plan.cached) table_stats[name] = row.stats;
  m.believed.resize(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].passed()) continue;
    for (const auto& rb : plan.ref_raw) {
      auto it = interleaved[i].find(rb);
      if (it == interleaved[i].end()) continue;
      TimingStats mine = timing_from_json(it->second);
      if (!mine.valid()) continue;
      auto clean = table_stats.find(rb);
      double drift = clean != table_stats.end() && clean->second.valid()
                         ? mine.median_us / clean->second.median_us - 1
                         : 0;
      if (std::abs(drift) > cfg.baseline_drift) {
        const double stored_us = clean->second.median_us;  // `clean` sees the re-measured row next
        measure_baselines(task, plan.key, plan.ref_raw, plan.cached);
        for (const auto& [name, row] : plan.cached) table_stats[name] = row.stats;
        const TimingStats& now = table_stats[rb];
        const double agree = now.valid() ? mine.median_us / now.median_us - 1 : 1;
        out[i].metrics["baseline_check"] = {{"baseline", rb},
                                            {"interleaved_us", mine.median_us},
                                            {"stored_us", stored_us},
                                            {"remeasured_us", now.median_us}};
        if (std::abs(agree) > cfg.baseline_drift) {
          // Counted, not logged one by one (issue 38: dozens of lines a step on a busy host):
          // the result's metrics.baseline_disagreed, and one summary line per batch.
          KRL_LOG(debug) << "evaluator: " << rb << " at " << task.name << " timed beside a candidate ("
                         << mine.median_us << " us) disagrees with a clean re-measurement (" << now.median_us
                         << " us): the clean time is used";
          out[i].metrics["baseline_disagreed"] = true;
          mine = now;
        }
      }
      m.believed[i][rb] = mine;
    }
  }
  return m;
}

// 5. Reward and store: every candidate's baselines (its believed reference first, the shape's
//    clean table for the rest), its reward (failed_reward unless it passed and the reference was
//    timed), one row in the results store.
void Evaluator::Impl::score(const TaskSpec& task, const TaskKindRules& rules, const BaselinePlan& plan,
                            const MergedBaselines& merged, const std::vector<std::string>& sources,
                            const std::string& settings, Clock::time_point t0, std::vector<EvalResult>& out) {
  const bool gpu = backend == "gpu";
  const std::map<std::string, TimingStats>& table_stats = merged.table;
  for (size_t i = 0; i < sources.size(); ++i) {
    EvalResult& r = out[i];
    std::map<std::string, TimingStats> mine = table_stats;
    for (const auto& [name, t] : merged.believed[i]) mine[name] = t;
    for (const auto& name : plan.report) {
      TimingStats st;
      if (pick(mine, rules.raw(name, task, gpu), st)) r.baselines[name] = st;
    }
    r.reference = plan.reference;
    if (r.passed()) {
      TimingStats ref_stats;
      const std::map<std::string, TimingStats>& own = merged.believed[i];
      bool have_ref = pick(own, plan.ref_raw, ref_stats) ||
                      (plan.ref_stored && pick(table_stats, plan.ref_raw, ref_stats));
      if (!have_ref || !r.cand.valid()) {
        r.status = EvalStatus::internal_error;
        r.check = "no_reference_timing";
        r.reason = "the reference baseline " + plan.reference + " was not timed";
      } else {
        r.t_ref_us = ref_stats.median_us;
        r.speedup = r.t_ref_us / r.cand.median_us;
        r.reward = compute_reward(cfg, {{r.t_ref_us, r.cand.median_us, r.max_abs_dev}}, sources[i],
                                  &r.reward_reason);
        r.reward_reason += " [t_ref: " + plan.reference +
                           (rules.forbids_delegation() && !gpu ? " (host backend)" : "") + ", " + cfg.timing +
                           " time" + (own.count(plan.ref_raw[0]) ? "" : ", stored") + "]";
      }
    }
    if (!r.passed()) {
      r.reward = cfg.failed_reward;
      r.reward_reason = std::string("failed_reward ") + std::to_string(cfg.failed_reward) + ": " +
                        status_name(r.status) + (r.check.empty() ? "" : " (" + r.check + ")");
    }
    r.metrics["backend"] = backend;
    r.metrics["settings"] = settings;
    r.eval_s = std::chrono::duration<double>(Clock::now() - t0).count();
    try {
      store->add_result(r, sources[i], backend, device, timing_key(), settings);
    } catch (const std::exception& e) {
      KRL_LOG(warn) << "results store: " << e.what();
    }
  }
}

}  // namespace kernelrl
