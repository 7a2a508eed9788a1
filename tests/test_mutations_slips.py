"""The slip catalogue (kernelstrain/slips): each kind breaks the line it names, in the real
compiler's words; the engine writes the profile's kinds and repairs each; verify checks the
first error line of a type / constexpr slip."""
import math
import re
import shutil

import pytest

from kernelstrain import slips
from kernelstrain.compilers import compile_cuda, compile_triton, first_error, normalized
from kernelstrain.engine import STREAMS, Episode
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import seeded_rng
from kernelstrain.profiles import Search, load_profile
from kernelstrain.tasks import make_task
from kernelstrain.verify import judge

try:
    import triton  # noqa: F401
    HAVE_TRITON = True
except ImportError:
    HAVE_TRITON = False
HAVE_NVCC = shutil.which("nvcc") is not None

# kind -> (module, variant, the first line of the message, as a pattern)
CASES = {
    "const_cast": ("rmsnorm_cuda", "register_cached",
                   r'candidate\.cu\(\d+\): error: reinterpret_cast cannot cast away const or other type qualifiers'),
    "shared_vla": ("rmsnorm_cuda", "register_cached",
                   r'candidate\.cu\(\d+\): error: a variable length array cannot have static storage duration'),
    "shfl_mask": ("rmsnorm_cuda", "register_cached",
                  r'candidate\.cu\(\d+\): error: no instance of overloaded function "__shfl_xor_sync" matches the argument list'),
    "cast_pointer": ("rmsnorm_cuda", "register_cached",
                     r'candidate\.cu\(\d+\): error: cast to type "const \w+" is not allowed'),
    "arange_runtime": ("rmsnorm_triton", "persistent", r"triton\.compiler\.errors\.CompilationError: at \d+:\d+:"),
    "dot_dtype": ("swa_decode_triton", "gqa_dot", r"triton\.compiler\.errors\.CompilationError: at \d+:\d+:"),
}


def render(module, tag, gpu="A100"):
    m = REGISTRY[module]
    v = m.variant(tag)
    task = make_task(m, gpu, "fp16", m.shapes[0])
    return m, v, task, m.render(v, v.defaults(), task)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_kind_breaks_one_line_of_a_site_and_says_where(kind):
    module, tag, head = CASES[kind]
    m, _, _, code = render(module, tag)
    sites = slips.site_lines(kind, code)
    assert sites, f"{kind} finds no site in {module}/{tag}"
    broken, message = slips.apply(code, m.impl, slips.encode(kind, 0), dtype="fp16")
    before, after = code.split("\n"), broken.split("\n")
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert len(before) == len(after) and changed == [sites[0]]
    assert re.match(head, message.splitlines()[0]), message.splitlines()[0]
    if m.impl == "cuda":
        assert f"({changed[0] + 1}): error:" in message.splitlines()[0]
        assert message.endswith('1 error detected in the compilation of "candidate.cu".')
    else:   # Triton counts lines from the kernel's def
        line = int(re.search(r"at (\d+):", message).group(1))
        defs = [i for i, t in enumerate(before[:changed[0]]) if t.startswith("def ")]
        assert defs[-1] + line - 1 == changed[0]
    assert slips.kind_of(slips.encode(kind, 0)) == kind and slips.failure(kind) not in ("syntax", None)


def test_codes_without_a_site_and_other_dialects_get_no_slip():
    m, _, _, code = render("rmsnorm_cuda", "register_cached")
    assert slips.apply(code, "triton", slips.encode("arange_runtime", 0)) is None
    assert slips.apply(code, "cuda", slips.encode("const_cast", 0), hip_arch="gfx942") is None   # worded for nvcc only
    attention = render("swa_decode_triton", "gqa_dot")[3]
    assert slips.apply(attention, "triton", slips.encode("dot_dtype", 0), dtype="fp16") is not None
    assert slips.apply(attention, "triton", slips.encode("dot_dtype", 0), dtype="fp32") is None  # no cast to drop
    plain = "__global__ void k(float* y) {\n    y[threadIdx.x] = 0.f;\n}\n"
    assert all(slips.apply(plain, "cuda", slips.encode(k, 3)) is None for k in slips.NAMES)
    assert slips.kind_of(7) == "identifier" and slips.apply(code, "cuda", 7) is not None   # old picks keep their meaning


def _compile(m, v, task, code):
    if m.impl == "cuda":
        return compile_cuda(code, task.gpu.arch, f"{m.op}_kernel")
    return compile_triton(code, m.compile_specs(v, v.defaults(), task), task.gpu.arch)


@pytest.mark.parametrize("kind", ["const_cast", "cast_pointer", "shfl_mask", "arange_runtime", "dot_dtype"])
def test_the_compiler_rejects_it_with_the_same_words(kind):
    module, tag, _ = CASES[kind]
    m, v, task, code = render(module, tag, "H100")
    if m.impl == "cuda" and not HAVE_NVCC or m.impl == "triton" and not HAVE_TRITON:
        pytest.skip("needs nvcc / triton (pip install 'kernelstrain[verify]')")
    broken, message = slips.apply(code, m.impl, slips.encode(kind, 1), dtype="fp16")
    r = _compile(m, v, task, broken)
    assert not r.ok and r.error_class == slips.failure(kind)
    assert first_error(r.log) == first_error(message)
    assert normalized(r.log).strip().endswith(message.strip())      # the whole text, notes and all


def test_verify_wants_the_first_error_of_a_slip():
    message = slips.apply(render("rmsnorm_cuda", "register_cached")[3], "cuda", slips.encode("const_cast", 0))[1]
    row = {"status": "compile_error", "module": "rmsnorm_cuda", "tag": "register_cached", "gpu": "A100",
           "failure": "type", "error": message, "compiled": False, "class": "type", "smem": None, "smem_bytes": 0,
           "first_error": first_error(message)}
    assert judge(row) == []
    moved = re.sub(r"\((\d+)\)", lambda g: f"({int(g.group(1)) + 1})", first_error(message), count=1)
    assert "first error" in judge({**row, "first_error": moved})[0]
    assert "error class" in judge({**row, "class": "syntax"})[0]


def _binomial_quantile(n: int, p: float, q: float) -> int:
    """Smallest k with P(X <= k) >= q for X ~ Binomial(n, p).

    >>> _binomial_quantile(11, 0.04, 0.99)
    2
    """
    total = 0.0
    for k in range(n + 1):
        total += math.comb(n, k) * p ** k * (1 - p) ** (n - k)
        if total >= q:
            return k
    return n


def test_engine_writes_the_profiles_kinds_and_repairs_each():
    """kernelinfer names every kind; with those kinds on, sessions hold several, each failure
    classed as its kind says (the slip memory makes each site once: ten sessions), and a slip is followed by the same configuration (the repair, which
    may slip again) unless the session ends there or the engineer drops the change (4 %)."""
    assert {k for k, _ in load_profile("kernelinfer").search.slip_weights} == set(slips.NAMES[1:])
    search = Search(refail=0.3, slip_weights=tuple((k, 1.0) for k in slips.NAMES[1:]), typo_weight=0.3)
    seen, slipped, repaired = {}, 0, 0
    for module, gpu in (("rmsnorm_cuda", "A100"), ("softmax_cuda", "H100"), ("rmsnorm_triton", "H100"),
                        ("layernorm_triton", "A10"), ("softmax_triton", "H100"), ("layernorm_cuda", "A100"),
                        ("rmsnorm_cuda", "H100"), ("softmax_cuda", "A100"), ("layernorm_triton", "H100"),
                        ("softmax_triton", "A10")):
        m = REGISTRY[module]
        task = make_task(m, gpu, "fp16", m.shapes[0])
        s = {k: seeded_rng("slips", module, k) for k in STREAMS}
        steps = [x.row() for x in Episode(m, task, s, 60, 0.35, 0.0, 30, search).run()]
        for st, nxt in zip(steps, steps[1:]):
            if st["typo"] is None:
                continue
            kind = slips.kind_of(st["typo"])
            assert st["status"] == "compile_error" and st["failure"] == slips.failure(kind)
            seen[kind] = seen.get(kind, 0) + 1
            slipped += 1
            repaired += (nxt["tag"], nxt["params"]) == (st["tag"], st["params"])
    assert len([k for k in seen if k != "identifier"]) >= 3, seen
    # the engine puts off a due repair 4 % of the time: allow the 99th percentile of Binomial(slipped, 0.04)
    assert slipped - repaired <= _binomial_quantile(slipped, 0.04, 0.99), (repaired, slipped)


@pytest.mark.parametrize("table, says", [("{const_kast = 1.0}", "unknown slip kind 'const_kast'"),
                                         ("{identifier = 1.0}", "the typo's weight is typo_weight"),
                                         ("{shfl_mask = -1}", "must be a number >= 0"),
                                         ("[1, 2]", "must be a table of kind = weight")])
def test_bad_slip_weights_are_usage_errors(tmp_path, table, says):
    from kernelstrain.errors import UsageError
    from kernelstrain.profiles import resolve
    text = resolve("kernelinfer").read_text()
    path = tmp_path / "p.toml"
    path.write_text(re.sub(r"(?m)^slip_weights = .*$", f"slip_weights = {table}", text))
    with pytest.raises(UsageError, match=re.escape(says)):
        load_profile(path)


def test_no_site_where_the_compiler_would_accept_it_or_err_elsewhere():
    # a runtime bound of 1 is made a constant by Triton's launcher: tl.arange(0, T) then compiles
    code = render("rmsnorm_triton", "persistent")[3]
    pick = slips.encode("arange_runtime", 0)
    assert slips.apply(code, "triton", pick, shape={"T": 4, "D": 4096}) is not None
    assert slips.apply(code, "triton", pick, shape={"T": 1, "D": 4096}) is None
    # a shuffle in a macro's body errs where the macro is used: not a site
    macro = ("__device__ float twice(float v) { return 2.f * v; }\n"
             "#define SHFL_XOR(v, o) __shfl_xor_sync(0xffffffffu, v, o)\n"
             "__device__ float warp_sum(float v) {\n    for (int o = 16; o > 0; o >>= 1) v += SHFL_XOR(v, o);\n"
             "    return v;\n}\n")
    assert slips.site_lines("shfl_mask", macro) == []
    assert slips.site_lines("shfl_mask", macro.replace("SHFL_XOR(v, o);", "__shfl_xor_sync(0xffffffffu, v, o);")) == [3]
