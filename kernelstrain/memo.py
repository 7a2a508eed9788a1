"""Bounded caches of the simulator's pure functions of one candidate: (module, rung, params, task).

The engine asks the same questions of a candidate many times a step (is it writable, does it
run, how fast, what does it demand), and `best_config` and the baselines ask them again; each
answer is a frozen record computed from immutable inputs, so it is kept and handed back.

A key holds the params as items, the task's module, dtype and shape, and the identities of
the module object, of the rung and of the task's GPU record: the module and the GPU record are
not hashable by value, and a rung's hash by value walks every field of it and of its params on
each lookup (8-11% of generate's time in a profile). The cached entry keeps the three objects alive,
so an identity in a key is never reused by another object while the entry exists; a rung equal
to a cached one but another object is computed again (the same answer). A call with an
unhashable parameter value is computed, not cached. A forked worker inherits the parent's
entries, which stay true there (the same objects). The answers never change: `uncached` on a
wrapped function gives the plain computation (tests compare the two over the registry).
"""
from __future__ import annotations

import functools
from collections import OrderedDict

CANDIDATE_CACHE_MAX = 1 << 12     # entries per function (~0.7 MB a thousand): an episode's working set, and more


def candidate_cache(fn):
    """fn(module, variant, params, task), cached per candidate (see the module docstring)."""
    cache: OrderedDict = OrderedDict()

    @functools.wraps(fn)
    def cached(module, variant, params: dict, task):
        try:
            key = (id(module), id(variant), tuple(params.items()), id(task.gpu), task.module, task.dtype, task.shape)
            hit = cache.get(key)
        except TypeError:             # an unhashable parameter value
            return fn(module, variant, params, task)
        if hit is not None:
            return hit[3]
        result = fn(module, variant, params, task)
        if len(cache) >= CANDIDATE_CACHE_MAX:
            # the oldest entry (a plain dict's next(iter()) walks every slot deleted before it:
            # ~10x slower at this size)
            cache.popitem(last=False)
        cache[key] = (module, variant, task.gpu, result)
        return result

    cached.uncached = fn
    cached.cache_clear = cache.clear
    cached.cache_len = cache.__len__
    return cached


class RungGrid:
    """What every episode asks of a rung's grid that its parameters alone decide (the engine's
    Episode.configs and Episode.near): the grid's param dicts in param_grid's order (the slip knobs
    at 0: knobs.untuned), each config's positions along the tunable parameters' values, and, per
    position of the best and spread, the grid positions of the configs within that many value-steps.
    Each episode builds its ladder's rungs afresh (knobs.extend), so the rungs are found again by
    their parameters (equal parameters: the same grid). The dicts are shared by every episode's
    candidates and never written (a candidate's params are a new dict wherever they change)."""

    def __init__(self, variant):
        from .knobs import SLIPS, untuned
        from .tasks import param_grid
        params = variant.params
        self.dicts = tuple(param_grid(untuned(variant)))
        self.names = [p.name for p in params if len(p.values) > 1 and p.name not in SLIPS]
        values = {p.name: p.values for p in params}
        self.values = [values[n] for n in self.names]
        self.positions = [tuple(vals.index(d[n]) for n, vals in zip(self.names, self.values)) for d in self.dicts]
        self._near: dict = {}
        self._groups: dict = {}

    def groups(self, own: tuple) -> list:
        """The grid positions grouped by the values of the parameters at positions `own` of the
        rung's parameters (each config's dict holds them in the rung's order), each group in grid
        order, the groups in the order of their first config."""
        found = self._groups.get(own)
        if found is None:
            by: dict = {}
            for i, d in enumerate(self.dicts):
                values = tuple(d.values())
                by.setdefault(tuple(values[j] for j in own), []).append(i)
            found = self._groups[own] = list(by.values())
        return found

    def near(self, at: tuple, spread: int) -> tuple:
        """Grid positions of the configs at most `spread` value-steps (summed) from positions `at`."""
        key = (at, spread)
        found = self._near.get(key)
        if found is None:
            if len(self._near) >= NEAR_MAX:
                self._near.clear()
            found = self._near[key] = tuple(i for i, pos in enumerate(self.positions)
                                            if sum(abs(p - q) for p, q in zip(pos, at)) <= spread)
        return found


RUNG_GRIDS_MAX = 1 << 11      # distinct rungs (a registry's ladders with their knobs: ~1,000)
NEAR_MAX = 1 << 10            # best positions a rung keeps the near set of
_RUNG_GRIDS: dict = {}


def rung_grid(variant) -> RungGrid:
    """The RungGrid of a rung, by its parameters (names, values, defaults)."""
    grid = _RUNG_GRIDS.get(variant.params)
    if grid is None:
        if len(_RUNG_GRIDS) >= RUNG_GRIDS_MAX:
            _RUNG_GRIDS.clear()
        grid = _RUNG_GRIDS[variant.params] = RungGrid(variant)
    return grid


class Made:
    """A sequence of `make(item)` over `items`, each made when first asked and kept (the same object
    after): an episode's configs of a rung (Episode.configs), of which a scan by groups
    (limits.rung_failing) or a near set asks a few, made only for those. Indexing and iteration."""

    __slots__ = ("make", "items", "made")

    def __init__(self, make, items):
        self.make, self.items, self.made = make, items, [None] * len(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        found = self.made[i]
        if found is None:
            found = self.made[i] = self.make(self.items[i])
        return found

    def __iter__(self):
        return map(self.__getitem__, range(len(self.items)))
