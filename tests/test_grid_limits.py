"""grid_limits: a rung's grid proven clear of launch limits from its corners (the engine's limit scans skip
it) only where no config of it fails, and the launch models' monotonicity the proof stands on, per rung."""
from dataclasses import replace

import pytest

from kernelstrain import grid_limits, knobs, sim
from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task

KNOB_NAMES = ("min_blocks", "main_unroll", "bound", "optin", "evict")      # kernelinfer's, the most any profile adds


def rung_sample():
    """(module, rung as an episode extends it with every knob, task): every module's rungs on each GPU that runs
    it, at its first and last shape (a fused program's launch is no single kernel's: never proven, not here)."""
    for m in REGISTRY.values():
        if hasattr(m, "simulate"):
            continue
        for gpu in GPUS.values():
            dtype = next((d for d in m.dtypes if m.supports(gpu, d)), None)
            if dtype is None:
                continue
            for shape in {0: m.shapes[0], -1: m.shapes[-1]}.values():
                task = make_task(m, gpu.name, dtype, shape)
                for v in m.variants:
                    yield m, knobs.extend(v, m.impl, m.render(v, v.defaults(), task), KNOB_NAMES, gpu), task


def grid(variant) -> list:
    from kernelstrain.grids import rung_grid
    return rung_grid(variant).dicts


def test_every_rung_is_monotone_but_where_mixed_says():
    """Each rung's shared memory and threads are non-decreasing along each parameter's values and flat in each
    knob, except the parameters MIXED names for the rung: a launch model that stops being so fails here (then
    add it to MIXED: its grids' corners take each of its values, or the scan asks every config)."""
    found = {}
    for m, v, task in rung_sample():
        for p in grid_limits.unordered(m, v, task) - set(grid_limits.MIXED.get((m.name, v.tag), ())):
            found.setdefault((m.name, v.tag, p), task.key)
    assert not found, found


def test_a_grid_proven_clear_has_no_config_that_fails_so():
    """Where grid_limits.clear says a rung's grid is clear of a class, no config of it fails at launch with that
    class (launch_failure's plain answer; an smem failure at the margin's times the cap or more: 1, and the
    scans' margin, Episode.margin); and the proof is not empty-handed: most grids are proven, and some that are
    not do hold a failing config."""
    proven = unproven_failing = 0
    for m, v, task in rung_sample():
        failed = [r for c in grid(v) if (r := sim.launch_failure.uncached(m, v, c, task)) is not None]
        cap = sim.smem_cap(v, m, task.gpu)
        for error_class in grid_limits.CLASSES:
            for margin in (1.0, 1.6 if m.impl == "triton" and task.is_hip else 1.25):
                failing = [r for r in failed if r.error_class == error_class
                           and (error_class != "smem" or r.smem_bytes >= margin * cap)]
                if grid_limits.clear(m, v, task, error_class, margin):
                    assert not failing, (m.name, v.tag, task.key, error_class, margin, failing[0].error)
                    proven += 1
                else:
                    unproven_failing += bool(failing)
    assert proven > 1000 and unproven_failing > 50, (proven, unproven_failing)


def _shrinking(m, v, name: str):
    """Rung `v` of module `m` whose shared memory falls as parameter `name` grows: 300 KB at its first value,
    nothing at the others (past every GPU's cap only at the bottom of the grid)."""
    first = v.param(name).values[0]

    def launch(params, task):
        return replace(v.launch(params, task), smem_bytes=300 * 1024 if params[name] == first else 0)
    return replace(v, launch=launch)


def test_a_model_that_is_not_monotone_is_caught_and_mixed_falls_back(monkeypatch):
    """A launch model whose shared memory falls as a tile grows: `unordered` names the parameter (so the
    monotonicity test above fails for it); not in MIXED, the corner would prove a failing grid clear; in MIXED,
    the corners take each of its values and the grid is not proven."""
    m = REGISTRY["gemm_fp16_triton"]
    task = make_task(m, "H100", "fp16", m.shapes[0])
    v = _shrinking(m, m.variants[0], "BLOCK_M")
    assert "BLOCK_M" in grid_limits.unordered(m, v, task)
    assert any(sim.launch_failure.uncached(m, v, c, task).error_class == "smem" for c in grid(v)
               if sim.launch_failure.uncached(m, v, c, task) is not None)
    monkeypatch.setattr(grid_limits, "_PEAKS", {})
    assert grid_limits.clear(m, v, task, "smem", 1.25)       # the wrong proof MIXED exists to prevent
    monkeypatch.setattr(grid_limits, "_PEAKS", {})
    monkeypatch.setattr(grid_limits, "MIXED", {**grid_limits.MIXED, (m.name, v.tag): ("BLOCK_M",)})
    assert not grid_limits.clear(m, v, task, "smem", 1.25)


@pytest.mark.parametrize("name", ["gemm_fp16_cuda", "softmax_triton", "layernorm_triton"])
def test_limit_scans_skip_proven_grids_and_find_the_same(name, monkeypatch):
    """Episode._over_limit answers as with the proof switched off (the plain scans), for both classes, whole
    grids and near sets, on a task where some rungs overflow shared memory."""
    from kernelstrain import limits
    from kernelstrain.engine import Episode
    from test_engine import streams
    m = REGISTRY[name]
    task = make_task(m, "H100", "fp16", m.shapes[0])

    def scans():
        limits._FAILING.clear()
        e = Episode(m, task, streams(3), 40, 0.0, 0.0, 1)
        return [[c.params for c in e._over_limit(v, error_class, v is e.best.variant and near)]
                for v in e.rungs for error_class in grid_limits.CLASSES for near in (False, True)]
    asked = []
    monkeypatch.setattr(grid_limits, "clear", lambda *a, clear=grid_limits.clear: asked.append(clear(*a)) or asked[-1])
    proven = scans()
    monkeypatch.setattr(grid_limits, "clear", lambda *a: False)
    plain = scans()
    assert proven == plain and True in asked
    if name == "gemm_fp16_cuda":
        assert any(plain) and False in asked
