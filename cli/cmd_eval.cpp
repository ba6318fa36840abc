// `kernelrl eval KERNEL.cu --shape MxNxK`: verdict, times and speedups of one kernel, checked
// and timed by the evaluator (reward/evaluator.h) against the baselines. Exit 0 when the kernel
// passed, 1 when it was evaluated and failed, 2 on bad input.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "data/tasks/task_suite.h"
#include "reward/compile.h"
#include "reward/evaluator.h"
#include "reward/task_json.h"

namespace kernelrl::cli {

namespace {

std::string us(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", x);
  return b;
}

void print_result(const EvalResult& r, const std::string& kernel, const std::string& backend,
                  const std::string& device, const std::string& sandbox) {
  std::printf("kernel   %s\ntask     %s   (backend %s, %s)\nsandbox: %s\n", kernel.c_str(),
              r.task.c_str(), backend.c_str(), device.c_str(), sandbox.c_str());
  std::printf("verdict  %s%s%s\n         %s\n", status_name(r.status),
              r.check.empty() ? "" : " [", r.check.empty() ? "" : (r.check + "]").c_str(),
              r.reason.c_str());
  if (!r.compile_log.empty() && r.status == EvalStatus::compile_error)
    std::printf("compiler log:\n%s\n", r.compile_log.c_str());
  if (r.cand.valid()) {
    // The mode's times first; device mode also shows each contender's eager call time (the
    // host's cost of issuing the call included), which is what a caller without graphs sees.
    const bool device = r.cand.timing == "device";
    std::printf("\ntimes in microseconds per call, %s timing%s\n", r.cand.timing.c_str(),
                device ? " (CUDA-graph replay: kernel device time); call_us = events around one eager call"
                       : " (events around each call: host issue cost included)");
    // sm_mhz: the median SM clock the contender's replays ran at (from ~4096^3 up the power cap
    // lowers it; reward.clock_basis says whether median_us is at that clock or rescaled).
    std::printf("%-18s %11s %11s %11s %7s %9s %11s %9s %7s\n", "contender", "median_us", "p10_us",
                "p90_us", "cv", "speedup", "call_us", "call_spd", "sm_mhz");
    auto row = [&](const std::string& name, const TimingStats& t, bool cand) {
      double sp = cand ? 0 : t.median_us / r.cand.median_us;
      double csp = !cand && t.call_median_us > 0 && r.cand.call_median_us > 0
                       ? t.call_median_us / r.cand.call_median_us : 0;
      std::printf("%-18s %11s %11s %11s %7.4f %9s %11s %9s %7s\n", name.c_str(), us(t.median_us).c_str(),
                  us(t.p10_us).c_str(), us(t.p90_us).c_str(), t.cv,
                  sp > 0 ? (us(sp) + "x").c_str() : "-",
                  t.call_median_us > 0 ? us(t.call_median_us).c_str() : "-",
                  csp > 0 ? (us(csp) + "x").c_str() : "-",
                  t.clock_mhz > 0 ? std::to_string(static_cast<int>(std::lround(t.clock_mhz))).c_str() : "-");
    };
    row("candidate", r.cand, true);
    for (const auto& [name, t] : r.baselines)
      if (t.valid()) row(name, t, false);
    std::printf("\nmax|C-C_ref| %.6g (bound %.6g)\n", r.max_abs_dev, r.dev_bound);
  }
  std::printf("reward   %.6g   %s\n", r.reward, r.reward_reason.c_str());
}

}  // namespace

void register_eval(CLI::App& app) {
  struct Opts {
    std::string kernel, shape, layout = "nn", timing = "device", baselines = "all", json;
    std::string backend = "auto", store, cache_dir, l2 = "cold", acc = "f32", reference;
    std::string sandbox = "auto";
    std::vector<std::string> set;
    bool refresh = false, ncu = false, sanitizer = false;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand(
      "eval", "Evaluate one candidate kernel against the baselines (exit 0 passed, 1 failed)");
  sub->add_option("kernel", o->kernel, "candidate .cu file (.cpp for the host backend)")->required();
  sub->add_option("--shape", o->shape, "MxNxK")->required();
  sub->add_option("--layout", o->layout, "nn | tn")->check(CLI::IsMember({"nn", "tn"}));
  sub->add_option("--acc", o->acc, "f32 | f16 accumulation the task requires")
      ->check(CLI::IsMember({"f32", "f16"}));
  sub->add_option("--timing", o->timing, "device (CUDA-graph replay, default) | call | server")
      ->check(CLI::IsMember({"device", "call", "server"}));
  sub->add_option("--l2", o->l2, "cold | hot")->check(CLI::IsMember({"cold", "hot"}));
  sub->add_option("--baselines", o->baselines, "all | lt-auto | ... (comma-separated)");
  sub->add_option("--reference", o->reference, "baseline for the speedup in the reward (default lt-auto-max)");
  sub->add_option("--backend", o->backend, "auto | gpu | host")->check(CLI::IsMember({"auto", "gpu", "host"}));
  sub->add_option("--sandbox", o->sandbox, "OS sandbox for the candidate: auto | on | off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  sub->add_option("--store", o->store, "results store (default <cache>/results.sqlite)");
  sub->add_option("--cache-dir", o->cache_dir, "compile cache (default ~/.cache/kernelrl)");
  sub->add_flag("--refresh-baselines", o->refresh, "re-measure baselines even if stored");
  sub->add_flag("--ncu", o->ncu, "collect ncu metrics (--clock-control none) if it passes");
  sub->add_flag("--sanitizer", o->sanitizer, "run compute-sanitizer memcheck if it passes");
  sub->add_option("--json", o->json, "also write the result as JSON");
  sub->add_option("--set", o->set,
                  "any reward setting, KEY=VALUE as in a config's reward: section (e.g. --set "
                  "min_rounds=30); applied after the flags above");
  sub->callback([o] {
    RewardConfig cfg;
    cfg.backend = o->backend;
    cfg.timing = o->timing;
    cfg.l2 = o->l2;
    cfg.cache_dir = o->cache_dir;
    cfg.refresh_baselines = o->refresh;
    cfg.ncu = o->ncu;
    cfg.sanitizer = o->sanitizer;
    cfg.sandbox = o->sandbox;
    cfg.baselines.clear();
    auto allowed = report_baseline_names();
    for (const auto& b : split_list(o->baselines)) {
      if (b != "all" && std::find(allowed.begin(), allowed.end(), b) == allowed.end())
        throw UserError("--baselines: unknown baseline \"" + b +
                        "\"; allowed: all, torch, cublas-nn, cublas-tn, cublas-max, lt-heuristic, "
                        "lt-heuristic-max, lt-auto, lt-auto-max");
      cfg.baselines.push_back(b);
    }
    if (!o->reference.empty()) {
      if (std::find(allowed.begin(), allowed.end(), o->reference) == allowed.end())
        throw UserError("--reference: unknown baseline \"" + o->reference + "\"");
      cfg.baseline = o->reference;
    }
    if (!o->set.empty()) {
      // Through the config struct itself: the same keys, checks and messages as a YAML file.
      YAML::Node root = YAML::Load(reward_config_yaml(cfg));
      cfg::apply_overrides(root, o->set);
      cfg = RewardConfig{};
      cfg::read(root, cfg);
    }
    int64_t m, n, k;
    parse_shape(o->shape, m, n, k);
    std::string source = read_file(o->kernel, "kernel");
    fs::path cache = cfg.cache_dir.empty() ? default_cache_dir() : fs::path(cfg.cache_dir);
    fs::path store = o->store.empty() ? cache / "results.sqlite" : fs::path(o->store);
    Evaluator ev(cfg, store);
    TaskSpec task = hgemm_task(m, n, k, o->layout, o->acc);
    EvalResult r = ev.evaluate_one(task, source);
    print_result(r, o->kernel, ev.backend(), ev.device_name(), ev.sandbox());
    if (!o->json.empty()) {
      auto j = to_json(r);
      j["kernel"] = o->kernel;
      j["backend"] = ev.backend();
      j["device"] = ev.device_name();
      j["sandbox"] = ev.sandbox();
      atomic_write(o->json, j.dump(2) + "\n");
    }
    exit_code = r.passed() ? 0 : 1;
  });
}

}  // namespace kernelrl::cli
