#include "reward/worker/harness.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <chrono>
#include <optional>
#include <random>
#include <utility>

#include "data/task_suite.h"
#include "reward/eval_result.h"
#include "reward/task_json.h"
#include "reward/worker/baselines.h"
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
// Wall-clock cross-check: device-wide wall time may exceed stream events by launch and sync
// overheads, never by more than this (work that escaped the stream shows up here).
constexpr double kWallFactor = 2.0, kWallSlackUs = 100.0;

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

}  // namespace

struct Harness::Impl {
  Backend& be;
  at::Device dev;
  HgemmBaselines baselines;
  Guarded workspace;
  std::mt19937_64 rng{0x5eed};
  std::vector<void*> recent;  // data pointers of recent trials: new buffers must differ
  bool stream_gate = false;   // this evaluation's Opts::stream_gate

  explicit Impl(Backend& b)
      : be(b), dev(b.gpu() ? at::Device(at::kCUDA, b.device_index()) : at::Device(at::kCPU)),
        baselines(b, dev) {
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

  void invoke(LaunchFn fn, const kernelrl_args& args) {
    int rc = fn(&args, be.stream());
    if (rc != 0) fail("nonzero_return", "kernelrl_launch returned " + std::to_string(rc), "launch_error");
    try {
      be.check_launch();
    } catch (const LaunchFailure& e) {
      fail("launch_failed", e.what(), "launch_error");
    }
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
  std::vector<at::Tensor> checked_call(LaunchFn fn, std::vector<Guarded>& ins, std::vector<Guarded>& outs,
                                       const std::vector<int64_t>& dims, double timeout_s) {
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
      invoke(fn, args);
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

  std::vector<Guarded> new_outputs(TaskKind& kind) {
    std::vector<Guarded> outs;
    for (const auto& s : kind.output_shapes()) outs.push_back(make_guarded(s.sizes, s.dtype));
    return outs;
  }

  // ------------------------------------------------------------------------ the protocol
  nlohmann::json run(const TaskSpec& task, LaunchFn fn, const Opts& o, const Tick& tick) {
    auto probe = [&](const std::string& where) { diag_probe(be, where); };
    probe("start");
    stream_gate = o.stream_gate;
    at::manual_seed(o.seed_base);
    auto kind = make_task_kind(task, be, dev, baselines, o);
    probe("kind made");
    nlohmann::json metrics = nlohmann::json::object();
    double max_dev = 0;
    // Warm-up call (ungated): with lazy module loading the first launch loads the candidate's
    // kernels, which must not happen while the gate holds the legacy stream.
    {
      auto ins = kind->draw(Draw::normal, nullptr);
      std::vector<Guarded> gin, gout = new_outputs(*kind);
      for (auto& x : ins) gin.push_back(guarded_copy(x));
      be.sync_device();
      invoke(fn, make_args(ptrs(gin), ptrs(gout), kind->dims(ins)));
      be.wait_stream(o.timeout_s);
      be.sync_device();
    }
    tick("warm-up done");
    probe("warm-up call");
    int trials = 0;
    for (int s = 0; s < o.seeds; ++s) {
      at::manual_seed(o.seed_base + 1000003ull * (s + 1));
      const std::string tag = "seed " + std::to_string(s) + " ";
      // (1) fresh buffers at new addresses: binary (exact sums) where the kind has it.
      Draw first = kind->first_draw();
      auto v1 = kind->draw(first, nullptr);
      std::vector<Guarded> in1, out1 = new_outputs(*kind);
      for (auto& x : v1) in1.push_back(guarded_copy(x));
      auto r1 = checked_call(fn, in1, out1, kind->dims(v1), o.timeout_s);
      ++trials;
      check_written(r1, tag + "first");
      auto ref1 = kind->reference(v1);
      max_dev = std::max(max_dev, kind->check(r1, ref1, v1, first, tag + "first"));
      // (2) same buffers, new normal values: a result cached by pointer is stale here.
      auto v2 = kind->draw(Draw::normal, nullptr);
      for (size_t i = 0; i < v2.size(); ++i) in1[i].view.copy_(v2[i]);
      auto r2 = checked_call(fn, in1, out1, kind->dims(v2), o.timeout_s);
      ++trials;
      if (any_stale(r2, r1))
        fail("cached_by_pointer",
             "same buffers with new values returned the previous call's result (or nothing): "
             "results are cached by pointer");
      check_written(r2, tag + "normal");
      auto ref2 = kind->reference(v2);
      max_dev = std::max(max_dev, kind->check(r2, ref2, v2, Draw::normal, tag + "normal"));
      // (3) new buffers, the same values with 5% redrawn (leading row/column kept): a result
      //     cached by a fingerprint of the values is stale here.
      auto v3 = kind->draw(Draw::perturbed, &v2);
      std::vector<Guarded> in3, out3 = new_outputs(*kind);
      for (auto& x : v3) in3.push_back(guarded_copy(x));
      auto r3 = checked_call(fn, in3, out3, kind->dims(v3), o.timeout_s);
      ++trials;
      if (any_stale(r3, r2))
        fail("cached_by_value",
             "inputs that differ from the previous call's in 5% of their elements returned the "
             "previous result (or nothing): results are cached by input value");
      check_written(r3, tag + "perturbed");
      auto ref3 = kind->reference(v3);
      max_dev = std::max(max_dev, kind->check(r3, ref3, v3, Draw::perturbed, tag + "perturbed"));
      tick("seed " + std::to_string(s) + " passed");
    }
    metrics["check_trials"] = trials;
    probe("checks");

    // ---- timing ----
    std::vector<std::string> names = kind->timeable(o.baselines);
    const int64_t set_bytes = std::max<int64_t>(1, kind->set_bytes(names));
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
    for (int64_t s = 0; s < n_sets; ++s) sets.push_back(kind->timing_set());
    std::vector<kernelrl_args> cand_args;
    for (const auto& s : sets) {
      std::vector<void*> in, out;
      for (const auto& x : s.inputs) in.push_back(x.data_ptr());
      for (const auto& x : s.outputs) out.push_back(x.data_ptr());
      cand_args.push_back(make_args(in, out, kind->dims(s.inputs)));
    }
    be.sync_device();
    probe("timing sets");
    metrics["set_bytes"] = set_bytes;
    metrics["l2_bytes"] = info.l2_bytes;

    TimingPlan plan;
    plan.mode = o.timing;
    plan.cold_l2 = cold;
    plan.warmup = o.warmup;
    plan.min_rounds = o.min_rounds;
    plan.max_rounds = o.max_rounds;
    plan.graph_calls = o.graph_calls;
    plan.verify_rounds = o.verify_rounds;
    plan.budget_ms = o.budget_ms;
    plan.gap_us = o.gap_us;
    plan.timeout_s = o.timeout_s;
    plan.n_sets = static_cast<size_t>(n_sets);
    TimingHooks hooks;
    hooks.refresh = [&](const std::vector<size_t>& idx) {
      for (size_t s : idx) kind->refresh(sets[s]);
    };
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
          if (j == 0 || j + 1 == idx.size())
            kind->check(s.outputs, kind->reference(s.inputs), s.inputs, Draw::normal,
                        "timed replay, set " + std::to_string(idx[j]), /*replay=*/true);
        }
      } catch (const CheckFailure& f) {
        fail("replay_mismatch", "a timed CUDA-graph replay did not produce the answer its eager "
                                "calls did (" + f.check + ": " + f.reason + ")");
      }
    };

    tick("quiet:begin");  // the evaluator holds compile jobs while this worker times
    struct QuietEnd {
      const Tick& t;
      ~QuietEnd() { t("quiet:end"); }
    } quiet_end{tick};
    metrics["lt_auto"] = kind->prepare_timing(names, sets, plan, hooks, rng, tick);
    std::vector<Contender> cs;
    cs.push_back({"candidate", [&](size_t s) { invoke(fn, cand_args[s]); }});
    for (const auto& name : names) {
      if (!kind->run_baseline(name, sets[0])) continue;  // e.g. lt-auto without an algorithm
      cs.push_back({name, [&, name](size_t s) { kind->run_baseline(name, sets[s]); }});
    }
    be.wait_stream(o.timeout_s);
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
    probe("timed");

    // Device-wide wall clock versus the stream's events: work that escaped the stream (and so
    // the events) still holds up cudaDeviceSynchronize.
    if (be.gpu()) {
      std::vector<double> wall, ev;
      be.ensure_marks(2);
      for (int i = 0; i < 3; ++i) {
        be.sync_device();
        auto t0 = std::chrono::steady_clock::now();
        be.mark(0);
        cs[0].call(0);
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

    probe("wall check");
    // Post-timing verification on the timing buffers with new values: a result cached during
    // the timing rounds (by pointer or call count) fails here.
    {
      Operands& s0 = sets[0];
      std::vector<at::Tensor> prev;
      for (const auto& x : s0.outputs) prev.push_back(x.clone());
      kind->refresh(s0);
      std::vector<Guarded> gin, gout;
      for (auto& x : s0.inputs) gin.push_back(plain(x));
      for (auto& x : s0.outputs) gout.push_back(plain(x));
      auto out = checked_call(fn, gin, gout, kind->dims(s0.inputs), o.timeout_s);
      if (any_stale(out, prev))
        fail("stale_after_timing", "after the timing rounds the kernel returned stale results "
                                   "for new inputs in the same buffers");
      check_written(out, "post-timing");
      max_dev = std::max(max_dev, kind->check(out, kind->reference(s0.inputs), s0.inputs,
                                              Draw::normal, "post-timing"));
    }

    probe("post-timing check");
    if (auto p = take_probes(); !p.empty()) metrics["probes"] = p;
    nlohmann::json res;
    res["status"] = "ok";
    res["check"] = "";
    res["reason"] = "passed " + std::to_string(trials + 1) + " checked calls over " +
                    std::to_string(o.seeds) + " seeds; timed " + std::to_string(timed.rounds) +
                    " rounds (" + o.timing + ")";
    res["max_abs_dev"] = max_dev;
    res["dev_bound"] = kind->dev_bound();
    res["candidate"] = stats_json(timed.times.at(0), o.timing, o.clock_basis, be.max_clock_mhz());
    nlohmann::json bl = nlohmann::json::object();
    for (size_t i = 1; i < timed.times.size(); ++i) {
      auto j = stats_json(timed.times[i], o.timing, o.clock_basis, be.max_clock_mhz());
      const nlohmann::json extras = kind->baseline_extras(timed.times[i].name);  // outlives the loop
      for (const auto& [k, v] : extras.items()) j[k] = v;
      bl[timed.times[i].name] = j;
    }
    res["baselines"] = bl;
    const nlohmann::json kind_metrics = kind->metrics();
    for (const auto& [k, v] : kind_metrics.items()) metrics[k] = v;
    res["metrics"] = metrics;
    return res;
  }
};

Harness::Harness(Backend& backend) : impl_(std::make_unique<Impl>(backend)) {}
Harness::~Harness() = default;

nlohmann::json Harness::evaluate(const nlohmann::json& request, LaunchFn fn, const Tick& tick) {
  TaskSpec task = task_from_json(request.at("task"));
  Opts o = parse_opts(request);
#ifdef KERNELRL_HAVE_CUDA
  // Every LibTorch op of the evaluation (poison, draws, references, baselines) goes on the
  // candidate's stream, in order with its calls.
  std::optional<c10::cuda::CUDAStreamGuard> guard;
  if (impl_->be.gpu())
    guard.emplace(c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(impl_->be.stream()),
                                                   impl_->be.device_index()));
#endif
  try {
    return impl_->run(task, fn, o, tick);
  } catch (const CheckFailure& f) {
    impl_->be.gate_open();
    impl_->be.sync_device();  // a Fatal here propagates: the process must be replaced
    return {{"status", f.status}, {"check", f.check}, {"reason", f.reason}};
  }
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
  im.be.sync_device();
  im.invoke(fn, args);  // warm-up (module load), outside the profiled range
  im.be.sync_device();
#ifdef KERNELRL_HAVE_CUDA
  if (im.be.gpu()) cudaProfilerStart();
#endif
  for (int i = 0; i < calls; ++i) im.invoke(fn, args);
  im.be.sync_device();
#ifdef KERNELRL_HAVE_CUDA
  if (im.be.gpu()) cudaProfilerStop();
#endif
}

}  // namespace kernelrl::worker
