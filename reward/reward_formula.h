// The reward of one candidate, CUDA-L2 Eq. 3:
//   r = (1/N) Σ_i ( min(t_ref_i / t_cand_i, clip) − α·diff_i ) − β·L(code)
// i runs over the candidate's timed shapes/inputs (N of them), t_ref_i is the configured
// reference baseline's median, diff_i the max |C − C_ref| on normal inputs, L(code) the length
// measure. A candidate that failed any step gets RewardConfig::failed_reward instead. The result
// is clipped into [failed_reward, clip] here, the reward's only clip (the trainer winsorizes).
#pragma once

#include <string>
#include <vector>

#include "reward/reward_config.h"

namespace kernelrl {

// L(code): kchars = characters/1000, klines = lines/1000, ktokens = C-like lexical tokens/1000
// (identifier/number runs and single punctuation characters; no tokenizer needed).
double code_length(const std::string& source, const std::string& measure);

struct RewardTerm {
  double t_ref_us = 0;
  double t_cand_us = 0;
  double diff = 0;
};

// Eq. 3 over N terms; `why` gets the formula with its numbers.
double compute_reward(const RewardConfig& cfg, const std::vector<RewardTerm>& terms,
                      const std::string& source, std::string* why = nullptr);

}  // namespace kernelrl
