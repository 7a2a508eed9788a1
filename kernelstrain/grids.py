"""A rung's grid as every episode asks of it (the engine's Episode.configs, Episode.near and the
limit scan by groups): found once a process by the rung's parameters. In the model layer: the grid
is tasks.param_grid over knobs.untuned."""
from __future__ import annotations

from .knobs import SLIPS, untuned
from .tasks import param_grid


class RungGrid:
    """What every episode asks of a rung's grid that its parameters alone decide (the engine's
    Episode.configs and Episode.near): the grid's param dicts in param_grid's order (the slip knobs
    at 0: knobs.untuned), each config's positions along the tunable parameters' values, and, per
    position of the best and spread, the grid positions of the configs within that many value-steps.
    Each episode builds its ladder's rungs afresh (knobs.extend), so the rungs are found again by
    their parameters (equal parameters: the same grid). The dicts are shared by every episode's
    candidates and never written (a candidate's params are a new dict wherever they change)."""

    def __init__(self, variant):
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
