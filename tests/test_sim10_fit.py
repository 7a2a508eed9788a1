"""The fit holds what it measured and no more (issue 30, tenth session): each parameter term held at the edge of the
steps its rows span (Fit.param_range / variant_param_range), and a row at its floor fitted as a one-sided bound
(fit.bounded)."""
import math

import pytest

from kernelstrain.calibration import FIT, FIT_FORMAT, TERMS, Fit, fit_of, term_params
from kernelstrain.calibration.fit import (BOUND_AT, bounded, fit_terms, param_ranges, predict_ms, refit_modules,
                                          variant_param_ranges)
from kernelstrain.ops import REGISTRY

HELD = Fit(param_exponents={"m": {"num_warps": -0.2, "num_warps@v": 0.1, "num_warps^2": 0.05}},
           param_range={"m": {"num_warps": [-1.0, 1.0]}}, variant_param_range={"m": {"v": {"num_warps": [0.0, 1.0]}}})


def _factor(f: Fit, step: float) -> float:
    return f.core_factor("m", "cuda", "v", {}, {"num_warps": step})


def test_a_parameter_term_holds_its_value_past_the_steps_its_rows_span():
    """The module's terms (num_warps, its bend: calibration.CURVED) hold at its rows' edges (-1, 1), the variant's
    departure (num_warps@v) at its own
    rows' (0, 1): two doublings past the top is the top's factor, a halving under the variant's rows keeps the
    module's trend alone."""
    assert _factor(HELD, 1.0) == pytest.approx(2 ** (-0.2 + 0.1 + 0.05))
    assert _factor(HELD, 3.0) == _factor(HELD, 1.0)
    assert _factor(HELD, -1.0) == pytest.approx(2 ** (0.2 + 0.05))          # num_warps@v held at 0
    assert _factor(HELD, -4.0) == _factor(HELD, -1.0)
    plain = Fit(param_exponents=HELD.param_exponents)                           # no ranges: the power law as fitted
    assert _factor(plain, 3.0) == pytest.approx(2 ** (3 * (-0.2 + 0.1) + 0.05 * 4))


def _rows(truth: Fit) -> list:
    """Variant v timed at p steps -2..1, variant w at 0..1 only, three episodes each."""
    rows = []
    for v, steps in (("v", (-2.0, -1.0, 0.0, 1.0)), ("w", (0.0, 1.0))):
        for e in range(3):
            for x in steps:
                r = {"module": "m", "impl": "cuda", "variant": v, "episode": f"{v}{e}", "steps": {"p": x, "q": 0.0},
                     "terms": {t: 1.0 for t in TERMS}, "launches": 1, "core_ms": 0.05 * (1 + e), "work_ms": 0.05 * (1 + e)}
                r["measured_ms"] = predict_ms(truth, r)
                rows.append(r)
    return rows


def test_the_fit_records_the_steps_of_its_rows_and_predicts_them_as_without_ranges():
    truth = Fit(launch_us={"nvidia": 2.0, "amd": 2.5}, extra_launch_us={"nvidia": 2.5, "amd": 3.0},
                param_exponents={"m": {"p": -0.3, "p@w": 0.2}})
    rows = _rows(truth)
    got, _ = fit_terms(rows, 2.0, 2.5, k_episode=None, size=False)
    assert got.param_range == {"m": {"p": [-2.0, 1.0]}}                  # q never moves: no term, no range
    assert got.variant_param_range == {"m": {"v": {"p": [-2.0, 1.0]}, "w": {"p": [0.0, 1.0]}}}
    plain = Fit(**{**got.to_json(), "param_range": {}, "variant_param_range": {}})
    for r in rows:
        assert predict_ms(got, r) == predict_ms(plain, r)
    # w at p = -2 (a value only v was timed at): the module's term, w's departure held at its rows' edge
    far = dict(rows[-1], steps={"p": -2.0})
    assert predict_ms(got, far) != predict_ms(plain, far)


def test_ranges_round_outward_and_name_only_parameters_with_a_term():
    rows = [{"module": "m", "variant": "v", "steps": {"p": x, "q": 1.0}} for x in (-0.41503749927884376, 0.7369655941662062)]
    assert param_ranges(rows, {"m": {"p^2@v": 0.1}}) == {"m": {"p": [-0.4151, 0.737]}}
    assert variant_param_ranges(rows, {"m": {"p": 0.1}}) == {"m": {"v": {"p": [-0.4151, 0.737]}}}
    assert param_ranges(rows, {"n": {"p": 0.1}}) == {}


def test_a_module_refit_keeps_the_parameter_ranges_with_the_parameter_exponents():
    base = Fit(launch_us={"nvidia": 2.0, "amd": 2.5}, extra_launch_us={"nvidia": 2.5, "amd": 3.0},
               param_exponents={"m": {"p": -0.3}}, param_range={"m": {"p": [-1.0, 0.0]}},
               variant_param_range={"m": {"v": {"p": [-1.0, 0.0]}}})
    got = refit_modules(_rows(base), base, ["m"], k_episode=None, size=False)
    assert got.param_range == base.param_range and got.variant_param_range == base.variant_param_range


def test_the_fit_file_needs_its_parameter_ranges():
    data = {"format": FIT_FORMAT, "variant_size_range_ms": {}, "variant_param_range": {"m": {"v": {"p": [0.0, 1.0]}}}}
    assert fit_of(data).variant_param_range == {"m": {"v": {"p": [0.0, 1.0]}}}
    with pytest.raises(ValueError, match="variant_param_range"):
        fit_of({k: v for k, v in data.items() if k != "variant_param_range"})
    with pytest.raises(ValueError, match="format"):
        fit_of(dict(data, format="kernelstrain/calibration-fit@4"))


def test_the_shipped_fit_gives_every_parameter_term_a_range():
    for m, exps in FIT.param_exponents.items():
        named = {p for k in exps for p in term_params(k)}       # a cross term's two parameters each
        assert named <= set(FIT.param_range[m]), m
        for v, span in FIT.variant_param_range[m].items():
            for p, (lo, hi) in span.items():
                assert FIT.param_range[m][p][0] <= lo <= hi <= FIT.param_range[m][p][1], (m, v, p)


def test_fp8_persistent_rows_past_eight_programs_an_sm_keeps_the_factor_of_eight():
    """roomT (2026-12-07): fp8_quant_triton persistent_rows' programs_per_sm exponent, fitted on 1-4 programs an SM
    (a stored device row has 8), gave 16 programs x0.93 a doubling at every shape, T=512 included, where 8 and 16
    launch the same 512 programs; the H100 ran 16 level with 8 (11.6 / 11.6 us). Past the stored rows' 8 the launch
    model alone prices it now."""
    m = REGISTRY["fp8_quant_triton"]
    assert m.variant("persistent_rows").defaults()["programs_per_sm"] == 4
    assert FIT.variant_param_range[m.name]["persistent_rows"]["programs_per_sm"] == [-2.0, 1.0]
    at = {x: FIT.param_log2(m.name, m.impl, "persistent_rows", {"programs_per_sm": x}) for x in (-1.0, 0.0, 1.0, 2.0)}
    assert at[2.0] == at[1.0] != at[0.0] != at[-1.0]


def test_a_row_at_its_floor_bounds_the_core_from_one_side():
    """y: log(measured / core); a row whose floor is at least BOUND_AT of its measured time is its own target while
    the prediction stays under max(measured, floor), and is pulled back to the measured time above it."""
    y = math.log(2.0)
    assert bounded(y, 0.1, y) == 0.1                                    # the floor at the measured time
    assert bounded(y, y + 0.2, y + 0.3) == y + 0.2                      # under a floor above the measured time
    assert bounded(y, y + 0.4, y + 0.3) == y                            # over it: pulled back
    assert bounded(y, 0.1, y + math.log(BOUND_AT) + 0.01) == 0.1        # a floor just past BOUND_AT of it
    assert bounded(y, 0.1, y + math.log(BOUND_AT) - 0.01) == y          # under: two-sided
    assert bounded(y, 0.1, None) == y


def _floor_rows() -> list:
    """A rung whose core time follows its roofline exactly (factor 1) at every size, its three smallest shapes of
    five at a floor 2x their core (a chain of round trips): their measured time is the floor's."""
    rows = []
    for e in range(3):
        for i, core in enumerate((0.004, 0.008, 0.016, 0.064, 0.256)):
            r = {"module": "m", "impl": "cuda", "variant": "v", "episode": f"e{e}", "steps": {},
                 "terms": {t: 1.0 for t in TERMS}, "launches": 1, "core_ms": core, "work_ms": core,
                 "cta_ms": 2 * core if i < 3 else 0.0}
            r["measured_ms"] = predict_ms(Fit(launch_us={"nvidia": 2.0, "amd": 2.5},
                                              extra_launch_us={"nvidia": 2.5, "amd": 3.0}), r)
            rows.append(r)
    return rows


def test_floor_bound_rows_do_not_bend_the_size_term():
    """Fitted two-sided, the floor-bound small shapes read as a slow core at small sizes (a negative size exponent,
    gemm_fp16_triton's -0.66 a doubling); as bounds they leave the size term at what the core rows say (none)."""
    rows = _floor_rows()
    two_sided, _ = fit_terms(rows, 2.0, 2.5, k_episode=None, bounds=False)
    one_sided, _ = fit_terms(rows, 2.0, 2.5, k_episode=None)
    assert two_sided.size_exponents["m"]["v"] < -0.1
    assert abs(one_sided.size_exponents.get("m", {}).get("v", 0.0)) < 0.02
    for r in rows:
        assert predict_ms(one_sided, r) == pytest.approx(r["measured_ms"], rel=0.03)
