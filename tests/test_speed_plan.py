"""make_plan's room answers asked in a pool (plan.rooms_ahead, issue 32): the same answers, so the same plan."""
from dataclasses import replace

from kernelstrain import plan as P
from kernelstrain.ops import REGISTRY
from kernelstrain.profiles import Search, load_profile


def test_rooms_ahead_gives_has_rooms_answers_and_the_same_plan():
    base = load_profile("kernelinfer")
    assert base.min_room, "kernelinfer sets min_room (else this test asks nothing)"
    profile = replace(base, modules=base.modules[:4], combos=20)
    caps, bar = (profile.search.baseline_cap, profile.search.eager_cap), profile.min_room
    tasks = P._menu_tasks(profile)
    assert len(tasks) > 10
    P._ROOM.clear()
    serial = P.make_plan(profile, 0)
    answers = {t.key: P._ROOM[(t.key, caps, bar)] for t in tasks}
    P._ROOM.clear()
    P.rooms_ahead(profile, 2)                     # the pool's answers alone in _ROOM: make_plan asks nothing more
    assert {t.key: P._ROOM[(t.key, caps, bar)] for t in tasks} == answers
    assert len(P._ROOM) == len(tasks) and not P._AHEAD
    pooled = P.make_plan(profile, 0)
    assert (pooled.train, pooled.order, pooled.splits) == (serial.train, serial.order, serial.splits)
    search = Search(baseline_cap=caps[0], eager_cap=caps[1])
    for t in tasks[:5]:                           # each the plain computation's
        assert answers[t.key] == P.has_room(REGISTRY[t.module], t, search, bar)


def test_rooms_ahead_does_nothing_with_one_worker_or_without_min_room():
    P._ROOM.clear()
    profile = load_profile("kernelinfer")
    P.rooms_ahead(replace(profile, modules=profile.modules[:2]), 1)
    P.rooms_ahead(load_profile("kernelstrain"), 2)
    assert not P._ROOM
