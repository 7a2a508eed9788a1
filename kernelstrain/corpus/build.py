"""Which candidates the arch-text corpus must hold: every arch-failing candidate the bundled
profiles' engine can write (scripts/arch_corpus.py builds the corpus from them; tests check the
corpus covers them). Apart from the corpus reader (kernelstrain.corpus), which the messages use
while generating: this module reads the profiles and the plan, a layer above the messages."""
from __future__ import annotations

from collections import defaultdict

from . import PROFILES, code_key, smem_key
from ..compilers import specialization_key
from ..ops import REGISTRY
from ..plan import all_combos
from ..profiles import load_profile, resolve
from ..tasks import carry, param_grid


def candidates(profiles=PROFILES, modules=(), limit: int | None = None) -> dict:
    """{(module, arch, code_key): (task, variant, params, code)}: every arch-failing candidate the
    profiles' engine can write. On each task combo (plan.all_combos), a rung whose features the
    GPU lacks (offered for the dtype) is tried with the parameters carried from the best
    (engine.carry: the rung's defaults, and the best's value of each parameter the two share),
    the best being any setting of a runnable rung; knobs off (the engine writes a rewrite
    without the best's knobs where the corpus lacks their text). With `limit`, the first
    `limit` of each (module, arch)."""
    out, per_cell = {}, defaultdict(int)
    for name in profiles:
        for task in all_combos(load_profile(resolve(name))):
            m = REGISTRY[task.module]
            if modules and m.name not in modules:
                continue
            runnable = [u for u in m.variants if not (u.needs - task.gpu.features) and u.offered(task.dtype)]
            for v in m.variants:
                if not (v.needs - task.gpu.features) or not v.offered(task.dtype):
                    continue
                for params in _carried(v, [q for u in runnable for q in param_grid(u)]):
                    code = m.render(v, params, task)
                    _add(out, per_cell, limit, (m.name, task.gpu.arch, code_key(code)), (task, v, params, code))
    return out


def _add(out: dict, per_cell: dict, limit: int | None, key: tuple, candidate: tuple) -> None:
    """A candidate into `out` under its (module, arch, entry key), once, and at most `limit` of
    each (module, arch)."""
    if key in out or limit and per_cell[key[:2]] >= limit:
        return
    per_cell[key[:2]] += 1
    out[key] = candidate


def _carried(variant, bests: list) -> list:
    """The distinct parameter settings of `variant` carried from each of `bests`, defaults first."""
    out = {tuple(variant.defaults().items()): None}
    for best in bests:
        out.setdefault(tuple(carry(variant, best).items()), None)
    return [dict(p) for p in out]


def triton_smem_candidates(profiles=PROFILES, modules=(), limit: int | None = None, archs=()) -> dict:
    """{(module, arch, smem_key): (task, variant, params, code)}: every Triton candidate of the
    profiles' task combos whose modelled shared memory is over the device's cap (each rung's
    whole parameter grid), once per source and specialization (one source is compiled at
    several: tasks of another head dim or shape); the simulator labels it by Triton's own
    figure for it (corpus.triton_shared). With `limit`, the first `limit` of each (module,
    arch); with `archs`, those targets only."""
    from ..sim import modelled_launch, smem_cap      # the model decides which candidates need the figure
    out, per_cell = {}, defaultdict(int)
    for name in profiles:
        for task in all_combos(load_profile(resolve(name))):
            m = REGISTRY[task.module]
            if m.impl != "triton" or modules and m.name not in modules or archs and task.gpu.arch not in archs:
                continue
            for v in m.variants:
                if v.needs - task.gpu.features or not v.offered(task.dtype):
                    continue
                cap = smem_cap(v, m, task.gpu)
                for params in param_grid(v):
                    if modelled_launch(m, v, params, task).smem_bytes <= cap:
                        continue
                    code = m.render(v, params, task)
                    key = smem_key(code, specialization_key(m.compile_specs(v, params, task)))
                    _add(out, per_cell, limit, (m.name, task.gpu.arch, key), (task, v, params, code))
    return out
