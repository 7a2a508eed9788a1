"""search.flat_stop (engine.Episode.flat): a probe that moved nothing past the noise settles its
parameter without the mirror probe, a clear loss still turns the search back, and a neighbourhood of
the best measured flat (or both ways) ends the search with the `flat` rule."""
from dataclasses import replace

from kernelstrain import knobs
from kernelstrain.engine import Candidate
from kernelstrain.sim import noise_cv

from test_engine_search import _line_at, _measure, _walkable


def _flat(ep):
    ep.search = replace(ep.search, flat_stop=True)
    return ep


def test_a_probe_inside_the_noise_settles_its_parameter_without_the_mirror():
    ep, p, pts = _walkable()
    _flat(ep)
    line = _line_at(ep, p, pts[1], 1.0)
    up = ep.propose_coordinate(line)
    assert up.params == pts[2].params                      # the way it leans first
    _measure(ep, up, 1.0 + noise_cv(1.0))                 # one sigma slower: nothing a benchmark can see
    nxt = ep.propose_coordinate(line)
    assert p in line.settled                               # settled flat, the other way never written
    assert nxt is None or nxt.params[p] == pts[1].params[p]
    assert ep.fresh(pts[0])


def test_a_clear_loss_still_turns_the_search_back():
    ep, p, pts = _walkable()
    _flat(ep)
    line = _line_at(ep, p, pts[1], 1.0)
    up = ep.propose_coordinate(line)
    _measure(ep, up, 1.0 + 4 * noise_cv(1.0))             # four sigma slower: the parameter matters
    assert ep.propose_coordinate(line).params == pts[0].params
    off = _walkable()[0]                                   # flat_stop off (the Search default): the mirror, as before
    line = _line_at(off, p, pts[1], 1.0)
    _measure(off, off.propose_coordinate(line), 1.0)
    assert off.propose_coordinate(line).params == pts[0].params


def _neighbours(ep):
    """Each tunable parameter of the best worth tuning -> its one-value neighbours that can be written."""
    v, at = ep.best.variant, ep.best.params
    out = {}
    for name in ep.tunable(v):
        if not ep.worth_tuning(ep.best, name):
            continue
        values = knobs.param(v, name).values
        i = values.index(at[name])
        out[name] = [c for c in (Candidate(v, {**at, name: values[j]}) for j in (i - 1, i + 1) if 0 <= j < len(values))
                     if ep.writable(c) and ep.true_ms(c) is not None]
    return out


def test_a_flat_neighbourhood_ends_the_search_and_an_unprobed_parameter_keeps_it_open():
    ep, _, _ = _walkable()
    _flat(ep)
    best = ep.book.best_ms
    near = {n: cs for n, cs in _neighbours(ep).items() if cs}
    assert near
    ep.stale = 1
    ep.rung_tried |= {v.tag for v in ep.rungs}             # no rung left to climb
    first = next(iter(near))
    for name, cs in near.items():
        if name != first:
            _measure(ep, cs[0], best * (1 + noise_cv(best)))   # one way each, inside the noise
    assert not ep.flat() and ep.stop_rule() != "flat"      # one parameter never probed: open
    _measure(ep, near[first][0], best * (1 + 3 * noise_cv(best)))
    if len(near[first]) > 1:                               # a clear loss one way: its mirror is still owed
        assert not ep.flat()
        _measure(ep, near[first][1], best * (1 + 3 * noise_cv(best)))
    assert ep.flat() and ep.stop_rule() == "flat"
    ep.search = replace(ep.search, flat_stop=False)
    assert not ep.flat()
