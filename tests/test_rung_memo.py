"""The candidate caches know a rung knobs.extend made as the rung it extends (memo.same_rung): validate's row
checks, which re-simulate each step on the module's own rung, find the answers the engine's rebuild found on
the extended one. That holds only if every cached function answers alike for both, which this checks."""
import random

import pytest

from kernelstrain import feasibility, knobs, sim
from kernelstrain.grids import rung_grid
from kernelstrain.ops import REGISTRY

from test_caches import registry_sample

KNOB_NAMES = ("min_blocks", "main_unroll", "bound", "optin", "evict")
CACHED = [sim.simulate, sim.failure, sim.launch_failure, knobs.launch, knobs.module_launch, feasibility.violation]


def extended_sample():
    """(module, its rung, the rung extended with every knob that has a place in its code, params, task): the
    registry sample's candidates, each at knob settings drawn from the extended rung's values (slips included)."""
    rng = random.Random(5)
    seen = set()
    for m, v, params, task in registry_sample():
        if (m.name, v.tag, task.key) in seen:
            continue
        seen.add((m.name, v.tag, task.key))
        ext = knobs.extend(v, m.impl, m.render(v, v.defaults(), task), KNOB_NAMES, task.gpu)
        for own in rung_grid(v).dicts[:4]:
            yield m, v, ext, {**own, **{p.name: rng.choice(p.values) for p in ext.params if p.name in knobs.KNOBS}}, task


@pytest.mark.parametrize("fn", CACHED, ids=lambda f: f.__name__)
def test_a_rung_and_its_extension_answer_alike(fn):
    """Each cached function's plain answer for a candidate asked of the extended rung is the one asked of the
    module's own rung (a function that read the extended rung's Params beyond their defaults would fail)."""
    asked = 0
    for m, v, ext, params, task in extended_sample():
        if ext is v:
            continue
        p = knobs.own(params) if fn is knobs.module_launch else params
        assert fn.uncached(m, ext, p, task) == fn.uncached(m, v, p, task), (fn.__name__, m.name, v.tag, params, task.key)
        asked += 1
    assert asked > 1000


def test_extend_makes_one_rung_for_each_rung_and_knobs():
    m = REGISTRY["softmax_cuda"]
    from kernelstrain.tasks import make_task
    task = make_task(m, "H100", "fp16", m.shapes[0])
    v = m.variants[-1]
    code = m.render(v, v.defaults(), task)
    both, one = (knobs.extend(v, m.impl, code, names, task.gpu) for names in (("min_blocks", "main_unroll"), ("min_blocks",)))
    assert both is knobs.extend(v, m.impl, code, ("min_blocks", "main_unroll"), task.gpu)
    assert one is not both and one.params != both.params and len(both.params) == len(v.params) + 2


def test_the_module_rung_hits_what_the_extended_one_cached():
    """simulate asked of the module's own rung after the extended one: the same answer object, no new entry."""
    m = REGISTRY["layernorm_cuda"]
    from kernelstrain.tasks import make_task
    task = make_task(m, "A100", "fp16", m.shapes[0])
    v = m.variants[-1]
    ext = knobs.extend(v, m.impl, m.render(v, v.defaults(), task), ("min_blocks", "main_unroll"), task.gpu)
    params = {**v.defaults(), "min_blocks": 2, "main_unroll": 4}
    sim.simulate.cache_clear()
    r = sim.simulate(m, ext, params, task)
    assert sim.simulate(m, v, dict(params), task) is r and sim.simulate.cache_len() == 1
