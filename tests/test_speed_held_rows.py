"""The held-out rows kept in the solution store (generation.held_out_lines, issue 32): the stored rows are the
computed ones, for every seed of the profile, and another profile or held-out set is never answered from them."""
from dataclasses import replace

import pytest

from kernelstrain import generation
from kernelstrain.holdout import holdout_rows
from kernelstrain.plan import make_plan
from kernelstrain.profiles import load_profile


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """The store in tmp_path; the list of splits whose rows were computed."""
    monkeypatch.setenv("KERNELSTRAIN_SOLUTIONS", str(tmp_path))
    asked = []
    plain = generation.holdout_rows
    monkeypatch.setattr(generation, "holdout_rows", lambda plan, split: asked.append(split) or plain(plan, split))
    return asked


def _small(seed: int = 0, **changes):
    p = load_profile("kernelstrain")
    return make_plan(replace(p, modules=p.modules[:6], combos=40, **changes), seed)


def test_stored_rows_are_the_computed_ones_for_any_seed(counted):
    plan = _small()
    computed = generation.held_out_lines(plan)
    assert counted and sum(map(len, computed.values())) >= 4
    counted.clear()
    assert generation.held_out_lines(plan) == computed and not counted
    other_seed = _small(seed=7)
    assert other_seed.order != plan.order                # another run of the profile: the same held-out rows
    assert generation.held_out_lines(other_seed) == computed and not counted
    plain = {split: list(generation.holdout_rows(plan, split)) for split in plan.splits}
    assert plain == computed


def test_another_profile_or_held_out_set_is_not_answered(counted):
    generation.held_out_lines(_small())
    p = load_profile("kernelstrain")
    others = [_small(search=replace(p.search, baseline_cap=p.search.baseline_cap + 1.0)),     # other baselines
              make_plan(replace(p, modules=p.modules[:6], combos=40), 0, holdout_frac=0.3)]    # another combo split
    for plan in others:
        counted.clear()
        assert generation.held_out_lines(plan) == {s: list(holdout_rows(plan, s)) for s in plan.splits}
        assert counted == list(plan.splits)
