#include "reward/reward_formula.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "common/error.h"

namespace kernelrl {

double code_length(const std::string& s, const std::string& measure) {
  if (measure == "kchars") return s.size() / 1000.0;
  if (measure == "klines") {
    size_t lines = std::count(s.begin(), s.end(), '\n');
    if (!s.empty() && s.back() != '\n') ++lines;
    return lines / 1000.0;
  }
  if (measure == "ktokens") {
    size_t tokens = 0;
    for (size_t i = 0; i < s.size();) {
      unsigned char c = s[i];
      if (std::isspace(c)) {
        ++i;
      } else if (std::isalnum(c) || c == '_') {
        while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' || s[i] == '.'))
          ++i;
        ++tokens;
      } else {
        ++i;
        ++tokens;
      }
    }
    return tokens / 1000.0;
  }
  throw ConfigError("reward.length_measure: expected kchars | klines | ktokens, got \"" + measure + "\"");
}

double compute_reward(const RewardConfig& cfg, const std::vector<RewardTerm>& terms,
                      const std::string& source, std::string* why) {
  if (terms.empty()) {
    if (why) *why = "no timed terms: failed_reward " + std::to_string(cfg.failed_reward);
    return cfg.failed_reward;
  }
  // r = (1/N) Σ_i (min(t_ref_i / t_cand_i, clip) − α·diff_i) − β·L(code)
  double sum = 0;
  double first_speedup = 0;
  bool clipped = false;
  for (const auto& t : terms) {
    double speedup = t.t_cand_us > 0 ? t.t_ref_us / t.t_cand_us : 0.0;
    if (&t == &terms.front()) first_speedup = speedup;
    if (speedup > cfg.speedup_clip) clipped = true;
    sum += std::min(speedup, cfg.speedup_clip) - cfg.alpha * t.diff;
  }
  const double length = code_length(source, cfg.length_measure);
  // The one reward clip: a passing candidate never scores below a failing one, and (with the
  // speedup clip) never above speedup_clip. The trainer only winsorizes (trainer/grpo.h).
  const double unclipped = sum / terms.size() - cfg.beta * length;
  const double r = std::clamp(unclipped, std::min(cfg.failed_reward, cfg.speedup_clip), cfg.speedup_clip);
  if (why) {
    char buf[512];
    if (terms.size() == 1)
      std::snprintf(buf, sizeof buf,
                    "r = min(t_ref/t_cand, %g) - alpha*diff - beta*L = min(%.4g/%.4g = %.4g, %g) - "
                    "%g*%.4g - %g*%.4g(%s) = %.6g%s",
                    cfg.speedup_clip, terms[0].t_ref_us, terms[0].t_cand_us, first_speedup,
                    cfg.speedup_clip, cfg.alpha, terms[0].diff, cfg.beta, length,
                    cfg.length_measure.c_str(), unclipped, clipped ? " (speedup clipped)" : "");
    else
      std::snprintf(buf, sizeof buf,
                    "r = (1/%zu) sum_i(min(t_ref_i/t_cand_i, %g) - %g*diff_i) - %g*%.4g(%s) = %.6g%s",
                    terms.size(), cfg.speedup_clip, cfg.alpha, cfg.beta, length,
                    cfg.length_measure.c_str(), unclipped, clipped ? " (some speedups clipped)" : "");
    *why = buf;
    if (r != unclipped) *why += ", clipped to " + std::to_string(r);
  }
  return r;
}

}  // namespace kernelrl
