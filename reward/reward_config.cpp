#include "reward/reward_config.h"

#include <sstream>

#include "common/error.h"

namespace kernelrl {

namespace {

// Every field of a config as (key, value rendered canonically, bounds, choices), read through
// visit(): the one list of reward.* knobs.
class FieldLister final : public cfg::Visitor {
 public:
  std::vector<RewardField> fields;
  using cfg::Visitor::field;
  void field(const char* key, bool& v, const char*) override { add(key, v ? "true" : "false", "bool"); }
  void field(const char* key, int64_t& v, const char*, cfg::Bounds b) override {
    add(key, std::to_string(v), "int", b);
  }
  void field(const char* key, double& v, const char*, cfg::Bounds b) override {
    std::ostringstream s;
    s.precision(17);
    s << v;
    add(key, s.str(), "double", b);
  }
  void field(const char* key, std::string& v, const char*, cfg::Choices c) override {
    add(key, "\"" + v + "\"", "string", {}, c.allowed);
  }
  void field(const char* key, std::vector<int64_t>& v, const char*, cfg::Bounds b) override {
    std::string s = "[";
    for (auto x : v) s += std::to_string(x) + ",";
    add(key, s + "]", "int_list", b);
  }
  void field(const char* key, std::vector<double>& v, const char*, cfg::Bounds b) override {
    std::ostringstream s;
    s.precision(17);
    s << "[";
    for (auto x : v) s << x << ",";
    s << "]";
    add(key, s.str(), "double_list", b);
  }
  void field(const char* key, std::vector<std::string>& v, const char*, cfg::Choices c) override {
    std::string s = "[";
    for (const auto& x : v) s += "\"" + x + "\",";
    add(key, s + "]", "string_list", {}, c.allowed);
  }
  void field(const char* key, YAML::Node& v, const char*) override {
    std::ostringstream s;
    s << v;
    add(key, s.str(), "yaml");
  }

 protected:
  void enter(const char*, const char*) override {}
  void leave() override {}
  size_t begin_list(const char*, const char*, size_t current) override { return current; }
  void begin_item(size_t) override {}
  void end_item() override {}
  void end_list() override {}

 private:
  void add(const char* key, std::string value, const char* type, cfg::Bounds b = {},
           std::vector<std::string> choices = {}) {
    fields.push_back({key, std::move(value), type, b, std::move(choices)});
  }
};

// Two independent 64-bit FNV-1a streams, as the compile cache's content hash (reward/compile.h
// is not linked into the worker).
std::string hash16(const std::string& data) {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (unsigned char c : data) {
    h1 = (h1 ^ c) * 0x100000001b3ull;
    h2 = (h2 ^ (c + 0x9e)) * 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h1 ^ (h2 >> 7) ^ (h2 << 13)));
  return buf;
}

}  // namespace

std::vector<RewardField> reward_fields(const RewardConfig& c) {
  RewardConfig copy = c;
  FieldLister l;
  copy.visit(l);
  return l.fields;
}

const std::map<std::string, std::string>& fingerprint_exempt_fields() {
  static const std::map<std::string, std::string> exempt = {
      {"backend", "the backend in force (gpu or host) is part of every result's key"},
      {"store", "where results are written"},
      {"cache_dir", "where compiled candidates are kept"},
      {"include_dirs", "compile inputs: in the source hash of every compiled candidate"},
      {"compile_jobs", "how many compilers run at once"},
      {"workers", "how many GPUs evaluate at once; each result is one worker's"},
      {"gpus", "which GPUs evaluate; the device's name and driver are part of every result's key"},
      {"spare_runners", "when a candidate's runner starts, not what it runs: each is fresh and holds no "
                        "candidate until one is loaded"},
      {"refresh_baselines", "when stored baselines are re-measured, not what a measurement is"},
      {"ncu", "adds profiler metrics to a passing result; changes no verdict, time or reward"},
  };
  return exempt;
}

std::string settings_fingerprint(const RewardConfig& c, const std::string& sandbox_parts) {
  // Everything that changes a verdict, a time or a reward: every reward.* field but the exempt
  // ones (so a new knob is in it without an edit here), the sandbox parts in force (a candidate
  // that writes a file passes without the sandbox and fails with it) and the evaluation
  // protocol's version (3: candidates' host code in a runner, call-boundary verification).
  std::string s = "protocol=3;sandbox=" + sandbox_parts + ";";
  const auto& exempt = fingerprint_exempt_fields();
  for (const auto& f : reward_fields(c))
    if (!exempt.count(f.key)) s += f.key + "=" + f.value + ";";
  return hash16(s);
}

std::string baseline_timing_key(const RewardConfig& c) {
  if (c.timing != "device") return c.timing + "/" + c.l2;
  return c.timing + "/" + c.l2 + "/g" + std::to_string(c.graph_calls) +
         (c.clock_basis == "as_run" ? "" : "/" + c.clock_basis);
}

std::string reward_config_yaml(const RewardConfig& c) {
  RewardConfig copy = c;
  return cfg::to_yaml(copy);
}

RewardConfig reward_config_from_yaml(const std::string& text) {
  RewardConfig c;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const std::exception& e) {
    throw ConfigError(std::string("reward settings: not YAML: ") + e.what());
  }
  cfg::read(root, c);
  return c;
}

void check_reward_config(const RewardConfig& c, const std::string& who) {
  if (c.min_rounds > c.max_rounds)
    throw ConfigError("reward.min_rounds: " + std::to_string(c.min_rounds) +
                      " is above reward.max_rounds " + std::to_string(c.max_rounds) + who);
  for (size_t i = 0; i < c.gpus.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (c.gpus[i] == c.gpus[j])
        throw ConfigError("reward.gpus: GPU " + std::to_string(c.gpus[i]) +
                          " is listed twice (one worker a GPU)" + who);
  if (!c.gpus.empty() && c.workers != 1)
    throw ConfigError("reward.workers: " + std::to_string(c.workers) +
                      " beside reward.gpus: set one of them (with reward.gpus every listed GPU gets a worker)" + who);
}

std::vector<int> evaluation_gpus(const RewardConfig& c, int local_rank, int local_ranks, int device_count,
                                 bool policy_gpus) {
  check_reward_config(c);
  std::vector<int> mine;
  if (c.gpus.empty()) return mine;
  const int n = static_cast<int>(c.gpus.size());
  for (int64_t g : c.gpus) {
    if (device_count > 0 && g >= device_count)
      throw ConfigError("reward.gpus: GPU " + std::to_string(g) + " is not on this host (" +
                        std::to_string(device_count) + " GPUs: 0-" + std::to_string(device_count - 1) + ")");
    if (policy_gpus && g < local_ranks)
      throw ConfigError("reward.gpus: GPU " + std::to_string(g) + " is policy rank " + std::to_string(g) +
                        "'s (cuda:LOCAL_RANK): list GPUs no rank trains on, or [] for each rank's own GPU");
  }
  if (n < local_ranks)
    throw ConfigError("reward.gpus: " + std::to_string(n) + " GPU(s) for " + std::to_string(local_ranks) +
                      " ranks on this host: list at least one per rank");
  for (int i = n * local_rank / local_ranks; i < n * (local_rank + 1) / local_ranks; ++i)
    mine.push_back(static_cast<int>(c.gpus[i]));
  return mine;
}

}  // namespace kernelrl
