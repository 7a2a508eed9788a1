"""`--shape T=4096,D=4096` parsed and range-checked against the module's documented
constraints, and the `sim` verb's report of one task.

>>> from kernelstrain.ops import REGISTRY
>>> parse_shape("M=1,N=4096,K=4096", REGISTRY["gemm_int4_cuda"])
{'M': 1, 'N': 4096, 'K': 4096}
"""
from __future__ import annotations

import re

from .errors import UsageError
from .ops import REGISTRY
from .tasks import dims_problem

MAX_DIM = 2**40              # about 10^12 elements a dim: far past any GPU memory, and no overflow anywhere
_NUMBER = re.compile(r"[0-9]{1,13}")


def constraints(module) -> dict:
    """dim -> (multiple, maximum, choices) as documented in the module's dims or description,
    e.g. "input features (multiple of 128)", "draft tree nodes (<= 64)", "S is a multiple of
    128", "1: tanh approximation, 0: erf" (a flag: choices (0, 1))."""
    out = {}
    for dim, meaning in module.dims.items():
        mult = re.search(r"multiple of (\d+)", meaning) or re.search(
            rf"\b{re.escape(dim)} is a multiple of (\d+)", module.desc or "")
        cap = re.search(r"<=\s*(\d+)", meaning)
        choices = tuple(sorted(int(c) for c in re.findall(r"(?:^|[(,;]\s*)(\d+):", meaning)))
        out[dim] = (int(mult.group(1)) if mult else 1, int(cap.group(1)) if cap else MAX_DIM,
                    choices if len(choices) >= 2 else None)
    return out


def parse_shape(text: str, module) -> dict:
    """{dim: int} from 'T=4096,D=4096': every dim of the module once, each a positive
    integer within its documented constraints."""
    shape = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not name:
            raise UsageError(f"--shape must look like {_example(module)}, got {text!r}")
        if name in shape:
            raise UsageError(f"--shape gives {name} twice")
        if not _NUMBER.fullmatch(value):
            raise UsageError(f"--shape {name}={value!r}: must be a positive integer up to {MAX_DIM}")
        shape[name] = int(value)
    problem = dims_problem(module, shape)
    if problem:
        raise UsageError(problem)
    for dim, (mult, cap, choices) in constraints(module).items():
        v = shape[dim]
        if choices is not None:
            if v not in choices:
                raise UsageError(f"--shape {dim}={v}: must be one of {', '.join(map(str, choices))} ({module.dims[dim]})")
            continue
        if not 1 <= v <= cap:
            raise UsageError(f"--shape {dim}={v}: must be between 1 and {cap} ({module.dims[dim]})")
        if v % mult:
            raise UsageError(f"--shape {dim}={v}: {module.name} needs a multiple of {mult} ({module.dims[dim]})")
    return {d: shape[d] for d in module.dims}


def _example(module) -> str:
    return ",".join(f"{d}={v}" for d, v in module.shapes[0].items()) if module.shapes else "T=4096,D=4096"


def sim_report(gpu: str, op: str, impl: str, dtype: str, shape_text: str) -> dict:
    """The `sim` verb: FLOPs, bytes, roofline floor, baseline and best reachable time."""
    from .gpus import GPUS
    from .sim import roofline_floor_ms, simulate
    from .tasks import best_config, make_task
    name = f"{op}_{impl}"
    if name not in REGISTRY:
        raise UsageError(f"no op module {name!r} (see `kernelstrain ops`)")
    m = REGISTRY[name]
    if gpu not in GPUS:
        raise UsageError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    if dtype not in m.dtypes:
        raise UsageError(f"{name}: dtype {dtype!r} not in {', '.join(m.dtypes)}")
    task = make_task(m, gpu, dtype, parse_shape(shape_text, m))
    if not m.supports(task.gpu, dtype):
        raise UsageError(f"{name} does not run {dtype} on {gpu}")
    try:
        cost = m.cost(task)
        base = simulate(m, m.baseline_variant(), m.baseline_variant().defaults(), task)
        best_ms, variant, params = best_config(m, task)
        floor = roofline_floor_ms(m, task, variant.path)
        out = {"flops": cost.flops, "bytes": cost.bytes, "floor_ms": round(floor, 6),
               "baseline_ms": round(base.time_ms, 6) if base.ok else None, "best_ms": round(best_ms, 6),
               "best_variant": variant.tag, "best_params": params}
        if not base.ok:          # the first rung cannot run at this shape (sim.simulate says why)
            out["baseline_error"] = base.error.splitlines()[0]
    except ValueError as e:
        raise UsageError(str(e)) from None
    except (ArithmeticError, TypeError):
        # a cost or launch model that divides by a dim smaller than its tiles assume
        raise UsageError(f"{name} has no simulator model at {shape_text} (sizes this far from its menu, "
                         f"e.g. {_example(m)}, are outside it)") from None
    return out
