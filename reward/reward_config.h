// RewardConfig: how candidates are evaluated and scored, mirrored 1:1 by the YAML `reward:`
// section. The reward follows CUDA-L2 Eq. 3:
//   r = (1/N) Σ_i (t_ref_i / t_cand_i − α·diff_i) − β·L(code)
#pragma once

#include <string>

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
  }
};

}  // namespace kernelrl
