// The evaluator's one timing engine: every task kind hands it its contenders (the candidate and
// the baselines, each a callable that issues one call on the backend's stream for an input set)
// and gets per-contender samples back. It does not check answers: the harness poisons and
// verifies the outputs of sampled device-mode replays through the hooks.
//
// Modes (RewardConfig.timing):
//   device  each contender's call captured graph_calls times back-to-back into one graph, call i
//           on input set i (distinct sets), replayed in interleaved rounds in random order; a
//           sample is replay time / graph_calls: the kernels' device time, what a caller that
//           launches from CUDA graphs sees. The replay is queued behind a hold on the stream
//           that opens once the marks and the replay are issued, so the host's latency in
//           launching the graph is never inside the interval. Clock stamps around the replay
//           give the SM clock it ran at, kept per sample. The first call_rounds rounds also
//           time one eager call per contender with events (its call time, reported beside).
//           The graph's calls take the input sets in an order drawn after capture.
//   call    events around each eager call: includes the host's cost of issuing it.
//   server  call, after an exponential idle gap (mean gap_us) with the device drained.
// Every mode draws fresh input values (refresh hook) into the sets a timed call or replay will
// read, untimed, before it; with cold L2 the L2 is then flushed (untimed), so no timed call finds
// its operands in L2 and nothing keyed on input contents survives into timing.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "reward/worker/backend.h"

namespace kernelrl::worker {

struct Contender {
  std::string name;
  std::function<void(size_t set)> call;  // issues one call on the stream; no sync
  // Optional: issues the calls on these sets in order at once (the host backend's candidate:
  // one round trip to its runner per replay instead of one per call).
  std::function<void(const std::vector<size_t>& sets)> call_all;
};

struct TimingPlan {
  std::string mode = "device";  // device | call | server
  bool cold_l2 = true;
  int warmup = 3, min_rounds = 15, max_rounds = 50;
  int graph_calls = 20;         // device: calls per captured graph
  int verify_rounds = 2;        // device: replays whose outputs are poisoned and verified
  double budget_ms = 400, gap_us = 200, timeout_s = 20;
  size_t n_sets = 1;            // input sets the contenders can be called on
  bool candidate_first = true;  // contender 0 is the candidate (verified; capture failure throws)
  bool call_times = true;       // device: also one eager call per contender per round (call_us)
  int call_rounds = 10;         // ... in the first this many rounds (the call time is reported
                                // beside the device time, never ranked by: 10 samples suffice)
  // Every replay of the candidate is poisoned and verified, not verify_rounds of them (the host
  // backend, where the candidate's runner does the work the worker times).
  bool verify_every_replay = false;
};

struct TimingHooks {
  // Fresh values into these input sets (untimed, on the stream).
  std::function<void(const std::vector<size_t>& sets)> refresh;
  // Device mode: poison the outputs of these sets before a verified replay of contender `c`,
  // then check them after (throws the harness's check failure).
  std::function<void(size_t c, const std::vector<size_t>& sets)> poison, verify;
};

struct ContenderTimes {
  std::string name;
  std::vector<double> samples_us;  // in the plan's mode
  std::vector<double> call_us;     // device mode: eager per-call times from the same rounds
  std::vector<double> clock_mhz;   // device mode (GPU): the SM clock each sample's replay ran at (0: unknown)
};

struct TimingOutcome {
  std::vector<ContenderTimes> times;  // per timed contender, in input order (dropped ones left out)
  std::vector<std::string> dropped;   // baselines that could not be captured ("name: why")
  int rounds = 0;
  nlohmann::json metrics = nlohmann::json::object();
};

using Tick = std::function<void(const std::string&)>;

// A contender's samples rescaled to the rated SM clock: t * f_measured / f_rated for each whose
// clock is known (the replay's cycles at the rated clock). Empty where no clock is known (host
// backend, call/server mode, rated_mhz <= 0).
std::vector<double> rated_samples(const ContenderTimes& t, double rated_mhz);
// The samples a clock basis ranks by: rated ones for "rated" where known, else the as-run ones.
std::vector<double> basis_samples(const ContenderTimes& t, const std::string& basis, double rated_mhz);

// Diagnostic switches (docs/benchmarks.md, measurement trust): KERNELRL_TIMING_DIAG is a
// comma-separated list; timing_diag(flag) says whether it names `flag`. Flags: prereplay (an
// untimed replay before each timed one), nohold, noeager, twice (a second timing pass in one
// evaluation), dot (captured graphs as Graphviz to $KERNELRL_DIAG_DIR), probe (below), and the
// protocol before issue 38 for before/after runs in one build: fixed_sets (timing sets at a
// constant stride, replayed in capture order), v3 (no spare refill, an eager call every round,
// one refresh per set); with KERNELRL_L2_FLUSH=memset (backend_gpu.cpp) that is v3's worker.
bool timing_diag(const char* flag);

// The evaluation's profile (issue 38): wall seconds by phase ("runner", "checks", "t_rounds"...),
// summed in this process over one evaluation; the harness hands them over with the result
// (metrics.profile_s) and take_profile() clears them. Always on: a steady_clock read per scope.
void prof_add(const std::string& phase, double seconds);
nlohmann::json take_profile();
class ProfScope {
 public:
  explicit ProfScope(const char* phase);
  ~ProfScope();
  ProfScope(const ProfScope&) = delete;
  ProfScope& operator=(const ProfScope&) = delete;

 private:
  const char* phase_;
  double t0_;
};

// With "probe": diag_probe times the backend's built-in probe kernel and logs it under `where`;
// take_probes() hands the log over (and clears it). Without the switch both do nothing.
void diag_probe(Backend& be, const std::string& where);
nlohmann::json take_probes();

// A successive-halving screen (cuBLASLt autotuning): of the contenders whose median is
// `medians[i]` after a short first pass (<= 0 or NaN: not timed), the indices kept for the full
// pass: every one within `within` (relative) of the fastest, at least `min_keep` (the fastest
// ones) and at most `max_keep`, fastest first.
std::vector<size_t> screen_survivors(const std::vector<double>& medians, double within,
                                     size_t min_keep, size_t max_keep);

// With plan.candidate_first, contender 0 is the candidate: if it cannot be captured,
// CaptureFailure propagates (the harness turns it into a verdict), and its sampled replays are
// verified. Any other contender that cannot be captured is dropped and named.
TimingOutcome time_contenders(Backend& be, std::vector<Contender> contenders, const TimingPlan& plan,
                              const TimingHooks& hooks, std::mt19937_64& rng, const Tick& tick);

}  // namespace kernelrl::worker
