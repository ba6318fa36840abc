#!/usr/bin/env python3
"""A bench that measures RL must have measured RL (issue 23): every measured step of STAGE in
RUN_DIR/metrics.jsonl needs updates > 0 (the policy was updated) and compiled_rate > 0 (at least
one candidate compiled). Exits 0 and prints one line when they do; otherwise exits 1 with one line
per step that measured nothing, so the caller stops instead of printing a ratio.

    python3 bench/rl_guard.py RUN_DIR STAGE [--skip N] [--min-steps K]

--skip N      leave out the first N steps (e.g. the first step, which seeds the exemplar pool)
--min-steps K at least K measured steps (default 1): a run that stopped early measured nothing
Standard library only: it runs on the GPU machine's python3 and the project's venv alike."""
import argparse
import json
import os
import sys


def read_stage(path, stage):
    """The records of `stage` in the metrics file at `path` (none when it does not exist)."""
    recs = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("stage") == stage:
                recs.append(r)
    return recs


def problems(recs, name, stage, skip=0, min_steps=1):
    """One line per measured step (recs[skip:]) without an update or a compiled candidate, and
    one when fewer than min_steps were measured; [] when the run measured RL. `name` names the
    run in the lines (bench/multigpu_table.py shows the same check per run)."""
    measured = recs[skip:]
    bad = []
    for r in measured:
        why = []
        if r.get("updates", 0) <= 0:
            why.append(f"updates {r.get('updates', 'missing')}")
        if r.get("compiled_rate", 0) <= 0:
            why.append(f"compiled_rate {r.get('compiled_rate', 'missing')}")
        if why:
            bad.append(f"rl_guard: {name} {stage} step {r.get('step', '?')}: " + ", ".join(why) +
                       f" ({r.get('candidates', '?')} candidates): this step measured no RL")
    if len(measured) < min_steps:
        bad.append(f"rl_guard: {name} {stage}: {len(measured)} measured step(s) "
                   f"(after skipping {skip}), at least {min_steps} needed")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("stage")
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--min-steps", type=int, default=1)
    a = ap.parse_args()
    recs = read_stage(os.path.join(a.run_dir, "metrics.jsonl"), a.stage)
    bad = problems(recs, a.run_dir, a.stage, a.skip, a.min_steps)
    if bad:
        print("\n".join(bad), file=sys.stderr)
        return 1
    print(f"rl_guard: {a.run_dir} {a.stage}: {len(recs[a.skip:])} measured step(s), every one with updates "
          f"and compiled candidates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
