#include "reward/eval_result.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kernelrl {

namespace {
const char* const kStatusNames[] = {"ok",           "screen_rejected", "compile_error",
                                    "compile_timeout", "load_error",    "launch_error",
                                    "wrong_answer", "crash",           "hang",
                                    "cuda_error",   "sandbox_violation", "reward_hack", "unsupported",
                                    "internal_error"};
}

const char* status_name(EvalStatus s) { return kStatusNames[static_cast<int>(s)]; }

EvalStatus status_from_name(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(EvalStatus::internal_error); ++i)
    if (name == kStatusNames[i]) return static_cast<EvalStatus>(i);
  return EvalStatus::internal_error;
}

TimingStats timing_stats(std::vector<double> s) {
  TimingStats t;
  if (s.empty()) return t;
  std::sort(s.begin(), s.end());
  auto pct = [&](double q) {  // linear interpolation between order statistics
    double pos = q * (s.size() - 1);
    size_t lo = static_cast<size_t>(std::floor(pos));
    size_t hi = std::min(lo + 1, s.size() - 1);
    return s[lo] + (pos - lo) * (s[hi] - s[lo]);
  };
  t.n = static_cast<int64_t>(s.size());
  t.median_us = pct(0.5);
  t.p10_us = pct(0.1);
  t.p90_us = pct(0.9);
  t.mean_us = std::accumulate(s.begin(), s.end(), 0.0) / s.size();
  double var = 0;
  for (double x : s) var += (x - t.mean_us) * (x - t.mean_us);
  t.cv = s.size() > 1 && t.mean_us > 0 ? std::sqrt(var / (s.size() - 1)) / t.mean_us : 0;
  return t;
}

nlohmann::json to_json(const TimingStats& t) {
  nlohmann::json j = {{"median_us", t.median_us}, {"mean_us", t.mean_us}, {"p10_us", t.p10_us},
                      {"p90_us", t.p90_us},       {"cv", t.cv},           {"n", t.n},
                      {"timing", t.timing}};
  if (t.call_median_us > 0) j["call_median_us"] = t.call_median_us;
  if (t.clock_mhz > 0) {
    j["clock_mhz"] = t.clock_mhz;
    j["as_run_median_us"] = t.as_run_median_us;
    j["rated_median_us"] = t.rated_median_us;
  }
  return j;
}

TimingStats timing_from_json(const nlohmann::json& j) {
  TimingStats t;
  if (!j.is_object()) return t;
  t.median_us = j.value("median_us", 0.0);
  t.mean_us = j.value("mean_us", 0.0);
  t.p10_us = j.value("p10_us", 0.0);
  t.p90_us = j.value("p90_us", 0.0);
  t.cv = j.value("cv", 0.0);
  t.n = j.value("n", int64_t{0});
  t.timing = j.value("timing", std::string());
  t.call_median_us = j.value("call_median_us", 0.0);
  t.clock_mhz = j.value("clock_mhz", 0.0);
  t.as_run_median_us = j.value("as_run_median_us", 0.0);
  t.rated_median_us = j.value("rated_median_us", 0.0);
  return t;
}

nlohmann::json to_json(const EvalResult& r) {
  nlohmann::json b = nlohmann::json::object();
  for (const auto& [k, v] : r.baselines) b[k] = to_json(v);
  return {{"hash", r.hash},
          {"task", r.task},
          {"shape", r.shape},
          {"status", status_name(r.status)},
          {"check", r.check},
          {"reason", r.reason},
          {"reward", r.reward},
          {"reward_reason", r.reward_reason},
          {"speedup", r.speedup},
          {"reference", r.reference},
          {"t_ref_us", r.t_ref_us},
          {"candidate", to_json(r.cand)},
          {"baselines", b},
          {"max_abs_dev", r.max_abs_dev},
          {"dev_bound", r.dev_bound},
          {"compile_log", r.compile_log},
          {"compile_cached", r.compile_cached},
          {"metrics", r.metrics},
          {"eval_s", r.eval_s}};
}

EvalResult result_from_json(const nlohmann::json& j) {
  EvalResult r;
  r.hash = j.value("hash", "");
  r.task = j.value("task", "");
  r.shape = j.value("shape", "");
  r.status = status_from_name(j.value("status", "internal_error"));
  r.check = j.value("check", "");
  r.reason = j.value("reason", "");
  r.reward = j.value("reward", 0.0);
  r.reward_reason = j.value("reward_reason", "");
  r.speedup = j.value("speedup", 0.0);
  r.reference = j.value("reference", "");
  r.t_ref_us = j.value("t_ref_us", 0.0);
  if (j.contains("candidate")) r.cand = timing_from_json(j["candidate"]);
  if (j.contains("baselines"))
    for (auto it = j["baselines"].begin(); it != j["baselines"].end(); ++it)
      r.baselines[it.key()] = timing_from_json(it.value());
  r.max_abs_dev = j.value("max_abs_dev", 0.0);
  r.dev_bound = j.value("dev_bound", 0.0);
  r.compile_log = j.value("compile_log", "");
  r.compile_cached = j.value("compile_cached", false);
  if (j.contains("metrics")) r.metrics = j["metrics"];
  r.eval_s = j.value("eval_s", 0.0);
  return r;
}

}  // namespace kernelrl
