// A host-backend RewardConfig sized for tests: few seeds and timing rounds, hot L2, its own
// compile cache in a scratch directory. Tests adjust single fields on top.
#pragma once

#include "reward/reward_config.h"
#include "test_util.h"

namespace kernelrl::testing {

inline RewardConfig fast_host_reward_config(const ScratchDir& dir) {
  RewardConfig cfg;
  cfg.backend = "host";
  cfg.cache_dir = (dir / "cache").string();
  cfg.seeds = 2;
  cfg.warmup = 1;
  cfg.min_rounds = 3;
  cfg.max_rounds = 5;
  cfg.timing_budget_ms = 5;
  cfg.compile_jobs = 2;
  cfg.l2 = "hot";
  return cfg;
}

}  // namespace kernelrl::testing
