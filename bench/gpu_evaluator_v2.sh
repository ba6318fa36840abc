#!/usr/bin/env bash
# Evaluator v2 on the GPU machine (issue 10), in phases so each fits one device call:
#   build   configure + build into BUILD (CUTLASS headers from .device/cutlass-include.tgz or
#           $KERNELRL_CUTLASS_INCLUDE)
#   tests   ctest -R 'RewardGpu|SandboxGpu' (device timing, adversarial fixtures, CuTe candidate)
#   trust   standalone cuBLASLt graph timer (bench_lt_graph.cu, no shared code) vs the evaluator's
#           device-mode lt-auto at 12 shapes; the same kernel timed twice; baselines' cv; the
#           baselines beside a compile batch with and without quiet windows -> OUT/trust.md,
#           with an nvidia-smi clock/power log beside it -> OUT/smi.log
#   usage: bash bench/gpu_evaluator_v2.sh BUILD OUT build,tests,trust [shapes]
#   (TRUST_MIN_ROUNDS=N: the evaluator's reward.min_rounds in the trust phase, default 15; the
#   standalone timer takes 15 rounds at every shape)
set -uo pipefail
build=$1
out=$2
phases=${3:-build,tests,trust}
shapes=${4:-64,128,256,512,768,1024,1536,2048,3072,4096,8192,16384}
mkdir -p "$out"
if [[ -z "${KERNELRL_CUTLASS_INCLUDE:-}" && -f .device/cutlass-include.tgz ]]; then
  [[ -d /tmp/cutlass/include/cute ]] || { mkdir -p /tmp/cutlass && tar -C /tmp/cutlass -xzf .device/cutlass-include.tgz; }
  export KERNELRL_CUTLASS_INCLUDE=/tmp/cutlass/include
fi
echo "CUTLASS headers: ${KERNELRL_CUTLASS_INCLUDE:-none}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if [[ ,$phases, == *,build,* ]]; then
  t0=$(date +%s)
  # Build logs stay out of OUT (they are large; OUT comes back through the device tool's file
  # limits): the tail is printed on failure.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/gev2_cmake.log 2>&1 &&
    cmake --build "$build" > /tmp/gev2_build.log 2>&1 ||
    { tail -40 /tmp/gev2_cmake.log /tmp/gev2_build.log; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
fi
if [[ ,$phases, == *,tests,* ]]; then
  (cd "$build" && ctest -R 'RewardGpu|SandboxGpu' --output-on-failure --timeout 600) > "$out/gpu_tests.log" 2>&1
  grep -E "^\[(pass|fp16|gpu_|cute|relu|run)|REPEAT|tests passed|Failed|FAILED|Passed|\.cu: " "$out/gpu_tests.log" | cut -c1-220
fi
if [[ ,$phases, == *,trust,* ]]; then
  nvcc -O2 -std=c++17 -arch=sm_90 bench/bench_lt_graph.cu -lcublasLt -o /tmp/bench_lt_graph || exit 1
  # A build folder made for something else (bench/gpu_rl_lift.sh builds only kernelrl and the
  # worker) lacks the bench: build what this phase runs, or stop with why, before timing anything.
  [[ -f "$build/build.ninja" ]] ||
    { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/gev2_cmake.log 2>&1 || { tail -20 /tmp/gev2_cmake.log; exit 1; }; }
  cmake --build "$build" --target bench_timing_trust kernelrl_eval_worker kernelrl_candidate_runner \
    > /tmp/gev2_trust_build.log 2>&1 || { grep -E "error|FAILED" /tmp/gev2_trust_build.log | head -20; exit 1; }
  # SM clock, power and temperature every 500 ms (UTC stamps; bench_timing_trust stamps each
  # shape): from ~8192^3 up the device runs at its power cap and the clock moves.
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader \
    -lms 500 > "$out/smi.log" 2>&1 &
  smi=$!
  # The standalone timer before and after the evaluator: their spread is the machine's drift.
  /tmp/bench_lt_graph --shapes "$shapes" --layout nn --rounds 15 > "$out/lt_graph.csv"
  # The bench's stores and busy-phase compile caches stay in /tmp (with them the session-5
  # folder came back over the device tool's file limit); OUT gets the CSVs.
  rm -rf /tmp/gev2_trust /tmp/gev2_repeat
  "$build/bench/bench_timing_trust" --shapes "$shapes" --out /tmp/gev2_trust --busy-shapes 256,1024 \
    --busy-sources 48 --min-rounds "${TRUST_MIN_ROUNDS:-15}" 2>&1 | grep -v "^20..-..-.. " | tee "$out/trust.log"
  mkdir -p "$out/trust" && cp /tmp/gev2_trust/*.csv "$out/trust/"
  /tmp/bench_lt_graph --shapes "$shapes" --layout nn --rounds 15 > "$out/lt_graph2.csv"
  # A third standalone run that also stamps the SM clock around each timed replay (outside its
  # events): its time at the rated clock against the evaluator's lt-auto at the rated clock takes
  # the clock out of the comparison, which at the power cap the as-run times cannot.
  /tmp/bench_lt_graph --shapes "$shapes" --layout nn --rounds 15 --clocks 1 > "$out/lt_graph_clocks.csv"
  # Drift between evaluations in one worker: the kernel evaluated 4 times per shape, every
  # contender's device time per evaluation.
  "$build/bench/bench_timing_trust" --repeat-shapes 64,256,1024 --repeats 4 --out /tmp/gev2_repeat \
    2>&1 | grep "^repeat" | tee "$out/repeat.log"
  mkdir -p "$out/repeat" && cp /tmp/gev2_repeat/*.csv "$out/repeat/"
  kill "$smi" 2>/dev/null
  python3 - "$out" <<'PY'
import csv, sys, os
out = sys.argv[1]
lt, lt2, ltc = {}, {}, {}
for path, d in (("lt_graph.csv", lt), ("lt_graph2.csv", lt2)):
    for row in csv.reader(open(os.path.join(out, path))):
        if row and row[0].isdigit(): d[int(row[0])] = (float(row[6]), float(row[7]))
# The clocks run: M,N,K,layout,algos,best_algo,device_us,call_us,tflops,sm_mhz,rated_us.
for row in csv.reader(open(os.path.join(out, "lt_graph_clocks.csv"))):
    if row and row[0].isdigit(): ltc[int(row[0])] = (float(row[6]), float(row[9]), float(row[10]))
ev = list(csv.DictReader(open(os.path.join(out, "trust", "trust.csv"))))
lines = ["| shape | standalone lt before / after (device us) | evaluator lt-auto (device us) | diff to the nearer | lt call us (standalone / evaluator) | kernel run1 / run2 (us) | repeat diff | kernel MHz run1 / run2 | kernel rated run1 / run2 (us) | rated repeat diff | lt-auto run1 / run2 (us) | lt-auto MHz | lt-auto cv | cublas-nn cv | torch cv | standalone clocks run: us, MHz, rated us | evaluator lt-auto rated us | rated diff |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
f = lambda r, k: float(r.get(k) or "nan")
for r in ev:
    s = int(r["M"]); sd, sc = lt.get(s, (float("nan"), float("nan"))); sd2 = lt2.get(s, (float("nan"),))[0]
    e = float(r["lt_auto_us"])
    ds = [(e / x - 1) * 100 for x in (sd, sd2) if x == x and x > 0]
    d = min(ds, key=abs) if ds else float("nan")
    cu, cm, cr = ltc.get(s, (float("nan"),) * 3)
    er = f(r, "lt_auto_rated_us")
    rd = (er / cr - 1) * 100 if cr == cr and cr > 0 else float("nan")
    lines.append(f"| {s}^3 | {sd:.2f} / {sd2:.2f} | {e:.2f} | {d:+.2f}% | {sc:.2f} / {float(r['lt_auto_call_us']):.2f} | "
                 f"{float(r['run1_us']):.2f} / {float(r['run2_us']):.2f} | {float(r['repeat_diff_pct']):.2f}% | "
                 f"{f(r, 'run1_mhz'):.0f} / {f(r, 'run2_mhz'):.0f} | {f(r, 'run1_rated_us'):.2f} / {f(r, 'run2_rated_us'):.2f} | {f(r, 'rated_diff_pct'):.2f}% | "
                 f"{e:.2f} / {f(r, 'lt_auto_run2_us'):.2f} | {f(r, 'lt_auto_mhz'):.0f} | {float(r['lt_auto_cv']):.4f} | {float(r['cublas-nn_cv']):.4f} | {float(r['torch_cv']):.4f} | "
                 f"{cu:.2f}, {cm:.0f}, {cr:.2f} | {er:.2f} | {rd:+.2f}% |")
busy = list(csv.DictReader(open(os.path.join(out, "trust", "busy.csv"))))
lines += ["", "| shape | quiet windows | lt-auto idle (us) | lt-auto beside compiles (us) | change |", "|---|---|---|---|---|"]
for i in range(0, len(busy) - 1, 2):
    a, b = busy[i], busy[i + 1]
    x, y = float(a["lt_auto_us"]), float(b["lt_auto_us"])
    lines.append(f"| {a['M']}^3 | {'on' if a['quiet']=='1' else 'off'} | {x:.2f} | {y:.2f} | {(y/x-1)*100:+.2f}% |")
open(os.path.join(out, "trust.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
fi
