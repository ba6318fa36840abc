#!/usr/bin/env python3
"""The lift experiment's plots (issue 25) from a `kernelrl lift measure` directory:

    .venv/bin/python bench/plot_lift.py LIFT_DIR [--out-prefix LIFT_DIR/lift]

writes PREFIX_curves.png (the hgemm_rl stage by step: mean reward, the policy's own correct rate
and the best speedup so far, from curves.csv) and PREFIX_shapes.png (per held-out shape against
log2(M*N*K): best of N before RL, after RL, the sweep's best family variant and the best
exemplar shown, from per_shape.jsonl; the line at 1 is parity with the reference; a side with
no passing sample is left out, not drawn at 0). Needs matplotlib.

    .venv/bin/python bench/plot_lift.py --proof PROOF_DIR

issue 39's plots from a `kernelrl lift proof` directory: PROOF_DIR/best_of_k.png (per group,
split x prompt mode: the mean best-of-k speedup over the shapes where one of k passed, and the
pass rate, k = 1..16, for before RL, after RL and the best-of-N pool of the pre-RL policy, one
line per seed, from curves_k.csv) and PROOF_DIR/gains.png (per group and seed, after RL's gain
over each control with its bootstrap 95 % interval, from proof.json).
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
    ap.add_argument("lift_dir", nargs="?")
    ap.add_argument("--out-prefix", default="")
    ap.add_argument("--proof", default="", help="a `kernelrl lift proof` directory")
    a = ap.parse_args()
    if a.proof:
        return plot_proof(a.proof)
    if not a.lift_dir:
        ap.error("give LIFT_DIR or --proof PROOF_DIR")
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
            pts = [(xi, r[key]) for xi, r in zip(x, rows) if r.get(key, 0) > 0]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=label, s=22)
        ax.axhline(1.0, color="grey", lw=0.5)
        ref = rows[0]["reference"] if rows else "reference"
        n = rows[0]["samples"] if rows else 0
        ax.set_xlabel("log2(M*N*K)")
        ax.set_ylabel(f"best-of-{n} speedup over {ref}")
        ax.set_title(f"held-out shapes ({len(rows)})")
        ax.legend()
        fig.tight_layout()
        fig.savefig(prefix + "_shapes.png", dpi=120)


def plot_proof(d):
    rows = list(csv.DictReader(open(os.path.join(d, "curves_k.csv"))))
    groups = sorted({r["group"] for r in rows})
    if not groups:
        print("plot_lift: no curves in", d)
        return
    fig, axes = plt.subplots(2, len(groups), figsize=(4.5 * len(groups), 7), squeeze=False)
    styles = {"before": ("o", "C0"), "after": ("s", "C1"), "best_of_n": ("^", "C2")}
    for j, g in enumerate(groups):
        for (arm, seed) in sorted({(r["arm"], r["run_seed"]) for r in rows if r["group"] == g}):
            sel = [r for r in rows if r["group"] == g and r["arm"] == arm and r["run_seed"] == seed]
            k = [int(r["k"]) for r in sel]
            marker, color = styles.get(arm, ("x", "C3"))
            label = f"{arm} seed {seed}"
            axes[0][j].plot(k, [float(r["speed"]) for r in sel], marker=marker, color=color, ms=3, lw=1,
                            label=label)
            axes[1][j].plot(k, [float(r["pass"]) for r in sel], marker=marker, color=color, ms=3, lw=1)
        axes[0][j].set_title(g)
        axes[0][j].set_ylabel("best-of-k speedup (shapes where one passed)")
        axes[1][j].set_ylabel("P(one of k passes)")
        axes[1][j].set_xlabel("k")
        axes[0][j].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "best_of_k.png"), dpi=120)

    proof = json.load(open(os.path.join(d, "proof.json")))
    labels, means, lo, hi = [], [], [], []
    for g, gv in sorted(proof["groups"].items()):
        for seed, sv in sorted(gv["seeds"].items()):
            for c, cv in sv.get("gains", {}).items():
                if cv["shapes"] == 0:
                    continue
                labels.append(f"{g} s{seed} vs {c}")
                means.append(100 * cv["mean"])
                lo.append(100 * (cv["mean"] - cv["lo"]))
                hi.append(100 * (cv["hi"] - cv["mean"]))
    if labels:
        fig, ax = plt.subplots(figsize=(8, 0.25 * len(labels) + 1.5))
        ax.errorbar(means, range(len(labels)), xerr=[lo, hi], fmt="o", ms=3)
        ax.axvline(0, color="grey", lw=0.5)
        ax.axvline(3, color="C3", lw=0.5, ls="--")
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=6)
        ax.set_xlabel("after RL over the control, % (bootstrap 95 % interval over shapes)")
        fig.tight_layout()
        fig.savefig(os.path.join(d, "gains.png"), dpi=120)


if __name__ == "__main__":
    main()
