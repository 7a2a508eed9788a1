"""The tasks of a fused profile: programs of the grammar's stream (or of a `tasks filter`
output), each in one language on one of the profile's GPUs, both drawn by hash.

A program enters when its ladder has room: at least two rungs of custom kernels above the eager
program (a program whose fusible part is one elementwise op has nothing to fuse), and it is not
degenerate (degenerate.reason), nor the same operator sequence as a program taken before it.
`programs` usable ones are taken in stream order.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import UsageError
from ..ops import REGISTRY
from ..tasks import make_task
from .dataset import TASKS, candidate
from .degenerate import reason
from .module import module_name

MIN_RUNGS = 3          # eager + two rungs of custom kernels
STREAM_FACTOR = 4      # look at most this many candidates a wanted program


def _rank(*parts) -> str:
    from ..plan import rank
    return rank(*parts)


def usable(module) -> bool:
    return len(module.variants) >= MIN_RUNGS


def _stream(profile):
    f = profile.fused
    if f.tasks:
        path = Path(f.tasks) / TASKS
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise UsageError(f"--tasks {f.tasks}: cannot read {TASKS} ({e.strerror or e}); "
                             "give the directory `kernelstrain tasks filter` wrote") from None
        for n, line in enumerate(lines, 1):
            row = json.loads(line)
            if candidate(row["seed"], row["index"])["source_sha256"] != row["source_sha256"]:
                raise UsageError(f"{path}:{n}: task {row['id']} is not what the grammar composes for its "
                                 f"seed and index (edited, or written by another version)")
            yield row["seed"], row["index"]
        return
    for index in range(STREAM_FACTOR * f.programs + 100):
        yield f.seed, index


def fused_tasks(profile) -> list:
    """The profile's fused tasks, in stream order (plan.all_combos)."""
    f, out, seen = profile.fused, [], set()
    for seed, index in _stream(profile):
        if len(out) == f.programs:
            break
        impl = f.impls[int(_rank(profile.key, "impl", seed, index), 16) % len(f.impls)]
        module = REGISTRY[module_name(seed, index, impl)]
        ops = tuple(module.view.ops)
        if ops in seen or not usable(module) or reason(module.view.steps, module.view.dtype) is not None:
            continue      # a duplicate operator sequence, no room to fuse, or degenerate
        seen.add(ops)
        gpu = profile.gpus[int(_rank(profile.key, "gpu", seed, index), 16) % len(profile.gpus)]
        task = make_task(module, gpu, module.dtypes[0], module.shapes[0])
        if module.supports(task.gpu, task.dtype):
            out.append(task)
    return out
