// Measurement trust for the evaluator's device timing (issue 10): per shape, one mma.sync family
// kernel evaluated twice in one run (the same kernel timed twice must agree), the device-mode
// lt-auto baseline and every baseline's cv written out for comparison with the standalone timer
// (bench_lt_graph.cu, which shares no code with the evaluator); then, at a few shapes, the
// baselines re-measured while a second evaluator compiles a batch of sources in this process
// (an RL stage's situation), once with quiet windows (compile jobs held while timing) and once
// without.
//
//   bench_timing_trust --shapes 64,256,1024,4096 --out DIR [--busy-shapes 256,1024|""]
//                      [--busy-sources 48] [--sandbox auto|on|off]
// Writes DIR/trust.csv (shape, kernel runs, baselines) and DIR/busy.csv.
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/fs.h"
#include "data/families.h"
#include "data/tasks/task_suite.h"
#include "reward/evaluator.h"

using namespace kernelrl;
namespace fs = std::filesystem;

namespace {

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  for (std::string t; std::getline(in, t, ',');)
    if (!t.empty()) out.push_back(std::stoll(t));
  return out;
}

// UTC wall clock (HH:MM:SS.mmm), to line phases up with an nvidia-smi clock log.
std::string stamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S", std::gmtime(&t));
  return std::string(buf) + "." + std::to_string(1000 + ms).substr(1);
}

// An mma.sync variant (128x256 tiles, double-buffered fragments) for layout nn, fp32 accumulation.
std::string mma_kernel() {
  std::string fallback;
  for (const auto& v : hgemm_family_variants("hgemm_mma")) {
    if (v.layout != "nn" || v.acc != "f32") continue;
    std::map<std::string, int64_t> p(v.params.begin(), v.params.end());
    if (fallback.empty() && p["DBUF"]) fallback = v.source;
    if (p["DBUF"] && p["BM"] == 128 && p["BN"] == 256 && p["SPLITK"] <= 1) return v.source;
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Evaluator device-timing trust benchmark"};
  std::string shapes = "64,128,256,512,768,1024,1536,2048,3072,4096,8192,16384", out = "trust";
  std::string busy_shapes = "256,1024";
  std::string cache_dir, sandbox = "auto", repeat_shapes;
  std::string l2 = "cold";
  int busy_sources = 48, repeats = 4, graph_calls = 20, min_rounds = 15;
  bool fresh_worker = false, stream_gate = false;
  double idle_before = 0;
  std::string clock_basis = "as_run";
  app.add_option("--shapes", shapes, "comma-separated cube sizes");
  app.add_option("--busy-shapes", busy_shapes, "shapes re-measured beside a compile batch");
  app.add_option("--busy-sources", busy_sources, "distinct sources compiled in the busy phase");
  app.add_option("--out", out, "output directory");
  app.add_option("--cache-dir", cache_dir, "compile cache");
  app.add_option("--sandbox", sandbox, "worker sandbox: auto | on | off (a diagnostic control)");
  app.add_option("--repeat-shapes", repeat_shapes,
                 "only: evaluate the kernel --repeats times per shape in one worker, every "
                 "contender's time per evaluation (-> DIR/repeat.csv)");
  app.add_option("--repeats", repeats, "evaluations per shape for --repeat-shapes");
  app.add_flag("--fresh-worker", fresh_worker,
               "with --repeat-shapes: every evaluation in a new evaluator (a fresh worker process)");
  app.add_option("--idle-before", idle_before,
                 "with --repeat-shapes: start the worker, then wait this many seconds before the first evaluation");
  app.add_option("--graph-calls", graph_calls, "reward.graph_calls (calls captured per graph)");
  app.add_option("--l2", l2, "reward.l2: cold | hot");
  app.add_option("--min-rounds", min_rounds,
                 "reward.min_rounds (the largest shapes get the minimum: 16384^3)");
  app.add_flag("--stream-gate", stream_gate, "reward.stream_gate (the legacy-stream gate)");
  app.add_option("--clock-basis", clock_basis, "reward.clock_basis: as_run | rated (both are reported)");
  CLI11_PARSE(app, argc, argv);
  fs::create_directories(out);
  const std::string kernel = mma_kernel();

  RewardConfig cfg;
  cfg.backend = "gpu";
  cfg.baselines = {"all"};
  cfg.seeds = 1;
  cfg.min_rounds = min_rounds;
  cfg.max_rounds = std::max(30, min_rounds);
  cfg.timing_budget_ms = 2000;
  cfg.refresh_baselines = true;
  cfg.sandbox = sandbox;
  cfg.graph_calls = graph_calls;
  cfg.l2 = l2;
  cfg.stream_gate = stream_gate;
  cfg.clock_basis = clock_basis;
  if (!cache_dir.empty()) cfg.cache_dir = cache_dir;
  Evaluator ev(cfg, fs::path(out) / "trust.sqlite");
  if (!repeat_shapes.empty()) {  // evaluation-to-evaluation drift inside one worker
    if (idle_before > 0) {
      ev.backend();
      std::this_thread::sleep_for(std::chrono::duration<double>(idle_before));
    }
    std::ostringstream rep;
    rep << "M,evaluation,candidate_us,candidate_mhz,candidate_rated_us";
    for (const auto& b : report_baseline_names()) rep << "," << b << "_us," << b << "_mhz," << b << "_rated_us";
    rep << "\n";
    for (int64_t s : parse_list(repeat_shapes))
      for (int i = 1; i <= repeats; ++i) {
        const std::string t0 = stamp();
        EvalResult r;
        if (fresh_worker) {
          Evaluator fresh(cfg, fs::path(out) / ("fresh-" + std::to_string(s) + "-" + std::to_string(i) + ".sqlite"));
          r = fresh.evaluate_one(hgemm_task(s, s, s, "nn"), kernel);
        } else {
          r = ev.evaluate_one(hgemm_task(s, s, s, "nn"), kernel);
        }
        rep << s << "," << i << "," << r.cand.median_us << "," << r.cand.clock_mhz << "," << r.cand.rated_median_us;
        std::printf("repeat %lld eval %d [%s - %s]: candidate %.2f (%.0f MHz, rated %.2f)",
                    static_cast<long long>(s), i, t0.c_str(), stamp().c_str(), r.cand.median_us,
                    r.cand.clock_mhz, r.cand.rated_median_us);
        for (const auto& b : report_baseline_names()) {
          auto it = r.baselines.find(b);
          TimingStats t = it != r.baselines.end() ? it->second : TimingStats{};
          rep << "," << t.median_us << "," << t.clock_mhz << "," << t.rated_median_us;
          std::printf(" %s %.2f (%.0f, %.2f)", b.c_str(), t.median_us, t.clock_mhz, t.rated_median_us);
        }
        rep << "\n";
        std::printf("\n");
        if (r.metrics.contains("probes"))
          std::printf("probes %lld eval %d: %s\n", static_cast<long long>(s), i,
                      r.metrics["probes"].dump().c_str());
        if (r.metrics.contains("graph_nodes"))
          std::printf("graphs %lld eval %d: %s\n", static_cast<long long>(s), i,
                      r.metrics["graph_nodes"].dump().c_str());
        std::fflush(stdout);
      }
    atomic_write(fs::path(out) / "repeat.csv", rep.str());
    return 0;
  }
  std::ostringstream csv;
  csv << "M,N,K,status,run1_us,run2_us,repeat_diff_pct,run1_cv,lt_auto_us,lt_auto_cv,lt_auto_call_us";
  for (const auto& b : report_baseline_names()) csv << "," << b << "_us," << b << "_cv";
  // run2's lt-auto: whether a drift is the machine's; then SM clocks and the rated-clock times.
  csv << ",lt_auto_run2_us,run1_mhz,run2_mhz,lt_auto_mhz,run1_rated_us,run2_rated_us,rated_diff_pct,"
         "lt_auto_rated_us,lt_auto_run2_rated_us\n";
  std::printf("%-7s %10s %10s %8s %11s %8s %11s\n", "shape", "run1_us", "run2_us", "diff%", "lt-auto_us",
              "lt_cv", "lt_call_us");
  for (int64_t s : parse_list(shapes)) {
    TaskSpec task = hgemm_task(s, s, s, "nn");
    std::printf("[%s] %lld^3\n", stamp().c_str(), static_cast<long long>(s));
    EvalResult a = ev.evaluate_one(task, kernel);
    EvalResult b = ev.evaluate_one(task, kernel);
    double diff = a.passed() && b.passed()
                      ? 100 * std::fabs(a.cand.median_us - b.cand.median_us) / a.cand.median_us
                      : NAN;
    TimingStats lt = a.baselines.count("lt-auto") ? a.baselines.at("lt-auto") : TimingStats{};
    csv << s << "," << s << "," << s << "," << status_name(a.status) << "," << a.cand.median_us << ","
        << b.cand.median_us << "," << diff << "," << a.cand.cv << "," << lt.median_us << "," << lt.cv
        << "," << lt.call_median_us;
    for (const auto& name : report_baseline_names()) {
      auto it = a.baselines.find(name);
      csv << "," << (it != a.baselines.end() ? it->second.median_us : 0) << ","
          << (it != a.baselines.end() ? it->second.cv : 0);
    }
    const TimingStats lt2 = b.baselines.count("lt-auto") ? b.baselines.at("lt-auto") : TimingStats{};
    const double rdiff = a.cand.rated_median_us > 0 && b.cand.rated_median_us > 0
                             ? 100 * std::fabs(a.cand.rated_median_us - b.cand.rated_median_us) / a.cand.rated_median_us
                             : NAN;
    csv << "," << lt2.median_us << "," << a.cand.clock_mhz << "," << b.cand.clock_mhz << "," << lt.clock_mhz
        << "," << a.cand.rated_median_us << "," << b.cand.rated_median_us << "," << rdiff << ","
        << lt.rated_median_us << "," << lt2.rated_median_us << "\n";
    std::printf("%-7lld %10.2f %10.2f %8.2f %11.2f %8.4f %11.2f  %s %s  (MHz %.0f / %.0f, lt %.0f; rated %.2f / %.2f, %.2f%%)\n",
                static_cast<long long>(s), a.cand.median_us, b.cand.median_us, diff, lt.median_us, lt.cv,
                lt.call_median_us, status_name(a.status), a.passed() ? "" : a.reason.c_str(),
                a.cand.clock_mhz, b.cand.clock_mhz, lt.clock_mhz, a.cand.rated_median_us,
                b.cand.rated_median_us, rdiff);
    std::fflush(stdout);
    atomic_write(fs::path(out) / "trust.csv", csv.str());
  }

  // Busy phase: a second evaluator in this process compiles distinct sources while the first
  // re-measures baselines; quiet windows are process-wide, as in an RL stage.
  std::ostringstream busy;
  busy << "M,quiet,phase,lt_auto_us,lt_auto_cv,cublas_nn_us,compiles_done\n";
  for (bool quiet : {true, false}) {
    if (parse_list(busy_shapes).empty()) break;
    RewardConfig qc = cfg;
    qc.quiet = quiet;
    qc.refresh_baselines = false;  // the idle run's cuBLASLt pick is reused: only timing differs
    Evaluator timer(qc, fs::path(out) / ("busy-" + std::to_string(quiet) + ".sqlite"));
    RewardConfig cc = cfg;
    cc.cache_dir = (fs::path(out) / ("busy-cache-" + std::to_string(quiet))).string();  // cold cache
    Evaluator compiler(cc, fs::path(out) / "busy-compile.sqlite");
    compiler.backend();
    for (int64_t s : parse_list(busy_shapes)) {
      TaskSpec task = hgemm_task(s, s, s, "nn");
      auto row = [&](const char* phase, const EvalResult& r, int done) {
        auto lt = r.baselines.count("lt-auto") ? r.baselines.at("lt-auto") : TimingStats{};
        auto nn = r.baselines.count("cublas-nn") ? r.baselines.at("cublas-nn") : TimingStats{};
        busy << s << "," << quiet << "," << phase << "," << lt.median_us << "," << lt.cv << ","
             << nn.median_us << "," << done << "\n";
        std::printf("busy %lld quiet=%d %-6s lt-auto %.2f us (cv %.4f) cublas-nn %.2f us, %d compiled\n",
                    static_cast<long long>(s), quiet, phase, lt.median_us, lt.cv, nn.median_us, done);
        std::fflush(stdout);
      };
      row("idle", timer.evaluate_one(task, kernel), 0);
      std::vector<std::string> srcs;
      static int salt = 0;
      for (int i = 0; i < busy_sources; ++i)
        srcs.push_back(kernel + "\n// busy-phase variant " + std::to_string(++salt) + "\n");
      std::atomic<bool> done{false};
      std::atomic<int> compiled{0};
      std::thread t([&] {
        compiled = compiler.precompile(srcs);
        done = true;
      });
      std::this_thread::sleep_for(std::chrono::seconds(2));  // let the compilers get going
      EvalResult r = timer.evaluate_one(task, kernel);
      row("busy", r, done ? compiled.load() : -1);
      t.join();
    }
  }
  atomic_write(fs::path(out) / "busy.csv", busy.str());
  return 0;
}
