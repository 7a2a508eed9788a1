"""The partial refits (calibration.fit.refit_variants / refit_modules): what they move and what they keep."""
from dataclasses import replace

import pytest

from kernelstrain.calibration import Fit, read_data
from kernelstrain.calibration.fit import MODULE_FIELDS, predict_ms, refit_modules, refit_variants
from test_calibration import _synthetic

TRUTH = Fit(launch_us={"nvidia": 2.0, "amd": 2.5}, extra_launch_us={"nvidia": 4.0, "amd": 5.0},
            exponents={"cuda": {"coverage": -0.3}, "triton": {"threads": 0.2}},
            param_exponents={"m1": {"BLOCK": -0.25}},
            ceilings={f"m{m}": {f"v{v}": round(0.5 + 0.4 * m + 0.7 * v, 2) for v in range(3)} for m in range(8)})


def test_refit_variants_finds_a_moved_rung_and_moves_nothing_else():
    """Rows timed with a rung 1.3x slower than the base fit has it (its launch model changed): the rung's ceiling
    comes back near 1.3x base's, every other term of base stays as it was."""
    truth = replace(TRUTH, ceilings={**TRUTH.ceilings, "m1": {**TRUTH.ceilings["m1"], "v1": 1.3 * 1.6}})
    rows = _synthetic(truth, n_per=18)
    got = refit_variants(rows, TRUTH, {"m1": ["v1"]}, k_variant=0.0)
    assert got.ceiling("m1", "v1") == pytest.approx(1.3 * 1.6, rel=0.02)
    assert {k: v for k, v in got.to_json().items() if k != "ceilings"} == \
        {k: v for k, v in TRUTH.to_json().items() if k != "ceilings"}
    assert {m: v for m, v in got.ceilings.items() if m != "m1"} == {m: v for m, v in TRUTH.ceilings.items() if m != "m1"}
    assert {v: c for v, c in got.ceilings["m1"].items() if v != "v1"} == \
        {v: c for v, c in TRUTH.ceilings["m1"].items() if v != "v1"}


def test_refit_modules_keeps_the_shared_terms_and_every_other_module():
    """A module refit on the base's shared terms: the refitted module's ceilings answer to its rows (its parameter
    exponents held at base's), the launch floor, the impl exponents and the other modules' terms byte for byte."""
    rows = _synthetic(TRUTH, n_per=18)
    base = replace(TRUTH, ceilings={**TRUTH.ceilings, "m1": {v: 1.0 for v in TRUTH.ceilings["m1"]}})
    got = refit_modules(rows, base, ["m1"], k_module=0.0, k_variant=0.0, k_episode=None, iters=30)
    for v, c in TRUTH.ceilings["m1"].items():
        assert got.ceiling("m1", v) == pytest.approx(c, rel=0.05)
    assert got.param_exponents == base.param_exponents
    assert got.exponents == base.exponents and got.launch_us == base.launch_us
    for name in MODULE_FIELDS:
        assert {m: v for m, v in getattr(got, name).items() if m != "m1"} == \
            {m: v for m, v in getattr(base, name).items() if m != "m1"}
    for r in rows[:20]:
        if r["module"] != "m1":
            assert predict_ms(got, r) == predict_ms(base, r)


def test_the_shipped_fit_records_its_partial_refits():
    """h200_fit.json names the rungs whose ceilings a partial refit moved (and the modules refitted), with their rows'
    figures: out of sample, the level within 2% of the measured and no fewer rows within 0.8-1.25x than the fit it
    replaced had on the same rows."""
    entries = read_data("h200_fit.json")["module_refits"]
    rungs = [e for e in entries if e.get("rungs")]
    assert rungs and all(set(e["rungs"]) == set(e["modules"]) for e in rungs)
    for e in entries:
        fig = e["figures"]
        assert fig["out_of_sample"]["n"] == fig["replaced"]["n"] > 200
        assert abs(fig["out_of_sample"]["geomean"] - 1) <= 0.02
        assert fig["out_of_sample"]["within_0.8_1.25"] >= fig["replaced"]["within_0.8_1.25"]
