"""Tasks (module, GPU, dtype, shape) and the search for a task's best reachable candidate."""
from __future__ import annotations

import itertools

from .fields import as_dict
from .gpus import get_gpu
from .ops.base import OpModule, Task, Variant
from .sim import simulate


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


def param_grid(variant: Variant):
    """Every combination of a variant's parameter values, as dicts."""
    names = [p.name for p in variant.params]
    for values in itertools.product(*(p.values for p in variant.params)):
        yield dict(zip(names, values))


def best_config(module: OpModule, task: Task) -> tuple[float, Variant, dict]:
    """The fastest ok (variant, params) over the whole ladder, noise-free."""
    best = None
    for variant in module.variants:
        for params in param_grid(variant):
            r = simulate(module, variant, params, task)
            if r.ok and (best is None or r.time_ms < best[0]):
                best = (r.time_ms, variant, params)
    if best is None:
        raise ValueError(f"no candidate of {module.name} runs on {task.gpu.name}")
    return best
