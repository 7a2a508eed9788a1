"""Session 12 (helper sim, issue 30): the tile-geometry cross terms of the fit (calibration.cross_steps,
fit.add_cross): a term in the product of two tile dimensions' steps, per rung, held within the steps its rows timed."""
import itertools
import math

import pytest

from kernelstrain.calibration import CROSS, FIT, TERMS, Fit
from kernelstrain.calibration.fit import add_cross, measured_records, predict_ms

TILE = ("BLOCK_M", "BLOCK_K")


def _rows(truth: Fit) -> list:
    """Module m rung v timed over BLOCK_M x BLOCK_K steps -1..1 in three episodes; module n beside it."""
    rows = []
    for module, e in itertools.product(("m", "n"), range(3)):
        for bm, bk in itertools.product((-1.0, 0.0, 1.0), repeat=2):
            r = {"module": module, "impl": "triton", "variant": "v", "episode": f"{module}{e}",
                 "steps": {"BLOCK_M": bm, "BLOCK_K": bk}, "terms": {t: 1.0 for t in TERMS}, "launches": 1,
                 "core_ms": 0.1 * (1 + e), "work_ms": 0.1 * (1 + e)}
            r["measured_ms"] = predict_ms(truth, r)
            rows.append(r)
    return rows


def test_add_cross_finds_the_interaction_and_keeps_the_rungs_level_and_every_other_module():
    """BLOCK_K's effect turns with BLOCK_M's (the H100's grouped_swizzle: BK 64 faster on 128-row tiles, slower on
    64-row ones): the log-linear terms cannot hold it, the cross term can; the rung's mean level and module n stay."""
    truth = Fit(param_exponents={"m": {"BLOCK_M*BLOCK_K@v": -0.6}})
    base = Fit()
    rows = _rows(truth)
    got = add_cross(rows, base, ["m"], k_param=0.1, k_episode=1.0)
    assert got.param_exponents["m"]["BLOCK_M*BLOCK_K@v"] == pytest.approx(-0.6, abs=0.05)
    assert "n" not in got.param_exponents and got.ceilings.get("n") == base.ceilings.get("n")
    mine = [r for r in rows if r["module"] == "m"]
    level = [sum(math.log(predict_ms(f, r)) for r in mine) for f in (base, got)]
    assert level[1] == pytest.approx(level[0], abs=1e-3 * len(mine))
    err = [sum(math.log(predict_ms(f, r) / r["measured_ms"]) ** 2 for r in mine) for f in (base, got)]
    assert err[1] < 0.05 * err[0]


def test_add_cross_refuses_a_fit_that_has_cross_terms_for_the_module():
    with pytest.raises(ValueError, match="cross terms"):
        add_cross(_rows(Fit()), Fit(param_exponents={"m": {"BLOCK_M*BLOCK_K@v": 0.1}}), ["m"])


def test_a_cross_term_holds_at_the_edge_of_the_steps_its_rung_timed():
    f = Fit(param_exponents={"m": {"BLOCK_M*BLOCK_K@v": 0.5}},
            variant_param_range={"m": {"v": {"BLOCK_M": [-1.0, 0.0], "BLOCK_K": [0.0, 1.0]}}})
    def factor(bm, bk):
        return f.core_factor("m", "triton", "v", {}, {"BLOCK_M": bm, "BLOCK_K": bk})
    assert factor(-1.0, 1.0) == pytest.approx(2 ** -0.5)
    assert factor(-3.0, 2.0) == factor(-1.0, 1.0)                 # past both edges: the edges' product
    assert factor(1.0, 1.0) == factor(0.0, 1.0) == 1.0           # BLOCK_M held at 0: no term
    assert f.core_factor("m", "triton", "w", {}, {"BLOCK_M": -1.0, "BLOCK_K": 1.0}) == 1.0   # another rung: none


def _pairs_right(rows: list, f: Fit) -> int:
    return sum(1 for a, b in itertools.combinations(rows, 2)
               if (predict_ms(f, a) - predict_ms(f, b)) * (a["measured_ms"] - b["measured_ms"]) > 0)


def test_the_shipped_cross_terms_order_the_held_out_4096_grid_of_grouped_swizzle_better():
    """Device job sim j3 (H100, 17:06 UTC 2026-12-07, held out: no fit list), grouped_swizzle at 4096^3 over
    BLOCK_M x BLOCK_N x BLOCK_K 64/128 x 64/128 x 32/64: within one rung the ceiling cancels, so the pairs the fit
    orders right with and without the rung's cross terms are the terms' doing (17 of 28 without, 20 with)."""
    assert any(CROSS in p for p in FIT.param_exponents["gemm_fp16_triton"])
    rows = [r for r in measured_records(("h100_sim_s12_j3.json",), {"gemm_fp16_triton"})
            if r["variant"] == "grouped_swizzle"]
    plain = Fit(**{**FIT.to_json(), "param_exponents": {
        m: {p: x for p, x in v.items() if CROSS not in p} for m, v in FIT.param_exponents.items()}})
    assert len(rows) == 8 and _pairs_right(rows, FIT) > _pairs_right(rows, plain)


def test_the_register_staged_mma_sync_loop_under_a_wave_is_a_chain_of_round_trips():
    """gemm_fp16_cuda mma_sync at M=128 N=4096 K=14336 (sim j2 of the eleventh session, H100; 64-128 programs, 224-448
    K steps each, no ring): 214-801 us, ordered by the chain of steps more than by the tiles' FLOPs; the roofline
    terms alone ordered the 8 tiles at Spearman 0.40."""
    from kernelstrain.calibration.metrics import spearman
    rows = [r for r in measured_records(("h100_sim_s11_j2.json",), {"gemm_fp16_cuda"}) if r["variant"] == "mma_sync"]
    assert len(rows) == 8
    assert spearman([r["measured_ms"] for r in rows], [predict_ms(FIT, r) for r in rows]) > 0.6
