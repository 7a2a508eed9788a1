"""The missing-semicolon slip (kernelstrain/slips/nvcc_syntax.py): where it is offered, and its
text against tests/fixtures/semicolon_compiler.json (real nvcc 13.0 logs of rendered candidates,
written by `scripts/slip_audit.py --kinds semicolon --per-module 2 --compilers nvcc --fixture FILE`)."""
import json
from pathlib import Path

import pytest

from kernelstrain import slips
from kernelstrain.compilers import classify
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task

CASES = json.loads((Path(__file__).parent / "fixtures" / "semicolon_compiler.json").read_text())
BODY = "__global__ void k(float* y, int n) {{\n    const int row = blockIdx.x;\n{next}\n    y[0] = 1.f;\n}}\n"


@pytest.mark.parametrize("next_line, site", [
    ("    if (row < n) y[row] = 0.f;", True),          # skipped whole by EDG's recovery: one error
    ("    __syncthreads();", True),
    ("    float acc = 0.f;", False),                     # a declaration: its name undefined further on
    ("    extern __shared__ uint8_t smem_raw[];", False),             # so are shared arrays (kernelinfer 12727:
    ("    __shared__ __align__(8) unsigned long long full[4];", False),  # nvcc's 2nd error, "smem_raw" undefined)
    ("    for (int i = 0; i < n; ++i) {", False),        # a block: parsing restarts past it, with a warning
    ("#pragma unroll", False),
    ("    (void)row;", False),                           # could continue the expression
    ("    return;", False),                              # skipped: a function without its return
    ("    if (row < n) y[row] = 0.f;\n    else y[0] = 0.f;", False),   # skipped: an orphan else
])
def test_sites_are_where_nvcc_reports_one_error(next_line, site):
    code = BODY.format(next=next_line)
    assert (slips.site_lines("semicolon", code) == [1]) == site


def test_offered_for_nvcc_only():
    code = BODY.format(next="    __syncthreads();")
    assert slips.apply(code, "cuda", slips.encode("semicolon", 0), hip_arch="gfx942") is None
    assert slips.failure("semicolon") == "syntax"


@pytest.mark.parametrize("c", CASES, ids=lambda c: f"{c['module']}:{c['variant']}:{c['gpu']}")
def test_text_is_nvccs(c):
    m = REGISTRY[c["module"]]
    task = make_task(m, c["gpu"], c["dtype"], c["shape"])
    code = m.render(m.variant(c["variant"]), c["params"], task)
    text = slips.apply(code, m.impl, slips.encode("semicolon", c["site"]), "", c["dtype"], c["shape"])[1]
    assert text.strip() == c["text"] and classify(text) == "syntax"
