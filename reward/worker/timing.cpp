#include "reward/worker/timing.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <set>
#include <thread>

namespace kernelrl::worker {

namespace {

std::vector<size_t> unique_sets(const std::vector<size_t>& sets) {
  std::set<size_t> u(sets.begin(), sets.end());
  return {u.begin(), u.end()};
}

nlohmann::json& probe_log() {
  static nlohmann::json log = nlohmann::json::array();
  return log;
}

nlohmann::json& profile_log() {
  static nlohmann::json log = nlohmann::json::object();
  return log;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void prof_add(const std::string& phase, double seconds) {
  nlohmann::json& log = profile_log();
  log[phase] = log.value(phase, 0.0) + seconds;
}

nlohmann::json take_profile() {
  nlohmann::json out = profile_log();
  profile_log() = nlohmann::json::object();
  return out;
}

ProfScope::ProfScope(const char* phase) : phase_(phase), t0_(now_s()) {}
ProfScope::~ProfScope() { prof_add(phase_, now_s() - t0_); }

bool timing_diag(const char* flag) {
  static const std::string v = [] {
    const char* e = std::getenv("KERNELRL_TIMING_DIAG");
    return std::string(",") + (e ? e : "") + ",";
  }();
  return v.find(std::string(",") + flag + ",") != std::string::npos;
}

void diag_probe(Backend& be, const std::string& where) {
  if (timing_diag("probe")) probe_log().push_back({where, be.probe_us()});
}

nlohmann::json take_probes() {
  nlohmann::json out = probe_log();
  probe_log() = nlohmann::json::array();
  return out;
}

std::vector<double> rated_samples(const ContenderTimes& t, double rated_mhz) {
  std::vector<double> out;
  if (rated_mhz <= 0 || t.clock_mhz.size() != t.samples_us.size()) return out;
  for (size_t i = 0; i < t.samples_us.size(); ++i)
    if (t.clock_mhz[i] > 0) out.push_back(t.samples_us[i] * t.clock_mhz[i] / rated_mhz);
  return out;
}

std::vector<double> basis_samples(const ContenderTimes& t, const std::string& basis, double rated_mhz) {
  if (basis == "rated") {
    std::vector<double> r = rated_samples(t, rated_mhz);
    if (!r.empty()) return r;
  }
  return t.samples_us;
}

std::vector<size_t> screen_survivors(const std::vector<double>& medians, double within,
                                     size_t min_keep, size_t max_keep) {
  std::vector<size_t> timed;
  for (size_t i = 0; i < medians.size(); ++i)
    if (medians[i] > 0) timed.push_back(i);  // NaN compares false: left out
  std::stable_sort(timed.begin(), timed.end(),
                   [&](size_t a, size_t b) { return medians[a] < medians[b]; });
  std::vector<size_t> keep;
  for (size_t i : timed) {
    if (keep.size() >= max_keep) break;
    if (keep.size() >= min_keep && medians[i] > medians[timed[0]] * (1 + within)) break;
    keep.push_back(i);
  }
  return keep;
}

TimingOutcome time_contenders(Backend& be, std::vector<Contender> cs, const TimingPlan& plan,
                              const TimingHooks& hooks, std::mt19937_64& rng, const Tick& tick) {
  TimingOutcome out;
  const bool device = plan.mode == "device";
  const size_t n_sets = std::max<size_t>(1, plan.n_sets);
  size_t rot = 0;
  auto next_set = [&] { return rot++ % n_sets; };
  // Untimed, before a timed unit: fresh values, then (cold) an L2 flush.
  auto prepare = [&](const std::vector<size_t>& sets) {
    ProfScope p("t_refresh_flush");
    if (hooks.refresh) hooks.refresh(sets);
    if (plan.cold_l2) be.flush_l2();
  };

  std::optional<ProfScope> phase(std::in_place, "t_warmup");
  // Warm-up (module load, library heuristics, allocator caches) before any capture.
  for (auto& c : cs) {
    for (int w = 0; w < plan.warmup; ++w) c.call(next_set());
    be.wait_stream(plan.timeout_s * std::max(1, plan.warmup));
  }
  tick("warm-up done");

  // Device mode: one graph per contender, call i on set i mod n_sets.
  std::vector<size_t> graph_sets, graph_unique;
  std::vector<size_t> graph_of(cs.size(), 0);
  nlohmann::json graph_nodes = nlohmann::json::object();  // per contender: what its graph holds
  phase.emplace("t_capture");
  if (device) {
    for (int i = 0; i < plan.graph_calls; ++i) graph_sets.push_back(static_cast<size_t>(i) % n_sets);
    // The order the graph's calls take the sets in is drawn now, after the candidate's runner
    // captured its calls and ended: a call cannot know which set the next one reads (issue 38,
    // docs/sandbox.md "Cold means cold"). KERNELRL_TIMING_DIAG=fixed_sets keeps set order; the
    // host backend (no L2 to warm across calls that matters here) keeps it too.
    if (be.gpu() && !timing_diag("fixed_sets")) std::shuffle(graph_sets.begin(), graph_sets.end(), rng);
    graph_unique = unique_sets(graph_sets);
    std::vector<Contender> kept;
    for (size_t c = 0; c < cs.size(); ++c) {
      try {
        // By value: the host backend keeps the callable and replays it later.
        graph_of[kept.size()] = be.capture([call = cs[c].call, all = cs[c].call_all, sets = graph_sets] {
          if (all) all(sets);
          else
            for (size_t s : sets) call(s);
        });
        kept.push_back(cs[c]);
      } catch (const CaptureFailure& e) {
        if (c == 0 && plan.candidate_first) throw;  // a verdict for the harness
        out.dropped.push_back(cs[c].name + ": " + e.what());
      }
    }
    cs = std::move(kept);
    graph_of.resize(cs.size());
    for (size_t c = 0; c < cs.size(); ++c) {
      std::string census = be.graph_census(graph_of[c]);
      if (!census.empty()) graph_nodes[cs[c].name] = census;
    }
    for (size_t c = 0; c < cs.size(); ++c) be.replay(graph_of[c]);  // first replay uploads
    be.wait_stream(plan.timeout_s * plan.graph_calls * cs.size());
    tick("captured " + std::to_string(cs.size()) + " graphs");
  }

  double unit_clock = 0;  // the SM clock of the last device unit (MHz; 0 unknown)
  // One timed unit of contender c: a replay (device) or one call (call/server); returns µs
  // per call.
  auto timed_unit = [&](size_t c, bool verify) -> double {
    if (device) {
      if (timing_diag("prereplay")) {
        be.replay(graph_of[c]);
        be.wait_stream(plan.timeout_s * plan.graph_calls);
      }
      prepare(graph_unique);
      std::optional<ProfScope> step;
      if (verify) step.emplace("t_verify");
      if (verify && hooks.poison) hooks.poison(c, graph_unique);
      if (verify && plan.cold_l2) be.flush_l2();
      if (!verify) step.emplace("t_replay");
      // The replay is queued behind a hold that opens once it is issued: the interval between
      // the marks is the graph's device time, not the host's latency in launching it.
      const bool hold = !timing_diag("nohold");
      if (hold) be.hold_stream(plan.timeout_s);
      try {
        be.clock_stamp(0);
        be.mark(0);
        be.replay(graph_of[c]);
        be.mark(1);
        be.clock_stamp(1);
      } catch (...) {
        be.gate_open();
        throw;
      }
      if (hold) be.gate_open();
      be.wait_stream(plan.timeout_s * plan.graph_calls);
      if (verify && hooks.verify) hooks.verify(c, graph_unique);
      step.reset();
      unit_clock = be.clock_mhz(0, 1);
      return be.elapsed_us(0, 1) / plan.graph_calls;
    }
    size_t s = next_set();
    prepare({s});
    be.wait_stream(plan.timeout_s);  // the device idles: the call's issue cost is in the time
    if (plan.mode == "server" && plan.gap_us > 0) {
      std::exponential_distribution<double> gap(1.0 / plan.gap_us);
      std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(gap(rng)));
    }
    be.mark(0);
    cs[c].call(s);
    be.mark(1);
    be.wait_stream(plan.timeout_s);
    return be.elapsed_us(0, 1);
  };
  // Device mode's companion: one eager call, the device idle when it is issued.
  auto eager_call = [&](size_t c) {
    ProfScope p("t_eager");
    size_t s = next_set();
    prepare({s});
    be.wait_stream(plan.timeout_s);
    be.mark(0);
    cs[c].call(s);
    be.mark(1);
    be.wait_stream(plan.timeout_s);
    return be.elapsed_us(0, 1);
  };

  phase.emplace("t_sizing");
  be.ensure_marks(2);
  // Size the rounds from one unit of the slowest contender.
  double slowest_us = 1;
  for (size_t c = 0; c < cs.size(); ++c)
    slowest_us = std::max(slowest_us, timed_unit(c, false) * (device ? plan.graph_calls : 1));
  int rounds = std::clamp(static_cast<int>(plan.budget_ms * 1000 / slowest_us), plan.min_rounds,
                          plan.max_rounds);
  const int verify_every = std::max(1, rounds / std::max(1, plan.verify_rounds));
  int verified = 0;
  // A sample and, in device mode on a backend with clocks, the SM clock its replay ran at (0
  // where that replay's stamps gave none: rated_samples leaves it out).
  const bool clocks = device && be.max_clock_mhz() > 0;
  auto sample = [&](size_t c, bool verify) {
    unit_clock = 0;
    const double us = timed_unit(c, verify);
    if (clocks) out.times[c].clock_mhz.push_back(unit_clock);
    return us;
  };

  phase.emplace("t_rounds");
  out.times.assign(cs.size(), {});
  for (size_t c = 0; c < cs.size(); ++c) out.times[c].name = cs[c].name;
  std::vector<size_t> order(cs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (int r = 0; r < rounds; ++r) {
    std::shuffle(order.begin(), order.end(), rng);  // interleaved, random order each round
    const bool verify_round =
        device && (plan.verify_every_replay || (r % verify_every == 0 && verified < plan.verify_rounds));
    for (size_t c : order) {
      out.times[c].samples_us.push_back(sample(c, verify_round && c == 0 && plan.candidate_first));
      if (device && plan.call_times && (r < plan.call_rounds || timing_diag("v3")) && !timing_diag("noeager"))
        out.times[c].call_us.push_back(eager_call(c));
    }
    if (verify_round) ++verified;
    tick("round " + std::to_string(r + 1) + "/" + std::to_string(rounds));  // also the heartbeat
  }
  phase.emplace("t_clear");
  if (device) be.clear_graphs();
  phase.reset();
  out.rounds = rounds;
  out.metrics = {{"timing", plan.mode},       {"rounds", rounds},
                 {"l2", plan.cold_l2 ? "cold" : "hot"}, {"input_sets", n_sets},
                 {"graph_calls", device ? plan.graph_calls : 0},
                 {"verified_replays", verified}};
  if (!out.dropped.empty()) out.metrics["dropped_baselines"] = out.dropped;
  if (!graph_nodes.empty()) out.metrics["graph_nodes"] = graph_nodes;
  return out;
}

}  // namespace kernelrl::worker
