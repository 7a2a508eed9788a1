"""The tasks of a fused profile: programs of the grammar's stream (or of a `tasks filter`
output), each in one language on one of the profile's GPUs, both drawn by hash.

A program enters when its ladder has room (usable: at least two rungs of custom kernels above the
eager program, one of them ROOM times faster than it), and it is not
degenerate (degenerate.reason), nor the same operator sequence as a program taken before it.
`programs` usable ones are taken in stream order.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .. import solution_store
from ..errors import UsageError
from ..gpus import get_gpu
from ..ops.base import Task
from ..ops import REGISTRY
from ..rng import rank
from ..tasks import make_task
from .dataset import TASKS
from .degenerate import reason
from .module import GRAPHED, module_name
from .render import candidate

MIN_RUNGS = 3          # eager + two rungs of custom kernels
ROOM = 1.25            # the best rung at its default parameters must beat the eager program by this much
STREAM_FACTOR = 4      # look at most this many candidates a wanted program


def usable(module, task) -> bool:
    """Room to work: rungs of custom kernels, one of which beats the eager program by ROOM at its
    default parameters on the task's GPU (a host-bound program whose calls fusion cannot remove has
    nothing to teach)."""
    fusing = [v for v in module.variants if v.tag not in GRAPHED]     # the task set is the fusion ladders' (graphs.py)
    if len(fusing) < MIN_RUNGS:
        return False
    eager = module.simulate(fusing[0], {}, task).time_ms
    best = min((r.time_ms for r in (module.simulate(v, v.defaults(), task) for v in fusing[1:]) if r.ok), default=eager)
    return eager >= ROOM * best


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


def with_tasks_dir(profile, tasks: Path):
    """The profile with its programs taken from a `tasks filter` output (`generate --tasks DIR`); its
    description names the directory, so readers never take the run for the bundled profile's."""
    from dataclasses import replace

    from .dataset import read_fused_stats
    if profile.fused is None:
        raise UsageError(f"--tasks needs a fused profile (modules = \"fused\"); {profile.path} is not one")
    stats = read_fused_stats(tasks)
    if not stats.get("filtered"):
        raise UsageError(f"--tasks {tasks}: not filtered yet (run `kernelstrain tasks filter {tasks}` first)")
    fused = replace(profile.fused, tasks=str(tasks.resolve()), programs=min(profile.fused.programs, stats["rows"]))
    out = replace(profile, fused=fused, description=f"{profile.description}; programs from {tasks.resolve()}")
    usable_tasks = len(fused_tasks(out))          # one episode a usable program of the directory
    if not usable_tasks:
        raise UsageError(f"--tasks {tasks}: none of its {stats['rows']} programs leaves room to fuse (fused/tasks.py)")
    return replace(out, fused=replace(fused, programs=usable_tasks), episodes=min(profile.episodes, usable_tasks),
                   combos=usable_tasks)


def fused_tasks(profile) -> list:
    """The profile's fused tasks, in stream order (plan.all_combos): from the solution store where an
    earlier run of this package walked the same stream (stored_key), else walked (and stored). The walk
    builds and emulates every program it looks at (~6,000 FusedModules for the bundled profile, 99+ s of
    CPU before the first episode whatever --episodes says); its answer is a function of the profile's
    task-defining tables (tasks_key), of a `tasks filter` file's bytes and of the package alone."""
    key = stored_key(profile)
    stored = solution_store.get(key) if key else None
    if stored is not None:
        return [Task(name, get_gpu(gpu), dtype, tuple(map(tuple, shape))) for name, gpu, dtype, shape in json.loads(stored)]
    out = walked_tasks(profile)
    if key:
        solution_store.put(key, json.dumps([[t.module, t.gpu.name, t.dtype, t.shape] for t in out]))
    return out


def stored_key(profile) -> tuple | None:
    """The solution store's key of fused_tasks' answer: the profile's tasks_key (its fused, GPU and task
    tables: the stream's seed, length, languages, GPUs and every hash draw's key) and the sha256 of the
    `tasks filter` file the programs come from ("" for the grammar's own stream); None where that file
    cannot be read (the walk then says why)."""
    digest = ""
    if profile.fused.tasks:
        try:
            digest = hashlib.sha256((Path(profile.fused.tasks) / TASKS).read_bytes()).hexdigest()
        except OSError:
            return None
    return "fused_tasks", profile.tasks_key, digest


def walked_tasks(profile) -> list:
    """fused_tasks, walked: the stream's programs built and judged in turn."""
    f, out, seen = profile.fused, [], set()
    for seed, index in _stream(profile):
        if len(out) == f.programs:
            break
        impl = f.impls[int(rank(profile.tasks_key, "impl", seed, index), 16) % len(f.impls)]
        module = REGISTRY[module_name(seed, index, impl)]
        ops = tuple(module.view.ops)
        if ops in seen or reason(module.view.steps, module.view.dtype) is not None:
            continue      # a duplicate operator sequence, or degenerate
        gpu = profile.gpus[int(rank(profile.tasks_key, "gpu", seed, index), 16) % len(profile.gpus)]
        task = make_task(module, gpu, module.dtypes[0], module.shapes[0])
        if module.supports(task.gpu, task.dtype) and usable(module, task):
            seen.add(ops)
            out.append(task)
    return out
