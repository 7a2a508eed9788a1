"""The held-out solutions' search: tasks.best_config's answer, asked with less repeated work.

A held-out task's solution (contamination.solution_code) is its best reachable candidate, found
by a search of every config of every rung (tasks.best_config): ~350 tasks, ~44,000 configs for the
default profile, a first run's largest fixed cost. tasks.best_config asks `writable` of each
config, then `simulate`, whose `failure` asks feasibility.violation again (the same answer
`writable` just gave) and whose timing builds the launch a second time, each through the
candidate caches (memo.candidate_cache), which a search that never asks a config twice only fills.

Here, for a module the simulator times itself (not a fused program, which has its own `simulate`):
a rung whose features the GPU lacks is skipped whole (each of its configs fails so: launch_failure's
first answer); each config's launch is modelled once, without the candidate caches (a search that never
asks a config twice only fills them, evicting what a run asks again): `writable` is read from it, the
built launch (sim.built_launch) made from it, launch_failure's answer read from that
(sim.failure_of_launch: a config `writable` accepts has no access violation, so simulate's answer is
launch_failure's where it fails), and a config that runs is timed on it. The same configs in the same
order with the same strict `<`, so the same (time, variant, params): tests/test_holdout_search.py
compares the two over tasks of every registry module.
"""
from __future__ import annotations

from . import feasibility, knobs
from .sim import TILE_VALUES_MAX, built_launch, failure_of_launch, time_ms
from .tasks import best_config as searched, param_grid


def best_config(module, task) -> tuple:
    """tasks.best_config(module, task): (time_ms, variant, params) of the fastest ok config an
    engineer would write, noise-free; ValueError where none runs."""
    if hasattr(module, "simulate"):        # a fused program: its own simulate (kernelstrain/fused)
        return searched(module, task)
    best = None
    for t, variant, params in timed_configs(module, task, module.variants):
        if best is None or t < best[0]:
            best = (t, variant, params)
    if best is None:
        raise ValueError(f"no candidate of {module.name} runs on {task.gpu.name}")
    return best


def timed_configs(module, task, variants):
    """(time_ms, variant, params) of each config of `variants`, in their order and param_grid's, that an engineer
    would write (sim.writable) and that runs (sim.launch_failure None): each launch modelled once, kept nowhere
    (the module docstring). Not for a fused program (its own simulate). A rung whose features the GPU lacks
    yields nothing (each of its configs fails so)."""
    for variant in variants:
        if variant.needs - task.gpu.features:
            continue
        for params in param_grid(variant):
            launch = knobs.plain_launch(module, variant, params, task)
            if launch.unrolled > TILE_VALUES_MAX or feasibility.violation.uncached(module, variant, params, task) is not None:
                continue                   # not writable (sim.writable)
            built = built_launch(module, variant, params, task, lambda *_: launch)
            if failure_of_launch(module, variant, params, task, built) is not None:
                continue
            yield time_ms(module, variant, built, task, params), variant, params
