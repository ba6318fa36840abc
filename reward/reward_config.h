// RewardConfig: how candidates are evaluated and scored, mirrored 1:1 by the YAML `reward:`
// section. The reward follows CUDA-L2 Eq. 3:
//   r = (1/N) Σ_i (t_ref_i / t_cand_i − α·diff_i) − β·L(code)
// The evaluator itself is reward/evaluator.h; this header only holds its knobs.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace kernelrl {

struct RewardConfig {
  std::string backend = "auto";     // auto (gpu when a GPU is present, else host) | gpu | host
  std::string baseline = "lt-auto-max";  // t_ref for HGEMM tasks
  double alpha = 0.1;               // α: weight of the max-abs deviation diff_i
  double beta = 0.0;                // β: weight of the code length L(code)
  std::string length_measure = "kchars";  // L(code): kchars (characters/1000) | klines | ktokens
  double failed_reward = -1.0;      // reward of a candidate that fails to compile or check
  double speedup_clip = 10.0;       // speedups above this are clipped (reward-hacking guard)
  std::string mode = "offline";     // offline (back-to-back) | server (idle gaps)
  std::string store = "";           // SQLite results store; "" = <run_dir>/results.sqlite
  // ---- checking ----
  int64_t seeds = 3;                // correctness seeds (each: {0,1}, normal, perturbed trials)
  double deviation_slack = 2.0;     // max|C−C_ref| ≤ slack · max(baseline deviation, 2^-11·max|C_ref|)
  // ---- timing ----
  std::string l2 = "cold";          // cold (rotate input sets larger than L2) | hot (one set)
  int64_t warmup = 3;               // untimed calls per contender before timing
  int64_t min_rounds = 5;           // timed calls per contender, at least
  int64_t max_rounds = 50;          // timed calls per contender, at most
  double timing_budget_ms = 400;    // rounds = clamp(budget / slowest contender, min, max)
  double server_gap_us = 200;       // server mode: mean of the exponential idle gap before a call
  std::vector<std::string> baselines = {};  // extra baselines to report besides `baseline`; [all]
  bool refresh_baselines = false;   // re-measure baselines even when the store has them
  // ---- compile and isolation ----
  int64_t compile_jobs = 0;         // parallel compiler processes; 0 = number of cores
  double compile_timeout_s = 120;   // per candidate
  double call_timeout_s = 20;       // a candidate call (or silent worker) longer than this = hang
  std::string cache_dir = "";       // compile cache; "" = $XDG_CACHE_HOME/kernelrl or ~/.cache/kernelrl
  int64_t workers = 1;              // worker processes (one per GPU, GPUs 0..workers-1)
  // ---- optional extras for kept candidates ----
  bool ncu = false;                 // ncu --clock-control none metrics for passing candidates
  bool sanitizer = false;           // compute-sanitizer memcheck for passing candidates

  void visit(cfg::Visitor& v) {
    v.field("backend", backend, "auto | gpu | host", {"auto", "gpu", "host"});
    v.field("baseline", baseline, "reference timing for HGEMM speedups",
            {"torch", "cublas-nn", "cublas-tn", "cublas-max", "lt-heuristic", "lt-heuristic-max",
             "lt-auto", "lt-auto-max"});
    v.field("alpha", alpha, "α, weight of the deviation penalty", cfg::at_least(0));
    v.field("beta", beta, "β, weight of the code-length penalty", cfg::at_least(0));
    v.field("length_measure", length_measure, "L(code): kchars | klines | ktokens",
            {"kchars", "klines", "ktokens"});
    v.field("failed_reward", failed_reward, "reward of a failed candidate");
    v.field("speedup_clip", speedup_clip, "clip speedups above this", cfg::greater_than(0));
    v.field("mode", mode, "offline | server", {"offline", "server"});
    v.field("store", store, "SQLite results store path; empty = <run_dir>/results.sqlite");
    v.field("seeds", seeds, "correctness seeds per candidate", cfg::in_closed(1, 100));
    v.field("deviation_slack", deviation_slack,
            "allowed max|C-C_ref| = slack * max(baseline deviation, 2^-11*max|C_ref|)",
            cfg::at_least(1));
    v.field("l2", l2, "cold (rotate input sets larger than L2) | hot", {"cold", "hot"});
    v.field("warmup", warmup, "untimed calls per contender", cfg::in_closed(0, 1000));
    v.field("min_rounds", min_rounds, "timed calls per contender, at least", cfg::in_closed(1, 100000));
    v.field("max_rounds", max_rounds, "timed calls per contender, at most", cfg::in_closed(1, 100000));
    v.field("timing_budget_ms", timing_budget_ms, "rounds = clamp(budget / slowest, min, max)",
            cfg::greater_than(0));
    v.field("server_gap_us", server_gap_us, "server mode: mean idle gap before a call (µs)",
            cfg::at_least(0));
    v.field("baselines", baselines, "extra baselines to report; [all] for every one",
            {"all", "torch", "cublas-nn", "cublas-tn", "cublas-max", "lt-heuristic",
             "lt-heuristic-max", "lt-auto", "lt-auto-max"});
    v.field("refresh_baselines", refresh_baselines, "re-measure baselines even if stored");
    v.field("compile_jobs", compile_jobs, "parallel compiler processes; 0 = cores",
            cfg::in_closed(0, 1024));
    v.field("compile_timeout_s", compile_timeout_s, "compile timeout per candidate (s)",
            cfg::greater_than(0));
    v.field("call_timeout_s", call_timeout_s, "a call longer than this is a hang (s)",
            cfg::greater_than(0));
    v.field("cache_dir", cache_dir, "compile cache dir; empty = ~/.cache/kernelrl");
    v.field("workers", workers, "worker processes, one per GPU", cfg::in_closed(1, 64));
    v.field("ncu", ncu, "collect ncu metrics for passing candidates");
    v.field("sanitizer", sanitizer, "compute-sanitizer memcheck for passing candidates");
  }
};

}  // namespace kernelrl
