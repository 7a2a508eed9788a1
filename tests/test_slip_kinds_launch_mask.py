"""The launch slips (nvcc: an argument short, the configuration left out) and the masking
slips (Triton: `other=` on a store, a load's mask dropped): where they are offered, what they
change, and their texts against tests/fixtures/slip_kinds_compiler.json (real nvcc 13.0 and
Triton 3.9 logs of rendered candidates, written by `scripts/slip_audit.py --kinds
launch_args,launch_config,store_other,load_unmasked --fixture FILE`, a choice of its cases)."""
import json
import re
from pathlib import Path

import pytest

from kernelstrain import slips
from kernelstrain.compilers import classify, first_error
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task
from kernelstrain.verify import comparable, judge

FIXTURE = Path(__file__).parent / "fixtures" / "slip_kinds_compiler.json"
CASES = json.loads(FIXTURE.read_text())
NEW = ("launch_args", "launch_config", "store_other", "load_unmasked")

LAUNCH = ('extern "C" __global__ void __launch_bounds__(256) add_kernel(const float* a, const float* b, float* c, int n) {\n'
          '    const int i = blockIdx.x * 256 + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}\n\n'
          'void add(const float* a, const float* b, float* c, int n, cudaStream_t s) {\n'
          '    add_kernel<<<dim3((n + 255) / 256, 1), 256, 0, s>>>(a, b + min(n, 4), c, n);\n}\n')
MASKED = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
          "def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):\n"
          "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
          "    a = tl.load(a_ptr + offs, mask=offs < n, other=0.0, cache_modifier='.cg')\n"
          "    b = tl.load(b_ptr + offs, mask=offs < n)\n"
          "    if EVEN:\n        tl.store(c_ptr + offs, a + b, mask=offs < n)\n"
          "    tl.store(c_ptr + offs, a + b, mask=offs < n)\n\n\n"
          "def add(a, b, c):\n    add_kernel[(1,)](a, b, c, c.numel(), BLOCK=1024, EVEN=False)\n")


def message(c):
    m = REGISTRY[c["module"]]
    task = make_task(m, c["gpu"], c["dtype"], c["shape"])
    code = m.render(m.variant(c["variant"]), c["params"], task)
    return slips.apply(code, m.impl, slips.encode(c["kind"], c["site"]), "", c["dtype"], c["shape"])[1]


def changed(code, broken):
    return [(a, b) for a, b in zip(code.split("\n"), broken.split("\n")) if a != b]


def test_launch_slips_edit_the_launch_only():
    assert slips.site_lines("launch_args", LAUNCH) == [6]
    broken, text = slips.apply(LAUNCH, "cuda", slips.encode("launch_args", 0))
    assert changed(LAUNCH, broken) == [(LAUNCH.split("\n")[6], "    add_kernel<<<dim3((n + 255) / 256, 1), 256, 0, s>>>"
                                        "(a, b + min(n, 4), c);")]     # the last argument, not one inside brackets
    assert text.splitlines()[0] == "candidate.cu(7): error: too few arguments in function call"
    assert text.splitlines()[2].index("^") == text.splitlines()[1].rindex(")")
    broken, text = slips.apply(LAUNCH, "cuda", slips.encode("launch_config", 5))
    assert changed(LAUNCH, broken)[0][1] == "    add_kernel(a, b + min(n, 4), c, n);"
    assert text.splitlines()[:3] == ["candidate.cu(7): error: a __global__ function call must be configured",
                                     "      add_kernel(a, b + min(n, 4), c, n);", "      ^"]
    assert slips.apply(LAUNCH, "cuda", slips.encode("launch_args", 0), hip_arch="gfx942") is None  # nvcc's words


@pytest.mark.parametrize("code", [
    LAUNCH.replace("int n) {", "int n = 0) {"),                        # a default argument: one short compiles
    LAUNCH.replace('extern "C" ', "template <int B> "),                  # a template: another error
    LAUNCH.replace("c, n);", "c,\n        n);"),                         # a launch over two lines
    LAUNCH.replace("(a, b + min(n, 4), c, n)", "()"),                    # no argument to drop
])
def test_no_launch_site_where_the_error_could_differ(code):
    assert slips.site_lines("launch_args", code) == slips.site_lines("launch_config", code) == []


def test_masking_slips_only_where_they_certainly_run():
    # the store under `if EVEN:` (a constexpr may drop it) is no site; the load without other= no load site
    assert slips.site_lines("store_other", MASKED) == [11]
    assert slips.site_lines("load_unmasked", MASKED) == [7]
    broken, text = slips.apply(MASKED, "triton", slips.encode("store_other", 3))
    assert changed(MASKED, broken) == [(MASKED.split("\n")[11], "    tl.store(c_ptr + offs, a + b, mask=offs < n, other=0.0)")]
    assert text.splitlines()[0] == "triton.compiler.errors.CompilationError: at 7:4:"
    assert text.splitlines()[-1] == "store() got an unexpected keyword argument 'other'"
    broken, text = slips.apply(MASKED, "triton", slips.encode("load_unmasked", 0))
    assert changed(MASKED, broken)[0][1] == "    a = tl.load(a_ptr + offs, other=0.0, cache_modifier='.cg')"
    assert first_error(text) == "CompilationError: at 3:8: `other` cannot be provided without `mask`"
    assert slips.apply(MASKED, "cuda", slips.encode("store_other", 0)) is None


def test_fixture_covers_each_kind():
    assert {c["kind"] for c in CASES} == set(NEW)
    assert all(slips.failure(k) == "type" for k in NEW)     # not typos: they count against the typo share


@pytest.mark.parametrize("c", CASES, ids=lambda c: f"{c['kind']}:{c['module']}:{c['variant']}:{c['gpu']}")
def test_text_is_the_compilers(c):
    text = message(c)
    assert comparable(first_error(text)) == comparable(c["first_error"])
    assert text.strip() == c["text"]
    assert classify(c["text"]) == classify(text) == slips.failure(c["kind"])    # qa and verify class it as recorded


@pytest.mark.parametrize("c", CASES, ids=lambda c: f"{c['kind']}:{c['module']}:{c['gpu']}")
def test_verify_wants_the_compilers_first_line_of_the_new_kinds(c):
    compiled = dict(compiled=False, first_error=c["first_error"], smem=None, smem_bytes=0)
    compiled["class"] = classify(c["text"])
    record = dict(status="compile_error", module=c["module"], tag=c["variant"], gpu=c["gpu"],
                  failure=slips.failure(c["kind"]), error=message(c))
    assert judge({**record, **compiled}) == []
    elsewhere = re.sub(r"\d+", lambda n: str(int(n.group()) + 1), c["first_error"], count=1)    # a line further on
    assert "first error" in judge({**record, **compiled, "first_error": elsewhere})[0]
