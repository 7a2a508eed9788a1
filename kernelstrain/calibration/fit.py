"""Fit the simulator's calibration constants to measured times (scripts/refit_calibration.py).

A record is one measured candidate with its uncalibrated roofline time:
  {"module", "impl", "variant", "episode", "measured_ms", "core_ms", "launches", "terms", "steps"}
The fit works in log space: log(measured - launch overhead) - log(core) =
  log ceiling[module][variant] + sum over launch terms t of exponents[impl][t] * log(terms[t])
  + sum over the module's steps s of exponent[module][s] * s * log 2,
where the steps are the parameters' log2(value / default), the launch terms' log2 (`~term`: the
module's departure from its impl's exponent), each of these again per variant (`p@variant`) and
the variant's size step (log2 of its roofline floor over the module's reference). It alternates
shrunk weighted means (variant -> module -> 1.0) for the ceilings, a ridge solve for the impl
exponents, a per-module ridge solve (shrunk toward 0) for the step exponents and shrunk
per-episode offsets (dropped at the end); the launch floor and the extra-launch cost are picked
on a grid by the whole time's error (total_error).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace
from pathlib import Path

from . import CROSS, TERMS, Fit, cross_steps, curve_steps, launch_terms, param_steps, term_params

IMPLS = ("cuda", "triton")
LN2 = math.log(2.0)
LAUNCH_GRID_US = (1.0, 1.5, 2.0, 2.5, 3.0)
EXTRA_GRID_US = (1.0, 1.5, 2.0, 3.0, 4.0)
AMD_LAUNCH_RATIO = 1.25      # the catalog's ROCm / NVIDIA launch cost, kept: no AMD measurement
EPISODE_RIDGE = 8.0          # shrinkage of the per-episode offsets: CV best of 1, 2, 4, 8, 16, 32
PARAM_RIDGE = 2.0            # shrinkage of the parameter exponents: CV (scripts/calibration_cv.py) best of 2, 4, 8, 16


FEATURES = [(i, t) for i in IMPLS for t in TERMS]


def features(r: dict) -> list:
    """log of each launch term, one column per (impl, term) (FEATURES)."""
    return [math.log(r["terms"][t]) if r["impl"] == i else 0.0 for i, t in FEATURES]


def target(r: dict, launch_us: float, extra_us: float) -> tuple[float, float]:
    """(log(measured kernel time without launch overhead / roofline), weight): the weight is the
    share of the measured time that is not overhead, so launch-bound rows say little of a ceiling."""
    rest = r["measured_ms"] - (launch_us + extra_us * (r["launches"] - 1)) * 1e-3 - r.get("later_ms", 0.0)
    share = max(rest, 0.2 * r["measured_ms"]) / r["measured_ms"]
    # a row at its floor (sim.floor_s: CTA starts, an unpipelined loop's latency chain) bounds the core time from above only
    bound = r.get("cta_ms", 0.0) / (share * r["measured_ms"])
    return math.log(share * r["measured_ms"] / r["core_ms"]), share * max(0.1, min(1.0, (1.0 - bound) / 0.3))


# a row whose floor is at least this share of its measured time bounds the core from above only (bounded); target's
# weight falls from the same share on
BOUND_AT = 0.7


def floor_log(r: dict) -> float | None:
    """log(the least time the row's prediction can take, whatever its factor / its roofline core time), in target's
    space (None: none): the floor predict_ms takes the max with (sim.floor_s: CTA starts, an unpipelined loop's chain
    of round trips, element-wise loads at a narrow K) and the roofline at the measured peaks' share (Fit's caps)."""
    least = r.get("cta_ms", 0.0)
    if "e_m" in r:
        caps = Fit()
        least = max(least, r["compute_ms"] / (caps.compute_cap.get(r["path"], caps.compute_cap["fp16"]) * r.get("mma_share", 1.0)),
                    r["memory_ms"] / caps.memory_cap)
    return math.log(least / r["core_ms"]) if least > 0.0 else None


def bounded(y: float, predicted: float, floor: float | None) -> float:
    """The target a row is fitted to, given the fit's current prediction of its core (all in target's space). A row
    whose floor (floor_log) is at least BOUND_AT of its measured time says only that its core is no slower than the
    measured time (than the floor, where the floor is above it): a prediction under that is as good as any (its own
    prediction is its target), one above it is pulled back to the measured time. Fitted two-sided, the floor-bound
    rows pulled the core to their measured time, which the floor (CTA starts, a chain of dependent round trips)
    partly made: gemm_fp16_triton's (the unpipelined rungs' chain floor at M=16 / M=128, the narrow-K rows) set its
    size exponent to -0.66 a doubling of work, which timed the held-out 2048^3 1.6x slow and 4096^3 0.6x fast."""
    if floor is not None and floor >= y + math.log(BOUND_AT) and predicted <= max(y, floor):
        return predicted
    return y


def _solve(a: list, b: list) -> list:
    """Gaussian elimination with partial pivoting for a small dense system."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda i: abs(m[i][c]))
        m[c], m[p] = m[p], m[c]
        pivot = m[c]
        for i in range(c + 1, n):
            f = m[i][c] / pivot[c]
            if f:                                   # the parameter systems are block-sparse
                row = m[i]
                for j in range(c, n + 1):
                    row[j] -= f * pivot[j]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][j] * x[j] for j in range(i + 1, n))) / m[i][i]
    return x


def _param_slopes(records: list, ws: list, rest: list, ridge: float) -> dict:
    """module -> {param: exponent}: a weighted ridge fit, per module, of the residual log error on
    the candidates' param_steps (shrunk toward 0: a parameter the data barely moves stays at 0).
    Steps and residuals are centred within each variant, whose ceiling takes their mean; a row
    adds only the steps its variant moves (the normal equations are built sparse)."""
    groups = {}
    for r, w, e in zip(records, ws, rest):
        groups.setdefault(r["module"], {}).setdefault(r["variant"], []).append((r.get("steps", {}), w, e))
    out = {}
    for m, by_variant in groups.items():
        names = sorted({p for rows in by_variant.values() for steps, _, _ in rows for p, x in steps.items() if x})
        if not names:
            continue
        index = {p: i for i, p in enumerate(names)}
        k = len(names)
        ata = [[0.0] * k for _ in range(k)]
        atb = [0.0] * k
        for rows in by_variant.values():
            active = sorted({index[p] for steps, _, _ in rows for p, x in steps.items() if x})
            total = sum(w for _, w, _ in rows)
            mx = [sum(w * steps.get(names[i], 0.0) for steps, w, _ in rows) / total for i in active]
            me = sum(w * e for _, w, e in rows) / total
            for steps, w, e in rows:
                x = [steps.get(names[i], 0.0) - c for i, c in zip(active, mx)]
                for a, i in enumerate(active):
                    wx = w * x[a]
                    atb[i] += wx * (e - me)
                    row = ata[i]
                    for b, j in enumerate(active):
                        row[j] += wx * x[b]
        keep = [i for i in range(k) if ata[i][i] > 0.0]     # drop a parameter constant within every variant
        if not keep:
            continue
        a = [[ata[i][j] + (ridge if i == j else 0.0) for j in keep] for i in keep]
        out[m] = {names[i]: b / LN2 for i, b in zip(keep, _solve(a, [atb[i] for i in keep]))}   # per doubling
    return out


def _param_term(slopes: dict, r: dict) -> float:
    s = slopes.get(r["module"], {})
    return LN2 * sum(s.get(p, 0.0) * x for p, x in r.get("steps", {}).items())


SIZE = "@size:"      # the pseudo-parameter of a variant's size term in the parameter solve
TERM = "~"           # ... and of a module's departure from its impl's exponent of a launch term


def size_refs(records: list) -> dict:
    """module -> geomean roofline floor (ms) of its records: the size term's reference point."""
    logs = {}
    for r in records:
        logs.setdefault(r["module"], []).append(math.log(r["work_ms"]))
    return {m: round(math.exp(sum(v) / len(v)), 6) for m, v in sorted(logs.items())}


def size_ranges(records: list, key=lambda r: r["module"]) -> dict:
    """key (the module) -> [least, most] roofline floor (ms) of its records, rounded outward to 6 significant digits
    (every record stays inside): the range Fit.size_step keeps the size term within."""
    spans = {}
    for r in records:
        lo, hi = spans.get(key(r), (r["work_ms"], r["work_ms"]))
        spans[key(r)] = (min(lo, r["work_ms"]), max(hi, r["work_ms"]))
    return {k: [_round_sig(lo, math.floor), _round_sig(hi, math.ceil)] for k, (lo, hi) in sorted(spans.items())}


def variant_size_ranges(records: list, sizes: dict) -> dict:
    """module -> {variant: [least, most] roofline floor (ms) of that variant's own records} for the variants of
    `sizes` (module -> {variant: size exponent}): the range each variant's size exponent is held within (a variant's
    exponent says nothing of sizes only its siblings were timed at)."""
    out = {}
    for (m, v), span in size_ranges(records, key=lambda r: (r["module"], r["variant"])).items():
        if v in sizes.get(m, {}):
            out.setdefault(m, {})[v] = span
    return out


def param_ranges(records: list, exponents: dict, key=lambda r: r["module"]) -> dict:
    """key (the module) -> {param: [least, most] step} over its records' parameter steps (param_steps), for the
    parameters of the module that `exponents` (module -> {param key: exponent}: `p`, `p^2`, `p@variant`) gives a
    term, rounded outward to 4 decimals (every record stays inside): the range Fit.param_log2 holds each step within.
    A parameter's term is what the fit measured of it between those values; past them it would be extrapolation
    (roomT 2026-12-07: fp8_quant_triton persistent_rows 16 programs an SM took x0.926 from the exponent fitted on
    4 / 8, at T=512 where 8 and 16 launch the same 512 programs; the H100 ran them level)."""
    spans = {}
    for r in records:
        named = {p for k in exponents.get(r["module"], {}) for p in term_params(k)}
        own = spans.setdefault(key(r), {})
        for p, x in r.get("steps", {}).items():
            if p in named:
                lo, hi = own.get(p, (x, x))
                own[p] = (min(lo, x), max(hi, x))
    return {k: {p: [_round_step(lo, math.floor), _round_step(hi, math.ceil)] for p, (lo, hi) in sorted(v.items())}
            for k, v in sorted(spans.items()) if v}


def variant_param_ranges(records: list, exponents: dict) -> dict:
    """module -> {variant: {param: [least, most] step of that variant's own records}} (param_ranges per variant)."""
    out = {}
    for (m, v), span in param_ranges(records, exponents, key=lambda r: (r["module"], r["variant"])).items():
        out.setdefault(m, {})[v] = span
    return out


def _round_step(x: float, direction) -> float:
    """x to 4 decimals, rounded by `direction` (math.floor: never above x, math.ceil: never below)."""
    y = direction(x * 1e4) / 1e4
    while (y - x) * (-1 if direction is math.floor else 1) < 0:      # x * 1e4 rounded the wrong way
        y += 1e-4 if direction is math.ceil else -1e-4
        y = round(y, 4)
    return y + 0.0          # no -0.0


def _round_sig(x: float, direction, digits: int = 6) -> float:
    """x to `digits` significant digits, rounded by `direction` (math.floor: never above x, math.ceil: never below)."""
    unit = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    step = -1 if direction is math.floor else 1
    k = direction(x / unit)
    while (float(f"{k * unit:.{digits}g}") - x) * step < 0:      # x / unit rounded the wrong way
        k += step
    return float(f"{k * unit:.{digits}g}")


def with_fit_steps(records: list, refs: dict | None, launch_steps: bool = True) -> list:
    """The records with the steps the parameter solve fits beside the module's parameters: the square of
    each CURVED parameter's step as `p^2` (curve_steps), each launch term as `~term` (the module's departure from its impl's exponent), each of these and of
    the parameters again as `p@variant` (the variant's departure from the module's) and, with refs,
    the variant's size step (log2 of work over the module's reference)."""
    out = []
    for r in records:
        steps = r.get("steps", {})
        steps = {**steps, **curve_steps(steps), **({TERM + t: math.log2(x) for t, x in r["terms"].items()} if launch_steps else {})}
        steps = {**steps, **{f"{p}@{r['variant']}": x for p, x in steps.items()}}
        if refs is not None:
            steps[SIZE + r["variant"]] = math.log2(r["work_ms"] / refs[r["module"]])
        out.append(dict(r, steps=steps))
    return out


def fit_terms(records: list, launch_us: float, extra_us: float, k_module: float = 1.0,
              k_variant: float = 0.25, ridge: float = 1.0, k_param: float = PARAM_RIDGE,
              size: bool = True, k_episode: float | None = EPISODE_RIDGE, iters: int = 25,
              exponents: dict | None = None, launch_steps: bool = True, bounds: bool = True) -> tuple[Fit, float]:
    """(fit, mean squared log error) for a fixed launch floor and extra-launch cost; size: fit the
    variants' size exponents too. k_episode: shrinkage of per-episode offsets that absorb part of
    what an episode's shape does to all its candidates alike, so that the ceilings and exponents
    lean on the differences within episodes (the ranking); the offsets are not kept (None: none).
    exponents: the impl exponents held fixed at these (refit_modules), not solved; launch_steps: False, no module
    departures from them (refit_modules holding base's); bounds: a row at its floor is a one-sided bound (bounded),
    else every row is fitted two-sided (the shipped global fit's way)."""
    refs = size_refs(records) if size else {}
    plain = records
    records = with_fit_steps(records, refs if size else None, launch_steps)
    ys0, ws = zip(*(target(r, launch_us, extra_us) for r in records))
    ys, yb, ep_row = list(ys0), list(ys0), [0.0] * len(records)      # yb: the targets with the bounds applied
    floors = [floor_log(r) if bounds else None for r in records]
    offs = None
    xs = [features(r) for r in records]
    nf = len(xs[0])
    beta = [exponents.get(i, {}).get(t, 0.0) for i, t in FEATURES] if exponents is not None else [0.0] * nf
    slopes = {}
    ata = None if exponents is not None else \
        [[sum(w * f[i] * f[j] for f, w in zip(xs, ws)) + (ridge if i == j else 0.0) for j in range(nf)] for i in range(nf)]
    for _ in range(iters):
        glob = [sum(b * x for b, x in zip(beta, f)) for f in xs]
        pterm = [_param_term(slopes, r) for r in records] if slopes else [0.0] * len(records)
        if offs is not None and any(f is not None for f in floors):
            yb = [bounded(y, o + g + p + e, f) for y, o, g, p, e, f in zip(ys0, offs, glob, pterm, ep_row, floors)]
            ys = [y - e for y, e in zip(yb, ep_row)]
        rest = [y - g - p for y, g, p in zip(ys, glob, pterm)]
        by_module, by_variant = {}, {}
        for r, e, w in zip(records, rest, ws):
            by_module.setdefault(r["module"], []).append((e, w))
            by_variant.setdefault((r["module"], r["variant"]), []).append((e, w))
        mod = {m: sum(e * w for e, w in v) / (sum(w for _, w in v) + k_module) for m, v in by_module.items()}
        var = {mv: (sum(e * w for e, w in v) + k_variant * mod[mv[0]]) / (sum(w for _, w in v) + k_variant)
               for mv, v in by_variant.items()}
        offs = [var[(r["module"], r["variant"])] for r in records]
        if ata is not None:
            atb = [sum(w * f[i] * (y - o - p) for f, w, y, o, p in zip(xs, ws, ys, offs, pterm)) for i in range(nf)]
            beta = _solve(ata, atb)
        if k_param is not None:
            glob = [sum(b * x for b, x in zip(beta, f)) for f in xs]
            slopes = _param_slopes(records, ws, [y - o - g for y, o, g in zip(ys, offs, glob)], k_param)
        if k_episode is not None:
            glob = [sum(b * x for b, x in zip(beta, f)) for f in xs]
            d = {}
            for r, y, w, o, g in zip(records, yb, ws, offs, glob):
                d.setdefault(r["episode"], []).append((y - o - g - _param_term(slopes, r), w))
            ep = {e: sum(x * w for x, w in v) / (sum(w for _, w in v) + k_episode) for e, v in d.items()}
            ep_row = [ep[r["episode"]] for r in records]
            ys = [y - e for y, e in zip(yb, ep_row)]
    err = sum(w * (y - o - sum(b * x for b, x in zip(beta, f)) - _param_term(slopes, r)) ** 2
              for r, y, w, o, f in zip(records, ys, ws, offs, xs)) / sum(ws)
    ceilings, sizes, term_exps = {}, {}, {}
    for m, by_param in slopes.items():
        for p in [p for p in by_param if p.startswith(SIZE)]:
            sizes.setdefault(m, {})[p[len(SIZE):]] = by_param.pop(p)
        for p in [p for p in by_param if p.startswith(TERM)]:
            term_exps.setdefault(m, {})[p[len(TERM):]] = round(by_param.pop(p), 4)
    for (m, v), lv in sorted(var.items()):
        ceilings.setdefault(m, {})[v] = round(math.exp(lv), 4)
    fit = Fit(launch_us={"nvidia": launch_us, "amd": round(launch_us * AMD_LAUNCH_RATIO, 3)},
              extra_launch_us={"nvidia": extra_us, "amd": round(extra_us * AMD_LAUNCH_RATIO, 3)},
              exponents={i: {t: round(beta[FEATURES.index((i, t))], 4) for t in TERMS} for i in IMPLS},
              ceilings=ceilings, module_ceilings={m: round(math.exp(v), 4) for m, v in sorted(mod.items())},
              param_exponents={m: {p: round(x, 4) for p, x in sorted(v.items()) if round(x, 4)}
                               for m, v in sorted(slopes.items()) if any(round(x, 4) for x in v.values())},
              module_exponents={m: {t: x for t, x in sorted(v.items()) if x} for m, v in sorted(term_exps.items())},
              size_ref_ms={m: x for m, x in refs.items() if m in sizes},
              size_range_ms={m: x for m, x in size_ranges(records).items() if m in sizes},
              variant_size_range_ms=variant_size_ranges(records, sizes),
              size_exponents={m: {v: round(x, 4) for v, x in sorted(by_v.items())} for m, by_v in sorted(sizes.items())})
    return replace(fit, param_range=param_ranges(plain, fit.param_exponents),
                   variant_param_range=variant_param_ranges(plain, fit.param_exponents)), err


def total_error(f: Fit, records: list) -> float:
    """Mean squared log error of the whole predicted time (launch overhead included), every record
    alike: what gpu-check scores. The core fit's own error weighs launch-bound rows down, so it
    cannot say which launch floor is right; this does."""
    return sum(math.log(predict_ms(f, r) / r["measured_ms"]) ** 2 for r in records) / len(records)


def fit(records: list, scan_iters: int = 4, **kw) -> Fit:
    """The fit at the launch floor and extra-launch cost of least total_error on the grid (scanned
    with scan_iters rounds of the alternating fit, the chosen point then fitted in full)."""
    return fits([records], 1, scan_iters, **kw)[0]


_SETS: list = []      # the record sets of fits(), read by its forked workers (inherited, not pickled per task)


def _scan_point(task) -> float:
    i, a, b, kw = task
    return total_error(fit_terms(_SETS[i], a, b, **kw)[0], _SETS[i])


def _final_fit(task) -> Fit:
    i, a, b, kw = task
    return fit_terms(_SETS[i], a, b, **kw)[0]


def fits(sets: list, jobs: int = 1, scan_iters: int = 4, launch: tuple | None = None, **kw) -> list:
    """fit() of each record set, its grid points' scans and then its final fits spread over `jobs` forked processes
    (one flat pool: every set's every grid point is one task; the same fits as one process gives, byte for byte).
    The global refit's CPU is 25 grid scans and a full fit a set, times 1 + folds sets (scripts/refit_calibration.py
    --jobs: the device host's 16 cores). launch: (launch floor, extra-launch cost) held, no scan (a refit for a change
    of the roofline's terms, which leave the launch floor where it was: a fifth of the CPU)."""
    short = {**kw, "iters": min(scan_iters, kw.get("iters", scan_iters))}
    grid = [] if launch else [(a, b) for a in LAUNCH_GRID_US for b in EXTRA_GRID_US]
    scans = [(i, a, b, short) for i in range(len(sets)) for a, b in grid]

    def best(errors: list) -> list:
        if launch:
            return [launch] * len(sets)
        return [min(grid, key=lambda ab: errors[i * len(grid) + grid.index(ab)]) for i in range(len(sets))]
    _SETS[:] = sets
    try:
        if jobs > 1:
            import multiprocessing
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                chosen = best(pool.map(_scan_point, scans, chunksize=1))
                return pool.map(_final_fit, [(i, a, b, kw) for i, (a, b) in enumerate(chosen)], chunksize=1)
        chosen = best([_scan_point(t) for t in scans])
        return [_final_fit((i, a, b, kw)) for i, (a, b) in enumerate(chosen)]
    finally:
        _SETS[:] = []


MODULE_FIELDS = ("ceilings", "module_ceilings", "param_exponents", "module_exponents", "size_ref_ms", "size_range_ms",
                 "variant_size_range_ms", "size_exponents", "param_range", "variant_param_range")
# the ranges a kept kind's terms are held within stay with it (refit_modules' keep)
KEPT_WITH = {"param_exponents": ("param_range", "variant_param_range")}


def refit_modules(records: list, base: Fit, modules, keep: tuple = ("param_exponents",), **kw) -> Fit:
    """base with the terms of `modules` (their ceilings, size exponents and, unless `keep` names them, their
    launch-term departures `module_exponents` and parameter exponents `param_exponents`) fitted anew on those
    modules' records, everything shared (the launch floor, the extra-launch cost, the impl exponents) and every
    other module's terms kept byte for byte. Every term the alternating fit gives a module is a function of that
    module's records once the shared terms are fixed (the ceilings, the per-module ridge solve and the per-episode
    offsets: an episode is one module's), so this is the full fit's answer for those modules at base's shared
    terms, and no other module's time moves: the orderings the tests hold of other modules' rungs (measured on the
    device, tests/test_room*.py) cannot flip, as a global refit's moved shared terms flipped 22 of them (sim_prev
    d015ca3, 2026-12-06). A kept kind stays base's: each row's core time carries its factor and the solve does not
    see it (a refit of the parameter exponents flipped 8 measured orderings of num_stages, word widths and threads
    in the refitted modules' own tests: a launch-model fix moves the terms, not what a block size does beyond them)."""
    modules = set(modules)
    rows = [dict(r, core_ms=r["core_ms"] * _kept_factor(base, r, keep), steps={} if "param_exponents" in keep else r.get("steps", {}))
            for r in records if r["module"] in modules]
    f, _ = fit_terms(rows, base.launch_us["nvidia"], base.extra_launch_us["nvidia"], exponents=base.exponents,
                     launch_steps="module_exponents" not in keep, **kw)
    merged, kept_too = {}, {n for k in keep for n in KEPT_WITH.get(k, ())}
    for name in MODULE_FIELDS:
        if name in keep or name in kept_too:
            continue
        kept, new = getattr(base, name), getattr(f, name)
        merged[name] = dict(sorted({**{m: v for m, v in kept.items() if m not in modules},
                                    **{m: v for m, v in new.items() if m in modules}}.items()))
    return replace(base, **merged)


def keep_modules(new: Fit, old: Fit, impls: dict) -> Fit:
    """new with the modules of `impls` ({module: its impl}) timed as `old` times them: their terms (MODULE_FIELDS) are
    old's, and each launch-term departure (module_exponents[m][t]) is old's plus old's impl exponent less new's, so
    that the impl exponent + the departure sums to old's on every term (Fit.core_factor); the shared floor, caps and
    every other module new's. What a gate does with a module whose terms under a global refit break the device rows
    its tests pin (scripts/refit_gate.py): the refit moves the impl exponents every module shares, so old's module
    terms alone would not give old's times. new and old must share the launch floor, the extra-launch cost and the
    caps (a refit with --hold-launch): those are no module's own."""
    for name in ("launch_us", "extra_launch_us", "memory_cap", "compute_cap"):
        if getattr(new, name) != getattr(old, name):
            raise ValueError(f"keep_modules: the fits differ in {name}; a kept module's time would not be old's")
    merged = {}
    for name in MODULE_FIELDS:
        fresh, kept = getattr(new, name), getattr(old, name)
        merged[name] = dict(sorted({**{m: v for m, v in fresh.items() if m not in impls},
                                    **{m: v for m, v in kept.items() if m in impls}}.items()))
    for m, impl in impls.items():
        was, now = old.exponents.get(impl, {}), new.exponents.get(impl, {})
        own = dict(old.module_exponents.get(m, {}))
        for t in TERMS:
            shift = was.get(t, 0.0) - now.get(t, 0.0)
            if shift:
                own[t] = own.get(t, 0.0) + shift
        if own:
            merged["module_exponents"][m] = dict(sorted(own.items()))
    merged["module_exponents"] = dict(sorted(merged["module_exponents"].items()))
    return replace(new, **merged)


# shrinkage of the cross terms (add_cross): 5-fold CV on the GEMM modules' rows (scripts/refit_calibration.py --modules
# ... --cross), of 2 and 8 the one at which gemm_fp16_triton's out-of-sample share within 0.8-1.25x stays at the
# replaced fit's (2: Spearman 0.843 -> 0.864 but within 0.658 -> 0.646; 8: 0.846, within 0.661)
CROSS_RIDGE = 8.0


def add_cross(records: list, base: Fit, modules, k_param: float = CROSS_RIDGE, k_episode: float = EPISODE_RIDGE) -> Fit:
    """base with tile-geometry cross terms (calibration.cross_steps, `p*q@variant`) given to the rungs of `modules`,
    fitted on what base leaves of their rows (_residual, less each episode's shrunk mean: the ranking within an
    episode is what they are for), every other term kept; each rung's ceiling is moved by the cross terms' weighted
    mean over its rows, so that its level stays base's and only the shape within the rung changes (a module refit
    moves the ceilings and exponents of its every rung: on gemm_fp16_triton's 401 rows its folds lost 0.005 of the
    rows within 0.8-1.25x before a cross term was added). A base that has cross terms for these modules is refused:
    the ceilings it moved cannot be told from the rest (refit from the fit before them)."""
    modules = set(modules)
    if any(CROSS in p for m in modules for p in base.param_exponents.get(m, {})):
        raise ValueError(f"add_cross: the base fit has cross terms for {sorted(modules)} already")
    rows = [r for r in records if r["module"] in modules]
    res = [_residual(base, r) for r in rows]
    by_episode = {}
    for r, (e, w) in zip(rows, res):
        by_episode.setdefault(r["episode"], []).append((e, w))
    offset = {ep: sum(e * w for e, w in v) / (sum(w for _, w in v) + k_episode) for ep, v in by_episode.items()}
    crossed = [dict(r, steps={f"{p}@{r['variant']}": x for p, x in cross_steps(r.get("steps", {})).items()}) for r in rows]
    slopes = _param_slopes(crossed, [w for _, w in res], [e - offset[r["episode"]] for r, (e, _) in zip(rows, res)], k_param)
    exps = {m: {p: round(x, 4) for p, x in v.items() if round(x, 4)} for m, v in slopes.items()}
    params = {m: dict(sorted({**base.param_exponents.get(m, {}), **exps.get(m, {})}.items())) for m in modules}
    shifts = {}
    for r, (_, w) in zip(crossed, res):
        own = exps.get(r["module"], {})
        shifts.setdefault((r["module"], r["variant"]), []).append((sum(own.get(p, 0.0) * x for p, x in r["steps"].items()), w))
    ceilings = {m: dict(v) for m, v in base.ceilings.items()}
    for (m, v), terms in sorted(shifts.items()):
        mean = sum(t * w for t, w in terms) / sum(w for _, w in terms)
        if mean:
            ceilings.setdefault(m, {})[v] = round(base.ceiling(m, v) * math.exp(-LN2 * mean), 4)
    return replace(base, ceilings=ceilings, param_exponents=dict(sorted({**base.param_exponents, **params}.items())))


def _kept_factor(base: Fit, r: dict, keep: tuple) -> float:
    """The factor of base's kept kinds (param_exponents, module_exponents) for one record, as Fit.core_factor has it."""
    m, v, log = r["module"], r["variant"], 0.0
    if "param_exponents" in keep:
        log += LN2 * base.param_log2(m, r["impl"], v, r.get("steps", {}))
    if "module_exponents" in keep:
        own = base.module_exponents.get(m, {})
        log += sum((own.get(t, 0.0) + own.get(f"{t}@{v}", 0.0)) * math.log(x) for t, x in r["terms"].items())
    return math.exp(log)


def refit_variants(records: list, base: Fit, variants: dict, k_episode: float = EPISODE_RIDGE,
                   k_variant: float = 0.25) -> Fit:
    """base with the ceilings of `variants` ({module: [variant, ...]}: rungs whose launch model changed) moved to
    their rows as the current launch models give them, every other term kept: a rung's log ceiling moves by the
    weighted mean over its rows of log(measured / base's prediction) less its episode's offset (the shrunk mean of
    the same residual over the episode's other rungs, whose model did not change), shrunk toward no move
    (k_variant). The rung is placed against the peers it was timed beside, as the fit's episode offsets place it;
    nothing else moves, so the tests' measured orderings of unchanged rungs, modules and parameters hold (a refit
    of whole modules moved the levels of unchanged rungs, tests/test_l2_reuse.py's among them, and a global one the
    shared terms: 22 orderings flipped, sim_prev d015ca3)."""
    ceilings = {m: dict(v) for m, v in base.ceilings.items()}
    for module, tags in variants.items():
        rows = [r for r in records if r["module"] == module]
        res = [(r, *_residual(base, r)) for r in rows]
        offsets = {}
        for r, e, w in res:
            if r["variant"] not in tags:
                offsets.setdefault(r["episode"], []).append((e, w))
        offset = {ep: sum(e * w for e, w in v) / (sum(w for _, w in v) + k_episode) for ep, v in offsets.items()}
        for tag in tags:
            mine = [(e - offset.get(r["episode"], 0.0), w) for r, e, w in res if r["variant"] == tag]
            if mine:
                shift = sum(e * w for e, w in mine) / (sum(w for _, w in mine) + k_variant)
                ceilings.setdefault(module, {})[tag] = round(base.ceiling(module, tag) * math.exp(shift), 4)
    return replace(base, ceilings=ceilings)


def _residual(f: Fit, r: dict) -> tuple[float, float]:
    """(log(measured / f's prediction) of the core time, the fit's weight of the row: target's); 0 for a row at its
    floor whose core f predicts under the floor (bounded: its time is the floor's, whatever the ceiling)."""
    launch = f.overhead_us("nvidia", r["launches"]) * 1e-3 + r.get("later_ms", 0.0)
    y, w = target(r, f.launch_us["nvidia"], f.extra_launch_us["nvidia"])
    core = math.log(max(predict_ms(f, dict(r, cta_ms=0.0)) - launch, 1e-9) / r["core_ms"])
    if bounded(y, core, floor_log(r)) != y:
        return 0.0, w
    return y - math.log(max(predict_ms(f, r) - launch, 1e-9) / r["core_ms"]), w


def predict_ms(f: Fit, r: dict) -> float:
    """What sim.time_ms gives the record with fit f; with the record's unit-efficiency times
    (compute_ms, memory_ms), efficiencies (e_c, e_m) and atomics_ms, the caps apply too."""
    factor = f.core_factor(r["module"], r["impl"], r["variant"], r["terms"], r.get("steps"), r.get("work_ms"))
    if "e_m" in r:
        cap_c = f.compute_cap.get(r["path"], f.compute_cap["fp16"]) * r.get("mma_share", 1.0)
        core = max(r["compute_ms"] / min(r["e_c"] / factor, cap_c), r["memory_ms"] / f.soft_cap(r["e_m"] / factor, f.memory_cap),
                   r["atomics_ms"] * factor)
    else:
        core = r["core_ms"] * factor
    return max(core, r.get("cta_ms", 0.0)) + r.get("later_ms", 0.0) + f.overhead_us("nvidia", r["launches"]) * 1e-3


def held_out(record: dict, fold: int = 0, folds: int = 3) -> bool:
    """Whole episodes are held out: fold `fold` of `folds`, by a hash of the episode id."""
    return int(hashlib.sha256(record["episode"].encode()).hexdigest()[:8], 16) % folds == fold


def episode_folds(records: list, folds: int) -> dict:
    """episode -> fold, dealt round-robin within each module in a hashed order: whole episodes are
    held out and every module keeps episodes in each fit (as a new seed's test has every module
    fitted; a plain hash fold can put all of a thin module's episodes in one fold)."""
    by_module = {}
    for r in records:
        by_module.setdefault(r["module"], set()).add(r["episode"])
    def key(e):
        return hashlib.sha256(e.encode()).hexdigest()
    return {e: i % folds for eps in by_module.values() for i, e in enumerate(sorted(eps, key=key))}


def _fold_fit(args) -> Fit:
    records, kw = args
    if "variants" in kw:                  # kw: base, variants (refit_variants)
        return refit_variants(records, **kw)
    if "crossed" in kw:                   # kw: base, crossed (the modules add_cross gives cross terms)
        return add_cross(records, kw["base"], kw["crossed"])
    if "modules" in kw:                   # kw: base, modules (refit_modules) and the shrinkages
        return refit_modules(records, **kw)
    return fit(records, **kw)


def fit_with_folds(records: list, folds: int, jobs: int = 1, **kw) -> tuple[Fit, list]:
    """(fit() of every record, the records with `sim_ms` of the fit that held their episode out: out_of_fold's), the
    1 + folds fits in one pool of `jobs` processes (fits); folds 0: no held-out rows."""
    fold_of = episode_folds(records, folds) if folds else {}
    sets = [records] + [[r for r in records if fold_of[r["episode"]] != fold] for fold in range(folds)]
    got = fits(sets, jobs, **kw)
    return got[0], [dict(r, sim_ms=predict_ms(got[1 + fold_of[r["episode"]]], r)) for r in records] if folds else []


def out_of_fold(records: list, folds: int, jobs: int = 1, **kw) -> list:
    """The records with `sim_ms` predicted by the fit (kw: fit_terms' shrinkage; with base and modules, refit_modules'
    fit of those modules, the records then theirs alone) that held the record's episode out (episode_folds); jobs:
    folds fitted in that many processes (same result)."""
    fold_of = episode_folds(records, folds)
    work = [([r for r in records if fold_of[r["episode"]] != fold], kw) for fold in range(folds)]
    if not {"variants", "modules", "crossed"} & set(kw):     # the global fit: every fold's grid points in one pool
        fits_ = fits([w[0] for w in work], jobs, **kw)
    elif jobs > 1:
        import concurrent.futures
        with concurrent.futures.ProcessPoolExecutor(min(jobs, folds)) as pool:
            fits_ = list(pool.map(_fold_fit, work))
    else:
        fits_ = [_fold_fit(w) for w in work]
    out = [None] * len(records)
    for fold, f in enumerate(fits_):
        for i, r in enumerate(records):
            if fold_of[r["episode"]] == fold:
                out[i] = dict(r, sim_ms=predict_ms(f, r))
    return out


# What the fit learns from: the calibration grid (seed 4242), the gpu-check runs on seeds 9191, 5151, 6262,
# 3131, 1717 and 8484, the shape grid (scripts/shape_grid.py: the same candidates at 3 shapes), the parameter
# grid (shape_grid.py --params: each parameter one at a time at 2 common shapes) and the same parameter grid of
# the modules those left unmeasured (kernelinfer's) and of 4 modules at misaligned rows, timed on an H100 (no
# H200 could be had that day; its rows are fitted on the H100's profile), and the candidates of three gpu-check
# seeds drawn by the current engines (6868 on the H200; 40404 on an H100 and 50505 on the H200, both profiles:
# closer to each other than any grid's, the near-ties the within-episode figures turn on), the H100 checks of the
# literature rungs (h100_room_checks.json: the figures tests/test_room_rungs.py and test_literature_rungs.py hold,
# shapes the seeds never drew, such as a one-row top-k) and the H100 parameter grid at the shapes seeds 40404/50505
# misordered most (h100_gpucheck_simgrid.json), and every rung and parameter of the modules those tests hold gains of,
# at the tests' shapes, timed on an H200 (h200_gpucheck_testgrid.json). A later gpu-check file (a new seed) is held
# out: reported, never fitted.
FIT_FILES = ("h200_kernels.json", "h200_gpucheck_s9191.json", "h200_gpucheck_s5151.json", "h200_gpucheck_s6262.json",
             "h200_gpucheck_s3131.json", "h200_gpucheck_s1717.json", "h200_gpucheck_s8484.json", "h200_gpucheck_grid5.json",
             "h200_gpucheck_pgrid.json", "h100_gpucheck_kigrid.json", "h200_gpucheck_s6868.json", "h100_gpucheck_s40404.json",
             "h200_gpucheck_s50505.json", "h100_room_checks.json", "h100_gpucheck_simgrid.json",
             "h200_gpucheck_testgrid.json")
# What a module refit (refit_modules: scripts/refit_calibration.py --modules) reads beside FIT_FILES: the H100 rows
# of 2026-12-06 -- gpu-check seeds 93131 95353 96969 97171 98989 99199, the sim2 and sim30/31 device checks, and the
# device rows the tests of measured orderings hold (the knobs' evict/Triton rows of softmax/layernorm_triton,
# roomS's rope_triton order, the room's gemv_cuda widen grid) -- so that a refitted module's terms answer to the
# orderings its tests pin. Seeds 84317, 98181, 98282 and every later gpu-check seed stay held out.
MODULE_FIT_FILES = FIT_FILES + (
    "h100_gpucheck_s93131.json", "h100_gpucheck_s95353.json", "h100_gpucheck_s96969.json", "h100_gpucheck_s97171.json",
    "h100_gpucheck_s98989.json", "h100_gpucheck_s99199.json", "h100_sim2_fit.json", "h100_sim2_held.json",
    "h100_sim30_checks.json", "h100_sim30b_checks.json", "h100_sim31c_checks.json", "h100_knobs_triton.json",
    "h100_knobs_evict_menu.json", "h100_knobs_evict_tuned.json", "h100_roomS_order.json", "h100_room_widen.json",
    "h100_roomK_k5.json", "h100_simS_s1.json",
    # roomA's H100 plans a1, a4, a5 (docs/roomA_device_h100_a*: the attention rungs at B=1 H=32 S=4096 D=128 and D=64
    # shapes, past the fit's flash_prefill_cuda rows of wgmma_warpgroup / warp_specialized at <= B=1 S=2048)
    "h100_roomA_a1.json", "h100_roomA_a4.json", "h100_roomA_a5.json",
    # the seventh session's device jobs, run by the lead on an H100 at 04:47 UTC of 2026-12-07 (the eighth session):
    # sim f1 (flash_prefill_cuda's rungs at B=2-4 S=4096-8192), sim2 j1 / j2 (prefix_scan_cuda tile rungs,
    # selective_scan_triton state_outer_scan sweeps, layernorm_triton staged loops, selective_scan_cuda rows). roomA j1
    # (measurements/h100_roomA_j1.json) stays out: 14 of its 48 rows time a rung main does not have
    # (warp_specialized_pingpong of flash_prefill_cuda / chunked_prefill_cuda, roomA's branch)
    "h100_sim_f1.json", "h100_sim2_j1.json", "h100_sim2_j2.json",
    # roomK's plan k11, run by the lead on an H100 at 04:47 UTC of 2026-12-07: grouped_gemm_cuda wgmma_pipeline at
    # T=64-4096 (BM 64 and the off-menu BM 128), grouped_gemm_triton, gemm_splitk_triton and gemm_fp4_triton tiles
    "h100_roomK_j1.json",
    # the eighth session's sim w1 / w2, run by the lead on an H100 at 07:19-07:27 UTC of 2026-12-07: layernorm_triton
    # staged loops and warps, gemm_fp16_cuda wgmma_split_k SPLITS, gemm_splitk_triton SPLIT_K x warps (2 and 4),
    # mla_decode_triton split_kv / pipelined_stages at B=32 H=128, prefix_scan_cuda one-tile rows
    "h100_sim_w1.json", "h100_sim_w2.json",
    # this session's sim j1 (the lead, H100, 07:51 UTC): grouped_gemm_cuda wgmma_pipeline / cp_async_pipeline at
    # T=8192 E=128 top-8 and T=512, mla_decode_triton exp2_tail_peel / pipelined_stages at B=32, gemm_fp16_triton's
    # pointer and TMA rungs at 2048^3, 4096^3 and M=128 K=14336
    "h100_sim_j1.json",
    # the tenth session's sim j2 (the lead, H100, 10:43 UTC): gemm_fp16_triton pipelined_stages 2 vs 4 warps at
    # 4096^3 (Triton's 2-warp mma.sync; off the menus), its pointer rungs at 1024^3, 8192^3 and 4096x14336x4096, and
    # gemm_splitk_triton's 64-row tiles on 2 / 4 warps at M=16 / M=64
    "h100_sim_j2.json",
    # the eleventh session's sim j2 (plan j4; the lead, H100, 14:13 UTC of 2026-12-07): gemm_fp16_triton grouped_swizzle
    # at 2048^3 over BM x BN x BK 64/128 x 64/128 x 32/64, gemm_fp16_cuda mma_sync likewise at M=128 K=14336,
    # gemm_splitk_triton split_k_reduce SPLIT_K x warps, grouped_gemm_cuda mma_sync BM x BK: the tile grids the
    # rungs' cross terms (calibration.cross_steps) are fitted on (the twelfth session's refits)
    "h100_sim_s11_j2.json")
# device checks written without a kernelstrain format line (room_device_check's rows, the card named in sim_gpu at the
# top, or in TEXT_META_CARD where the file's meta is text)
UNSTAMPED = ("h100_knobs_triton.json", "h100_knobs_evict_menu.json", "h100_knobs_evict_tuned.json", "h100_roomS_order.json",
             "h100_roomK_k5.json", "h100_simS_s1.json", "h100_roomA_a1.json", "h100_roomA_a4.json", "h100_roomA_a5.json",
             "h100_sim_f1.json", "h100_sim2_j1.json", "h100_sim2_j2.json", "h100_roomK_j1.json",
             "h100_sim_w1.json", "h100_sim_w2.json", "h100_sim_j1.json", "h100_sim_j2.json",
             # held out, in no fit list: sim j3 (H100, 2026-12-07 11:12 UTC), the out-of-sample check of the
             # gemm_fp16_triton refit (docs/sim_issue30_s10.md section 4)
             "h100_sim_j3.json",
             # sim's eleventh-session j2 (plan j4; H100, 2026-12-07 14:13 UTC), the rows behind grouped_gemm_cuda's
             # REG_STAGED_TRIP and the open questions of docs/sim_issue30_s11.md section 3 (MODULE_FIT_FILES since the
             # twelfth session)
             "h100_sim_s11_j2.json",
             # held out, in no fit list: sim's twelfth-session j3 (plan j6; H100, 2026-12-07 17:06 UTC), the
             # out-of-sample check of REG_STAGED_TRIP (grouped_gemm_cuda mma_sync at T=16 E=8) and a 4096^3 tile grid
             # of gemm_fp16_triton grouped_swizzle / pipelined_stages and gemm_fp16_cuda cp_async_pipeline
             # (docs/sim_issue30_s12.md)
             "h100_sim_s12_j3.json")
# the card of a device check whose meta was written as text (simS's plan s1: "'sim_gpu': 'H100'" inside its meta string)
TEXT_META_CARD = {"h100_simS_s1.json": "H100"}
# Rows that did not time what the simulator times: gpu-check timed paged decode on ragged seq_lens ([S/2, S], ~0.75
# of the task's KV bytes) until gpucheck.adapters.WORK_SHRINKING_PREPARE; FIT_FILES keep theirs (the fit they made),
# the files added after them leave them out.
RAGGED_TIMED = ("paged_decode_cuda", "paged_decode_triton")


MEASUREMENTS = Path(__file__).resolve().parents[2] / "measurements"


def read_measurement(name: str) -> dict:
    """One file of H200 measurement rows (the source tree's measurements/: only the fit and the
    scripts read them, so they do not ship in the package), its `format` line checked."""
    try:
        data = json.loads((MEASUREMENTS / name).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{MEASUREMENTS / name}: the measurement rows live in the source tree's "
                                "measurements/ (a checkout, not an installed package)") from None
    if not str(data.get("format", "")).startswith("kernelstrain/") and not (
            name in UNSTAMPED and (data.get("sim_gpu") or name in TEXT_META_CARD)):
        raise ValueError(f"measurement file {name}: no kernelstrain format line")
    return data


def timed_rows(name: str) -> list:
    """The matching, timed ok candidates of one shipped file (grid kernels or gpu-check rows), as
    {module, variant, episode, params, dtype, shape, measured_ms, gpu}: gpu is the catalog profile of the
    device that timed them (the file's meta.sim_gpu; H200 where the file does not say)."""
    data = read_measurement(name)
    meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
    gpu = TEXT_META_CARD.get(name) or meta.get("sim_gpu") or data.get("sim_gpu", "H200")   # device checks: at the top
    if "kernels" in data:
        return [dict(k, gpu=gpu) for k in data["kernels"] if k.get("matched") and k.get("measured_ms")]
    ragged = RAGGED_TIMED if name not in FIT_FILES else ()
    # a device check's rows name no episode: those of one module, dtype and shape are its episode (ordered together)
    return [dict(r, measured_ms=r["time_ms"], gpu=gpu,
                 episode=r.get("episode") or f"{name}|{r['module']}|{r['dtype']}|{sorted(r['shape'].items())}")
            for r in data["rows"] if r["label"] == "ok" and r["ok"] and r.get("time_ms") and r["module"] not in ragged]


def measured_records(files=FIT_FILES, modules=None) -> list:
    """The shipped measurements (matched, timed) as records, with the current launch models'
    uncalibrated roofline terms on the GPU that timed them (timed_rows: the H200, or the H100 of
    h100_gpucheck_kigrid.json), the launch built as sim.simulate builds it; modules: only these modules' rows."""
    from .. import knobs
    from ..ops import REGISTRY
    from ..sim import SAME_ADDRESS_ATOMIC_S, cap_registers, compute_ceiling, efficiencies, floor_s, in_flight_ratio, latency_ratio, narrowed, roofline_floor_ms, roofline_terms, sm_coverage, stepped_params
    from ..tasks import make_task
    out = []
    for name, k in ((name, k) for name in files for k in timed_rows(name)):
        if k["module"] not in REGISTRY or (modules is not None and k["module"] not in modules):
            continue
        module = REGISTRY[k["module"]]
        variant = module.variant(k["variant"])
        task = make_task(module, k["gpu"], k["dtype"], k["shape"])
        params = {**variant.defaults(), **k["params"]}    # a parameter added since the row was timed: at its default
        launch = narrowed(module, variant, cap_registers(knobs.launch(module, variant, params, task), task.gpu), task)
        cost, gpu = module.cost(task), task.gpu
        e_c, e_m = efficiencies(variant, launch, gpu)
        terms = roofline_terms(module, variant, launch, task)
        out.append({"source": name, "gpu": k["gpu"], "module": k["module"], "impl": module.impl, "variant": k["variant"], "episode": k["episode"],
                    "params": params, "steps": param_steps(stepped_params(params, launch), variant.defaults()),
                    "dtype": k["dtype"], "shape": k["shape"], "measured_ms": k["measured_ms"],
                    "core_ms": max(terms) * 1e3,
                    "launches": launch.launches,
                    "terms": launch_terms(launch, sm_coverage(launch, gpu), terms[0] >= terms[1],
                                          in_flight_ratio(launch, gpu), latency_ratio(launch, gpu, max(terms)), gpu.bw_tbs),
                    "path": variant.path, "e_c": e_c, "e_m": e_m,
                    "work_ms": roofline_floor_ms(module, task, variant.path),
                    "atomics_ms": launch.serial_atomics * SAME_ADDRESS_ATOMIC_S * 1e3,
                    "cta_ms": floor_s(launch, gpu) * 1e3,
                    "later_ms": launch.later_s * 1e3,        # sim.time_ms adds it after the core (Launch.later_s)
                    "compute_ms": cost.flops / gpu.peak(variant.path) * 1e3,
                    # sim.compute_ceiling's share of the compute cap (an MMA slower than the peak's, over padded tiles)
                    "mma_share": compute_ceiling(1.0, launch),
                    "memory_ms": cost.bytes * launch.traffic * launch.narrow / (gpu.bw_tbs * 1e12) * 1e3})
    return out
