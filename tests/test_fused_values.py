"""values.py: the emulated values of a fused program (issue 35's 'no task a trivial kernel solves')."""
from __future__ import annotations

import math
import random
import statistics

import pytest

from kernelstrain.fused.values import K, emulate, trivial
from kernelstrain.fused.values_library import softmax_of_scores


def _step(op, role, dims, out=None, kind="vec", **params):
    return {"op": op, "role": role, "params": params, "in": {"kind": kind, "shape": list(dims)},
            "out": {"kind": kind, "shape": list(out or dims)}}


def _randn_rows(op: str, C: int, rows: int = 400, seed: int = 1) -> list:
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        row = [rng.gauss(0.0, 1.0) for _ in range(C)]
        out.append(max(row) if op == "amax" else math.log(sum(math.exp(x) for x in row)))
    return out


@pytest.mark.parametrize("op", ["amax", "logsumexp"])
def test_row_statistics_of_randn_match_a_direct_simulation(op):
    C = 512
    [s] = emulate([_step(op, "reduction", (64, C), (64, 1), dim=-1, keepdim=True)])
    direct = _randn_rows(op, C)
    assert statistics.median(s.v) == pytest.approx(statistics.median(direct), rel=0.03)
    spread = s.v[int(0.9 * K)] - s.v[int(0.1 * K)]
    direct.sort()
    assert spread == pytest.approx(direct[int(0.9 * len(direct))] - direct[int(0.1 * len(direct))], rel=0.3)


def test_a_rows_max_at_a_clamps_bound_is_that_bound():
    prog = [_step("clamp", "elementwise", (64, 256), clamp_min=-0.5, clamp_max=0.5),
            _step("amax", "reduction", (64, 256), (64, 1), dim=-1, keepdim=True)]
    [s] = emulate(prog)
    assert set(s.v) == {0.5} and trivial(s, 1e-4, 1.0) == "constant"


def test_a_scalar_parameters_value_is_a_scenario():
    """A per-channel scale on one channel is one randn: under a relu its sign decides whether the
    output is all zeros, so its values (either sign) are emulated in turn."""
    prog = [_step("sigmoid", "elementwise", (64, 8)),
            _step("mean", "reduction", (64, 8), (64, 1), dim=-1, keepdim=True),
            _step("scale_param", "elementwise", (64, 1), shape=[1]),
            _step("relu", "elementwise", (64, 1))]
    verdicts = [trivial(s, 1e-4, 1.0) for s in emulate(prog)]
    assert verdicts == [None, "zeros"] * 4          # SCALAR_VALUES: +w, -w for four sizes


def test_the_mean_of_a_scaled_softmax_is_constant_and_a_linear_is_not():
    soft = [_step("softmax", "softmax", (8, 256), dim=-1), _step("scale", "elementwise", (8, 256), scale_factor=0.1),
            _step("mean", "reduction", (8, 256), (8, 1), dim=-1, keepdim=True)]
    [s] = emulate(soft)
    assert s.v == pytest.approx((0.1 / 256,) * K)
    [lin] = emulate([_step("linear", "contraction", (64, 256), (64, 128), in_features=256, out_features=128, bias=True)])
    assert statistics.pstdev(lin.v) == pytest.approx(math.sqrt(1 / 3 + 1 / (3 * 256)), rel=0.02)
    assert trivial(lin, 1e-2, 2.0) is None


def test_a_gram_of_normalised_rows_has_its_row_max_on_the_diagonal():
    prog = [_step("layer_norm", "norm", (4, 128, 256), kind="seq"),
            _step("gram", "contraction", (4, 128, 256), (4, 128, 128), kind="seq"),
            _step("amax", "reduction", (4, 128, 128), (4, 128, 1), kind="seq", dim=-1, keepdim=True)]
    [s] = emulate(prog)
    assert min(s.v) == pytest.approx(256.0, rel=1e-3) and trivial(s, 1e-4, 2.0) == "constant"


@pytest.mark.parametrize("n, sd", [(63, 0.5), (63, 2.0), (63, 128.0), (255, 10.0), (1000, 3.0)])
def test_a_softmax_of_gaussian_scores_matches_direct_draws(n, sd):
    """Attention's softmax over n keys: its log-sum-exp (log n + var / 2 for small scores, near the largest score for
    large ones, where the lognormal mean is e^8,000 too large) and sum p^2 against 300 seeded draws (the median of the
    largest of 63 draws of sd 128 itself moves by ~5 % between seeds)."""
    rng = random.Random(7)
    lse, energy = [], []
    for _ in range(300):
        xs = [rng.gauss(0.0, sd) for _ in range(n)]
        top = max(xs)
        total = top + math.log(math.fsum(math.exp(x - top) for x in xs))
        lse.append(total)
        energy.append(math.fsum(math.exp(2 * (x - total)) for x in xs))
    got_lse, got_energy = softmax_of_scores(n, sd * sd)
    assert got_lse == pytest.approx(statistics.median(lse), rel=0.06)
    assert statistics.median(energy) * 0.9 <= got_energy <= statistics.median(energy) * 1.4
