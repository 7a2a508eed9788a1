"""A fused profile's tasks kept in the solution store (fused/tasks.fused_tasks, issue 32): the stored answer is the
walked one, and another stream's is never answered from it."""
from dataclasses import replace

import pytest

from kernelstrain.fused import tasks as ft
from kernelstrain.profiles import load_profile


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", str(tmp_path / "store"))
    return tmp_path / "store"


def _profile(programs: int, seed: int = 0):
    p = load_profile("fused")
    return replace(p, fused=replace(p.fused, programs=programs, seed=seed))


def test_stored_fused_tasks_are_the_walked_ones(store, monkeypatch):
    profile = _profile(12)
    walked = ft.walked_tasks(profile)
    assert ft.fused_tasks(profile) == walked and len(walked) == 12     # walked, then stored
    assert any(store.rglob("*.json"))

    def no_walk(p):
        raise AssertionError("walked again")
    monkeypatch.setattr(ft, "walked_tasks", no_walk)
    stored = ft.fused_tasks(profile)
    assert stored == walked
    assert [t.key for t in stored] == [t.key for t in walked]


def test_another_stream_is_not_answered_from_the_store(store, monkeypatch):
    ft.fused_tasks(_profile(12))
    asked = []
    walk = ft.walked_tasks

    def counted(p):
        asked.append(p.fused)
        return walk(p)
    monkeypatch.setattr(ft, "walked_tasks", counted)
    for other in (_profile(13), _profile(12, seed=1)):
        assert ft.fused_tasks(other) == walk(other)
    assert len(asked) == 2
    assert ft.stored_key(_profile(12)) != ft.stored_key(_profile(13))


def test_no_store_walks_each_time(monkeypatch):
    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", "off")
    asked = []
    walk = ft.walked_tasks
    monkeypatch.setattr(ft, "walked_tasks", lambda p: asked.append(1) or walk(p))
    ft.fused_tasks(_profile(5))
    ft.fused_tasks(_profile(5))
    assert len(asked) == 2


def test_a_tasks_file_is_keyed_by_its_bytes(tmp_path):
    p = _profile(12)
    (tmp_path / ft.TASKS).write_text('{"seed": 0, "index": 1}\n')
    filtered = replace(p, fused=replace(p.fused, tasks=str(tmp_path)))
    first = ft.stored_key(filtered)
    (tmp_path / ft.TASKS).write_text('{"seed": 0, "index": 2}\n')
    assert ft.stored_key(filtered) != first and first != ft.stored_key(p)
    (tmp_path / ft.TASKS).unlink()
    assert ft.stored_key(filtered) is None       # unreadable: walked, so the walk says why


def test_a_fused_modules_op_from_its_name():
    from kernelstrain.fused.module import fused_op, module_name
    from kernelstrain.ops import REGISTRY
    for seed, index, impl in ((0, 1, "triton"), (0, 42, "cuda"), (3, 12345, "cuda")):
        name = module_name(seed, index, impl)
        assert fused_op(name) == REGISTRY[name].op
    assert fused_op("rmsnorm_cuda") is None
