"""The held-out solutions' search: tasks.best_config's answer, asked with less repeated work.

A held-out task's solution (contamination.solution_code) is its best reachable candidate, found
by a search of every config of every rung (tasks.best_config): ~350 tasks, ~44,000 configs for the
default profile, a first run's largest fixed cost. tasks.best_config asks `writable` of each
config, then `simulate`, whose `failure` asks feasibility.violation again (the same answer
`writable` just gave) and whose timing builds the launch a second time, each through the
candidate caches (memo.candidate_cache), which a search that never asks a config twice only fills.

Here, for a module the simulator times itself (not a fused program, which has its own `simulate`):
a config `writable` accepts has no access violation, so simulate's answer is launch_failure's
when it fails, else the time of its built launch (sim.simulate and sim.failure, read through);
launch_failure and the timing are asked without their caches. The same configs in the same order
with the same strict `<`, so the same (time, variant, params): tests/test_holdout_search.py
compares the two over tasks of every registry module.
"""
from __future__ import annotations

from .sim import built_launch, launch_failure, time_ms, writable
from .tasks import best_config as searched, param_grid


def best_config(module, task) -> tuple:
    """tasks.best_config(module, task): (time_ms, variant, params) of the fastest ok config an
    engineer would write, noise-free; ValueError where none runs."""
    if hasattr(module, "simulate"):        # a fused program: its own simulate (kernelstrain/fused)
        return searched(module, task)
    fails = launch_failure.uncached
    best = None
    for variant in module.variants:
        for params in param_grid(variant):
            if not writable(module, variant, params, task) or fails(module, variant, params, task) is not None:
                continue
            t = time_ms(module, variant, built_launch(module, variant, params, task), task, params)
            if best is None or t < best[0]:
                best = (t, variant, params)
    if best is None:
        raise ValueError(f"no candidate of {module.name} runs on {task.gpu.name}")
    return best
