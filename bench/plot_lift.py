#!/usr/bin/env python3
"""The lift experiment's plots (issue 25) from a `kernelrl lift measure` directory:

    .venv/bin/python bench/plot_lift.py LIFT_DIR [--out-prefix LIFT_DIR/lift]

writes PREFIX_curves.png (the hgemm_rl stage by step: mean reward, the policy's own correct rate
and the best speedup so far, from curves.csv) and PREFIX_shapes.png (per held-out shape against
log2(M*N*K): best of N before RL, after RL, the sweep's best family variant and the best
exemplar shown, from per_shape.jsonl; the line at 1 is parity with the reference). Needs
matplotlib.
"""
import argparse
import csv
import json
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lift_dir")
    ap.add_argument("--out-prefix", default="")
    a = ap.parse_args()
    prefix = a.out_prefix or os.path.join(a.lift_dir, "lift")

    curves = os.path.join(a.lift_dir, "curves.csv")
    if os.path.exists(curves):
        rows = list(csv.DictReader(open(curves)))
        steps = [int(r["step"]) for r in rows]
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(steps, [float(r["reward_mean"]) for r in rows], "o-", label="mean reward")
        ax.plot(steps, [float(r["sampled_correct_rate"]) for r in rows], "s-",
                label="correct rate (policy's samples)")
        ax.plot(steps, [float(r["best_speedup"]) for r in rows], "^-", label="best speedup so far")
        ax.set_xlabel("hgemm_rl step")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.legend()
        ax.set_title("HGEMM RL by step")
        fig.tight_layout()
        fig.savefig(prefix + "_curves.png", dpi=120)

    table = os.path.join(a.lift_dir, "per_shape.jsonl")
    if os.path.exists(table):
        rows = [json.loads(line) for line in open(table) if line.strip()]
        x = [math.log2(r["m"] * r["n"] * r["k"]) for r in rows]
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for key, marker, label in (("before", "o", "before RL"), ("after", "s", "after RL"),
                                   ("sweep", "x", "sweep's best variant"),
                                   ("exemplar", "+", "best exemplar shown")):
            ax.scatter(x, [r[key] for r in rows], marker=marker, label=label, s=22)
        ax.axhline(1.0, color="grey", lw=0.5)
        ref = rows[0]["reference"] if rows else "reference"
        n = rows[0]["samples"] if rows else 0
        ax.set_xlabel("log2(M*N*K)")
        ax.set_ylabel(f"best-of-{n} speedup over {ref}")
        ax.set_title(f"held-out shapes ({len(rows)})")
        ax.legend()
        fig.tight_layout()
        fig.savefig(prefix + "_shapes.png", dpi=120)


if __name__ == "__main__":
    main()
