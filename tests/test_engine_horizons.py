"""The long-horizon engineer (issue 26): a kernel built up one rung at a time toward the rung that
raises the ceiling (search.stepwise), each rung's pointed-at parameters tuned on the way, limit
failures only on the climb it would make anyway; every parameter of the best probed both ways and
interacting pairs tried jointly before patience ends a search (search.probe_all, search.interact); the rule that
ended each search named (Episode.stop)."""
import random
from dataclasses import replace

import pytest

from kernelstrain.engine import INTERACT_LOSS, POINTS_AT, RAISES, Candidate, Episode, Habits, Line
from kernelstrain.ops import REGISTRY
from kernelstrain.profiles import Search
from kernelstrain.tasks import make_task

from test_engine import streams
from test_engine_search import _measure, _walkable


def _raise_above(stepwise: bool) -> tuple[Episode, int]:
    """An episode on an NVIDIA GPU whose nearest ceiling-raising rung up is not the next rung
    (a GEMM-like ladder: CUDA-core rungs below the tensor-core one), found over the registry;
    and the position of that rung among ups()."""
    for found in _raises_above(stepwise):
        return found
    pytest.skip("no ladder in the registry has a rung below its first ceiling-raising one")


def _raises_above(stepwise: bool):
    for name in sorted(REGISTRY):
        m = REGISTRY[name]
        if "nvidia" not in m.vendors:
            continue
        task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
        ep = Episode(m, task, streams(3), 40, 0.0, 0.0, 1, search=Search(stepwise=stepwise))
        ep.leaps = False if stepwise else None      # an engineer who builds up (test_the_leap_... the other)
        here, ups = ep.floor_ms(ep.best.variant), ep.ups()
        raising = [i for i, v in enumerate(ups) if ep.floor_ms(v) * RAISES <= here]
        if raising and raising[0] > 0 and all(ep.fresh(ep.rung_candidate(v)) for v in ups[:raising[0] + 1]):
            yield ep, raising[0]


def test_a_stepwise_climb_goes_one_rung_at_a_time_toward_the_raised_ceiling():
    ep, i = _raise_above(stepwise=True)                                # an engineer who builds up
    assert ep.propose_raise().variant.tag == ep.ups()[0].tag          # the next rung, not the raising one
    ep, i = _raise_above(stepwise=True)
    ep.leaps = True                                                    # one who skips to the raised ceiling
    here = ep.floor_ms(ep.best.variant)
    raising = [v.tag for v in ep.ups() if ep.floor_ms(v) * RAISES <= here]
    assert ep.propose_raise().variant.tag in raising and raising[0] == ep.ups()[i].tag
    picks = set()
    for seed in range(30):                                             # onto any of them, as its habit draws
        ep, i = _raise_above(stepwise=True)
        ep.leaps, ep.rng = True, random.Random(seed)
        picks.add(ep.propose_raise().variant.tag)
    assert picks <= set(raising) and (len(picks) > 1 or len(raising) == 1)
    ep, i = _raise_above(stepwise=True)
    ep.habits = replace(ep.habits, expert_first=True)                  # an expert-first engineer: the top one, at first
    assert ep.propose_raise(1).variant.tag == raising[-1]
    assert ep.propose_raise().variant.tag == ep.ups()[0].tag           # later (or asked without a step), one rung at a time
    ep, i = _raise_above(stepwise=False)
    assert ep.propose_raise().variant.tag == ep.ups()[i].tag          # the jump straight to the raising rung
    assert ep.leaps is None                                            # asked only of a stepwise engineer


def test_the_leap_is_the_skip_habit_asked_once():
    leaps = []
    for seed in range(40):
        ep, _ = next(iter(_raises_above(stepwise=True)))
        ep.rng, ep.habits, ep.leaps = random.Random(seed), replace(ep.habits, skip=0.3), None
        first = ep.leap()
        assert all(ep.leap() == first for _ in range(5))                # one habit, not a draw per climb
        leaps.append(first)
    assert 0 < sum(leaps) < len(leaps)                                  # some leap, most build up


def test_a_stepwise_climb_tunes_what_the_profile_points_at_before_the_next_rung():
    """Once a rung on the way up leads, its parameters the profile points at are walked before the
    next rung is written; the baseline's rung is rewritten first, never tuned."""
    tested = 0
    for ep, _ in _raises_above(stepwise=True):
        nxt = ep.ups()[0]
        assert ep.propose_raise().variant.tag == nxt.tag              # at the baseline: climb
        c = ep.rung_candidate(nxt)
        _measure(ep, c, ep.book.best_ms * 0.5)
        ep.rung_tried.add(nxt.tag)
        ep.book.best_ms = ep.book.best_ms * 0.5
        ep.climbed(c)
        points = POINTS_AT[ep.bottleneck(ep.best)]
        pointed = [n for n in ep.tunable(nxt) if points.search(n)]
        if not any(ep.fresh(o) for o in ep.neighbours(ep.best, 1) if any(o.params[n] != ep.best.params[n] for n in pointed)):
            continue                                                   # nothing there to tune: it climbs on
        got = ep.propose_raise()
        assert got.variant.tag == nxt.tag                              # a tune of the new best's rung
        moved = [n for n in got.params if got.params[n] != ep.best.params[n]]
        assert len(moved) == 1 and points.search(moved[0])             # one pointed-at parameter
        tested += 1
    if not tested:
        pytest.skip("no rung on the way up has a pointed-at parameter with a neighbour to try")


def test_stepwise_limit_failures_are_aimed_at_the_next_rung_only():
    ep, _ = _raise_above(stepwise=True)
    assert [v.tag for v in ep.reach()] == [ep.ups()[0].tag]
    ep.search = replace(ep.search, stepwise=False, limit_rungs=4)
    assert [v.tag for v in ep.reach()] == [v.tag for v in ep.ups()[:4]]
    assert len(ep.reach()) > 1


def test_expert_first_is_the_profiles_share():
    rng = random.Random(1)
    assert not any(Habits.draw(rng, (4, 8), (0.1, 0.2), 0.0).expert_first for _ in range(200))
    assert all(Habits.draw(rng, (4, 8), (0.1, 0.2), 1.0).expert_first for _ in range(200))


def test_probe_all_waits_for_both_ways_of_every_parameter():
    """With search.probe_all a parameter with one neighbour tried and the other still fresh is
    not probed; without it, one tried neighbour is enough."""
    ep, p, pts = _walkable()
    ep.search = replace(ep.search, probe_all=True, joints=0)
    v = pts[1].variant
    ep.best = pts[1]
    ep.line = Line(pts[1], 1.0)
    for name in ep.tunable(v):                  # every other parameter settled: p alone decides
        if name != p:
            ep.line.settled[name] = 0.5
    _measure(ep, pts[1], 1.0)
    _measure(ep, pts[2], 1.1)                    # one way tried
    assert ep.fresh(pts[0]) and not ep.probed()
    ep.search = replace(ep.search, probe_all=False)
    assert ep.probed()
    ep.search = replace(ep.search, probe_all=True)
    _measure(ep, pts[0], 1.2)                    # the other way too
    assert ep.probed()


def _tile_pair():
    """An episode whose best's rung has two tunable parameters of one POINTS_AT group."""
    for name in sorted(REGISTRY):
        m = REGISTRY[name]
        gpu = "H100" if "nvidia" in m.vendors else "MI300X"
        task = make_task(m, gpu, m.dtypes[0], m.shapes[0])
        ep = Episode(m, task, streams(4), 40, 0.0, 0.0, 1, search=Search(joints=2, interact=True))
        for v in ep.rungs:
            names = ep.tunable(v)
            for group in POINTS_AT.values():
                hits = [n for n in names if group.search(n)]
                if len(hits) >= 2:
                    at = Candidate(v, v.defaults())
                    pair = hits[:2]
                    near = [c for c in ep.neighbours(at, 2) if ep.fresh(c)
                            and {n for n in c.params if c.params[n] != at.params[n]} == set(pair)]
                    if near:
                        return ep, at, pair
    pytest.skip("no rung with two interacting parameters and a joint neighbour")


def test_interacting_parameters_that_each_lost_a_little_are_tried_together():
    ep, at, (a, b) = _tile_pair()
    _measure(ep, at, 1.0)
    ep.best, ep.book.best_ms = at, 1.0
    ep.line = Line(at, 1.0, settled={a: INTERACT_LOSS / 2, b: INTERACT_LOSS / 2})
    assert ep.interacting(ep.line) == {frozenset((a, b))}
    ep.habits = replace(ep.habits, joint=1.0)
    c = ep.propose_joint()
    assert c is not None and {n for n in c.params if c.params[n] != at.params[n]} == {a, b}
    ep.line = Line(at, 1.0, settled={a: INTERACT_LOSS / 2, b: 2 * INTERACT_LOSS})
    assert ep.interacting(ep.line) == set()      # one lost clearly alone: no joint move of the pair


def test_a_declined_joint_habit_closes_the_joints_of_that_best():
    ep, at, (a, b) = _tile_pair()
    _measure(ep, at, 1.0)
    ep.best, ep.book.best_ms = at, 1.0
    ep.line = Line(at, 1.0, settled={a: 0.01, b: 0.01})
    ep.habits = replace(ep.habits, joint=0.0)
    assert ep.joints_open() and ep.propose_joint() is None and not ep.joints_open()


def test_every_converged_episode_names_the_rule_that_ended_it():
    for name in ("rmsnorm_cuda", "gemm_fp16_cuda", "softmax_triton"):
        if name not in REGISTRY:
            continue
        m = REGISTRY[name]
        task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
        for seed in range(3):
            ep = Episode(m, task, streams(seed), 60, 0.05, 0.02, 1)
            assert ep.stop is None
            ep.run()
            if ep.end == "converged":
                assert ep.stop in ("roofline", "launch", "patience", "exhausted")


def test_without_interact_a_joint_move_takes_near_tied_parameters_only():
    """search.interact off (the default profile): two parameters that each lost by a few percent
    but more than the noise are not tried together, and patience does not wait for them."""
    ep, at, (a, b) = _tile_pair()
    _measure(ep, at, 1.0)
    ep.best, ep.book.best_ms = at, 1.0
    ep.search = replace(ep.search, interact=False)
    ep.line = Line(at, 1.0, settled={a: INTERACT_LOSS / 2, b: INTERACT_LOSS / 2})
    ep.habits = replace(ep.habits, joint=1.0)
    assert not ep.joints_open() and ep.propose_joint() is None


def test_a_contenders_steps_are_renewed_only_by_a_gain_beyond_the_noise():
    """A tune of the contender measured faster inside the noise moves its search there but does
    not renew its steps (no evidence of progress: flailing inside the noise); a gain beyond it does."""
    ep, p, pts = _walkable()
    other = next((v for v in ep.rungs if v.tag != pts[0].variant.tag), None)
    if other is None:
        pytest.skip("the walkable rung is the episode's only one")
    ep.best = Candidate(other, other.defaults())
    _measure(ep, pts[0], 1.0)
    ep.contender = Line(pts[0], 1.0, left=1)
    _measure(ep, pts[1], 0.999)
    ep.contend(pts[1], 0.999)
    assert ep.contender.at == pts[1] and ep.contender.left == 1
    _measure(ep, pts[2], 0.8)
    ep.contend(pts[2], 0.8)
    assert ep.contender.at == pts[2] and ep.contender.left == ep.search.contender_steps
