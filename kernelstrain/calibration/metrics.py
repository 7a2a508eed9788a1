"""Agreement between simulated and measured times: level, spread and ranking.

>>> round(geomean([1.0, 4.0]), 3)
2.0
>>> spearman([1, 2, 3], [10, 30, 20])
0.5
"""
from __future__ import annotations

import itertools
import math


def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def ranks(xs) -> list:
    """Ranks from 0, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def spearman(a, b) -> float:
    """Rank correlation of two equally long sequences (0.0 when either is constant)."""
    ra, rb = ranks(list(a)), ranks(list(b))
    n = len(ra)
    ma, mb = sum(ra) / n, sum(rb) / n
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return num / den if den else 0.0


def pair_counts(sim, measured, tie: float = 0.5) -> tuple[float, int]:
    """(pairs ordered alike, pairs) over the pairs whose measured times differ; a pair the simulator ties counts
    `tie` (1/2, Harrell's concordance convention). Why 1/2, not 0: the dataset's times are the simulator's plus
    run-to-run noise (sim.measure), so a tied pair comes out in either order with equal odds, and a model that
    ties two candidates whose code the hardware runs alike (a parameter that changes nothing) should score what
    a coin scores, not less (scored 0, a model that broke the tie at random would beat the honest tie).
    gpu-check reports both (pair_agreement, pair_agreement_ties_wrong: tie=0, the figure before 2026-12-06).

    >>> pair_counts([1, 2, 3], [1, 3, 2]), pair_counts([1, 1, 3], [1, 2, 3]), pair_counts([1, 1, 3], [1, 2, 3], tie=0)
    ((2.0, 3), (2.5, 3), (2.0, 3))
    """
    alike, total = 0.0, 0
    for i, j in itertools.combinations(range(len(sim)), 2):
        if measured[i] == measured[j]:
            continue
        total += 1
        alike += 1.0 if (sim[i] - sim[j]) * (measured[i] - measured[j]) > 0 else tie if sim[i] == sim[j] else 0.0
    return alike, total


def standard_error(xs) -> float | None:
    """The standard error of xs' mean (sample sd / sqrt(n)); None under two values.

    >>> round(standard_error([0.2, 1.0, 0.6, 1.0]), 3)
    0.191
    """
    n = len(xs)
    if n < 2:
        return None
    mean = sum(xs) / n
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1) / n)


def episode_spearmans(rows, group="episode", min_group=3) -> list:
    """The Spearman of sim_ms against measured_ms within each group of >= min_group rows (groups in first-seen order)."""
    groups = {}
    for r in rows:
        groups.setdefault(r[group], []).append(r)
    return [spearman([m["sim_ms"] for m in ms], [m["measured_ms"] for m in ms])
            for ms in groups.values() if len(ms) >= min_group]


def agreement(rows, group="episode", min_group=3) -> dict:
    """Summary of rows with `sim_ms`, `measured_ms`, `module` and the `group` key.

    ratio figures over every row; ranking figures within each group of >= min_group rows
    (Spearman mean, median and the groups at or below 0; same-group pair-order agreement, the simulator's ties
    counted 1/2 and, as pair_agreement_ties_wrong, 0: pair_counts);
    pooled Spearman per module.
    """
    ratios = sorted(r["sim_ms"] / r["measured_ms"] for r in rows)
    groups, modules = {}, {}
    for r in rows:
        groups.setdefault(r[group], []).append(r)
        modules.setdefault(r["module"], []).append(r)
    rhos, alike, strict, pairs = episode_spearmans(rows, group, min_group), 0.0, 0.0, 0
    for members in groups.values():
        if len(members) >= min_group:
            sim, measured = [m["sim_ms"] for m in members], [m["measured_ms"] for m in members]
            a, t = pair_counts(sim, measured)
            alike, strict, pairs = alike + a, strict + pair_counts(sim, measured, tie=0.0)[0], pairs + t
    n = len(ratios)
    rhos.sort()
    return {
        "n": n,
        "geomean": geomean(ratios) if n else None,
        "p10": ratios[n // 10] if n else None,
        "p90": ratios[(9 * n) // 10] if n else None,
        "within_0.8_1.25": sum(0.8 <= x <= 1.25 for x in ratios) / n if n else None,
        "within_0.5_2": sum(0.5 <= x <= 2 for x in ratios) / n if n else None,
        "groups": len(rhos),
        "spearman_mean": sum(rhos) / len(rhos) if rhos else None,
        "spearman_median": rhos[len(rhos) // 2] if rhos else None,
        "groups_nonpositive": sum(r <= 0 for r in rhos),
        "pair_agreement": alike / pairs if pairs else None,
        "pair_agreement_ties_wrong": strict / pairs if pairs else None,
        "module_spearman": {m: spearman([x["sim_ms"] for x in ms], [x["measured_ms"] for x in ms])
                            for m, ms in sorted(modules.items()) if len(ms) >= min_group},
    }


def repeat_ceiling(pairs) -> dict:
    """The hardware's own agreement with itself: [(first_ms, second_ms), ...] of re-timed rows."""
    pairs = [(a, b) for a, b in pairs if a and b]
    if not pairs:
        return {"n": 0}
    logs = sorted(abs(math.log(a / b)) for a, b in pairs)
    return {"n": len(pairs), "median_abs_log": logs[len(logs) // 2],
            "within_5pct": sum(x <= math.log(1.05) for x in logs) / len(logs),
            "spearman": spearman([a for a, _ in pairs], [b for _, b in pairs])}
