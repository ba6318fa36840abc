#!/usr/bin/env python3
"""Golden values for trainer/lift.h's bootstrap_mean and best_of_k (tests/unit/test_lift.cpp),
computed independently: plain Python integers for splitmix64 and exact binomials (math.comb)
over every k-subset count, no C++ shared. Run: python3 tests/golden/lift_stats_golden.py"""
import itertools
import math

MASK = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def bootstrap_mean(x, resamples, seed, level=0.95):
    n, c, means = len(x), 0, []
    for _ in range(resamples):
        s = 0.0
        for _ in range(n):
            s += x[splitmix64((seed + c) & MASK) % n]
            c += 1
        means.append(s / n)
    means.sort()
    r = round((1 - level) / 2 * resamples)  # llround: halves away from zero; none occur here
    return sum(x) / n, means[r], means[resamples - 1 - r]


def best_of_k_bruteforce(v, k):
    """Mean over all k-subsets (by index) of max and of 'any passed'."""
    subsets = list(itertools.combinations(range(len(v)), k))
    best = [max(v[i] for i in s) for s in subsets]
    return (sum(b > 0 for b in best) / len(subsets), sum(best) / len(subsets))


if __name__ == "__main__":
    x = [0.02, -0.01, 0.05, 0.03, 0.0, 0.04, -0.02, 0.06, 0.01, 0.03]
    for resamples, seed in [(1000, 0), (10000, 7)]:
        m, lo, hi = bootstrap_mean(x, resamples, seed)
        print(f"bootstrap resamples={resamples} seed={seed}: mean={m!r} lo={lo!r} hi={hi!r}")
    v = [0.0, 1.2, 0.0, 0.9, 1.05, 0.0, 1.3]
    for k in (1, 2, 3, 5, 7):
        p, e = best_of_k_bruteforce(v, k)
        print(f"best_of_k k={k}: pass={p!r} combined={e!r}")
