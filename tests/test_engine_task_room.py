"""Tasks with room for a session (issue 26): both bundled profiles set no combo whose roofline is
under profile.min_floor_launches kernel launches (plan.floor_launches), keep every (module, GPU)
pair and their combo counts, and a profile without the setting keeps its key; the default
profile's step budget cuts few episodes short."""
import random

import pytest

from kernelstrain.engine import draw_steps

from kernelstrain.errors import UsageError
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import all_combos, floor_launches, make_plan, select_combos
from kernelstrain.profiles import load_profile, profile_from_tables, profile_tables
from kernelstrain.tasks import make_task


def test_floor_launches_is_the_roofline_over_one_launch():
    m = REGISTRY["bias_gelu_cuda"]
    decode = make_task(m, "H100", "fp16", {"T": 1, "N": 18176, "TANH": 0})
    prefill = make_task(m, "H100", "fp16", {"T": 4096, "N": 18176, "TANH": 0})
    assert floor_launches(m, decode) < 0.1 < 1.0 < floor_launches(m, prefill)
    # the same shape on a slower memory system: more of the time is the kernel's own
    assert floor_launches(m, make_task(m, "A10", "fp16", {"T": 4096, "N": 18176, "TANH": 0})) > floor_launches(m, prefill)


@pytest.mark.parametrize("config", ["kernelinfer", "kernelstrain"])
def test_no_launch_bound_task_and_every_module_on_every_gpu(config):
    p = load_profile(config)
    assert p.min_floor_launches == 1.0
    combos = select_combos(p)
    assert len(combos) == p.combos
    assert all(floor_launches(REGISTRY[t.module], t) >= 1.0 for t in combos)
    every = profile_from_tables({**profile_tables(p), "profile": {k: v for k, v in profile_tables(p)["profile"].items()
                                                                  if k != "min_floor_launches"}}, p.path)
    # (op, GPU): with one impl per combo, which impl an (op, GPU, dtype, shape) gets is drawn by the tables that
    # define tasks (profile.tasks_key), which leaving a setting out changes
    assert {(REGISTRY[t.module].op, t.gpu.name) for t in all_combos(every)} <= {(REGISTRY[t.module].op, t.gpu.name) for t in combos}
    assert any(floor_launches(REGISTRY[t.module], t) < 1.0 for t in all_combos(every))
    plan = make_plan(p, 0)
    assert len(plan.train) + sum(len(t) for t in plan.splits.values()) == p.combos
    if config == "kernelinfer":
        assert (len(plan.train), len(plan.holdout)) == (1899, 195)


def test_the_setting_is_hashed_only_where_set():
    p = load_profile("kernelstrain")
    tables = profile_tables(p)
    every = {**tables, "profile": {k: v for k, v in tables["profile"].items() if k != "min_floor_launches"}}
    unset = profile_from_tables(every, p.path)
    assert "min_floor_launches" not in profile_tables(unset)["profile"] and unset.key != p.key
    written = profile_from_tables({**every, "profile": {**every["profile"], "min_floor_launches": 0}}, p.path)
    assert (written.key, written.tasks_key) == (unset.key, unset.tasks_key)
    ki = load_profile("kernelinfer")
    back = profile_from_tables(profile_tables(ki), ki.path)
    assert back.min_floor_launches == 1.0 and (back.key, back.tasks_key) == (ki.key, ki.tasks_key)


@pytest.mark.parametrize("value, message", [(-1.0, "must be >= 0"), ("one", "must be float")])
def test_a_bad_setting_names_its_key(value, message):
    p = load_profile("kernelinfer")
    tables = profile_tables(p)
    with pytest.raises(UsageError, match=f"profile.min_floor_launches' {message}"):
        profile_from_tables({**tables, "profile": {**tables["profile"], "min_floor_launches": value}}, p.path)


def test_the_default_budget_cuts_few_episodes_short():
    """The step budget (engine.draw_steps at search.budget_scale x steps.mean, capped at steps.max)
    is a session's limit, not its length: under the card's mean for at most 5% of episodes (at
    2x, 15%: 9% of a 400-episode sample ended on it mid-search, scripts/stop_reasons.py)."""
    p = load_profile("kernelstrain")
    rng = random.Random(5)
    budgets = [min(p.steps.max, draw_steps(rng, p.steps.min, p.steps.max, p.steps.mean * p.search.budget_scale))
               for _ in range(20000)]
    assert sum(b < p.steps.mean for b in budgets) / len(budgets) <= 0.05


def test_has_room_answers_what_the_whole_ladder_answers():
    """plan.has_room's bounds and its stopped grid search give room()'s verdict at the bar, and its
    lower bound is never over room() (a copy at its DRAM floor has none; a GEMM has plenty)."""
    from kernelstrain.plan import has_room, room
    p = load_profile("kernelinfer")
    tasks = [make_task(REGISTRY["paged_kv_copy_triton"], "H100", "fp16", REGISTRY["paged_kv_copy_triton"].shapes[0]),
             make_task(REGISTRY["fp8_quant_cuda"], "A10", "bf16", REGISTRY["fp8_quant_cuda"].shapes[-1]),
             make_task(REGISTRY["rope_cuda"], "A10", "bf16", REGISTRY["rope_cuda"].shapes[0]),
             make_task(REGISTRY["gemm_fp16_triton"], "A100", "fp16", REGISTRY["gemm_fp16_triton"].shapes[0])]
    rooms = [room(REGISTRY[t.module], t, p.search) for t in tasks]
    assert min(rooms) < 1.5 < max(rooms)
    for t, r in zip(tasks, rooms):
        for bar in (1.1, 1.5, 3.0):
            ok, low = has_room(REGISTRY[t.module], t, p.search, bar)
            assert ok == (r >= bar) and low <= r * (1 + 1e-9), (t.key, bar, r, low)


def test_kernelinfer_draws_tasks_with_room_and_keeps_every_module_and_count():
    """profile.min_room (kernelinfer 1.5): every combo drawn has that room, or is the one combo left of
    a (module, GPU) pair none of whose combos has it (plan.with_room keeps its roomiest); with_room
    keeps every pair it is given; the profile keeps its combo count and its 1,899 training combos,
    each (op, GPU, dtype, shape) once, and every (op, GPU) of the combos drawn without the setting."""
    from collections import Counter
    from dataclasses import replace
    from kernelstrain.plan import _has_room, with_room
    p = load_profile("kernelinfer")
    assert p.min_room == 1.5
    caps = (p.search.baseline_cap, p.search.eager_cap)
    combos, left = select_combos(p), all_combos(p)
    per_pair = Counter((t.module, t.gpu.name) for t in left)
    assert all(_has_room(t, caps, p.min_room)[0] or per_pair[(t.module, t.gpu.name)] == 1 for t in combos)
    every = all_combos(replace(p, min_room=0.0))
    kept = with_room(every, p)
    assert len(kept) < len(every) and {(t.module, t.gpu.name) for t in kept} == {(t.module, t.gpu.name) for t in every}
    for pair in {(t.module, t.gpu.name) for t in every} - {(t.module, t.gpu.name) for t in kept if _has_room(t, caps, 1.5)[0]}:
        (t,) = [t for t in kept if (t.module, t.gpu.name) == pair]
        assert _has_room(t, caps, 1.5)[1] == max(_has_room(u, caps, 1.5)[1] for u in every if (u.module, u.gpu.name) == pair)
    assert {(REGISTRY[t.module].op, t.gpu.name) for t in every} <= {(REGISTRY[t.module].op, t.gpu.name) for t in combos}
    assert len(combos) == p.combos
    assert len({(REGISTRY[t.module].op, t.gpu.name, t.dtype, t.shape) for t in combos}) == len(combos)
    plan = make_plan(p, 0)
    assert (len(plan.train), len(plan.holdout)) == (1899, 195)


def test_min_room_is_hashed_only_where_set_and_a_bad_value_names_its_key():
    p = load_profile("kernelstrain")
    tables = profile_tables(p)
    assert "min_room" not in tables["profile"] and p.min_room == 0.0
    zero = profile_from_tables({**tables, "profile": {**tables["profile"], "min_room": 0.0}}, p.path)
    assert (zero.key, zero.tasks_key) == (p.key, p.tasks_key)
    set_ = profile_from_tables({**tables, "profile": {**tables["profile"], "min_room": 1.5}}, p.path)
    assert set_.tasks_key != p.tasks_key and profile_tables(set_)["profile"]["min_room"] == 1.5
    with pytest.raises(UsageError, match="profile.min_room' must be 0"):
        profile_from_tables({**tables, "profile": {**tables["profile"], "min_room": 0.5}}, p.path)
