"""The plan of a run: which task combos exist, which are held out, which task each
episode works on, and the RNG of every episode. Pure functions of (profile, seed).

Every random draw comes from random.Random seeded through sha256 — never hash().
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

from .ops import REGISTRY
from .ops.base import OpModule, Task
from .profiles import Profile
from .calibration import FIT
from .holdout_search import timed_configs
from .rng import rank, seeded_rng  # noqa: F401 (seeded_rng: tests draw as the plan's episodes do)
from .sim import built_launch, launch_failure, roofline_floor_ms, simulate, time_ms, writable
from .tasks import make_task, param_grid


def profile_modules(profile: Profile) -> list[OpModule]:
    names = profile.modules or tuple(REGISTRY)
    return [REGISTRY[n] for n in names]


def all_combos(profile: Profile) -> list[Task]:
    """Every (module, gpu, dtype, shape) the profile's menus allow (a module's menu plus the
    profile's [shapes] for it), in registry order. With search.one_impl_per_combo an
    (op, gpu, dtype, shape) has one impl, picked in hash order; with profile.min_floor_launches,
    a combo whose roofline is under that many launches is none (floor_launches); with
    profile.min_room, one with less room than that is none (with_room). A fused
    profile's tasks are its programs (fused/tasks.py)."""
    if profile.fused is not None:
        from .fused.tasks import fused_tasks
        return fused_tasks(profile)
    tasks = _menu_tasks(profile)
    return with_room(tasks, profile) if profile.min_room else tasks


def _menu_tasks(profile: Profile) -> list[Task]:
    """all_combos' tasks before with_room's cut (not a fused profile's)."""
    tasks = []
    for m in profile_modules(profile):
        extra = [s for s in (profile.shapes or {}).get(m.name, ()) if s not in m.shapes]
        for gpu in profile.gpus:
            for shape in (*m.shapes, *extra):
                for dtype in m.dtypes:
                    t = make_task(m, gpu, dtype, shape)
                    if m.supports(t.gpu, dtype) and (not profile.min_floor_launches
                                                     or floor_launches(m, t) >= profile.min_floor_launches):
                        tasks.append(t)
    if profile.search.one_impl_per_combo:
        pick = {}
        for t in tasks:
            combo = (REGISTRY[t.module].op, t.gpu.name, t.dtype, tuple(sorted(t.shape)))
            if combo not in pick or rank(profile.tasks_key, "impl", t.key) < rank(profile.tasks_key, "impl", pick[combo].key):
                pick[combo] = t
        kept = {t.key for t in pick.values()}
        tasks = [t for t in tasks if t.key in kept]
    return tasks


def room(module: OpModule, task: Task, search) -> float:
    """How many times faster than the task's baseline (engine.baseline_rung at its default
    parameters, noise-free) the fastest configuration of the module's ladder runs on it
    (holdout_search.best_config): the most a session on the task could gain; inf where the
    baseline does not run at its defaults."""
    from .engine import baseline_rung
    from .holdout_search import best_config
    start = baseline_rung(module, task, search)
    base = simulate(module, start, start.defaults(), task)
    return base.time_ms / best_config(module, task)[0] if base.ok else math.inf


def has_room(module: OpModule, task: Task, search, bar: float) -> tuple[bool, float]:
    """(room(...) >= bar, the room of the fastest rung from the baseline's up at its own defaults:
    a lower bound of room), asked without the whole grid where bounds settle it: that lower bound
    at the bar (the simulations the baseline's cap asks anyway), or the roofline floor of every
    path the GPU runs under it (no configuration beats its floor: qa's roofline check); else the
    grid, top rung first, until a configuration reaches the bar."""
    from .engine import baseline_rung
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
    if hasattr(module, "simulate"):       # a fused program: its own simulate
        for v in reversed(module.variants):
            for params in param_grid(v):
                if writable(module, v, params, task) and launch_failure.uncached(module, v, params, task) is None \
                        and time_ms(module, v, built_launch(module, v, params, task), task, params) <= target:
                    return True, low
        return False, low
    # the held-out search's walk (one launch a config, kept nowhere), top rung first, until one reaches the bar
    return any(t <= target for t, _, _ in timed_configs(module, task, reversed(module.variants))), low


_ROOM: dict = {}      # (task key, caps, bar) -> has_room's answer
_AHEAD: list = []     # rooms_ahead's (task, caps, bar) asks, read by its forked workers by index


def rooms_ahead(profile: Profile, workers: int, meanwhile=None) -> None:
    """with_room's answer (has_room) for every task of the profile's menus, asked in `workers` forked
    processes and kept (_ROOM) where make_plan then finds it: a profile with min_room (kernelinfer) asks it
    of ~4,000 tasks before the first episode, ~3.3 s of one process (each simulates the ladder's rungs at
    their defaults), ~13% of a 200-session run, none of it shared by the workers. Nothing with one worker,
    or for a profile without min_room; the answers are has_room's own (pure), so the plan is the same.
    `meanwhile()`, where given, runs in this process while the pool works (else not at all)."""
    if workers <= 1 or profile.fused is not None or not profile.min_room:
        return
    from .engine import baseline_key, keep_baseline
    from .pools import fork_pool, result, running, submitted
    caps, bar = (profile.search.baseline_cap, profile.search.eager_cap), profile.min_room
    tasks = _menu_tasks(profile)
    stored_rooms(tasks, caps, bar)
    _AHEAD[:] = [(t, caps, bar) for t in tasks if (t.key, caps, bar) not in _ROOM]
    try:
        with running(lambda: fork_pool(workers) if len(_AHEAD) > 1 else None) as pool:
            if pool is None:
                return
            found = submitted(pool.map_async, _room_at, range(len(_AHEAD)), chunksize=max(1, len(_AHEAD) // (32 * workers)))
            if meanwhile is not None:
                meanwhile()
            for (t, caps, bar), (answer, start) in zip(_AHEAD, result(found)):
                _ROOM[(t.key, caps, bar)] = answer
                # the baseline each answer found, kept here too: the episodes' workers, forked from this process
                # after the plan, ask it again of every training task (engine.baseline_rung)
                module = REGISTRY[t.module]
                keep_baseline(baseline_key(module, t, *caps), module, t, module.variant(start))
    finally:
        _AHEAD.clear()


def _room_at(i: int) -> tuple[tuple[bool, float], str]:
    """_has_room of rooms_ahead's i-th ask and the tag of the task's baseline rung, which it found (in a
    forked worker: _AHEAD is the parent's list)."""
    from .engine import baseline_rung
    from .profiles import Search
    task, caps, bar = _AHEAD[i]
    answer = _has_room(task, caps, bar)
    return answer, baseline_rung(REGISTRY[task.module], task, Search(baseline_cap=caps[0], eager_cap=caps[1])).tag


def _has_room(task: Task, caps: tuple, bar: float) -> tuple[bool, float]:
    """has_room, asked once a process (generate's plan, validate's and the tests' ask it again):
    the baseline depends on the search's baseline_cap and eager_cap alone (engine.baseline_rung)."""
    from .profiles import Search
    key = (task.key, caps, bar)
    if key not in _ROOM:
        _ROOM[key] = has_room(REGISTRY[task.module], task, Search(baseline_cap=caps[0], eager_cap=caps[1]), bar)
    return _ROOM[key]


def with_room(tasks: list[Task], profile: Profile) -> list[Task]:
    """The tasks whose room (room) is at least profile.min_room: a team does not hand an engineer
    a kernel already at the fastest its techniques reach for a session of hours (the CUDA-Agent-Ops
    card keeps "non-trivial" tasks). Shapes are dropped, never a module: where none of a (module,
    GPU) pair's tasks has that room, its roomiest (by has_room's lower bound) stays."""
    caps = (profile.search.baseline_cap, profile.search.eager_cap)
    stored = stored_rooms(tasks, caps, profile.min_room)
    judged = {t.key: _has_room(t, caps, profile.min_room) for t in tasks}
    if not stored:
        store_rooms(tasks, caps, profile.min_room)
    roomiest = {}
    for t in tasks:
        pair = (t.module, t.gpu.name)
        if pair not in roomiest or judged[t.key][1] > judged[roomiest[pair].key][1]:
            roomiest[pair] = t
    return [t for t in tasks if judged[t.key][0] or roomiest[(t.module, t.gpu.name)] is t]


def _rooms_key(tasks: list[Task], caps: tuple, bar: float) -> tuple:
    """The solution store's key of a menu's room answers: its task keys (a digest of them, in order), caps and bar."""
    menu = hashlib.sha256("\n".join(t.key for t in tasks).encode()).hexdigest()
    return "rooms", menu, caps[0], caps[1], bar


def stored_rooms(tasks: list[Task], caps: tuple, bar: float) -> bool:
    """has_room's answers for every task of a menu (and each task's baseline rung, engine.baseline_rung), read from
    the solution store into _ROOM (and the engine's baselines) where an earlier run of this package stored them
    (store_rooms); True when it had them. They are pure functions of the task, the caps, the bar and the package's
    code and data, which the store's folder is named by (solution_store): kernelinfer's plan asks ~4,000 tasks, ~2.6 s
    of a 100-session run's ~11 s (23%), the same for every seed."""
    from .engine import baseline_key, keep_baseline
    from . import solution_store
    text = solution_store.get(_rooms_key(tasks, caps, bar))
    if text is None:
        return False
    answers = json.loads(text)
    if set(answers) != {t.key for t in tasks}:
        return False
    for t in tasks:
        ok, low, start = answers[t.key]
        module = REGISTRY[t.module]
        _ROOM[(t.key, caps, bar)] = (ok, low)
        keep_baseline(baseline_key(module, t, *caps), module, t, module.variant(start))
    return True


def store_rooms(tasks: list[Task], caps: tuple, bar: float) -> None:
    """Store the menu's room answers (_ROOM, all asked) and baselines for the next run (stored_rooms)."""
    from .engine import baseline_rung
    from .profiles import Search
    from . import solution_store
    if solution_store.store_dir() is None:
        return
    search = Search(baseline_cap=caps[0], eager_cap=caps[1])
    answers = {t.key: [*_ROOM[(t.key, caps, bar)], baseline_rung(REGISTRY[t.module], t, search).tag] for t in tasks}
    solution_store.put(_rooms_key(tasks, caps, bar), json.dumps(answers))


def floor_launches(module: OpModule, task: Task) -> float:
    """The task's roofline time (memory, or the fastest compute path a rung that runs on its GPU
    uses) in kernel launches (the overhead of one on its GPU). Under one, the best kernel the
    ladder holds is launch-bound (engine.LAUNCH_BOUND: the launch at least half its time): no
    session of tuning moves it past the noise, so a profile of long sessions sets no such task
    (a team hands an engineer kernels whose time is theirs; a launch is cut by fusion or graphs).

    >>> from kernelstrain.ops import REGISTRY
    >>> m = REGISTRY["bias_gelu_cuda"]
    >>> [round(floor_launches(m, make_task(m, "H100", "fp16", s)), 2)
    ...  for s in ({"T": 1, "N": 18176, "TANH": 0}, {"T": 4096, "N": 18176, "TANH": 0})]
    [0.02, 59.27]
    """
    paths = {v.path for v in module.variants if not (v.needs - task.gpu.features)}
    floor = min(roofline_floor_ms(module, task, path) for path in paths)
    return floor / (FIT.overhead_us(task.gpu.vendor, 1) * 1e-3)


def select_combos(profile: Profile) -> list[Task]:
    """`profile.combos` task combos: one per (module, gpu) first so every module appears on
    every GPU it supports, then the rest in a fixed hash order. Returned sorted by key."""
    tasks = all_combos(profile)
    order = sorted(tasks, key=lambda t: rank(profile.tasks_key, "combo", t.key))
    chosen, seen = [], set()
    for t in order:
        if (t.module, t.gpu.name) not in seen:
            seen.add((t.module, t.gpu.name))
            chosen.append(t)
    picked = {t.key for t in chosen}
    for t in order:
        if len(chosen) >= profile.combos:
            break
        if t.key not in picked:
            chosen.append(t)
            picked.add(t.key)
    return sorted(chosen, key=lambda t: t.key)




def split_holdout(combos: list[Task], frac: float, seed: int, profile_key: str, count: int | None = None) -> tuple[list[Task], list[Task]]:
    """(train, holdout): `count` (default round(frac * len)) combos held out in hash order,
    never the last training combo of a (module, gpu) pair."""
    n_hold = round(frac * len(combos)) if count is None else count
    left = {}
    for t in combos:
        left[(t.module, t.gpu.name)] = left.get((t.module, t.gpu.name), 0) + 1
    held = set()
    for t in sorted(combos, key=lambda t: rank(profile_key, "holdout", seed, t.key)):
        if len(held) >= n_hold:
            break
        if left[(t.module, t.gpu.name)] > 1:
            left[(t.module, t.gpu.name)] -= 1
            held.add(t.key)
    return [t for t in combos if t.key not in held], [t for t in combos if t.key in held]


def split_combos(combos: list[Task], profile: Profile, frac: float, seed: int) -> tuple[list[Task], dict]:
    """(train, {split: held-out tasks}) for the profile's splits, in its order.

    unseen_op holds out every combo of the listed ops (both impls), unseen_gpu every combo
    on the listed GPUs; combo then holds out round(frac * all combos) of what is left, so
    its size does not depend on the other splits (185 of 2313 for the default profile)."""
    h = profile.holdout
    held = {}
    if "unseen_op" in h.splits:
        held["unseen_op"] = [t for t in combos if REGISTRY[t.module].op in h.unseen_ops]
    if "unseen_gpu" in h.splits:
        held["unseen_gpu"] = [t for t in combos if t.gpu.name in h.unseen_gpus]
    unseen = {t.key for tasks in held.values() for t in tasks}
    train = [t for t in combos if t.key not in unseen]
    if "combo" in h.splits:
        train, held["combo"] = split_holdout(train, frac, seed, profile.tasks_key, count=round(frac * len(combos)))
    return train, {name: held[name] for name in h.splits}


@dataclass(frozen=True)
class Plan:
    profile: Profile
    seed: int
    train: tuple      # training combos, sorted by key
    holdout: tuple    # the combo split's held-out combos, sorted by key
    order: tuple      # training combos in the seed-shuffled order episodes cycle through
    splits: dict      # split name -> its held-out combos (tuple, sorted by key), profile order

    def task(self, index: int) -> Task:
        return self.order[index % len(self.order)]


def make_plan(profile: Profile, seed: int, holdout_frac: float | None = None, holdout_seed: int | None = None) -> Plan:
    combos = select_combos(profile)
    frac = profile.holdout.frac if holdout_frac is None else holdout_frac
    hseed = profile.holdout.seed if holdout_seed is None else holdout_seed
    train, splits = split_combos(combos, profile, frac, hseed)
    order = tuple(sorted(train, key=lambda t: rank(profile.tasks_key, "order", seed, t.key)))
    splits = {name: tuple(tasks) for name, tasks in splits.items()}
    return Plan(profile, seed, tuple(train), splits.get("combo", ()), order, splits)


def episode_id(plan: Plan, index: int) -> str:
    return f"{plan.profile.name}-s{plan.seed}-{index:06d}"


def task_id(task: Task) -> str:
    return "t-" + rank("task", task.key)[:12]
