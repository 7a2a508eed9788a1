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


def _has_room_plain(module, task, search, bar):
    """plan.has_room as it read before it walked the grid with holdout_search.timed_configs."""
    import math
    from kernelstrain.engine import baseline_rung
    from kernelstrain.sim import built_launch, launch_failure, roofline_floor_ms, simulate, time_ms, writable
    from kernelstrain.tasks import param_grid
    start = baseline_rung(module, task, search)
    base = simulate(module, start, start.defaults(), task)
    if not base.ok:
        return True, math.inf
    runs = [v for v in module.variants if v.offered(task.dtype) and not (v.needs - task.gpu.features)]
    up = [simulate(module, v, v.defaults(), task) for v in runs[runs.index(start):] if start in runs]
    low = base.time_ms / min(r.time_ms for r in (base, *up) if r.ok)
    if low >= bar:
        return True, low
    target = base.time_ms / bar
    if min(roofline_floor_ms(module, task, p) for p in {v.path for v in runs}) > target:
        return False, low
    for v in reversed(module.variants):
        for params in param_grid(v):
            if writable(module, v, params, task) and launch_failure.uncached(module, v, params, task) is None \
                    and time_ms(module, v, built_launch(module, v, params, task), task, params) <= target:
                return True, low
    return False, low


def test_has_room_walks_the_grid_as_it_did():
    """has_room's grid walk (holdout_search.timed_configs) gives the plain walk's answers: over every 97th menu task of
    kernelinfer, at its bar and at bars that make the walk decide (half and twice the lower bound)."""
    profile = load_profile("kernelinfer")
    search = Search(baseline_cap=profile.search.baseline_cap, eager_cap=profile.search.eager_cap)
    walked = 0
    for t in P._menu_tasks(profile)[::97]:
        m = REGISTRY[t.module]
        low = _has_room_plain(m, t, search, profile.min_room)[1]
        for bar in (profile.min_room, 2 * low, 1.2 * low):
            assert P.has_room(m, t, search, bar) == _has_room_plain(m, t, search, bar), (t.key, bar)
            walked += 1
    assert walked > 60


def test_rooms_ahead_keeps_each_tasks_baseline_for_the_episodes():
    """rooms_ahead's workers find each menu task's baseline rung (has_room asks it): the parent keeps it
    (engine._BASELINES), the plain answer of every task, so the episodes' workers forked after the plan
    ask the simulator nothing for it."""
    from kernelstrain import engine
    base = load_profile("kernelinfer")
    profile = replace(base, modules=base.modules[:3], combos=20)
    tasks = P._menu_tasks(profile)
    P._ROOM.clear()
    engine._BASELINES.clear()
    P.rooms_ahead(profile, 2)
    assert len(engine._BASELINES) == len(tasks) > 10
    search = profile.search
    for t in tasks:
        m = REGISTRY[t.module]
        key = engine.baseline_key(m, t, search.baseline_cap, search.eager_cap)
        assert engine._BASELINES[key][2] == engine._baseline_rung(m, t, search)


def test_room_answers_are_stored_and_read_back_for_the_same_menu(monkeypatch, tmp_path):
    """make_plan stores its menu's room answers and baselines in the solution store (plan.store_rooms); a later
    plan of the same menu reads them (has_room asked nothing) and is the same plan, its baselines the plain ones;
    another menu is not answered from them, and rooms_ahead then needs no pool."""
    from kernelstrain import engine
    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", str(tmp_path / "store"))
    base = load_profile("kernelinfer")
    profile = replace(base, modules=base.modules[:3], combos=20)
    P._ROOM.clear()
    first = P.make_plan(profile, 0)
    tasks = P._menu_tasks(profile)
    caps, bar = (profile.search.baseline_cap, profile.search.eager_cap), profile.min_room
    answers = {t.key: P._ROOM[(t.key, caps, bar)] for t in tasks}
    P._ROOM.clear()
    engine._BASELINES.clear()
    monkeypatch.setattr(P, "has_room", lambda *a: (_ for _ in ()).throw(AssertionError("asked again")))
    again = P.make_plan(profile, 0)
    assert (again.train, again.order, again.splits) == (first.train, first.order, first.splits)
    assert {t.key: P._ROOM[(t.key, caps, bar)] for t in tasks} == answers
    search = profile.search
    for t in tasks:
        m = REGISTRY[t.module]
        assert engine._BASELINES[engine.baseline_key(m, t, *caps)][2] == engine._baseline_rung(m, t, search)
    P._ROOM.clear()
    P.rooms_ahead(profile, 2)            # all stored: no task left to ask (has_room would raise)
    assert len(P._ROOM) == len(tasks)
    other = replace(base, modules=base.modules[3:5], combos=20)
    assert not P.stored_rooms(P._menu_tasks(other), caps, bar)
