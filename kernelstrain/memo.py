"""Bounded caches of the simulator's pure functions of one candidate: (module, rung, params, task).

The engine asks the same questions of a candidate many times a step (is it writable, does it
run, how fast, what does it demand), and `best_config` and the baselines ask them again; each
answer is a frozen record computed from immutable inputs, so it is kept and handed back.

A key holds the params' names and values (two tuples, in the dict's order: equal exactly where the
items are; a tuple of the items made a 2-tuple a parameter at every look-up: the registry's grids' params, 4 a
dict on average, 393 -> 198 B a key, 4.8 -> 2.4 MB for the six caches' 12,288 at their bound, a look-up 2.2 -> 0.4
us), the task's module, dtype and shape, and the identities of
the module object, of the rung and of the task's GPU record: the module and the GPU record are
not hashable by value, and a rung's hash by value walks every field of it and of its params on
each lookup (8-11% of generate's time in a profile). The cached entry keeps the three objects alive,
so an identity in a key is never reused by another object while the entry exists; a rung equal
to a cached one but another object is computed again (the same answer), except the rungs knobs.extend
makes: one object a rung and knobs, keyed as the rung they extend (same_rung). A call with an
unhashable parameter value is computed, not cached. A forked worker inherits the parent's
entries, which stay true there (the same objects). The answers never change: `uncached` on a
wrapped function gives the plain computation (tests compare the two over the registry).
"""
from __future__ import annotations

import functools
from collections import OrderedDict

# entries per function: an episode's working set, and more. Answers are asked again within an episode (and by
# validate's row checks right after its rebuild), seldom across episodes: generate --episodes 150 missed 88,664 /
# 88,733 / 88,751 times at 4,096 / 2,048 / 1,024 entries (same CPU), validate's row checks of 300 default episodes
# none at 4,096 or 2,048; 4,096 held ~8 MB more of the peak RSS than 2,048 (six functions, ~0.7 MB a thousand)
CANDIDATE_CACHE_MAX = 1 << 11


_RUNGS: dict = {}        # id of a rung made from another by knobs.extend -> id of that rung (same_rung)


def same_rung(made, rung):
    """`made` (kept alive by its maker for good: knobs.extend's rungs) as the candidate caches know it: `rung`,
    whose candidates it answers alike. knobs.extend adds the generic knobs' Params to a rung; a candidate is named
    by its params dict, which holds its knob settings whichever of the two it is asked of (the simulator reads
    the rung's declared Params only for their defaults, the knobs' all 0: calibration.param_steps skips them). So
    validate's row checks, which re-simulate each step on the module's own rung (rerender.simulated), find the
    answers of the engine's rebuild of the same episode, which asked the extended rung (tests/test_caches.py
    compares every cached function's answers for both rungs, registry-wide)."""
    _RUNGS[id(made)] = _RUNGS.get(id(rung), id(rung))
    return made


def candidate_cache(fn):
    """fn(module, variant, params, task), cached per candidate (see the module docstring)."""
    cache: OrderedDict = OrderedDict()

    @functools.wraps(fn)
    def cached(module, variant, params: dict, task):
        try:
            key = (id(module), _RUNGS.get(id(variant), id(variant)), tuple(params), tuple(params.values()), id(task.gpu),
                   task.module, task.dtype, task.shape)
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
