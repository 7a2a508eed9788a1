"""Issue 30, fourteenth session (helper sim): the all-rows refit's structural pieces, each tested on what it must
hold whatever the fitted numbers are."""
from dataclasses import replace

import pytest

from kernelstrain import sim
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def _us(fit, module: str, variant: str, params: dict, shape: dict, dtype: str = "bf16", gpu: str = "H100") -> float:
    """sim.time_ms of one candidate under `fit` (sim.FIT swapped for the call; simulate's cache is not asked)."""
    m = REGISTRY[module]
    v = m.variant(variant)
    task = make_task(m, gpu, dtype, shape)
    p = {**v.defaults(), **params}
    kept = sim.FIT
    sim.FIT = fit
    try:
        return sim.time_ms(m, v, sim.built_launch(m, v, p, task), task, p) * 1e3
    finally:
        sim.FIT = kept


# a num_stages exponent as the all-rows refit of docs/sim_issue30_s13.md gave layernorm_triton (-0.0201), made
# larger so that a term read on the written depth shows far past float noise
STAGES_FIT = replace(sim.FIT, param_exponents={**sim.FIT.param_exponents,
                                               "layernorm_triton": {"num_stages": -0.2},
                                               "rmsnorm_triton": {"num_stages": -0.2}},
                     param_range={k: v for k, v in sim.FIT.param_range.items()
                                  if k not in ("layernorm_triton", "rmsnorm_triton")},
                     variant_param_range={k: v for k, v in sim.FIT.variant_param_range.items()
                                          if k not in ("layernorm_triton", "rmsnorm_triton")})


@pytest.mark.parametrize("module, variant, params, shape", [
    # one trip a program (BLOCK 1024 x unroll 4 over a 4,096-wide row): nothing loaded ahead
    ("layernorm_triton", "chunked_three_pass", {"BLOCK": 1024, "num_warps": 8, "loop_unroll": 4}, {"T": 64, "D": 4096}),
    # rows of 4,100 bf16 values are not 16-byte multiples: cp.async stages none of them
    ("rmsnorm_triton", "chunked_two_pass", {"BLOCK": 1024, "num_warps": 4}, {"T": 64, "D": 4100}),
])
def test_a_fitted_stages_term_reads_the_stages_the_loop_gets(module, variant, params, shape):
    """Where a streaming loop loads no trip ahead Triton builds the code of num_stages=1 whatever the depth asked
    (stream_stages.trips_ahead 0), so a fitted num_stages exponent gives 1 and 3 stages one time (sim.stepped_params);
    read on the written depth it timed the same kernel 1.5% apart in test_sim8_models' case under the s13 refit."""
    if variant not in {v.tag for v in REGISTRY[module].variants}:
        pytest.skip(f"{module} has no {variant}")
    one, three = (_us(STAGES_FIT, module, variant, dict(params, num_stages=s), shape) for s in (1, 3))
    assert three == one
    # ... and where the loop does stage trips ahead the term applies (the test is not vacuous)
    staged = dict(params, loop_unroll=1, BLOCK=512) if module == "layernorm_triton" else params
    wide = dict(shape, D=8192)
    a, b = (_us(STAGES_FIT, module, variant, dict(staged, num_stages=s), wide) for s in (1, 3))
    c, d = (_us(sim.FIT, module, variant, dict(staged, num_stages=s), wide) for s in (1, 3))
    # the term's 2 ** (-0.2 x log2 3) = 0.80 on the core; the launch overhead it leaves alone
    assert (b / a) / (d / c) < 0.9, (a, b, c, d)


def test_the_fit_records_read_the_same_stages():
    """calibration.fit.measured_records builds a row's steps as sim.time_ms reads them: a one-trip row's num_stages
    step is 0, whatever depth the row was timed at."""
    from kernelstrain.calibration import param_steps
    m = REGISTRY["layernorm_triton"]
    v = m.variant("chunked_three_pass")
    task = make_task(m, "H100", "bf16", {"T": 64, "D": 4096})
    p = {**v.defaults(), "BLOCK": 1024, "num_warps": 8, "loop_unroll": 4, "num_stages": 3}
    launch = sim.built_launch(m, v, p, task)
    assert launch.loop_stages == 1
    assert param_steps(sim.stepped_params(p, launch), v.defaults()).get("num_stages") == 0.0


def test_keep_modules_times_a_kept_module_as_the_old_fit_and_the_rest_as_the_new():
    """calibration.fit.keep_modules: a module the gate keeps is predicted as the old fit predicts it, row for row,
    although the new fit moved the impl exponents it shares; every other module as the new fit."""
    from kernelstrain.calibration import Fit
    from kernelstrain.calibration.fit import keep_modules, predict_ms
    from test_calibration import _synthetic
    old = Fit(launch_us={"nvidia": 2.0, "amd": 2.5}, extra_launch_us={"nvidia": 4.0, "amd": 5.0},
              exponents={"cuda": {"coverage": -0.3, "tile_quant": 0.15}, "triton": {"threads": 0.2}},
              module_exponents={"m1": {"coverage": 0.1, "traffic@v1": 0.2}},
              param_exponents={"m1": {"BLOCK": -0.25}, "m2": {"stages": 0.3}},
              ceilings={f"m{m}": {f"v{v}": round(0.5 + 0.4 * m + 0.7 * v, 2) for v in range(3)} for m in range(8)})
    new = replace(old, exponents={"cuda": {"coverage": -0.1, "latency": 0.4}, "triton": {"threads": -0.3}},
                  module_exponents={"m2": {"threads": 0.05}}, param_exponents={"m2": {"stages": -0.1}},
                  ceilings={f"m{m}": {f"v{v}": 1.0 + 0.1 * v for v in range(3)} for m in range(8)})
    got = keep_modules(new, old, {"m1": "cuda", "m2": "triton"})
    rows = _synthetic(old, n_per=4)
    assert {r["module"] for r in rows} >= {"m1", "m2", "m3"}
    for r in rows:
        want = predict_ms(old if r["module"] in ("m1", "m2") else new, r)
        assert predict_ms(got, r) == pytest.approx(want, rel=1e-12)
    # the kept modules did move under the new fit (the test is not vacuous)
    assert any(predict_ms(new, r) != pytest.approx(predict_ms(old, r), rel=1e-3) for r in rows if r["module"] == "m1")
    with pytest.raises(ValueError):
        keep_modules(replace(new, launch_us={"nvidia": 1.5, "amd": 2.0}), old, {"m1": "cuda"})


def test_the_gate_pins_tests_that_exist():
    """scripts/refit_gate.py's PINNED: every node id names a test function of the tree (a renamed test would leave a
    module ungated: pytest would report the id as not found, which the gate reads as no failure)."""
    import ast
    import re
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "scripts"))
    from refit_gate import PINNED
    from kernelstrain.ops import REGISTRY as reg
    assert set(PINNED) <= set(reg)
    for nodes in PINNED.values():
        for n in nodes:
            path, name = n.split("::")
            names = {f.name for f in ast.walk(ast.parse((root / path).read_text())) if isinstance(f, ast.FunctionDef)}
            assert re.sub(r"\[.*\]$", "", name) in names, n


def test_size_ranges_come_from_the_rows_the_global_fit_read():
    """refit_calibration.global_files: an all-rows global fit's size exponents were fitted on MODULE_FIT_FILES, so its
    size ranges must be read there (s13: read from FIT_FILES, 9 modules had variant exponents and no variant range)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from refit_calibration import global_files, kept_modules
    from kernelstrain.calibration.fit import FIT_FILES, MODULE_FIT_FILES
    assert global_files({"source": " + ".join(MODULE_FIT_FILES) + ": 11236 matched timed candidates"}) == MODULE_FIT_FILES
    assert global_files({"source": " + ".join(FIT_FILES) + ": 8196 matched timed candidates"}) == FIT_FILES
    assert kept_modules({"kept_modules": [{"module": "topk_cuda", "impl": "cuda"}]}) == {"topk_cuda"}
