#!/usr/bin/env python3
"""Independent reference of KernelRL's GRPO formulas (docs/grpo.md), the oracle of
tests/unit/test_grpo_reference.cpp.

Written from the papers and from TRL's / verl's GRPO code, not from trainer/grpo.cpp:
  - reward shaping: DAPO's soft overlong punishment (Yu et al. 2025, Eq. 13), a passing
    candidate kept at or above the failure reward;
  - reward smoothing: CUDA-L1 §3.2 (Eq. 6) winsorizing against the task's window of past
    rewards, mean ± k·max(stdev, σ_min), windows as they stood before the step;
  - group advantages (GRPO, Shao et al. 2024; Dr.GRPO, Liu et al. 2025): group / none / batch;
  - the clipped surrogate with DAPO's ε_low/ε_high, Schulman's k3 KL, the aggregations
    token-mean, sequence-mean, dr-grpo (TRL loss_type="dr_grpo": sum / (N · max_completion_length);
    verl "seq-mean-token-sum-norm"), and GSPO's sequence ratio (Zheng et al. 2025);
  - log-probs at the sampling temperature from given hidden rows and head weight
    (TRL GRPOTrainer._get_per_token_logps: logits /= temperature; verl logits.div_(temperature)),
    with their entropy and gradients.
Scalar formulas are plain Python (statistics.stdev); tensor ones are float64 torch with autograd.
Inputs are float32-representable so that the C++ side reads them exactly.

    .venv/bin/python tests/golden/grpo_reference.py            # writes tests/golden/grpo/golden.json
    .venv/bin/python tests/golden/grpo_reference.py --check    # exit 1 if the file differs
"""
import argparse
import json
import math
import pathlib
import statistics
import sys

try:
    import torch
except ImportError:  # the C++ test skips on exit code 3
    print("grpo_reference.py needs torch", file=sys.stderr)
    sys.exit(3)

OUT = pathlib.Path(__file__).resolve().parent / "grpo" / "golden.json"
MIN_REWARDS = 8  # the smoother's window must hold this many rewards (kSmoothingMinRewards)


def f32(values):
    """Rounds to float32 and back: exact in both languages."""
    return torch.tensor(values, dtype=torch.float32).to(torch.float64)


def rand_f32(gen, *shape, lo=0.0, hi=1.0):
    return (torch.rand(*shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo).float().double()


# ---- rewards -----------------------------------------------------------------------------------

def overlong(length, max_len, buffer):
    if buffer <= 0 or length <= max_len - buffer:
        return 0.0
    if length > max_len:
        return -1.0
    return ((max_len - buffer) - length) / buffer


def shaped(reward, passed, length, max_len, buffer, failed_reward):
    r = reward + overlong(length, max_len, buffer)
    return max(r, failed_reward) if passed else r


def smooth_steps(window, sigmas, min_std, steps):
    """steps: [(tasks, rewards)]; returns the smoothed rewards of each step."""
    history = {}
    out = []
    for tasks, rewards in steps:
        bounds = {}
        for t in set(tasks):
            w = history.get(t, [])
            if window <= 0 or len(w) < MIN_REWARDS:
                bounds[t] = (-math.inf, math.inf)
            else:
                mu, sd = statistics.fmean(w), max(statistics.stdev(w), min_std)
                bounds[t] = (mu - sigmas * sd, mu + sigmas * sd)
        out.append([min(max(r, bounds[t][0]), bounds[t][1]) for t, r in zip(tasks, rewards)])
        if window > 0:
            for t, r in zip(tasks, rewards):
                history[t] = (history.get(t, []) + [r])[-window:]
    return out


def advantages(rewards, group_size, norm, eps):
    groups = [rewards[i:i + group_size] for i in range(0, len(rewards), group_size)]
    batch_sd = statistics.stdev(rewards) if len(rewards) > 1 else 0.0
    adv, valid, flat = [], [], 0
    for g in groups:
        mu = statistics.fmean(g)
        sd = statistics.stdev(g) if len(g) > 1 else 0.0
        if sd < 1e-8:
            adv += [0.0] * len(g)
            valid += [False] * len(g)
            flat += 1
            continue
        denom = {"group": sd + eps, "none": 1.0, "batch": batch_sd + eps}[norm]
        adv += [(r - mu) / denom for r in g]
        valid += [True] * len(g)
    return adv, valid, flat


# ---- the loss ----------------------------------------------------------------------------------

def surrogate(logp, logp_old, logp_ref, adv, mask, cfg, max_completion_tokens):
    """Returns (loss, clip_fraction, kl, ratio_mean, d loss / d logp)."""
    logp = logp.clone().requires_grad_(True)
    lo, hi = 1 - cfg["clip_eps_low"], 1 + cfg["clip_eps_high"]
    a = adv[:, None]
    ntok = mask.sum()
    log_ratio = logp - logp_old
    ratio = log_ratio.exp()
    if logp_ref is not None and cfg["kl_coef"] > 0:
        d = logp_ref - logp
        k3 = d.exp() - d - 1
    else:
        k3 = torch.zeros_like(logp)
    row_tokens = mask.sum(1)
    has_tokens = (row_tokens > 0).double()
    if cfg["ratio_level"] == "sequence":
        s = ((log_ratio * mask).sum(1) / row_tokens.clamp(min=1)).exp()
        row = -torch.minimum(s * adv, s.clamp(lo, hi) * adv)
        row = row + cfg["kl_coef"] * (k3 * mask).sum(1) / row_tokens.clamp(min=1)
        loss = (row * has_tokens).sum() / has_tokens.sum()
        active = ((adv > 0) & (s > hi)) | ((adv < 0) & (s < lo))
        clip = (active.double() * row_tokens).sum() / ntok
    else:
        per_token = -torch.minimum(ratio * a, ratio.clamp(lo, hi) * a) + cfg["kl_coef"] * k3
        agg = cfg["loss_agg"]
        if agg == "token-mean":
            loss = (per_token * mask).sum() / ntok
        elif agg == "sequence-mean":
            row = (per_token * mask).sum(1) / row_tokens.clamp(min=1)
            loss = (row * has_tokens).sum() / has_tokens.sum()
        elif agg == "dr-grpo":
            loss = (per_token * mask).sum() / (logp.shape[0] * max_completion_tokens)
        else:
            raise ValueError(agg)
        active = ((a > 0) & (ratio > hi)) | ((a < 0) & (ratio < lo))
        clip = (active.double() * mask).sum() / ntok
    (grad,) = torch.autograd.grad(loss, logp)
    kl = (k3 * mask).sum() / ntok
    ratio_mean = (ratio * mask).sum() / ntok
    return loss.item(), clip.item(), kl.item(), ratio_mean.item(), grad


def head_logprobs(h, w, targets, temperature, grad_out):
    h = h.clone().requires_grad_(True)
    w = w.clone().requires_grad_(True)
    z = (h @ w.T) / temperature
    logsm = torch.log_softmax(z, dim=-1)
    logp = logsm.gather(1, targets[:, None]).squeeze(1)
    entropy = -(logsm.exp() * logsm).sum(-1)
    gh, gw = torch.autograd.grad((logp * grad_out).sum(), (h, w))
    return logp, entropy, gh, gw


# ---- the cases ---------------------------------------------------------------------------------

def tolist(t):
    return t.tolist()


def smoothing_cases():
    cases = []
    # The erased first success (issue 39): 8 failures fill the window, then a group of one
    # success among failures. σ = 0; without a floor all eight come out as −1.
    steps = [(["a"] * 8, [-1.0] * 8), (["a"] * 8, [1.3] + [-1.0] * 7)]
    for min_std in (0.1, 0.5):
        cases.append({"name": f"erased_success_min_std_{min_std}", "window": 64, "sigmas": 3.0,
                      "min_std": min_std, "steps": [{"tasks": t, "rewards": r} for t, r in steps],
                      "expected": smooth_steps(64, 3.0, min_std, steps)})
    # Two tasks, a window of 10 that slides, k = 1.5, σ_min = 0.05: one task's rewards nearly
    # constant (the floor binds), the other's spread (the sample std binds).
    gen = torch.Generator().manual_seed(1234)
    steps = []
    for s in range(5):
        tasks = ["steady"] * 4 + ["noisy"] * 4
        steady = [float(x) for x in f32([1.0 + 0.001 * k for k in range(4)])]
        if s == 4:
            steady[0] = 1.5  # an outlier above a nearly constant window
        noisy = rand_f32(gen, 4, lo=-1.0, hi=3.0).tolist()
        steps.append((tasks, steady + noisy))
    cases.append({"name": "two_tasks_sliding_window", "window": 10, "sigmas": 1.5, "min_std": 0.05,
                  "steps": [{"tasks": t, "rewards": r} for t, r in steps],
                  "expected": smooth_steps(10, 1.5, 0.05, steps)})
    return cases


def shaping_cases():
    rows = []
    for reward, passed in ((1.2, True), (-0.6, True), (-1.0, True), (-1.0, False), (0.0, True)):
        for length in (70, 85, 95, 100, 101):
            rows.append({"reward": reward, "passed": passed, "length": length, "max_len": 100,
                         "buffer": 20, "failed_reward": -1.0,
                         "expected": shaped(reward, passed, length, 100, 20, -1.0)})
    return rows


def advantage_cases():
    gen = torch.Generator().manual_seed(7)
    r = rand_f32(gen, 12, lo=-1.0, hi=2.0).tolist()
    r[8:12] = [0.5] * 4  # a zero-spread group
    cases = []
    for norm in ("group", "none", "batch"):
        adv, valid, flat = advantages(r, 4, norm, 1e-4)
        cases.append({"name": norm, "rewards": r, "group_size": 4, "norm": norm, "eps": 1e-4,
                      "expected": adv, "valid": valid, "zero_spread_groups": flat})
    return cases


def pipeline_cases():
    """Shaping → smoothing → group advantages over two steps of one task, G = 8: the erased-success
    case end to end, with an overlong passing row."""
    failed = -1.0
    step1 = [(-1.0, False, 60)] * 8
    step2 = [(1.3, True, 60), (0.9, True, 118)] + [(-1.0, False, 60)] * 6
    shaped_steps = [[shaped(r, p, n, 120, 16, failed) for r, p, n in s] for s in (step1, step2)]
    smoothed = smooth_steps(64, 3.0, 0.1, [(["t"] * 8, s) for s in shaped_steps])
    adv, valid, _ = advantages(smoothed[1], 8, "group", 1e-4)
    return [{"name": "first_success_survives", "max_len": 120, "buffer": 16, "failed_reward": failed,
             "window": 64, "sigmas": 3.0, "min_std": 0.1, "group_size": 8,
             "steps": [[{"reward": r, "passed": p, "length": n} for r, p, n in s] for s in (step1, step2)],
             "shaped": shaped_steps, "smoothed": smoothed, "advantages": adv, "valid": valid}]


def surrogate_cases():
    gen = torch.Generator().manual_seed(42)
    N, T = 4, 6
    logp_old = rand_f32(gen, N, T, lo=-3.0, hi=-0.2)
    logp = (logp_old + rand_f32(gen, N, T, lo=-0.5, hi=0.4)).float().double()  # ratios 0.61..1.49
    logp_ref = (logp_old + rand_f32(gen, N, T, lo=-0.3, hi=0.3)).float().double()
    mask = f32([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    adv = f32([1.25, -0.75, 0.5, 0.0])
    cases = []
    for agg, level in (("token-mean", "token"), ("sequence-mean", "token"), ("dr-grpo", "token"),
                       ("token-mean", "sequence")):
        for kl in (0.0, 0.05):
            cfg = {"clip_eps_low": 0.2, "clip_eps_high": 0.28, "kl_coef": kl, "loss_agg": agg,
                   "ratio_level": level}
            if level == "sequence":
                cfg["clip_eps_low"], cfg["clip_eps_high"] = 0.05, 0.08
            loss, clip, klv, ratio_mean, grad = surrogate(
                logp, logp_old, logp_ref if kl > 0 else None, adv, mask, cfg, 8)
            cases.append({"name": f"{agg}_{level}_kl{kl}", "config": cfg, "max_completion_tokens": 8,
                          "logp": tolist(logp), "logp_old": tolist(logp_old),
                          "logp_ref": tolist(logp_ref) if kl > 0 else None,
                          "advantages": tolist(adv), "mask": tolist(mask),
                          "expected": {"loss": loss, "clip_fraction": clip, "kl": klv,
                                       "ratio_mean": ratio_mean, "grad_logp": tolist(grad)}})
    return cases


def logprob_cases():
    gen = torch.Generator().manual_seed(3)
    N, D, V = 7, 5, 13
    h = rand_f32(gen, N, D, lo=-2.0, hi=2.0)
    w = rand_f32(gen, V, D, lo=-1.0, hi=1.0)
    targets = torch.randint(0, V, (N,), generator=gen)
    grad_out = rand_f32(gen, N, lo=-1.0, hi=1.0)
    cases = []
    for temperature in (1.0, 0.6, 1.7):
        logp, ent, gh, gw = head_logprobs(h, w, targets, temperature, grad_out)
        cases.append({"name": f"T{temperature}", "temperature": temperature, "h": tolist(h),
                      "w": tolist(w), "targets": targets.tolist(), "grad_out": tolist(grad_out),
                      "expected": {"logp": tolist(logp), "entropy": tolist(ent),
                                   "grad_h": tolist(gh), "grad_w": tolist(gw)}})
    return cases


def golden():
    return {
        "generator": "tests/golden/grpo_reference.py (torch " + torch.__version__.split("+")[0] + ")",
        "smoothing": smoothing_cases(),
        "shaping": shaping_cases(),
        "advantages": advantage_cases(),
        "pipeline": pipeline_cases(),
        "surrogate": surrogate_cases(),
        "logprobs": logprob_cases(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed file")
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    args = ap.parse_args()
    text = json.dumps(golden(), indent=1, sort_keys=True) + "\n"
    if args.check:
        old = json.loads(args.out.read_text())
        new = json.loads(text)
        old.pop("generator"), new.pop("generator")
        if old != new:
            print(f"{args.out} differs from what {sys.argv[0]} computes now", file=sys.stderr)
            return 1
        print(f"{args.out}: up to date")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
