"""Where a Triton rung's list may end too early, by the model (issue 26 Build 2): for each rung of each Triton module, at
every menu shape on H100 / A100 / RTX5090 (the module's first dtype), the model's best configuration of the rung; for
each integer parameter of it at an end of its list, the same configuration one doubling past the top (or halving past
the bottom). Prints the values that gain more than 3% somewhere, with the shared memory they change. A lead to read
against stored device rows (measurements/*.json), never a reason alone: the model's trend past a list's end is
extrapolation (roomA: 2 warps and 32-row tiles the model ranks mid ran last on the H100). Each lead says how much of its
gain is the fit's parameter exponents carried past the values they were fitted on (Fit.core_factor's param term), not
the launch model: roomT 2026-12-07 found most leads of the norm / quant / activation rungs are that (fp8 persistent_rows
16 programs an SM: x0.926 of x0.93-0.95; softmax 2 warps: the num_warps bend x0.67), which a device need not bear out.

    python3 scripts/roomT_edge_scan.py [MODULE,MODULE ...]      # every Triton module where none is named
"""
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.calibration import FIT, curve_steps, param_steps  # noqa: E402
from kernelstrain.gpus import GPUS as GPUS_BY_NAME  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

GPUS = ("H100", "A100", "RTX5090")
GRID_MAX = 400          # rungs with larger grids are left out (the scan is a few minutes as it is)


def fitted_factor(m, v, params: dict) -> float:
    """The time factor the fit's parameter exponents give `params` (Fit.core_factor's param term: each parameter's
    log2 step from the rung's default, the CURVED ones' squared steps), without the launch model."""
    steps = param_steps({**v.defaults(), **params}, v.defaults())
    steps.update(curve_steps(steps))
    own = FIT.param_exponents.get(m.name, {})
    return 2.0 ** sum(x * (own.get(p, 0.0) + own.get(f"{p}@{v.tag}", 0.0)) for p, x in steps.items())


def best_config(m, v, task):
    names, values = [p.name for p in v.params], [p.values for p in v.params]
    runs = [(r.time_ms, c, r.smem_bytes) for c in itertools.product(*values)
            if (r := simulate(m, v, dict(zip(names, c)), task)).ok]
    return min(runs) if runs else None


def past_the_ends(m, v, task, found: dict) -> None:
    """Record (rung, param, value) -> [(gpu, shape, gain, smem before, smem after)] for this task."""
    best = best_config(m, v, task)
    if best is None:
        return
    t0, c0, s0 = best
    names = [p.name for p in v.params]
    for i, p in enumerate(v.params):
        if len(p.values) < 2 or not all(isinstance(x, int) for x in p.values):
            continue
        for end, new in ((p.values[-1], p.values[-1] * 2), (p.values[0], p.values[0] // 2)):
            # num_stages past 4 is no doubling an engineer writes (stream_stages has no figure for it)
            if c0[i] != end or new < 1 or (p.name == "num_stages" and new > 4):
                continue
            moved = dict(zip(names, c0[:i] + (new,) + c0[i + 1:]))
            try:
                r = simulate(m, v, moved, task)
            except KeyError:        # a launch model's table has no figure for the value (gemm_fp16_triton's
                continue            # BLOCK_K / stage tables): no lead the model can price
            if r.ok and r.time_ms < t0 * 0.97:
                # the part of the gain the fitted exponents carry past the list (not the launch model's)
                fit = fitted_factor(m, v, dict(zip(names, c0))) / fitted_factor(m, v, moved)
                found.setdefault((v.tag, p.name, new), []).append(
                    (task.gpu.name, tuple(dict(task.shape).values()), round(t0 / r.time_ms, 3), s0, r.smem_bytes,
                     round(fit, 3)))


def scan(name: str) -> dict:
    m, found = REGISTRY[name], {}
    for v in m.variants:
        if not v.params or len(list(itertools.product(*[p.values for p in v.params]))) > GRID_MAX:
            continue
        for gpu in (g for g in GPUS if m.supports(GPUS_BY_NAME[g], m.dtypes[0])):
            for shape in m.shapes:
                task = make_task(m, gpu, m.dtypes[0], shape)
                if not (v.needs - task.gpu.features):
                    past_the_ends(m, v, task, found)
    return found


def main(argv) -> int:
    names = argv[0].split(",") if argv else sorted(n for n, m in REGISTRY.items() if m.impl == "triton")
    for name in names:
        for (tag, param, value), hits in scan(name).items():
            smem = "same" if all(h[3] == h[4] for h in hits) else "changes"
            gains, fit = [h[2] for h in hits], hits[0][5]
            print(f"{name} {tag} {param}={value}: {len(hits)} task(s) gain {min(gains)}-{max(gains)}x, of it the fit's "
                  f"exponents {fit}x (launch model {round(min(gains) / fit, 3)}-{round(max(gains) / fit, 3)}x), "
                  f"smem {smem}, e.g. {[h[:5] for h in hits[:2]]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
