"""The simulator's fitted constants and the shipped H200 measurements they come from.

Package data (refit with `python3 scripts/refit_calibration.py`):
  h200_references.json  the PyTorch reference programs, eager and torch.compile, per module x menu shape
  h200_fit.json         the constants `sim.time_ms` applies, and the hold-out figures of the fit
The measurement rows the fit reads live in the source tree's measurements/ (fit.read_measurement),
not in the package: only the fit and the scripts read them.
  h200_kernels.json     our own candidates timed alone on an H200 (method, device and versions in `meta`)
  h200_gpucheck_*.json  gpu-check rows of a seed (or of scripts/shape_grid.py): fitted where fit.FIT_FILES names them, else held out
  h100_gpucheck_kigrid.json  the parameter grid of the modules the H200 files lack, timed on an H100 (meta.sim_gpu:
                        the fit builds its rows on the H100 profile; the constants below are ratios to each GPU's roofline)

The fit keeps the analytic roofline and corrects it with a few readable terms:
  factor = ceiling[module][variant] * prod over the launch terms t of t ** (exponents[impl][t]
                                         + module_exponents[module][t] + module_exponents[module][t@variant])
           * prod over the candidate's integer parameters p of (p / p's default) ** param_exponent[module][p]
             (the step log2(p / default) held within param_range[module][p], the steps of the module's fit rows; the
             variant's departure param_exponent[module][p@variant] on the step held within variant_param_range)
           * prod over pairs of the candidate's tile dimensions p, q of 2 ** (param_exponent[module][p*q@variant]
             x p's held step x q's held step)   (a rung's tile-geometry cross terms, TILE_PARAMS; most rungs have none)
           * (roofline floor / size_ref_ms[module]) ** size_exponents[module][variant]
             (the floor held within variant_size_range_ms[module][variant], the floors of the variant's fit rows)
  time = max(roofline(efficiencies / factor, capped at the measured peaks' share), sim.floor_s)
         + launch_us + (launches - 1) * extra_launch_us
`ceiling` is measured / simulated roofline time of the (module, variant), shrunk toward its
module's (variants seen rarely lean on their module); 1.0 for anything the H200 grid lacks.
The launch terms (launch_terms) are the launch model's own ratios: SM coverage, threads / 128,
compute_scale, tile_quant, lane_util, traffic and the bytes in flight over what the bandwidth
needs (Little's law) and latency (sim.latency_ratio: 1 + the grid's waves of one DRAM round trip each over
the roofline time, which an exponent near 1 adds: the dependent phases of a short or thin grid) and the H200's DRAM
bandwidth over the card's (REFERENCE_DRAM_TBS: how much of a memory-bound time follows the DRAM); an exponent of 0 keeps the analytic model's
effect, a negative one for a factor in 0..1 damps its penalty (the fit: how far the H200 follows it);
`module_exponents[module][term]` is a module's departure from its impl's exponent (its kernels
feel masked lanes or a short grid more or less than the impl's average) and `term@variant` a
variant's from its module's, shrunk toward 0.
`size_exponent[module][variant]` is what the analytic model misses of how the variant's time grows
with the problem: factor *= (roofline floor / the module's reference floor) ** size_exponent. A
positive one: small problems run relatively slower than the roofline says (fixed per-CTA costs,
latency chains of dependent phases, tails), a negative one: large ones fall out of the variant's
sweet spot (L2 reuse lost, tiles past the cache). Ridge-shrunk toward 0 like the parameter terms.
The power law is not extrapolated: past the smallest or largest floor of the variant's own fit rows
(`variant_size_range_ms`; the module's, `size_range_ms`, where a fit gives no variant's) the factor stays at the
edge's, the analytic model alone saying how the time grows (chunked_prefill_triton's rows span floors of 33-65 us:
its online_softmax exponent -0.12, taken to a menu shape of 2.1 ms, made that rung 1.5x faster than any measured
trend and its ladder 1.28x). The edge is the variant's, not the module's: flash_prefill_cuda's module rows span
floors of 3.5-513 us (its fp32-FMA rungs' floors are on the fp32 peak), its mma_sync rows 3.5-35 us, and mma_sync's
exponent (-0.415) taken to the module's edge timed it at 625 TFLOP/s at B=4 H=32 S=4096 D=128 on the H100, past the
494 that mma.sync can issue there (gpus.mma_sync_rate) and 3x the most any of its rows ran (204).
`param_exponent` is what the launch model misses of a parameter's effect (a block size, warps,
stages) in one module (`p^2`: the bend of a CURVED parameter's, a term in the square of its step), ridge-shrunk toward 0 so that a parameter seen rarely keeps the analytic
model's effect alone; a parameter at its variant's default contributes nothing. A key `p@variant`
is that variant's own departure from the module's exponent of p (its code uses p differently:
threads of a warp-per-row rung vs. a block-per-row one), shrunk toward the module's the same way.
Neither is extrapolated: past the least or most step of the rows that fitted it (`param_range`: the module's rows,
`variant_param_range`: the variant's own), a term keeps the edge's value and the launch model alone prices a value
further out (roomT 2026-12-07: every list extension inherited the fitted trend as a time factor, fp8_quant_triton
persistent_rows 16 programs an SM x0.926 at T=512, where 8 and 16 launch the same 512 programs; the H100 ran them level).

Other GPUs follow from the same numbers (assumptions, not measurements): a variant's ceiling is a
property of its code and carries across NVIDIA parts; the catalog's bandwidth, peaks, SMs and
caches scale the roofline; the back-to-back launch floor is the same on every NVIDIA part, and
ROCm's is the catalog's 1.25x the NVIDIA floor.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources

# @4: per-variant size ranges (variant_size_range_ms); @5: parameter step ranges (param_range, variant_param_range);
# a file of an older format is refused (refit it)
FIT_FORMAT = "kernelstrain/calibration-fit@5"
# the launch quantities the fit scales by a power: ratios that are 1 at the analytic reference
SOFT_CAP_POWER = 10.0        # sharpness of Fit.soft_cap: CV (scripts/calibration_cv.py) best of 4, 10, 16
TERMS = ("coverage", "threads", "compute_scale", "tile_quant", "lane_util", "traffic", "in_flight", "latency", "dram")
# The DRAM bandwidth (TB/s) of the card most fit rows were timed on (the H200): the `dram` term is it over the
# simulated card's. A memory-bound kernel short of the bandwidth for another reason -- bytes in flight (Little's law:
# bandwidth = bytes in flight / latency, whatever the peak), re-reads that L2 serves, an issue-bound loop -- takes
# as long on a card of the same SMs and L2 but other DRAM; the fit's exponent of the term says how much of a
# module's time follows the DRAM (0: all of it, -1: none). H100 (3.35 TB/s) against H200 (4.8), both 132 SMs and
# 50 MB of L2: paged_decode_cuda B=32 H=32 KVH=8 S=2048 ran 96-161 us on the H100 (seed 30303) and 97-157 on the H200,
# where the bytes alone say 1.43x; at B=128 S=1024 (h100_gpucheck_s40404.json) split_kv and vectorized_uint4, whose
# sibling query heads re-read their KV head (L2 serves most of it), ran 230 and 270 us: 1.2-1.4x the gqa rung's
# 190 us (which reads it once) for 2.5x its modelled bytes. Without the term the fit put the H100 rows of
# paged_decode_cuda, flash_decode_triton, gemv_cuda and grad_clip_cuda 1.16-1.31x slow against their H200 rows.
REFERENCE_DRAM_TBS = 4.8
# the parameters whose effect the fit lets bend (a term in the square of the step beside the linear one): a block's
# size has a sweet spot that no power law gives (more warps hide more latency, then cost more at every barrier and
# block scan: topk_cuda's rungs on the H200 gain 1.5x from 256 to 512 threads and lose 5-15% from 512 to 1024, where
# a straight line in log2(threads) modelled 512 15-38% slow and 1024 10-28% fast); past CURVE_SPAN doublings from the
# default the square stays at its edge (few rows lie further: it is not extrapolated)
CURVED = ("threads", "num_warps", "warps")
CURVE_SPAN = 2.0


def curve_steps(steps: dict) -> dict:
    """{p^2: the square of p's step, held within CURVE_SPAN} of the CURVED parameters among param_steps' `steps`.

    >>> curve_steps({"threads": 1.0, "num_warps": -3.0, "BLOCK": 1.0})
    {'threads^2': 1.0, 'num_warps^2': 4.0}
    """
    return {f"{p}^2": min(x * x, CURVE_SPAN ** 2) for p, x in steps.items() if p in CURVED}


# The tile-geometry parameters whose pairs a rung's fit may cross (a term in the product of two steps, `p*q@variant`):
# the log-linear terms give each of a tile's dimensions one exponent whatever the others are, but the hardware's
# costs of a tile are products of them -- the accumulator's registers a thread (BM x BN over the warps: past the file
# a block fewer an SM), a stage's operand bytes (BK x (BM + BN): the ring's depth in shared memory, blocks an SM),
# the operand reuse an MMA gets (BM x BN / (BM + BN)) -- so one dimension's effect turns with another's (the H100,
# sim j2 of 2026-12-07: gemm_fp16_triton grouped_swizzle BLOCK_K 64 ran 1.39x faster than 32 on 128 x 128 tiles and
# 2.06x slower on 64 x 128 at 2048^3). A cross term is the second-order (mixed) term of log time in the log tile
# dimensions, fitted per rung and ridge-shrunk toward 0 as the others; it acts on the held steps (Fit.param_log2), so
# it is never extrapolated past the values the rung's rows timed either. Only rungs refitted with it carry it
# (scripts/refit_calibration.py --modules ... --params --cross).
TILE_PARAMS = ("BLOCK_M", "BM", "BLOCK_N", "BN", "BLOCK_K", "BK", "num_warps", "warps", "num_stages", "stages")
CROSS = "*"


def cross_steps(steps: dict) -> dict:
    """{p*q: p's step x q's step} of each pair of TILE_PARAMS that both leave their default among param_steps'
    `steps` (the product is 0 where either is at its default).

    >>> cross_steps({"BLOCK_M": -1.0, "BLOCK_K": 1.0, "num_warps": 0.0, "GROUP_M": 1.0})
    {'BLOCK_M*BLOCK_K': -1.0}
    """
    names = [p for p in TILE_PARAMS if steps.get(p)]
    return {f"{p}{CROSS}{q}": steps[p] * steps[q] for i, p in enumerate(names) for q in names[i + 1:]}


def term_params(key: str) -> set:
    """The parameters a parameter-term key is a function of: `p`, `p^2`, `p@variant` -> {p}; `p*q@variant` -> {p, q}.

    >>> sorted(term_params("BLOCK_M*BLOCK_K@grouped_swizzle")), term_params("num_warps^2@tl_dot")
    (['BLOCK_K', 'BLOCK_M'], {'num_warps'})
    """
    return {p.split("^")[0] for p in key.split("@")[0].split(CROSS)}


class _Sums(dict):
    """{name: sum(name)}, each summed when first asked and kept (Fit._rung)."""

    def __init__(self, sum_of):
        super().__init__()
        self.sum_of = sum_of

    def __missing__(self, name: str) -> float:
        found = self[name] = self.sum_of(name)
        return found


@dataclass(frozen=True)
class Fit:
    """Fitted constants of the simulator (see the module docstring for the formula)."""
    launch_us: dict = field(default_factory=lambda: {"nvidia": 4.0, "amd": 5.0})
    extra_launch_us: dict = field(default_factory=lambda: {"nvidia": 2.5, "amd": 3.5})
    exponents: dict = field(default_factory=dict)             # impl -> {launch term: exponent}
    module_exponents: dict = field(default_factory=dict)      # module -> {launch term: departure from its impl's}
    ceilings: dict = field(default_factory=dict)              # module -> {variant: factor}
    module_ceilings: dict = field(default_factory=dict)       # module -> factor
    param_exponents: dict = field(default_factory=dict)       # module -> {param: exponent}
    size_exponents: dict = field(default_factory=dict)        # module -> {variant: exponent of work / size_ref}
    size_ref_ms: dict = field(default_factory=dict)           # module -> its fit rows' geomean roofline floor
    size_range_ms: dict = field(default_factory=dict)         # module -> [least, most] roofline floor of its fit rows
    variant_size_range_ms: dict = field(default_factory=dict)  # module -> {variant: [least, most] floor of its own rows}
    param_range: dict = field(default_factory=dict)           # module -> {param: [least, most] step of its fit rows}
    variant_param_range: dict = field(default_factory=dict)   # module -> {variant: {param: [least, most] step, own rows}}
    # the most any kernel reaches of a peak: H200 library anchors (h200_measured.json): a 2 GB
    # copy at 4.25 of 4.8 TB/s; cuBLAS bf16 724 of 989 TFLOP/s, fp8 1234 of 1979, fp32 51 of 67.
    # The memory ceiling is approached softly (soft_cap): 0.91 is its asymptote, the copy's 0.885
    # raised 3 % (CV: scripts/calibration_cv.py, against 0.885), which an analytic 1.12x it reaches.
    memory_cap: float = 0.91
    compute_cap: dict = field(default_factory=lambda: {"fp16": 0.73, "fp8": 0.62, "fp32": 0.76})

    @staticmethod
    def soft_cap(e: float, cap: float) -> float:
        """An efficiency e held under the memory ceiling cap by a smooth minimum: near the ceiling
        DRAM gives diminishing returns (page conflicts, refresh, read/write turnarounds), so two
        fast candidates keep distinct times instead of tying at a hard cap."""
        return (e ** -SOFT_CAP_POWER + cap ** -SOFT_CAP_POWER) ** (-1.0 / SOFT_CAP_POWER)

    def ceiling(self, module: str, variant: str) -> float:
        by_variant = self.ceilings.get(module, {})
        return by_variant.get(variant, self.module_ceilings.get(module, 1.0))

    def size_step(self, module: str, work_ms: float | None, variant: str | None = None) -> float:
        """log2(work / the module's reference work), the work held within the floors the variant's own fit rows
        span (variant_size_range_ms; the module's size_range_ms where the fit gives none for the variant; no bound
        where it gives neither): 0 where the work or the reference is unknown."""
        ref = self.size_ref_ms.get(module)
        if not (ref and work_ms):
            return 0.0
        lo, hi = self.variant_size_range_ms.get(module, {}).get(variant) or self.size_range_ms.get(module, (work_ms, work_ms))
        return math.log2(min(max(work_ms, lo), hi) / ref)

    def core_factor(self, module: str, impl: str, variant: str, terms: dict, steps: dict | None = None,
                    work_ms: float | None = None) -> float:
        """Measured over simulated roofline time of one candidate; terms: launch_terms(), steps: param_steps(),
        work_ms: its roofline floor (sim.roofline_floor_ms on its datapath)."""
        ceiling, of_term, _, _, _, size, _, _, _ = self._rung(module, impl, variant)
        return ceiling * math.exp(
            sum(of_term[t] * math.log(x) for t, x in terms.items())
            + math.log(2.0) * (self.param_log2(module, impl, variant, steps or {})
                               + size * self.size_step(module, work_ms, variant)))

    def param_log2(self, module: str, impl: str, variant: str, steps: dict) -> float:
        """log2 of the parameter terms' factor of one candidate (steps: param_steps()): the module's exponents on its
        steps held within the module's fit rows (param_range), the variant's departures (`p@variant`) on its steps held
        within the variant's own rows (variant_param_range); each CURVED parameter's square of the held step beside.
        A term is held at the edge of what its rows measured: past it, the launch model alone prices a value. A rung
        fitted with cross terms (TILE_PARAMS) adds them on its held steps (cross_steps), after the others."""
        _, _, of_both, of_module, of_variant, _, module_range, variant_range, crossed = self._rung(module, impl, variant)
        by_module, by_variant = held_steps(steps, module_range), held_steps(steps, variant_range)
        cross = sum(of_variant[p] * x for p, x in cross_steps(by_variant).items()) if crossed else 0.0
        if by_module == by_variant:         # one step for both terms (none held, or both alike): their sum's float
            return sum(of_both[p] * x for p, x in {**by_module, **curve_steps(by_module)}.items()) + cross
        return sum(of_module[p] * x for p, x in {**by_module, **curve_steps(by_module)}.items()) + \
            sum(of_variant[p] * x for p, x in {**by_variant, **curve_steps(by_variant)}.items()) + cross

    def __getstate__(self) -> dict:
        """Pickled (and copied) without the per-rung sums _rung keeps: they hold closures, and the copy rebuilds
        them on first use."""
        return {k: v for k, v in self.__dict__.items() if k != "_kept_rungs"}

    def _rung(self, module: str, impl: str, variant: str) -> tuple:
        """core_factor's constants of one rung: (its ceiling, {launch term: its exponent}, {param: the module's
        exponent + the rung's departure}, {param: the module's}, {param: the rung's}, its size exponent, the module's and the rung's parameter step
        ranges, whether it has cross terms), the launch exponents summed as core_factor sums them (the impl's + the module's + the rung's
        departure), each once a Fit and kept: time_ms asks
        core_factor of every candidate it times, and the look-ups and their f-strings were most of its cost.
        A Fit is frozen and never changed in place (a refit is a new Fit: dataclasses.replace), so what is
        kept stays its answer (tests/test_caches.py compares core_factor with the plain sums)."""
        kept = self.__dict__.get("_kept_rungs")
        if kept is None:
            kept = {}
            object.__setattr__(self, "_kept_rungs", kept)      # not a field: no part of eq, repr or to_json
        found = kept.get((module, impl, variant))
        if found is None:
            exps, own, params = self.exponents.get(impl, {}), self.module_exponents.get(module, {}), \
                self.param_exponents.get(module, {})
            found = kept[(module, impl, variant)] = (
                self.ceiling(module, variant),
                _Sums(lambda t: exps.get(t, 0.0) + own.get(t, 0.0) + own.get(f"{t}@{variant}", 0.0)),
                _Sums(lambda p: params.get(p, 0.0) + params.get(f"{p}@{variant}", 0.0)),
                _Sums(lambda p: params.get(p, 0.0)),
                _Sums(lambda p: params.get(f"{p}@{variant}", 0.0)),
                self.size_exponents.get(module, {}).get(variant, 0.0),
                self.param_range.get(module, {}),
                self.variant_param_range.get(module, {}).get(variant, {}),
                any(CROSS in p and p.endswith(f"@{variant}") for p in params))
        return found

    def overhead_us(self, vendor: str, launches: int) -> float:
        return self.launch_us[vendor] + (launches - 1) * self.extra_launch_us[vendor]

    def to_json(self) -> dict:
        return {"launch_us": self.launch_us, "extra_launch_us": self.extra_launch_us,
                "exponents": self.exponents, "module_exponents": self.module_exponents,
                "memory_cap": self.memory_cap, "compute_cap": self.compute_cap,
                "module_ceilings": self.module_ceilings, "param_exponents": self.param_exponents,
                "size_ref_ms": self.size_ref_ms, "size_range_ms": self.size_range_ms,
                "variant_size_range_ms": self.variant_size_range_ms,
                "size_exponents": self.size_exponents,
                "param_range": self.param_range, "variant_param_range": self.variant_param_range,
                "ceilings": self.ceilings}


def launch_terms(launch, coverage: float, compute_bound: bool, in_flight: float = 1.0, latency: float = 1.0,
                 dram_tbs: float = REFERENCE_DRAM_TBS) -> dict:
    """The launch model's ratios the fit scales (TERMS), each floored above 0. The compute-side
    ratios (compute_scale, tile_quant) count only where the uncalibrated roofline is compute-bound
    and traffic, in_flight (sim.in_flight_ratio: Little's law) and dram (REFERENCE_DRAM_TBS over the card's
    dram_tbs) only where it is memory-bound: elsewhere they do not set the time (1.0); latency is sim.latency_ratio."""
    def memory_side(x: float) -> float:
        return 1.0 if compute_bound else x
    values = (coverage, launch.threads / 128, launch.compute_scale if compute_bound else 1.0,
              launch.tile_quant if compute_bound else 1.0, launch.lane_util, memory_side(launch.traffic),
              memory_side(in_flight), latency, memory_side(REFERENCE_DRAM_TBS / dram_tbs))
    return {t: max(float(x), 1e-6) for t, x in zip(TERMS, values)}


def held_steps(steps: dict, ranges: dict) -> dict:
    """param_steps' `steps`, each held within its (least, most) of `ranges` (Fit.param_log2): a parameter term says
    what the fit measured between those values and nothing past them, where the launch model alone prices a value.

    >>> held_steps({"num_warps": -1.0, "BLOCK": 2.0, "rows": 1.0}, {"num_warps": (0.0, 2.0), "BLOCK": (-1.0, 1.0)})
    {'num_warps': 0.0, 'BLOCK': 1.0, 'rows': 1.0}
    """
    if not ranges:
        return steps
    out = {}
    for p, x in steps.items():
        lo, hi = ranges.get(p, (x, x))
        out[p] = lo if x < lo else hi if x > hi else x
    return out


def param_steps(params: dict, defaults: dict) -> dict:
    """{param: log2(value / default)} of a candidate's positive integer parameters.

    >>> param_steps({"threads": 512, "rows": 4, "fast": True}, {"threads": 128, "rows": 4, "fast": False})
    {'threads': 2.0, 'rows': 0.0}
    """
    return {p: math.log2(v / defaults[p]) for p, v in params.items()
            if type(v) is int and v > 0 and type(defaults.get(p)) is int and defaults[p] > 0}


def read_data(name: str) -> dict:
    """One of the package's JSON files, its `format` line checked."""
    data = json.loads(resources.files(__name__).joinpath(name).read_text())
    if not str(data.get("format", "")).startswith("kernelstrain/"):
        raise ValueError(f"calibration file {name}: no kernelstrain format line")
    return data


def load_fit() -> Fit:
    """The shipped fit; the analytic model alone (Fit()) if no fit file is there."""
    try:
        data = read_data("h200_fit.json")
    except FileNotFoundError:
        return Fit()
    return fit_of(data)


def fit_of(data: dict) -> Fit:
    """The Fit of a fit file's data, its format checked: one of another format (or without the per-variant size
    ranges) is refused, not read as this one."""
    if data["format"] != FIT_FORMAT:     # an older fit extrapolates each variant's size term over its module's range
        raise ValueError(f"h200_fit.json: format {data['format']!r}, expected {FIT_FORMAT!r} "
                         "(refit: python3 scripts/refit_calibration.py)")
    if "variant_size_range_ms" not in data:
        raise ValueError("h200_fit.json: no variant_size_range_ms (python3 scripts/refit_calibration.py --size-ranges)")
    if "variant_param_range" not in data:
        raise ValueError("h200_fit.json: no variant_param_range (python3 scripts/refit_calibration.py --param-ranges)")
    return Fit(**{k: data[k] for k in Fit().to_json() if k in data})


FIT = load_fit()
