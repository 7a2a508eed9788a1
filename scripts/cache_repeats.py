"""Repeated work of one `generate` run: every miss of the simulator's candidate caches (memo.candidate_cache) and
of the render cache (ops.base._rendered), by whether the same content (module, rung tag, params, bug, task key) was
computed before in the process: first, again in the same episode, again after being computed outside the episodes
(the plan, the held-out search and rows), or again in an earlier episode.

    python scripts/cache_repeats.py CONFIG EPISODES      (one worker, the held-out solutions' store off)

Issue 32's question "what work is repeated" (docs/speed_issue32_s2026-12-07b.md section 1). The wrappers time each
computation (wall clock, nested ones counted in their callers too), so its seconds rank, not measure.
"""
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernelstrain import memo  # noqa: E402  (patched before the modules that make cached functions import)
CUR = {"ep": None, "task": None}
SEEN = collections.defaultdict(dict)     # fn -> key -> (first ep, task)
STATS = collections.defaultdict(collections.Counter)
TIME = collections.Counter()
_orig = memo.candidate_cache


def counting(fn):
    name = fn.__module__.split(".")[-1] + "." + fn.__name__
    def counted(module, variant, params, task):
        key = (module.name, getattr(variant, "tag", id(variant)), tuple(sorted(params.items(), key=str)), task.key)
        t = time.perf_counter()
        try:
            return fn(module, variant, params, task)
        finally:
            TIME[name] += time.perf_counter() - t
            classify(name, key, task.key)
    counted.__name__ = fn.__name__; counted.__module__ = fn.__module__; counted.__qualname__ = fn.__qualname__
    return _orig(counted)


def classify(name, key, task):
    seen = SEEN[name].get(key)
    ep = CUR["ep"]
    if seen is None:
        STATS[name]["first"] += 1
        SEEN[name][key] = (ep, task)
    elif ep is None or seen[0] is None:
        STATS[name]["again: before/outside episodes" if seen[0] is None else "again: after episodes"] += 1
    elif seen[0] == ep:
        STATS[name]["again: same episode"] += 1
    else:
        STATS[name]["again: earlier episode"] += 1


memo.candidate_cache = counting
from kernelstrain.ops import base  # noqa: E402
_r = base._rendered


def rendered(module, variant, params, task, bug):
    try:
        k = (id(module), id(variant), tuple(params.items()), bug, id(task.gpu), task.module, task.dtype, task.shape)
        hit = k in base._RENDERS
    except TypeError:
        hit = False
    if hit:
        return _r(module, variant, params, task, bug)
    t = time.perf_counter()
    try:
        return _r(module, variant, params, task, bug)
    finally:
        TIME["render"] += time.perf_counter() - t
        classify("render", (module.name, variant.tag, tuple(sorted(params.items(), key=str)), bug, task.key), task.key)
base._rendered = rendered
from kernelstrain import generation  # noqa: E402
_w = generation._work


def work(i):
    CUR["ep"] = i
    try:
        return _w(i)
    finally:
        CUR["ep"] = None
generation._work = work
from kernelstrain.profiles import load_profile  # noqa: E402
os.environ["KERNELSTRAIN_SOLUTIONS"] = "off"
cfg, n = sys.argv[1], int(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    t = time.process_time()
    generation.generate(load_profile(cfg), 0, Path(tmp) / "o", n, 1, progress=False)
    total = time.process_time() - t
print(cfg, n, f"total {total:.1f} s CPU")
for name, c in sorted(STATS.items(), key=lambda kv: -TIME[kv[0]]):
    s = sum(c.values())
    print(f"{name:28} misses {s:7d} time {TIME[name]:6.2f} s  " + "  ".join(f"{k} {v} ({100*v/s:.0f}%)" for k, v in c.most_common()))
