"""Tasks (module, GPU, dtype, shape) and the search for a task's best reachable candidate."""
from __future__ import annotations

import itertools
import math

from .fields import as_dict
from .gpus import get_gpu
from .ops.base import OpModule, Task, Variant
from .sim import simulate, writable


def dims_problem(module: OpModule, shape: dict) -> str | None:
    """What is wrong with a shape's dim names for a module, or None.

    >>> from kernelstrain.ops import REGISTRY
    >>> dims_problem(REGISTRY["rmsnorm_cuda"], {"T": 8, "N": 4})
    'rmsnorm_cuda: shape needs dims T, D; missing D; unknown N'
    """
    missing = [d for d in module.dims if d not in shape]
    extra = [d for d in shape if d not in module.dims]
    if not (missing or extra):
        return None
    return (f"{module.name}: shape needs dims {', '.join(module.dims)}" + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(extra)}" if extra else ""))


def make_task(module: OpModule, gpu: str, dtype: str, shape: dict) -> Task:
    """Build a Task, with shape dims put in the module's declared order.

    >>> from kernelstrain.ops import REGISTRY
    >>> make_task(REGISTRY["rmsnorm_cuda"], "A100", "fp16", {"D": 4096, "T": 8}).key
    'rmsnorm_cuda|A100|fp16|T=8,D=4096'
    """
    shape = as_dict(shape)            # a row's list of {dim, value} pairs, or a dict
    problem = dims_problem(module, shape)
    if problem:
        raise ValueError(problem)
    if dtype not in module.dtypes:
        raise ValueError(f"{module.name}: dtype {dtype!r} not in {', '.join(module.dtypes)}")
    return Task(module.name, get_gpu(gpu), dtype, tuple((d, int(shape[d])) for d in module.dims))


def starting_rung(module: OpModule, task: Task, cap: float = 0.0, eager_ms: float | None = None,
                  eager_cap: float = 0.0) -> Variant:
    """An episode's baseline rung. With cap 0: the module's first rung (or its declared
    `baseline`). Otherwise the lowest rung at or above it that runs on the task's GPU and whose
    default-parameter time is within `cap` times that of the fastest such rung and, with
    eager_cap and the PyTorch eager reference's time, within `eager_cap` times that (else the
    fastest rung): the kernel a team already has in place is naive, but not arbitrarily far
    from a good one, nor from what PyTorch already gives (the kernelinfer card's sessions
    average a ~13x speedup).

    >>> from kernelstrain.ops import REGISTRY
    >>> m = REGISTRY["rmsnorm_cuda"]
    >>> t = make_task(m, "H100", "fp16", {"T": 4096, "D": 4096})
    >>> starting_rung(m, t).tag, starting_rung(m, t, 1.0) == m.variants[-1] or starting_rung(m, t, 1.0).tag != "row_per_thread"
    ('row_per_thread', True)
    """
    first = module.baseline_variant()
    ladder = [v for v in module.variants[module.variants.index(first):] if v.offered(task.dtype)]
    first = ladder[0] if ladder else first
    if not cap:
        return first
    timed = []
    for v in ladder:
        if v.needs - task.gpu.features:
            continue
        r = simulate(module, v, v.defaults(), task)
        if r.ok:
            timed.append((v, r.time_ms))
    if not timed:
        return first
    fastest = min(t for _, t in timed)
    far_from_eager = eager_cap * eager_ms if eager_cap and eager_ms else math.inf
    near = [v for v, t in timed if t <= cap * fastest and t <= far_from_eager]
    return near[0] if near else min(timed, key=lambda vt: vt[1])[0]


def carry(variant: Variant, best: dict) -> dict:
    """Params for a rewrite onto `variant` from a best with params `best`: the rung's defaults,
    and the best's value of each parameter the two share where the rung offers it."""
    params = variant.defaults()
    for p in variant.params:
        if best.get(p.name) in p.values:
            params[p.name] = best[p.name]
    return params


def param_grid(variant: Variant):
    """Every combination of a variant's parameter values, as dicts."""
    names = [p.name for p in variant.params]
    for values in itertools.product(*(p.values for p in variant.params)):
        yield dict(zip(names, values))


def best_config(module: OpModule, task: Task) -> tuple[float, Variant, dict]:
    """The fastest ok (variant, params) an engineer would write, over the whole ladder, noise-free."""
    best = None
    for variant in module.variants:
        for params in param_grid(variant):
            if not writable(module, variant, params, task):
                continue
            r = simulate(module, variant, params, task)
            if r.ok and (best is None or r.time_ms < best[0]):
                best = (r.time_ms, variant, params)
    if best is None:
        raise ValueError(f"no candidate of {module.name} runs on {task.gpu.name}")
    return best
