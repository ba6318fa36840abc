#!/usr/bin/env python3
"""What a policy's samples at the lift's held-out shapes are, against the family list (issue 25):

    python3 bench/lift_samples.py PROMPTS_JSONL VARIANT_DIR [--side before|after]
                                  [--verdicts SAMPLES_JSONL] [--compile OUT_DIR]

PROMPTS_JSONL is `kernelrl lift measure`'s prompts.jsonl (each held-out shape's exemplars and the
before policy's samples); SAMPLES_JSONL its samples.jsonl (every sample's verdict, and the after
policy's code: needed for --side after), which adds each class's passing samples and best
speedup; VARIANT_DIR holds every family variant's source, as
`kernelrl data synth --families hgemm_small,hgemm_cutlass,... --n 6000 --emit-dir DIR` writes them.
Each sample, compared line by line with comments, blank lines and the end marker left out, is
  exact            a family variant verbatim;
  exact but unread flags
                   the nearest variant (difflib's ratio, same namespace) with only template
                   parameters changed that its code never reads (hgemm_small's B_COL_MAJOR, EPI
                   and PDL: the body is written for one setting of each): that variant, in effect;
  parameters only  the nearest variant with parameters changed that its code reads (tile sizes,
                   stages, split-K): a parameter tuple, listed or not;
  body edit        the nearest variant with other lines changed (median lines changed printed);
  unmatched        no variant of its namespace within 40 lines of its length.
It prints the counts per class and per shape, which parameters the "parameters only" samples
changed, and the hgemm_small tuples that are not in the family list. With --compile, those
samples are written to OUT_DIR and compiled with the evaluator's nvcc flags for sm_90a
(reward/compile.cpp), which says whether the new tuple passes the family's static checks; whether
it is correct and fast takes the GPU. The token-level novelty of `kernelrl lift measure` (edit
distance >= 0.1) calls all of these copies; this says which kind of copy.
"""
import argparse
import collections
import difflib
import glob
import json
import os
import re
import subprocess
import sys

PARAM = re.compile(r"/\*(\w+)=\*/(\w+)")


def lines_of(source):
    out = []
    for line in source.splitlines():
        line = line.strip()
        if line and line != "<|end|>" and not line.startswith("//"):
            out.append(line)
    return out


def params_of(lines):
    return {k: v for line in lines for k, v in PARAM.findall(line)}


def used_params_of(lines):
    """The parameters the code reads: a template parameter NAME_ named again past its declaration.
    hgemm_small's specializer writes a body for one layout, epilogue and PDL setting, so its
    Config's B_COL_MAJOR_, EPI_ and PDL_ are declared and never read: a sample that changes only
    them is the variant it copied."""
    text = "\n".join(lines)
    return {k: v for k, v in params_of(lines).items() if text.count(k + "_") > 1}


class Families:
    def __init__(self, variant_dir):
        self.variants = {os.path.basename(f)[:-3]: lines_of(open(f).read())
                         for f in sorted(glob.glob(os.path.join(variant_dir, "*.cu")))}
        if not self.variants:
            sys.exit(f"lift_samples.py: no .cu variants in {variant_dir}")
        self.exact = {tuple(v): k for k, v in self.variants.items()}
        self.small_tuples = {tuple(sorted(used_params_of(v).items()))
                             for k, v in self.variants.items() if k.startswith("hgemm_small")}

    def classify(self, lines):
        """(class, nearest variant name or None, lines changed)"""
        if tuple(lines) in self.exact:
            return "exact", self.exact[tuple(lines)], 0
        namespace = next((l for l in lines if l.startswith("namespace ")), None)
        best = None
        for name, v in self.variants.items():
            if namespace and namespace not in v or abs(len(v) - len(lines)) > 40:
                continue
            sm = difflib.SequenceMatcher(None, v, lines, autojunk=False)
            if best and sm.real_quick_ratio() < best[0]:
                continue
            ratio = sm.ratio()
            if not best or ratio > best[0]:
                best = (ratio, name, sm)
        if not best:
            return "unmatched", None, None
        ops = [o for o in best[2].get_opcodes() if o[0] != "equal"]
        v = self.variants[best[1]]
        changed = [l for _, i1, i2, j1, j2 in ops for l in v[i1:i2] + lines[j1:j2]]
        n = sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2 in ops)
        if not all(PARAM.search(l) or "Config<" in l for l in changed):
            return "body edit", best[1], n
        if used_params_of(lines) == used_params_of(v):
            return "exact but unread flags", best[1], n
        return "parameters only", best[1], n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prompts")
    ap.add_argument("variant_dir")
    ap.add_argument("--side", default="before", choices=["before", "after"],
                    help="whose samples: the before policy's (prompts.jsonl) or the after policy's (--verdicts)")
    ap.add_argument("--verdicts", default="", metavar="SAMPLES_JSONL",
                    help="lift measure's samples.jsonl: each sample's status and speedup")
    ap.add_argument("--compile", default="", metavar="OUT_DIR",
                    help="write the new-tuple samples there and compile them with nvcc (sm_90a)")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository (for kernel_abi.h)")
    a = ap.parse_args()
    fam = Families(a.variant_dir)
    rows = [json.loads(l) for l in open(a.prompts) if l.strip()]
    verdicts = {}
    if a.verdicts:
        for line in open(a.verdicts):
            if line.strip():
                j = json.loads(line)
                verdicts[j["task"]] = j  # the last line of a shape counts (lift.h)
    if a.side == "after" and not verdicts:
        sys.exit("lift_samples.py: --side after reads the after policy's code from --verdicts SAMPLES_JSONL")

    def samples_of(row):  # [(source, verdict or None)]
        v = verdicts.get(row["task"], {}).get(a.side)
        if a.side == "after":
            return [(x.get("code", ""), x) for x in v or []]
        sources = row.get("before", [])
        return [(src, v[i] if v and i < len(v) else None) for i, src in enumerate(sources)]

    total = collections.Counter()
    passed = collections.Counter()
    best = {}
    changed_params = collections.Counter()
    body_lines = []
    new_tuples = []
    print(f"{'shape':>22}  exact  unread flags  params  body  unmatched")
    for r in rows:
        per = collections.Counter()
        for source, verdict in samples_of(r):
            lines = lines_of(source)
            kind, near, n = fam.classify(lines) if lines else ("no code", None, None)
            per[kind] += 1
            if verdict and verdict.get("status") == "ok":
                passed[kind] += 1
                best[kind] = max(best.get(kind, 0), verdict.get("speedup", 0))
            if kind == "body edit":
                body_lines.append(n)
            if kind == "parameters only" and near.startswith("hgemm_small"):
                mine, theirs = used_params_of(lines), used_params_of(fam.variants[near])
                changed_params[tuple(sorted(k for k in set(mine) | set(theirs)
                                            if mine.get(k) != theirs.get(k)))] += 1
                if tuple(sorted(mine.items())) not in fam.small_tuples:
                    new_tuples.append((r["task"], mine, source, verdict))
        total += per
        print(f"{r['task']:>22}  {per['exact']:5d}  {per['exact but unread flags']:12d}  {per['parameters only']:6d}  "
              f"{per['body edit']:4d}  {per['unmatched']:9d}")
    n = sum(total.values())
    print(f"{n} samples ({a.side}): " + ", ".join(f"{k} {v} ({100 * v / n:.0f} %)" for k, v in total.most_common()))
    if verdicts:
        print("passed on the evaluator, by class: " + ", ".join(
            f"{k} {passed[k]} of {v} (best {best.get(k, 0):.3f}x)" for k, v in total.most_common()))
    if body_lines:
        body_lines.sort()
        print(f"body edits: median {body_lines[len(body_lines) // 2]} lines changed, "
              f"{sum(x <= 2 for x in body_lines)} of {len(body_lines)} at most 2")
    print("parameters-only samples of hgemm_small, by the parameters (read by the code) changed against the nearest variant:")
    for k, v in changed_params.most_common():
        print(f"  {v:3d}  {', '.join(k)}")
    print(f"hgemm_small parameter tuples not in the family list: {len(new_tuples)}")
    for i, (task, p, source, ev) in enumerate(new_tuples, 1):
        desc = " ".join(f"{k}={p[k]}" for k in sorted(p))
        if ev:
            desc += f" [{ev.get('status')}" + (f" {ev.get('speedup', 0):.3f}x]" if ev.get("status") == "ok" else "]")
        verdict = ""
        if a.compile:
            os.makedirs(a.compile, exist_ok=True)
            path = os.path.join(a.compile, f"{i:03d}_{task}.cu")
            with open(path, "w") as f:
                f.write(source.replace("<|end|>", ""))
            cmd = ["nvcc", "-O3", "-DNDEBUG", "-std=c++17", "-shared", "-Xcompiler", "-fPIC",
                   "-gencode", "arch=compute_90a,code=sm_90a", "-I", os.path.join(a.root, "reward"),
                   "-I", a.root, "-o", path[:-3] + ".so", path]
            res = subprocess.run(cmd, capture_output=True, text=True)
            err = next((l for l in res.stderr.splitlines() if "error" in l), "")
            verdict = " -> compiles" if res.returncode == 0 else f" -> compile error: {err.strip()[:120]}"
        print(f"  {task}: {desc}{verdict}")


if __name__ == "__main__":
    main()
