"""Engine invariants, checked on seeded random episodes (Hypothesis) over the registry."""
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kernelstrain.engine import Episode, draw_steps
from kernelstrain.mutations import break_identifier
from kernelstrain.ops import REGISTRY
from kernelstrain.ops.base import BUGS
from kernelstrain.plan import seeded_rng
from kernelstrain.tasks import make_task

MODULES = sorted(REGISTRY)


@st.composite
def episodes(draw):
    m = REGISTRY[draw(st.sampled_from(MODULES))]
    gpu = draw(st.sampled_from(["A100", "H100", "RTX4090", "MI300X"]))
    dtypes = [d for d in m.dtypes if m.supports(make_task(m, gpu if gpu in ("A100",) else gpu, d, m.shapes[0]).gpu, d)] \
        if m.vendors != ("nvidia",) or gpu != "MI300X" else []
    if not dtypes:
        gpu, dtypes = "H100", [d for d in m.dtypes if m.supports(make_task(m, "H100", d, m.shapes[0]).gpu, d)]
    task = make_task(m, gpu, draw(st.sampled_from(dtypes)), draw(st.sampled_from(m.shapes)))
    rng = seeded_rng("test", draw(st.integers(0, 10**6)))
    # high failure rates so every path is exercised
    ep = Episode(m, task, rng, draw_steps(rng, 8, 60, 24.5), 0.15, 0.15)
    return m, task, ep, ep.run()


@settings(max_examples=60, deadline=None)
@given(episodes())
def test_best_is_running_minimum_and_failures_never_kept(case):
    m, task, ep, steps = case
    best = ep.baseline_ms
    for k, s in enumerate(steps, 1):
        assert s["step"] == k
        assert (s["time_ms"] is None) == (s["status"] != "ok")
        assert (s["error"] is None) == (s["status"] == "ok")
        if s["status"] != "ok" or s["kind"] == "rebench":
            assert not s["kept"]
        else:
            assert s["kept"] == (s["time_ms"] < best)
        if s["kept"]:
            best = s["time_ms"]
        assert s["best_ms"] == best
        assert s["elapsed_s"] >= (steps[k - 2]["elapsed_s"] if k > 1 else 0)


@settings(max_examples=40, deadline=None)
@given(episodes())
def test_failures_are_real_in_the_code(case):
    """A wrong result's code differs from the clean render; a typo's code lacks the identifier."""
    m, task, ep, steps = case
    for s in steps:
        if s["status"] == "compile_error" and "is undefined" in (s["error"] or ""):
            name = re.search(r'identifier "(\w+)" is undefined', s["error"]).group(1)
            assert not re.search(rf"\b(int|float|unsigned|size_t|int64_t|bool)\s+{name}\s*=", s["code"])
        if s["status"] == "compile_error" and "NameError" in (s["error"] or ""):
            name = re.search(r"NameError\('(\w+) is not defined'\)", s["error"]).group(1)
            kernel = re.search(r"at \d+:\d+:\n(def \w+)", s["error"]).group(1)
            body = s["code"].split(kernel, 1)[1].split("\ndef ", 1)[0]
            assert not re.search(rf"^\s+{name}\s*=[^=]", body, flags=re.M)
        if s["status"] == "wrong_result":
            v = m.variant(s["tag"])
            assert s["code"] != m.render(v, s["params"], task), "bug not visible in code"


def test_step_count_distribution_hits_the_mean():
    rng = seeded_rng("steps")
    xs = [draw_steps(rng, 8, 80, 24.5) for _ in range(20000)]
    assert min(xs) >= 8 and max(xs) <= 80
    assert abs(sum(xs) / len(xs) - 24.5) < 0.4


def test_break_identifier_makes_an_undefined_name():
    src = "__global__ void k(float* y) {\n    const int row = blockIdx.x;\n    y[row] = 0.f;\n}\n"
    code, err = break_identifier(src, "cuda")
    assert "row_idx = blockIdx.x" in code and 'identifier "row" is undefined' in err
    py = "@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n    tl.store(x_ptr + offs, 0)\n"
    code, err = break_identifier(py, "triton")
    assert "offs_idx = tl.arange" in code and "NameError('offs is not defined')" in err


def test_every_declared_bug_is_known():
    for m in REGISTRY.values():
        for v in m.variants:
            assert set(v.bugs) <= set(BUGS), (m.name, v.tag)
