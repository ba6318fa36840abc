// A host-backend RewardConfig sized for tests: few seeds and timing rounds, hot L2, its own
// compile cache in a scratch directory. Tests adjust single fields on top. And the misbehaving
// candidates of the sandbox and reward-integrity tests (unit and gpu).
#pragma once

#include <filesystem>
#include <string>

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

// `kernel` (a correct candidate) whose first call first runs variant `hostile` of
// tests/data/kernels/sandbox_misbehave.h, which aims its writes at `target_dir`.
inline std::string misbehaving_candidate(int hostile, const std::filesystem::path& target_dir,
                                         const std::string& kernel) {
  return "#define HOSTILE " + std::to_string(hostile) + "\n#define TARGET_DIR \"" +
         target_dir.string() + "\"\n" +
         read_text(std::string(KERNELRL_SOURCE_DIR) + "/tests/data/kernels/sandbox_misbehave.h") +
         "#define kernelrl_launch correct_launch\n" + kernel +
         "\n#undef kernelrl_launch\n"
         "extern \"C\" int kernelrl_launch(const kernelrl_args* a, void* s) {\n"
         "  misbehave_once();\n"
         "  return correct_launch(a, s);\n"
         "}\n";
}

// `kernel` (a correct candidate) whose every call first writes a forged result line to every
// pipe it holds (tests/data/kernels/forged_line.h), then computes, or (`compute` false) returns
// without computing.
inline std::string forging_candidate(const std::string& kernel, bool compute) {
  return read_text(std::string(KERNELRL_SOURCE_DIR) + "/tests/data/kernels/forged_line.h") +
         "#define kernelrl_launch correct_launch\n" + kernel +
         "\n#undef kernelrl_launch\n"
         "extern \"C\" int kernelrl_launch(const kernelrl_args* a, void* s) {\n"
         "  kernelrl_fixture_forge_result_lines();\n" +
         (compute ? "  return correct_launch(a, s);\n" : "  (void)a;\n  (void)s;\n  return 0;\n") + "}\n";
}

}  // namespace kernelrl::testing
