"""The half_accumulator bug of fused candidates (fused/precision.py): bf16 rounding as torch does
it, the emulated accumulation against torch's own bf16 arithmetic, and the bug offered only at the
parameters where the emulation says the output breaks."""
from __future__ import annotations

import random

import pytest

from kernelstrain.fused.module import fused_module, module_name
from kernelstrain.fused.precision import bf16, half_sum, row_breaks
from kernelstrain.tasks import make_task


def test_bf16_rounds_as_torch_does():
    torch = pytest.importorskip("torch", reason="torch (CPU) checks the rounding")
    rng = random.Random(3)
    xs = [rng.gauss(0.0, 10.0 ** rng.randint(-3, 3)) for _ in range(2000)] + [1.0 + 2.0 ** -9, 1.0 + 3.0 * 2.0 ** -9]
    want = torch.tensor(xs, dtype=torch.float64).to(torch.float32).to(torch.bfloat16).to(torch.float64).tolist()
    assert [bf16(x) for x in xs] == want


def test_half_sum_is_torch_bf16_accumulation_lane_by_lane():
    torch = pytest.importorskip("torch", reason="torch (CPU) runs the bf16 accumulation")
    rng = random.Random(5)
    terms = [rng.gauss(0.4, 1.0) for _ in range(1000)]
    lanes = 32
    t = torch.tensor(terms, dtype=torch.float32)
    acc = torch.zeros(lanes, dtype=torch.bfloat16)
    for i in range(0, len(terms), lanes):       # lane l adds terms l, l + 32, ... (a strided loop)
        chunk = torch.zeros(lanes)
        chunk[:len(terms[i:i + lanes])] = t[i:i + lanes]
        acc = (acc.float() + chunk).to(torch.bfloat16)
    want = float(acc.double().sum())
    assert half_sum(terms, lanes, "float") == pytest.approx(want, rel=1e-6)
    assert abs(half_sum(terms, lanes, "float") - sum(terms)) > 1e-3      # bf16 drifts from the exact sum


def _row_kernel_modules():
    for index in range(40):
        for impl in ("cuda", "triton"):
            m = fused_module(module_name(0, index, impl))
            yield m


def test_half_accumulator_is_offered_only_for_bf16_and_only_at_params_that_break():
    offered = broke_only_somewhere = 0
    for m in _row_kernel_modules():
        for v in m.variants:
            if "half_accumulator" not in v.bugs:
                continue
            assert m.view.dtype == "bf16"
            per_value = [("half_accumulator" in v.bugs_for("bf16", {**v.defaults(), p.name: x}))
                         for p in v.params for x in p.values]
            if v.bugs_for("bf16", None):
                offered += 1
                broke_only_somewhere += not all(per_value)
            else:
                # the rung-level answer is the most-terms parameters': nothing breaks at the defaults either
                assert "half_accumulator" not in v.bugs_for("bf16", v.defaults())
    assert offered >= 3 and broke_only_somewhere >= 1


def test_a_long_sum_breaks_with_few_lanes_and_a_short_one_does_not():
    steps = [{"op": "sum", "role": "reduction", "params": {"dim": -1, "keepdim": True},
              "in": {"shape": [256, 4096]}, "out": {"shape": [256, 1]}}]
    mags = [(0.0, 1.0)]
    assert row_breaks(steps, mags, 0, 4096, 32, "float", "t")
    short = [{**steps[0], "in": {"shape": [256, 64]}}]
    assert not row_breaks(short, mags, 0, 64, 64, "float", "t")


def test_the_bug_renders_a_bf16_accumulator():
    m = fused_module(module_name(0, 7, "cuda"))
    task = make_task(m, "H200", m.dtypes[0], m.shapes[0])
    v = next(v for v in m.variants if v.bugs_for("bf16") and "half_accumulator" in v.bugs_for("bf16"))
    code = m.render(v, v.defaults(), task, "half_accumulator")
    assert "scalar_t acc_h = __float2bfloat16(0.f);" in code and code != m.render(v, v.defaults(), task, None)
    t = fused_module(module_name(0, 254, "triton"))
    g = next(v for v in t.variants if v.tag == "gemm_epilogue")
    code = t.render(g, g.defaults(), make_task(t, "H200", t.dtypes[0], t.shapes[0]), "half_accumulator")
    assert "dtype=tl.bfloat16)" in code and "tl.dot(a, b).to(tl.bfloat16)" in code
