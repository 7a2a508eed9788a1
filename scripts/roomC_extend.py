"""What a value list's extension would add, by the simulator, on the tasks a profile draws: for one rung's parameter
and new values, per task of the module (the profile's plan), the ladder's fastest configuration before (tasks.best_config
over the module's ladder as it is) and the extended rung's fastest after, and which new value wins there.

    python3 scripts/roomC_extend.py --config kernelinfer moe_scatter_cuda warp_aggregated_fused threads=64,128,256,512,1024

Prints one line a task (GPU, dtype, shape, before us, after us, the gain, the winning configuration) and the count of
tasks whose ladder best the extension beats by more than 2% (the noise an engineer's timer shows). The extended
values are the simulator's extrapolation of the rung's existing physics: a value goes ON only after the compiler
builds it (scripts/roomC_build.py) and, for a new code path, a device job checks it.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.ops.base import Param  # noqa: E402
from kernelstrain.records import replaced  # noqa: E402
from kernelstrain.sim import simulate, writable  # noqa: E402
from kernelstrain.tasks import best_config, param_grid  # noqa: E402

NOISE = 1.02


def extended(variant, name: str, values: tuple):
    """The rung with `name`'s list replaced by `values` (its default kept)."""
    return replaced(variant, params=tuple(Param(p.name, values, p.default) if p.name == name else p
                                          for p in variant.params))


def extended_by(variant, changes: list) -> tuple:
    """The rung with every NAME=V1,V2,... of `changes` applied, and each parameter's values it adds."""
    new = {}
    for ch in changes:
        name, vals = ch.split("=")
        values = tuple(int(x) for x in vals.split(","))
        new[name] = set(values) - set(variant.param(name).values)
        variant = extended(variant, name, values)
    return variant, new


def fastest(module, variant, task, only=None):
    """(us, params) of the rung's fastest writable config (with `only`: among those where it holds)."""
    best = None
    for p in param_grid(variant):
        if (only is None or only(p)) and writable(module, variant, p, task):
            r = simulate(module, variant, p, task)
            if r.ok and (best is None or r.time_ms < best[0]):
                best = (r.time_ms, p)
    return best


def plan_tasks(config: str, seed: int, module: str) -> list:
    """The module's distinct tasks in the profile's plan."""
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    plan, seen, out = make_plan(load_profile(config), seed), set(), []
    for i in range(plan.profile.episodes):
        t = plan.task(i)
        if t.module == module and t.key not in seen:
            seen.add(t.key)
            out.append(t)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module")
    ap.add_argument("rung")
    ap.add_argument("change", nargs="+", help="NAME=V1,V2,... (several: all applied)")
    ap.add_argument("--config", default="kernelinfer")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    m = REGISTRY[args.module]
    v, new = extended_by(m.variant(args.rung), args.change)
    wins = n = 0
    for task in plan_tasks(args.config, args.seed, args.module):
        before = best_config(m, task)[0]
        after = fastest(m, v, task)
        if after is None:
            continue
        n += 1
        gain = before / after[0]
        uses_new = any(after[1][k] in vals for k, vals in new.items())
        wins += gain > NOISE and uses_new
        print(f"{task.gpu.name:9s} {task.dtype:5s} {dict(task.shape)}  before {before * 1e3:9.2f}  after "
              f"{after[0] * 1e3:9.2f}  x{gain:.3f}  {'NEW ' if uses_new else ''}{after[1]}")
    print(f"{wins} of {n} tasks: the extension beats the ladder's best by more than {NOISE - 1:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
