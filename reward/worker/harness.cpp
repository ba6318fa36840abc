#include "reward/worker/harness.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <algorithm>
#include <deque>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <chrono>
#include <numeric>
#include <optional>
#include <random>
#include <utility>

#include "data/tasks/task_suite.h"
#include "reward/eval_result.h"
#include "reward/task_json.h"
#include "reward/worker/baselines.h"
#include "reward/worker/candidate.h"
#include "reward/worker/task_kind.h"

#ifdef KERNELRL_HAVE_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_profiler_api.h>
#endif

namespace kernelrl::worker {

namespace {

constexpr uint8_t kGuardByte = 0xA5;                // guard pattern; fp16 0xA5A5 is finite
constexpr int64_t kWorkspaceBytes = 32 << 20;       // the candidate's workspace
constexpr int64_t kWorkspaceGuardBytes = 1 << 20;   // guard band behind (and a gap before) it
constexpr int64_t kAlign = 256;                     // buffer offsets keep 256-byte alignment
constexpr double kStaleFraction = 0.5;              // > this share unchanged/unwritten = stale
constexpr double kSetMemoryShare = 0.4;             // timing sets may take this share of free memory
// Host backend: the shared region for candidate-visible buffers (sparse: only what is used is
// backed by memory).
constexpr uint64_t kHostArenaBytes = 16ull << 30;
// Call-boundary verification (GPU device mode): the calls of a replay whose outputs are
// snapshotted right after their own call, at most (all of them where outputs are small).
constexpr size_t kBoundarySnapshots = 4;
constexpr int64_t kSnapshotAllBytes = 64 << 20;
// The boundary replay's cost check: replays of each graph (medians), and how much faster than
// the calls one by one the timed replay may be before it counts as batching (honest calls are
// not faster back to back: their inputs are hot in the boundary replay, cold when timed).
constexpr int kBoundaryReplays = 5;
constexpr double kBoundaryTolerance = 0.25, kBoundarySlackUs = 0.5;
// Wall-clock cross-check: device-wide wall time may exceed stream events by launch and sync
// overheads, never by more than this (work that escaped the stream shows up here).
constexpr double kWallFactor = 2.0, kWallSlackUs = 100.0;

// In place, each floating tensor's values negated (values no earlier call saw): the call-boundary
// and peer-word checks' way of changing inputs that are not the call's own.
void negate_floating(std::vector<at::Tensor>& xs) {
  for (auto& x : xs)
    if (at::isFloatingType(x.scalar_type())) x.neg_();
}

// A tensor inside a larger byte slab: a random front gap and a guard band after it, both filled
// with kGuardByte. Without a slab (timing sets) it is a plain tensor and guards are skipped.
struct Guarded {
  at::Tensor slab, view;
  int64_t front = 0, bytes = 0, guard = 0;
  void* ptr() const { return view.data_ptr(); }
  void reset_guards() {
    if (!slab.defined()) return;
    slab.narrow(0, 0, front).fill_(kGuardByte);
    slab.narrow(0, front + bytes, guard).fill_(kGuardByte);
  }
  bool guards_intact() const {
    if (!slab.defined()) return true;
    return slab.narrow(0, 0, front).eq(kGuardByte).all().item<bool>() &&
           slab.narrow(0, front + bytes, guard).eq(kGuardByte).all().item<bool>();
  }
};

Guarded plain(at::Tensor t) {
  Guarded g;
  g.view = t;
  g.bytes = static_cast<int64_t>(t.nbytes());
  return g;
}

bool bytes_equal(const at::Tensor& a, const at::Tensor& b) {
  return at::equal(a.contiguous().flatten().view(at::kByte), b.contiguous().flatten().view(at::kByte));
}

// Stale: most of the output is what the previous call produced (or still poisoned) although
// the inputs changed: a result cached across calls.
bool stale(const at::Tensor& out, const at::Tensor& prev) {
  if (!prev.defined() || prev.sizes() != out.sizes()) return false;
  auto a = out.contiguous().flatten();
  auto b = prev.contiguous().flatten();
  at::Tensor same;  // bitwise equality (NaN == NaN), plus anything still poisoned
  switch (at::elementSize(a.scalar_type())) {
    case 2: same = a.view(at::kShort).eq(b.view(at::kShort)); break;
    case 4: same = a.view(at::kInt).eq(b.view(at::kInt)); break;
    case 8: same = a.view(at::kLong).eq(b.view(at::kLong)); break;
    default: same = a.eq(b);
  }
  same = same | unwritten_mask(a);
  return same.to(at::kDouble).mean().item<double>() > kStaleFraction;
}

// A contender's statistics. Device mode with clocks (GPU): each sample also rescaled to the rated
// SM clock, t_rated = t * f_measured / f_rated (the replay's cycles at the rated clock); the
// medians are of the basis's samples, and both medians are reported.
nlohmann::json stats_json(const ContenderTimes& t, const std::string& mode, const std::string& basis,
                          double rated_mhz) {
  const std::vector<double> rated = rated_samples(t, rated_mhz);
  TimingStats s = timing_stats(basis_samples(t, basis, rated_mhz));
  s.timing = mode;
  if (!t.call_us.empty()) s.call_median_us = timing_stats(t.call_us).median_us;
  if (!rated.empty()) {
    std::vector<double> known;
    for (double f : t.clock_mhz)
      if (f > 0) known.push_back(f);
    s.clock_mhz = timing_stats(known).median_us;  // a median, in MHz
    s.as_run_median_us = timing_stats(t.samples_us).median_us;
    s.rated_median_us = timing_stats(rated).median_us;
  }
  return to_json(s);
}

// The check trials' tally: checked calls made and the largest deviation from the reference.
struct CheckTrials {
  int trials = 0;
  double max_dev = 0;
};

// What the timing phase runs: the baselines timed beside the candidate, the input sets it
// rotates over, and the candidate's call on each set (its arguments and buffers).
struct TimedCalls {
  std::vector<std::string> names;
  std::vector<Operands> sets;
  std::vector<kernelrl_args> args;
  std::vector<CallBuffers> bufs;
};

}  // namespace

struct Harness::Impl {
  Backend& be;
  at::Device dev;
  HgemmBaselines baselines;
  RunnerOptions runner_opts;
  // Spare runners (prepare_spares): started and ready, no candidate loaded, each with its own
  // scratch directory and log; a candidate takes the oldest (take_runner).
  std::deque<std::unique_ptr<Runner>> spares;
  std::vector<Runner*> pending;  // spares launched, not yet awaited (launch_spares)
  uint64_t runner_seq = 0;
  // This evaluation's runner: its start and load (s), and whether it was a spare; reported with
  // every result, a failed one's too.
  nlohmann::json runner_metrics = nlohmann::json::object();
  std::unique_ptr<HostArena> arena;  // host backend: where candidate-visible buffers live
  Guarded workspace;
  std::mt19937_64 rng{0x5eed};
  std::vector<void*> recent;  // data pointers of recent trials: new buffers must differ
  bool stream_gate = false;   // this evaluation's Opts::stream_gate

  Impl(Backend& b, RunnerOptions ro)
      : be(b), dev(b.gpu() ? at::Device(at::kCUDA, b.device_index()) : at::Device(at::kCPU)),
        baselines(b, dev), runner_opts(std::move(ro)) {
    if (!be.gpu()) {
      arena = std::make_unique<HostArena>(kHostArenaBytes);
      runner_opts.arena = arena.get();
    }
    ArenaScope in_arena(arena.get());
    // The fp32 reference must be true fp32 (no TF32).
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setFloat32MatmulPrecision("highest");
    // The workspace sits in a slab with a guard band behind it, checked like the outputs'.
    workspace.front = kAlign * 16;
    workspace.bytes = kWorkspaceBytes;
    workspace.guard = kWorkspaceGuardBytes;
    workspace.slab = at::empty({workspace.front + workspace.bytes + workspace.guard}, opts(at::kByte));
    workspace.view = workspace.slab.narrow(0, workspace.front, workspace.bytes);
    workspace.slab.fill_(kGuardByte);
  }

  at::TensorOptions opts(at::ScalarType t) const { return at::TensorOptions().dtype(t).device(dev); }

  // A new guarded buffer whose data pointer differs from every recent trial's.
  Guarded make_guarded(at::IntArrayRef shape, at::ScalarType dt) {
    Guarded g;
    int64_t numel = 1;
    for (auto d : shape) numel *= d;
    g.bytes = numel * static_cast<int64_t>(at::elementSize(dt));
    int64_t row = shape.empty() ? g.bytes : shape.back() * static_cast<int64_t>(at::elementSize(dt));
    g.guard = std::min<int64_t>(std::max<int64_t>(64 << 10, 2 * row), 16 << 20);
    ArenaScope in_arena(arena.get());
    for (int attempt = 0; attempt < 16; ++attempt) {
      g.front = kAlign * static_cast<int64_t>(1 + rng() % 64);
      g.slab = at::empty({g.front + g.bytes + g.guard}, opts(at::kByte));
      g.view = g.slab.narrow(0, g.front, g.bytes).view(dt).view(shape);
      if (std::find(recent.begin(), recent.end(), g.ptr()) == recent.end()) break;
    }
    g.slab.fill_(kGuardByte);
    recent.push_back(g.ptr());
    if (recent.size() > 64) recent.erase(recent.begin());
    return g;
  }
  Guarded guarded_copy(const at::Tensor& x) {
    Guarded g = make_guarded(x.sizes(), x.scalar_type());
    g.view.copy_(x);
    return g;
  }

  // One call of the candidate on the stream (candidate.h: what its runner captured or ran).
  void invoke(Candidate& cand, const kernelrl_args& args, const CallBuffers& bufs) {
    try {
      cand.call(args, bufs);
      be.check_launch();
    } catch (const LaunchFailure& e) {
      fail("launch_failed", e.what(), "launch_error");
    }
  }
  static Range range_of(const void* p, int64_t bytes) {
    const auto a = reinterpret_cast<uint64_t>(p);
    return {a, a + static_cast<uint64_t>(bytes)};
  }
  CallBuffers buffers_of(const std::vector<Guarded>& ins, const std::vector<Guarded>& outs) const {
    CallBuffers b;
    for (const auto& g : ins) b.inputs.push_back(range_of(g.ptr(), g.bytes));
    for (const auto& g : outs) b.outputs.push_back(range_of(g.ptr(), g.bytes));
    b.workspace = range_of(workspace.ptr(), kWorkspaceBytes);
    return b;
  }
  CallBuffers buffers_of(const Operands& s) const {
    CallBuffers b;
    for (const auto& x : s.inputs) b.inputs.push_back(range_of(x.data_ptr(), static_cast<int64_t>(x.nbytes())));
    for (const auto& x : s.outputs) b.outputs.push_back(range_of(x.data_ptr(), static_cast<int64_t>(x.nbytes())));
    b.workspace = range_of(workspace.ptr(), kWorkspaceBytes);
    return b;
  }

  kernelrl_args make_args(const std::vector<void*>& ins, const std::vector<void*>& outs,
                          const std::vector<int64_t>& dims) {
    kernelrl_args a{};
    for (size_t i = 0; i < ins.size() && i < 8; ++i) a.inputs[i] = ins[i];
    a.n_inputs = static_cast<int>(std::min<size_t>(ins.size(), 8));
    for (size_t i = 0; i < outs.size() && i < 4; ++i) a.outputs[i] = outs[i];
    a.n_outputs = static_cast<int>(std::min<size_t>(outs.size(), 4));
    for (size_t i = 0; i < dims.size() && i < 8; ++i) a.dims[i] = dims[i];
    a.n_dims = static_cast<int>(std::min<size_t>(dims.size(), 8));
    a.workspace = workspace.ptr();
    a.workspace_bytes = static_cast<size_t>(kWorkspaceBytes);
    return a;
  }
  template <class G>
  static std::vector<void*> ptrs(const std::vector<G>& gs) {
    std::vector<void*> p;
    for (const auto& g : gs) p.push_back(g.ptr());
    return p;
  }

  // One checked call: poison, guards, gate, call, snapshot what the stream produced, open the
  // gate, then the structural checks. Returns the outputs as the stream left them.
  std::vector<at::Tensor> checked_call(Candidate& cand, std::vector<Guarded>& ins, std::vector<Guarded>& outs,
                                       const std::vector<int64_t>& dims, double timeout_s) {
    ProfScope phase("checked_call");
    std::vector<at::Tensor> clones, snaps;
    for (auto& g : ins) {
      g.reset_guards();
      clones.push_back(g.view.clone());
    }
    for (auto& g : outs) {
      poison(g.view);
      g.reset_guards();
      snaps.push_back(at::empty_like(g.view));
    }
    workspace.view.fill_(0xFF);  // a workspace cache from an earlier call does not survive
    workspace.reset_guards();
    kernelrl_args args = make_args(ptrs(ins), ptrs(outs), dims);
    be.sync_device();
    if (stream_gate) be.gate_close(timeout_s);
    try {
      invoke(cand, args, buffers_of(ins, outs));
      be.wait_stream(timeout_s);
      for (size_t i = 0; i < outs.size(); ++i)
        be.copy_on_stream(snaps[i].data_ptr(), outs[i].ptr(), static_cast<size_t>(outs[i].bytes));
      be.wait_stream(timeout_s);
    } catch (...) {
      be.gate_open();
      throw;
    }
    be.gate_open();
    be.sync_device();
    try {
      be.check_launch();
    } catch (const LaunchFailure& e) {
      fail("launch_failed", e.what(), "launch_error");
    }
    for (size_t i = 0; i < outs.size(); ++i)
      if (!bytes_equal(outs[i].view, snaps[i]))
        fail("escaped_stream",
             "output " + std::to_string(i) +
                 " changed after the candidate's stream had drained: work was launched on "
                 "another stream (all work must go on the given stream)");
    for (size_t i = 0; i < outs.size(); ++i)
      if (!outs[i].guards_intact())
        fail("out_of_bounds_write", "the guard band around output " + std::to_string(i) +
                                        " was overwritten: the kernel wrote outside its buffer");
    if (!workspace.guards_intact())
      fail("workspace_overrun", "the guard band around the " + std::to_string(kWorkspaceBytes >> 20) +
                                    " MiB workspace was overwritten: the kernel wrote outside it");
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!ins[i].guards_intact())
        fail("out_of_bounds_write", "the guard band around input " + std::to_string(i) +
                                        " was overwritten: the kernel wrote outside its buffers");
      if (!bytes_equal(ins[i].view, clones[i]))
        fail("input_modified", "input " + std::to_string(i) + " was modified by the kernel");
    }
    return snaps;
  }

  void check_written(const std::vector<at::Tensor>& outs, const std::string& trial) {
    for (size_t i = 0; i < outs.size(); ++i) {
      auto mask = unwritten_mask(outs[i]);
      int64_t n = mask.sum().item<int64_t>();
      if (n > 0)
        fail("unwritten_output", std::to_string(n) + " of " + std::to_string(outs[i].numel()) +
                                     " elements of output " + std::to_string(i) +
                                     " were left unwritten (still NaN-poisoned), first at " +
                                     position(mask) + " [" + trial + " trial]");
    }
  }
  static bool any_stale(const std::vector<at::Tensor>& now, const std::vector<at::Tensor>& prev) {
    for (size_t i = 0; i < now.size() && i < prev.size(); ++i)
      if (stale(now[i], prev[i])) return true;
    return false;
  }

  // Call boundaries (GPU device mode; docs/sandbox.md): a call's outputs must be complete when
  // its own work ends, and computed from its inputs as they were when it ran. One untimed replay
  // of the timed graph's calls, each set once, in which P's own nodes negate call i's floating
  // inputs in place right before it (values no earlier call could have seen) and copy its outputs
  // aside right after it, for every call where that is cheap or a random sample: work deferred to
  // a later call leaves a snapshot unwritten, work done before its call leaves it wrong. The
  // calls are the very graphs the timing replayed (captured once, candidate.h).
  //
  // A kernel that timed its neighbours could tell this replay from the timed ones and work
  // honestly only here. So the first pass also times it, against the same replay without the
  // candidate's calls: their difference per call is what the calls cost one by one, with their
  // inputs hot from the negation. Batching pays only if the timed replay is faster than that;
  // more than kBoundaryTolerance (+ kBoundarySlackUs) faster is cross_call_work.
  void verify_call_boundaries(Candidate& cand, TaskKind& kind, std::vector<Operands>& sets,
                              const std::vector<kernelrl_args>& args, const std::vector<CallBuffers>& bufs,
                              const Opts& o, double timed_us, nlohmann::json& metrics) {
    const size_t n = std::min<size_t>(sets.size(), static_cast<size_t>(o.graph_calls));
    if (n < 2) return;
    int64_t out_bytes = 0;
    for (const auto& x : sets[0].outputs) out_bytes += static_cast<int64_t>(x.nbytes());
    const bool all = out_bytes * static_cast<int64_t>(n) <= kSnapshotAllBytes;
    const int64_t passes = all ? 1 : std::max<int64_t>(1, o.verify_rounds);
    for (int64_t pass = 0; pass < passes; ++pass) {
      std::vector<size_t> pos(n);
      std::iota(pos.begin(), pos.end(), size_t{0});
      if (!all) {
        std::shuffle(pos.begin(), pos.end(), rng);
        pos.resize(std::min(kBoundarySnapshots, n));
      }
      std::vector<std::vector<at::Tensor>> snaps(n);
      for (size_t i : pos)
        for (const auto& x : sets[i].outputs) snaps[i].push_back(at::empty_like(x));
      for (size_t i = 0; i < n; ++i)
        for (auto& x : sets[i].outputs) poison(x);
      be.sync_device();
      size_t g = 0;
      try {
        g = be.capture([&] {
          for (size_t i = 0; i < n; ++i) {
            negate_floating(sets[i].inputs);
            cand.call(args[i], bufs[i]);
            for (size_t j = 0; j < snaps[i].size(); ++j) snaps[i][j].copy_(sets[i].outputs[j]);
          }
        });
      } catch (const CaptureFailure& e) {
        throw std::runtime_error(std::string("call-boundary verification: ") + e.what());
      }
      size_t without = 0;  // the same replay without the candidate's calls
      const bool timed_pass = pass == 0 && timed_us > 0;
      if (timed_pass)
        without = be.capture([&] {
          for (size_t i = 0; i < n; ++i) {
            negate_floating(sets[i].inputs);
            for (size_t j = 0; j < snaps[i].size(); ++j) snaps[i][j].copy_(sets[i].outputs[j]);
          }
        });
      be.replay(g);
      be.wait_stream(o.call_timeout_s * static_cast<double>(n));
      be.sync_device();
      for (size_t i : pos) {
        const std::string at_call = "call " + std::to_string(i) + " of " + std::to_string(n);
        for (size_t j = 0; j < snaps[i].size(); ++j)
          if (int64_t left = unwritten_mask(snaps[i][j]).sum().item<int64_t>(); left > 0)
            fail("cross_call_work",
                 std::to_string(left) + " elements of output " + std::to_string(j) + " were still unwritten when " +
                     at_call + " of a replay ended: its work was deferred to a later call",
                 "reward_hack");
        try {
          kind.check(snaps[i], kind.reference(sets[i].inputs), sets[i].inputs, Draw::normal,
                     at_call + " (boundary)", /*replay=*/true);
        } catch (const CheckFailure& f) {
          fail("cross_call_work",
               "the outputs of " + at_call + " of a replay did not match its inputs as they were when it "
               "ran (" + f.check + "): its work was done before its call, or batched with another's",
               "reward_hack");
        }
      }
      if (timed_pass) {
        std::vector<double> with_us, without_us;
        be.ensure_marks(2);
        for (int r = 0; r < kBoundaryReplays; ++r)
          for (size_t gg : {g, without}) {
            if (o.l2 == "cold") be.flush_l2();
            be.hold_stream(o.call_timeout_s);
            be.mark(0);
            be.replay(gg);
            be.mark(1);
            be.gate_open();
            be.wait_stream(o.call_timeout_s * static_cast<double>(n));
            (gg == g ? with_us : without_us).push_back(be.elapsed_us(0, 1));
          }
        const double one_by_one =
            (timing_stats(with_us).median_us - timing_stats(without_us).median_us) / static_cast<double>(n);
        metrics["boundary_call_us"] = one_by_one;
        if (one_by_one > timed_us * (1 + kBoundaryTolerance) + kBoundarySlackUs)
          fail("cross_call_work",
               "its calls cost " + fmt(one_by_one) + " us each one by one, against " + fmt(timed_us) +
                   " us in the timed replays: work batched across the calls of a replay",
               "reward_hack");
      }
      be.clear_graphs();
    }
  }

  std::vector<Guarded> new_outputs(TaskKind& kind) {
    std::vector<Guarded> outs;
    for (const auto& s : kind.output_shapes()) outs.push_back(make_guarded(s.sizes, s.dtype));
    return outs;
  }

  // ------------------------------------------------------------------------ the protocol
  // One evaluation in four phases: check trials (eager, checked calls), input sets (every call
  // the timing will make, captured; the runner ends), time (the candidate interleaved with the
  // baselines), post-checks (call boundaries, wall clock, stale results: untimed). The order is
  // the protocol's: nothing of the candidate runs while it is timed, and no verification sits
  // inside the measured time.
  nlohmann::json run(const TaskSpec& task, const std::string& so, const Opts& o, const Tick& tick) {
    runner_metrics = nlohmann::json::object();
    take_profile();  // this evaluation's phases only
    auto probe = [&](const std::string& where) { diag_probe(be, where); };
    probe("start");
    stream_gate = o.stream_gate;
    at::manual_seed(o.seed_base);
    // Device state an earlier evaluation could have left (docs/sandbox.md): cleared first.
    std::optional<ProfScope> phase(std::in_place, "kind");
    be.reset_device_state();
    auto kind = make_task_kind(task, be, dev, baselines, o);
    phase.emplace("runner");
    // A fresh runner holds the candidate's host code (its static initializers run now); here only
    // the work it enqueues runs (GPU), or the calls it makes on the arena (host).
    const auto runner_t0 = std::chrono::steady_clock::now();
    bool spare = false;
    std::unique_ptr<Runner> runner = take_runner(spare, tick);
    runner_metrics["runner_spare"] = spare;  // the runner was started before this evaluation
    Candidate cand(be, *runner, so, o.call_timeout_s);
    const double runner_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - runner_t0).count();
    runner_metrics["runner_start_s"] = runner_s;  // a fresh runner's start and the candidate's load
    tick("loaded");
    probe("kind made");
    nlohmann::json metrics = nlohmann::json::object();

    // Spares run out after reward.spare_runners candidates (the evaluator starts them while the
    // batch compiles): then the next candidate's runner is launched now and comes up beside this
    // candidate's checks; it is awaited before timing, so that nothing starts while this worker
    // times. One, not a batch: the driver creates contexts one at a time (a batch of 16 cost
    // 114 ms a candidate to await, and each runner's teardown rose from 63 to 93 ms with 16
    // contexts alive: H200, 2026-11-28, docs/history/2026-11-28-evaluator-v4-issue38.md).
    if (be.gpu() && o.spare_runners > 0 && spares.empty() && !timing_diag("v3")) {
      ProfScope p("spare_launch");
      launch_spares(1);
    }
    phase.emplace("warm_up_call");
    warm_up_call(cand, *kind, o);
    tick("warm-up done");
    probe("warm-up call");
    phase.emplace("checks");
    const CheckTrials checks = check_trials(cand, *kind, o, tick);
    metrics["check_trials"] = checks.trials;
    probe("checks");

    phase.emplace("sets");
    TimedCalls calls = input_sets(cand, *kind, o, metrics);
    phase.reset();
    for (const auto& [k, v] : runner_metrics.items()) metrics[k] = v;
    probe("timing sets");

    tick("quiet:begin");  // the evaluator holds compile jobs while this worker times and verifies
    struct QuietEnd {
      const Tick& t;
      ~QuietEnd() { t("quiet:end"); }
    } quiet_end{tick};
    if (!pending.empty()) {
      ProfScope p("spare_await");
      await_spares(tick);
    }
    phase.emplace("timing");
    const TimingOutcome timed = time_calls(cand, *kind, calls, o, tick, metrics);
    probe("timed");

    phase.emplace("post_checks");
    const double post_dev = post_checks(cand, *kind, calls, o, timed, metrics);
    probe("post-timing check");
    phase.emplace("result");
    if (auto p = take_probes(); !p.empty()) metrics["probes"] = p;
    nlohmann::json res = passed_result(*kind, o, checks.trials, std::max(checks.max_dev, post_dev), timed, metrics);
    phase.reset();
    res["metrics"]["profile_s"] = take_profile();
    return res;
  }

  // A runner of its own for each runner started here: numbered scratch directory and log.
  RunnerOptions numbered_runner() {
    RunnerOptions o = runner_opts;
    const std::string n = "-" + std::to_string(runner_seq++);
    o.scratch = o.scratch.string() + n;
    o.log_path = o.log_path.parent_path() / (o.log_path.stem().string() + n + o.log_path.extension().string());
    o.remove_log = true;
    return o;
  }

  // The oldest ready spare, else a runner that starts when the candidate loads.
  std::unique_ptr<Runner> take_runner(bool& spare, const Tick& tick) {
    if (!pending.empty()) await_spares(tick);  // launched by an evaluation that failed early
    while (!spares.empty()) {
      std::unique_ptr<Runner> r = std::move(spares.front());
      spares.pop_front();
      if (r->ready()) {
        spare = true;
        return r;
      }
    }
    spare = false;
    return std::make_unique<Runner>(numbered_runner());
  }

  // Up to `count` spares, all launched before any is awaited (their CUDA contexts come up side
  // by side); a spare that fails to start is dropped, and the candidate that would have taken it
  // starts its own runner as without spares (a runner that cannot start is the worker's error,
  // never the candidate's verdict). Returns the spares ready.
  size_t prepare_spares(size_t count, const Tick& tick) {
    await_spares(tick);
    launch_spares(count);
    await_spares(tick);
    size_t ready = 0;
    for (const auto& r : spares) ready += r->ready();
    return ready;
  }
  // The first half of prepare_spares: spares launched, none awaited; the caller goes on while
  // they come up (the driver creates their contexts one at a time: H200, 2026-11-28).
  void launch_spares(size_t count) {
    // A spare that died while it waited is replaced, not counted.
    spares.erase(std::remove_if(spares.begin(), spares.end(), [](const auto& r) { return !r->ready(); }),
                 spares.end());
    while (spares.size() < count) {
      spares.push_back(std::make_unique<Runner>(numbered_runner()));
      try {
        spares.back()->launch();
        pending.push_back(spares.back().get());
      } catch (const std::exception&) {
        spares.pop_back();
        break;
      }
    }
  }
  // The second half: every launched spare read ready (or stopped: not ready, dropped later).
  void await_spares(const Tick& tick) {
    std::vector<Runner*> launched;
    launched.swap(pending);
    for (Runner* r : launched) {
      try {
        r->await_ready();
      } catch (const std::exception&) {
        r->stop();  // not ready(): take_runner drops it
      }
      tick("spare");  // progress: the client counts silence as a hang
    }
  }

  // Warm-up call (ungated): with lazy module loading the first launch loads the candidate's
  // kernels, which must not happen while the gate holds the legacy stream.
  void warm_up_call(Candidate& cand, TaskKind& kind, const Opts& o) {
    auto ins = kind.draw(Draw::normal, nullptr);
    std::vector<Guarded> gin, gout = new_outputs(kind);
    for (auto& x : ins) gin.push_back(guarded_copy(x));
    be.sync_device();
    invoke(cand, make_args(ptrs(gin), ptrs(gout), kind.dims(ins)), buffers_of(gin, gout));
    be.wait_stream(o.call_timeout_s);
    be.sync_device();
  }

  // 1. Check trials: per seed three checked calls (checked_call), each against the reference:
  //    fresh buffers, the same buffers with new values, new buffers with 5% of the values redrawn.
  CheckTrials check_trials(Candidate& cand, TaskKind& kind, const Opts& o, const Tick& tick) {
    CheckTrials c;
    for (int s = 0; s < o.seeds; ++s) {
      at::manual_seed(o.seed_base + 1000003ull * (s + 1));
      const std::string tag = "seed " + std::to_string(s) + " ";
      // (1) fresh buffers at new addresses: binary (exact sums) where the kind has it.
      Draw first = kind.first_draw();
      auto v1 = kind.draw(first, nullptr);
      std::vector<Guarded> in1, out1 = new_outputs(kind);
      for (auto& x : v1) in1.push_back(guarded_copy(x));
      auto r1 = checked_call(cand, in1, out1, kind.dims(v1), o.call_timeout_s);
      ++c.trials;
      check_written(r1, tag + "first");
      auto ref1 = kind.reference(v1);
      c.max_dev = std::max(c.max_dev, kind.check(r1, ref1, v1, first, tag + "first"));
      // (2) same buffers, new normal values: a result cached by pointer is stale here.
      auto v2 = kind.draw(Draw::normal, nullptr);
      for (size_t i = 0; i < v2.size(); ++i) in1[i].view.copy_(v2[i]);
      auto r2 = checked_call(cand, in1, out1, kind.dims(v2), o.call_timeout_s);
      ++c.trials;
      if (any_stale(r2, r1))
        fail("cached_by_pointer",
             "same buffers with new values returned the previous call's result (or nothing): "
             "results are cached by pointer");
      check_written(r2, tag + "normal");
      auto ref2 = kind.reference(v2);
      c.max_dev = std::max(c.max_dev, kind.check(r2, ref2, v2, Draw::normal, tag + "normal"));
      // (3) new buffers, the same values with 5% redrawn (leading row/column kept): a result
      //     cached by a fingerprint of the values is stale here.
      auto v3 = kind.draw(Draw::perturbed, &v2);
      std::vector<Guarded> in3, out3 = new_outputs(kind);
      for (auto& x : v3) in3.push_back(guarded_copy(x));
      auto r3 = checked_call(cand, in3, out3, kind.dims(v3), o.call_timeout_s);
      ++c.trials;
      if (any_stale(r3, r2))
        fail("cached_by_value",
             "inputs that differ from the previous call's in 5% of their elements returned the "
             "previous result (or nothing): results are cached by input value");
      check_written(r3, tag + "perturbed");
      auto ref3 = kind.reference(v3);
      c.max_dev = std::max(c.max_dev, kind.check(r3, ref3, v3, Draw::perturbed, tag + "perturbed"));
      tick("seed " + std::to_string(s) + " passed");
    }
    return c;
  }

  // 2. Input sets: the sets timing rotates over and the candidate's call on each, every one
  //    captured now; then the runner is stopped for good, so nothing of the candidate runs while
  //    the worker times (GPU). The sets of a replay are each other's peers: a call that names
  //    another's buffers is cross_call_work. A persisting-L2 set-aside left behind is refused.
  TimedCalls input_sets(Candidate& cand, TaskKind& kind, const Opts& o, nlohmann::json& metrics) {
    TimedCalls c;
    c.names = kind.timeable(o.raw_baselines);
    {
      ProfScope p("sets_alloc");
      c.sets = timing_sets(kind, c.names, o, metrics);
    }
    std::vector<Range> all_sets;
    std::vector<std::string> peer_names;  // "set 3 output 0", one per entry of all_sets
    for (const auto& s : c.sets) {
      std::vector<void*> in, out;
      for (const auto& x : s.inputs) in.push_back(x.data_ptr());
      for (const auto& x : s.outputs) out.push_back(x.data_ptr());
      c.args.push_back(make_args(in, out, kind.dims(s.inputs)));
      c.bufs.push_back(buffers_of(s));
      const std::string set = "set " + std::to_string(c.bufs.size() - 1);
      for (const auto& [rs, what] : {std::pair{&c.bufs.back().inputs, " input "}, {&c.bufs.back().outputs, " output "}})
        for (size_t j = 0; j < rs->size(); ++j) {
          all_sets.push_back((*rs)[j]);
          peer_names.push_back(set + what + std::to_string(j));
        }
    }
    be.sync_device();
    cand.set_peers(all_sets);
    {
      ProfScope p("sets_capture");
      for (size_t s = 0; s < c.sets.size(); ++s) cand.prepare(c.args[s], c.bufs[s]);
    }
    std::optional<ProfScope> step(std::in_place, "sets_release_runner");
    if (be.gpu()) cand.release_runner();
    step.emplace("sets_reset_state");
    if (const size_t persisting = be.reset_device_state(); persisting > 0)
      fail("device_state",
           "after the candidate's runner ended, " + std::to_string(persisting) +
               " more bytes of L2 than the default were set aside for persisting accesses "
               "(cudaLimitPersistingL2CacheSize): reset, and the candidate refused",
           "reward_hack");
    step.emplace("sets_peer_words");
    for (size_t s = 0; s < c.sets.size(); ++s)
      if (auto words = cand.peer_words(c.args[s]); !words.empty())
        verify_peer_words(cand, kind, c, s, words, all_sets, peer_names, o, metrics);
    metrics["captures"] = cand.captures();
    return c;
  }

  // A call whose captured work holds a word inside another call's buffer (candidate.h,
  // PeerWord) runs alone, untimed, with every other set's outputs NaN-poisoned and their
  // floating inputs negated: it must leave those outputs poisoned (it did no other call's work)
  // and compute its own answer from its own inputs (it needed none of theirs). Batching fails
  // the first, a call that leans on another's buffers the second: cross_call_work. A word that
  // only looks like an address (padding, a descriptor's packed field) passes, and is listed in
  // metrics.peer_words with where it sits.
  void verify_peer_words(Candidate& cand, TaskKind& kind, TimedCalls& c, size_t s, const std::vector<PeerWord>& words,
                         const std::vector<Range>& peers, const std::vector<std::string>& peer_names, const Opts& o,
                         nlohmann::json& metrics) {
    auto& listed = metrics["peer_words"];
    if (!listed.is_array()) listed = nlohmann::json::array();
    for (const auto& w : words)
      if (listed.size() < 16)
        listed.push_back({{"set", s}, {"kernel", w.kernel}, {"node", w.node}, {"offset", w.offset},
                          {"word", hex_address(w.word)}, {"peer", peer_names.at(w.peer)},
                          {"into_peer", w.word - peers.at(w.peer).first}});
    const PeerWord& first = words.front();
    const std::string named = "its captured work holds " + hex_address(first.word) + " (" + first.kernel +
                              (first.offset >= 0 ? ", parameter byte " + std::to_string(first.offset) : "") +
                              "), inside " + peer_names.at(first.peer);
    auto negate_others = [&] {
      for (size_t t = 0; t < c.sets.size(); ++t)
        if (t != s) negate_floating(c.sets[t].inputs);
    };
    for (auto& set : c.sets)
      for (auto& x : set.outputs) poison(x);
    negate_others();
    be.sync_device();
    cand.call(c.args[s], c.bufs[s]);
    be.wait_stream(o.call_timeout_s);
    be.sync_device();
    negate_others();  // back to the values the timing sets were drawn with
    const std::string call = "call " + std::to_string(s) + ", run alone,";
    for (size_t t = 0; t < c.sets.size(); ++t) {
      if (t == s) continue;
      for (size_t j = 0; j < c.sets[t].outputs.size(); ++j) {
        const at::Tensor& x = c.sets[t].outputs[j];
        if (int64_t wrote = x.numel() - unwritten_mask(x).sum().item<int64_t>(); wrote > 0)
          fail("cross_call_work",
               call + " wrote " + std::to_string(wrote) + " elements of set " + std::to_string(t) + "'s output " +
                   std::to_string(j) + "; " + named + ": work batched across the calls of a replay",
               "reward_hack");
      }
    }
    for (size_t j = 0; j < c.sets[s].outputs.size(); ++j)
      if (int64_t left = unwritten_mask(c.sets[s].outputs[j]).sum().item<int64_t>(); left > 0)
        fail("cross_call_work",
             call + " left " + std::to_string(left) + " elements of its output " + std::to_string(j) +
                 " unwritten; " + named + ": its work was deferred to another call",
             "reward_hack");
    try {
      kind.check(c.sets[s].outputs, kind.reference(c.sets[s].inputs), c.sets[s].inputs, Draw::normal,
                 call + " (peer words)", /*replay=*/true);
    } catch (const CheckFailure& f) {
      fail("cross_call_work",
           call + " did not compute its own answer (" + f.check + "); " + named +
               ": its result depends on another call's buffers",
           "reward_hack");
    }
    metrics["peer_words_verified"] = metrics.value("peer_words_verified", 0) + 1;
  }

  // 3. Time: the candidate (contender 0) interleaved with the baselines through the timing
  //    engine (timing.h); sampled replays verified (every one on the host, where the runner did
  //    the work). Runs inside the caller's quiet window.
  TimingOutcome time_calls(Candidate& cand, TaskKind& kind, TimedCalls& calls, const Opts& o, const Tick& tick,
                           nlohmann::json& metrics) {
    std::vector<Operands>& sets = calls.sets;
    TimingPlan plan = timing_plan(o, sets.size());
    plan.verify_every_replay = !be.gpu();
    TimingHooks hooks;
    hooks.refresh = [&](const std::vector<size_t>& idx) { kind.refresh_sets(sets, idx); };
    hooks.poison = [&](size_t, const std::vector<size_t>& idx) {
      for (size_t s : idx)
        for (auto& out : sets[s].outputs) poison(out);
    };
    // A replay's outputs: every one written, and (first and last set) the right answer. Any
    // failure here means the work differs under capture: one verdict, replay_mismatch.
    hooks.verify = [&](size_t, const std::vector<size_t>& idx) {
      try {
        for (size_t j = 0; j < idx.size(); ++j) {
          const Operands& s = sets[idx[j]];
          check_written(s.outputs, "timed replay, set " + std::to_string(idx[j]));
          if (j == 0 || j + 1 == idx.size() || plan.verify_every_replay)
            kind.check(s.outputs, kind.reference(s.inputs), s.inputs, Draw::normal,
                       "timed replay, set " + std::to_string(idx[j]), /*replay=*/true);
        }
      } catch (const CheckFailure& f) {
        fail("replay_mismatch", "a timed CUDA-graph replay did not produce the answer its eager "
                                "calls did (" + f.check + ": " + f.reason + ")");
      }
    };
    {
      ProfScope p("t_prepare_lt");
      metrics["lt_auto"] = kind.prepare_timing(calls.names, sets, plan, hooks, rng, tick);
    }
    std::vector<Contender> cs;
    Contender candidate{"candidate", [&](size_t s) { invoke(cand, calls.args[s], calls.bufs[s]); }, {}};
    if (!be.gpu())
      candidate.call_all = [&](const std::vector<size_t>& idx) {
        std::vector<kernelrl_args> as;
        std::vector<CallBuffers> bs;
        for (size_t s : idx) {
          as.push_back(calls.args[s]);
          bs.push_back(calls.bufs[s]);
        }
        cand.call_many(as, bs);
      };
    cs.push_back(std::move(candidate));
    for (const auto& name : calls.names) {
      if (!kind.run_baseline(name, sets[0])) continue;  // e.g. lt-auto without an algorithm
      cs.push_back({name, [&, name](size_t s) { kind.run_baseline(name, sets[s]); }, {}});
    }
    be.wait_stream(o.call_timeout_s);
    TimingOutcome timed;
    try {
      timed = time_contenders(be, cs, plan, hooks, rng, tick);
      // Diagnostic (docs/benchmarks.md, measurement trust): KERNELRL_TIMING_DIAG=twice times
      // everything a second time in the same evaluation and reports the second pass.
      if (timing_diag("twice"))
        timed = time_contenders(be, cs, plan, hooks, rng, tick);
    } catch (const CaptureFailure& e) {
      fail("not_capturable",
           std::string("the candidate's call could not be captured into a CUDA graph (") + e.what() +
               "): candidates must be capturable (no sync, allocation or other stream inside "
               "kernelrl_launch)");
    }
    for (const auto& [k, v] : timed.metrics.items()) metrics[k] = v;
    return timed;
  }

  // 4. Post-checks, untimed: call boundaries (GPU device mode), the device-wide wall clock
  //    against the stream's events (work that escaped the stream still holds up
  //    cudaDeviceSynchronize), and a checked call on the timing buffers with new values (a
  //    result cached during the timing rounds, by pointer or call count, fails here). Returns
  //    that call's deviation.
  double post_checks(Candidate& cand, TaskKind& kind, TimedCalls& calls, const Opts& o,
                     const TimingOutcome& timed, nlohmann::json& metrics) {
    std::optional<ProfScope> phase(std::in_place, "post_boundary");
    if (be.gpu() && o.timing == "device" && !timed.times.empty()) {
      verify_call_boundaries(cand, kind, calls.sets, calls.args, calls.bufs, o,
                             timing_stats(timed.times[0].samples_us).median_us, metrics);
      metrics["boundary_verified"] = true;
    }
    phase.emplace("post_wall");
    if (be.gpu()) {
      std::vector<double> wall, ev;
      be.ensure_marks(2);
      for (int i = 0; i < 3; ++i) {
        be.sync_device();
        auto t0 = std::chrono::steady_clock::now();
        be.mark(0);
        invoke(cand, calls.args[0], calls.bufs[0]);  // the candidate's contender, set 0
        be.mark(1);
        be.sync_device();
        wall.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        ev.push_back(be.elapsed_us(0, 1));
      }
      double w = timing_stats(wall).median_us, e = timing_stats(ev).median_us;
      metrics["wall_check"] = {{"wall_us", w}, {"event_us", e}};
      if (w > kWallFactor * e + kWallSlackUs)
        fail("escaped_stream_timing", "device-wide wall time " + fmt(w) + " us exceeds the stream's " +
                                          fmt(e) + " us: work escaped the stream while timed");
    }
    diag_probe(be, "wall check");
    phase.emplace("post_stale");
    Operands& s0 = calls.sets[0];
    std::vector<at::Tensor> prev;
    for (const auto& x : s0.outputs) prev.push_back(x.clone());
    kind.refresh(s0);
    std::vector<Guarded> gin, gout;
    for (auto& x : s0.inputs) gin.push_back(plain(x));
    for (auto& x : s0.outputs) gout.push_back(plain(x));
    auto out = checked_call(cand, gin, gout, kind.dims(s0.inputs), o.call_timeout_s);
    if (any_stale(out, prev))
      fail("stale_after_timing", "after the timing rounds the kernel returned stale results "
                                 "for new inputs in the same buffers");
    check_written(out, "post-timing");
    return kind.check(out, kind.reference(s0.inputs), s0.inputs, Draw::normal, "post-timing");
  }

  // The answer of an evaluation that passed every phase.
  nlohmann::json passed_result(TaskKind& kind, const Opts& o, int trials, double max_dev,
                               const TimingOutcome& timed, nlohmann::json& metrics) {
    nlohmann::json res;
    res["status"] = "ok";
    res["check"] = "";
    res["reason"] = "passed " + std::to_string(trials + 1) + " checked calls over " +
                    std::to_string(o.seeds) + " seeds; timed " + std::to_string(timed.rounds) +
                    " rounds (" + o.timing + ")";
    res["max_abs_dev"] = max_dev;
    res["dev_bound"] = kind.dev_bound();
    res["candidate"] = stats_json(timed.times.at(0), o.timing, o.clock_basis, be.max_clock_mhz());
    nlohmann::json bl = nlohmann::json::object();
    for (size_t i = 1; i < timed.times.size(); ++i) {
      auto j = stats_json(timed.times[i], o.timing, o.clock_basis, be.max_clock_mhz());
      const nlohmann::json extras = kind.baseline_extras(timed.times[i].name);  // outlives the loop
      for (const auto& [k, v] : extras.items()) j[k] = v;
      bl[timed.times[i].name] = j;
    }
    res["baselines"] = bl;
    const nlohmann::json kind_metrics = kind.metrics();
    for (const auto& [k, v] : kind_metrics.items()) metrics[k] = v;
    res["metrics"] = metrics;
    return res;
  }

  // The input sets timing rotates over (device cold: one per call of a replay, within the memory
  // share), allocated where a host candidate's runner can reach them.
  std::vector<Operands> timing_sets(TaskKind& kind, const std::vector<std::string>& names, const Opts& o,
                                    nlohmann::json& metrics) {
    const int64_t set_bytes = std::max<int64_t>(1, kind.set_bytes(names));
    auto info = be.info();
    const bool device = o.timing == "device", cold = o.l2 == "cold";
    int64_t n_sets = 2;  // call/server: values alternate between two sets (flushed when cold)
    // Cold: every call of a replay its own set, also where fewer would keep L2 cold. Rotating
    // over as few as keep 2x L2 between two uses of a set was tried (H100, 2026-11-24): it moved
    // device times up from 3072^3 (4096^3 lt-auto +9.8 % over the standalone timer, cv 0.001 ->
    // 0.03), likely the device's duty cycle with less refresh work between replays.
    if (device) n_sets = cold ? o.graph_calls : 2;
    if (!cold && static_cast<size_t>(2 * set_bytes) > info.l2_bytes) n_sets = 1;  // hot: fit L2
    if (info.free_bytes > 0)
      n_sets = std::clamp<int64_t>(static_cast<int64_t>(info.free_bytes * kSetMemoryShare) / set_bytes, 1, n_sets);
    at::manual_seed(o.seed_base + 77);
    std::vector<Operands> sets;
    {
      ArenaScope in_arena(arena.get());
      // At random places (the kind's timing_sets) on a GPU; one after another on the host backend
      // (whose candidate calls over the arena slowed past the hang limit in slabs: RewardHost's
      // adversarial test, 2-core host, 2026-11-28, not understood) and for the fixtures'
      // comparison with the placement before issue 38 (KERNELRL_TIMING_DIAG=fixed_sets).
      if (timing_diag("fixed_sets") || !be.gpu())
        for (int64_t s = 0; s < n_sets; ++s) sets.push_back(kind.timing_set());
      else
        sets = kind.timing_sets(n_sets, rng);
    }
    metrics["set_bytes"] = set_bytes;
    metrics["l2_bytes"] = info.l2_bytes;
    return sets;
  }

  static TimingPlan timing_plan(const Opts& o, size_t n_sets) {
    TimingPlan plan;
    plan.mode = o.timing;
    plan.cold_l2 = o.l2 == "cold";
    plan.warmup = o.warmup;
    plan.min_rounds = o.min_rounds;
    plan.max_rounds = o.max_rounds;
    plan.graph_calls = o.graph_calls;
    plan.verify_rounds = o.verify_rounds;
    plan.budget_ms = o.timing_budget_ms;
    plan.gap_us = o.server_gap_us;
    plan.timeout_s = o.call_timeout_s;
    plan.n_sets = n_sets;
    return plan;
  }

  // The baselines alone, in a worker that is running no candidate (the only measurements the
  // evaluator stores as a shape's baselines: docs/sandbox.md): same sets, engine and mode.
  nlohmann::json baselines_only(const TaskSpec& task, const Opts& o, const Tick& tick) {
    if (!pending.empty()) await_spares(tick);  // nothing starts while this worker times
    be.reset_device_state();
    at::manual_seed(o.seed_base);
    auto kind = make_task_kind(task, be, dev, baselines, o);
    nlohmann::json metrics = nlohmann::json::object();
    std::vector<std::string> names = kind->timeable(o.raw_baselines);
    std::vector<Operands> sets = timing_sets(*kind, names, o, metrics);
    be.sync_device();
    TimingPlan plan = timing_plan(o, sets.size());
    plan.candidate_first = false;
    TimingHooks hooks;
    hooks.refresh = [&](const std::vector<size_t>& idx) { kind->refresh_sets(sets, idx); };
    tick("quiet:begin");
    struct QuietEnd {
      const Tick& t;
      ~QuietEnd() { t("quiet:end"); }
    } quiet_end{tick};
    metrics["lt_auto"] = kind->prepare_timing(names, sets, plan, hooks, rng, tick);
    std::vector<Contender> cs;
    for (const auto& name : names) {
      if (!kind->run_baseline(name, sets[0])) continue;
      cs.push_back({name, [&, name](size_t s) { kind->run_baseline(name, sets[s]); }, {}});
    }
    be.wait_stream(o.call_timeout_s);
    nlohmann::json bl = nlohmann::json::object();
    if (!cs.empty()) {
      TimingOutcome timed = time_contenders(be, cs, plan, hooks, rng, tick);
      for (const auto& [k, v] : timed.metrics.items()) metrics[k] = v;
      for (const auto& t : timed.times) {
        auto j = stats_json(t, o.timing, o.clock_basis, be.max_clock_mhz());
        const nlohmann::json extras = kind->baseline_extras(t.name);
        for (const auto& [k, v] : extras.items()) j[k] = v;
        bl[t.name] = j;
      }
    }
    const nlohmann::json kind_metrics = kind->metrics();
    for (const auto& [k, v] : kind_metrics.items()) metrics[k] = v;
    return {{"status", "ok"}, {"check", ""}, {"reason", "baselines only"}, {"baselines", bl}, {"metrics", metrics}};
  }
};

Harness::Harness(Backend& backend, RunnerOptions runner)
    : impl_(std::make_unique<Impl>(backend, std::move(runner))) {}
Harness::~Harness() = default;

namespace {

// Every LibTorch op of an evaluation (poison, draws, references, baselines) goes on the backend's
// stream, in order with the candidate's calls.
struct OnBackendStream {
#ifdef KERNELRL_HAVE_CUDA
  std::optional<c10::cuda::CUDAStreamGuard> guard;
#endif
  explicit OnBackendStream(Backend& be) {
#ifdef KERNELRL_HAVE_CUDA
    if (be.gpu())
      guard.emplace(c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(be.stream()), be.device_index()));
#endif
  }
};

}  // namespace

nlohmann::json Harness::baselines(const nlohmann::json& request, const Tick& tick) {
  const TaskSpec task = task_from_json(request.at("task"));
  const Opts o = parse_opts(request);
  OnBackendStream on_stream(impl_->be);
  return impl_->baselines_only(task, o, tick);
}

nlohmann::json Harness::evaluate(const nlohmann::json& request, const std::string& so, const Tick& tick) {
  const TaskSpec task = task_from_json(request.at("task"));
  const Opts o = parse_opts(request);
  OnBackendStream on_stream(impl_->be);
  try {
    return impl_->run(task, so, o, tick);
  } catch (const CheckFailure& f) {
    impl_->be.gate_open();
    impl_->be.sync_device();  // a Fatal here propagates: the process must be replaced
    return {{"status", f.status}, {"check", f.check}, {"reason", f.reason}, {"metrics", impl_->runner_metrics}};
  }
}

nlohmann::json Harness::prepare_spares(int64_t count, const Tick& tick) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t ready = impl_->prepare_spares(static_cast<size_t>(std::max<int64_t>(0, count)), tick);
  return {{"status", "ok"},
          {"spares", ready},
          {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
}

nlohmann::json Harness::runner_sandbox() {
  Runner probe(impl_->numbered_runner());
  return probe.probe_sandbox();
}

void Harness::warm_up() {
  Impl& im = *impl_;
  if (!im.be.gpu()) return;
#ifdef KERNELRL_HAVE_CUDA
  c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(
      static_cast<cudaStream_t>(im.be.stream()), im.be.device_index()));
  at::Tensor a = at::randn({64, 64}, im.opts(at::kHalf)), c = at::empty_like(a);
  at::matmul_out(c, a, a);
  const size_t g = im.be.capture([&] { at::matmul_out(c, a, a); });
  im.be.replay(g);
  im.be.wait_stream(60);
  im.be.clear_graphs();
  im.be.sync_device();
#endif
}

void Harness::run_once(const nlohmann::json& task_json, LaunchFn fn, int calls) {
  TaskSpec t = task_from_json(task_json);
  Impl& im = *impl_;
  Opts o;
  at::manual_seed(1);
  auto kind = make_task_kind(t, im.be, im.dev, im.baselines, o);
  auto ins = kind->draw(Draw::normal, nullptr);
  std::vector<Guarded> gin, gout = im.new_outputs(*kind);
  for (auto& x : ins) gin.push_back(im.guarded_copy(x));
  auto args = im.make_args(Impl::ptrs(gin), Impl::ptrs(gout), kind->dims(ins));
  auto invoke = [&] {
    if (int rc = fn(&args, im.be.stream()); rc != 0) throw std::runtime_error("kernelrl_launch returned " + std::to_string(rc));
  };
  im.be.sync_device();
  invoke();  // warm-up (module load), outside the profiled range
  im.be.sync_device();
#ifdef KERNELRL_HAVE_CUDA
  if (im.be.gpu()) cudaProfilerStart();
#endif
  for (int i = 0; i < calls; ++i) invoke();
  im.be.sync_device();
#ifdef KERNELRL_HAVE_CUDA
  if (im.be.gpu()) cudaProfilerStop();
#endif
}

}  // namespace kernelrl::worker
