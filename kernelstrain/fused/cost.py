"""The work of a fused task: unfused (each operator its own kernel, every intermediate
written to and read back from DRAM) against fused (intermediates stay on chip).

Fusion groups: a contraction (linear, conv, matmul, bmm, gram), attention or gather
operator starts a new kernel; the operators after it run in its epilogue, the operators
before the first one in its prologue. Only tensors crossing a group boundary (and a
residual's saved tensor when it crosses one) touch DRAM; so the fused bytes are the
program's inputs, its weights, its output and those crossings.

>>> row = {"dtype": "fp32", "inputs": [{"shape": [4, 8], "dtype": "fp32"}], "output": {"shape": [4, 8]},
...        "program": [{"role": "elementwise", "flops": 32.0, "bytes": 256.0, "weights": 0, "params": {},
...                     "in": {"shape": [4, 8]}, "out": {"shape": [4, 8]}}] * 2}
>>> [(c.flops, c.bytes) for c in fused_cost(row)]
[(64.0, 512.0), (64.0, 256.0)]
"""
from __future__ import annotations

import math

from ..calibration import FIT
from ..gpus import GPU, get_gpu
from ..ops.base import Cost
from .types import DTYPE_BYTES

GROUP_STARTERS = ("contraction", "attention", "gather")
INPUT_BYTES = {"fp32": 4, "bf16": 2, "int64": 8}


def fusion_groups(program: list) -> list[int]:
    """The fusion group of each step (see the module docstring)."""
    groups, g, seen_starter = [], 0, False
    for s in program:
        if s["role"] in GROUP_STARTERS:
            if seen_starter:
                g += 1
            seen_starter = True
        groups.append(g)
    return groups


def fused_cost(task: dict, gpu: GPU | str | None = None) -> tuple[Cost, Cost]:
    """(unfused, fused) Cost of a task row; FLOPs are the same, bytes differ.

    `gpu` is accepted for symmetry with the op modules' costs; bytes and FLOPs do not depend on it.
    """
    program, nb = task["program"], DTYPE_BYTES[task["dtype"]]
    flops = sum(s["flops"] for s in program)
    unfused = Cost(flops, sum(s["bytes"] for s in program))
    groups = fusion_groups(program)
    moved = sum(math.prod(i["shape"]) * INPUT_BYTES[i["dtype"]] for i in task["inputs"])
    moved += sum(s["weights"] for s in program) * nb + math.prod(task["output"]["shape"]) * nb
    for j in range(1, len(program)):
        if groups[j] != groups[j - 1]:
            moved += 2 * math.prod(program[j]["in"]["shape"]) * nb   # written by one kernel, read by the next
    for j, s in enumerate(program):
        src = s["params"].get("skip_from") if s["role"] == "residual" else None
        if src is not None and (src < 0 or groups[src] != groups[j]):
            moved += 2 * math.prod(s["in"]["shape"]) * nb
    return unfused, Cost(flops, float(moved))


def _compute_s(task: dict, gpu: GPU) -> float:
    heavy_path = "fp16" if task["dtype"] == "bf16" else "fp32"
    heavy = sum(s["flops"] for s in task["program"] if s["role"] in GROUP_STARTERS)
    rest = sum(s["flops"] for s in task["program"]) - heavy
    return heavy / gpu.peak(heavy_path) + rest / gpu.peak("fp32")


def roofline_ms(task: dict, gpu: GPU | str) -> tuple[float, float]:
    """(unfused, fused) roofline time in ms on a GPU: max(compute, memory) plus launches.

    Unfused runs one kernel per operator; fused one per fusion group.
    """
    gpu = get_gpu(gpu) if isinstance(gpu, str) else gpu
    unfused, fused = fused_cost(task, gpu)
    compute = _compute_s(task, gpu)
    kernels = (len(task["program"]), max(fusion_groups(task["program"])) + 1)
    times = []
    for cost, n in zip((unfused, fused), kernels):
        launch_us = FIT.overhead_us(gpu.vendor, n)
        times.append((max(compute, cost.bytes / (gpu.bw_tbs * 1e12)) + launch_us * 1e-6) * 1e3)
    return times[0], times[1]
