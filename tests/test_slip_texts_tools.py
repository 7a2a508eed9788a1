"""Slip texts where the tools do something a line-by-line reading misses (issue 28, verify --text
misses on fresh seeds): nvcc's echo of a line after a system header's macro, EDG's recovery past
a block, Triton walking only the taken branch of a constexpr `if` in a helper, and clang's typo
correction (a HIP rename is made only where clang has nothing to offer). Each is checked against
the text the tool printed (nvcc 13.0, Triton 3.9, clang-19), and recompiled where the tool is
installed (skipped, with the reason, where it is not)."""
import random
import shutil

import pytest

from kernelstrain import messages, mutations, slips
from kernelstrain.compilers import compile_cuda, compile_hip, find_hip_compiler, tool_text
from kernelstrain.ops import REGISTRY
from kernelstrain.slips import triton_slips
from kernelstrain.slips.cpp import follows_system_macro
from kernelstrain.tasks import make_task, param_grid

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit 12.4+) not installed")
needs_hip = pytest.mark.skipif(find_hip_compiler() is None, reason="no HIP compiler (hipcc, or clang-17+ with HIP headers)")

INF = ("#include <math.h>\n__global__ void k(float* s, float* y) {\n    float r = -INFINITY;\n"
       "    for (int w = 0; w < 16; ++w) r = fmaxf(r, s[w]);\n    y[0] = r;\n}\n")
# nvcc 13.0 on INF with the `;` of line 3 left off: gcc -E returns from math.h's INFINITY with a
# line marker, and line 4 is printed (and echoed) one space less indented
INF_TEXT = ('candidate.cu(4): error: expected a ";"\n     for (int w = 0; w < 16; ++w) r = fmaxf(r, s[w]);\n     ^\n\n'
            '1 error detected in the compilation of "candidate.cu".')
BLOCK = ("__global__ void k(float* x, float* y, int n) {\n    float sq = 0.f;\n"
         "    for (int i = 0; i < n; ++i) { const float d = x[i]; sq += d * d; }\n"
         "    const float r = rsqrtf(sq);\n    y[0] = r;\n}\n")


def test_a_line_after_a_system_macro_is_echoed_one_space_short():
    broken, text = slips.apply(INF, "cuda", slips.encode("semicolon", 0))
    assert "float r = -INFINITY\n" in broken and text == INF_TEXT
    assert follows_system_macro(broken.split("\n"), 3) and not follows_system_macro(INF.split("\n"), 3)


@needs_nvcc
def test_the_system_macro_echo_is_nvccs():
    broken, text = slips.apply(INF, "cuda", slips.encode("semicolon", 0))
    assert tool_text(compile_cuda(broken, "sm_80").log) == text


# a line that goes on past a system header's macro (`-INFINITY) return;`): gcc -E prints the rest
# on later lines, but EDG parses it here, so the scopes after it are what they are (paged_decode_cuda
# split_kv, seed 7111: the second scope's report was missing)
PAST_MACRO = ("#include <math.h>\n__device__ __forceinline__ void upd(const float* s, float& m) {\n"
              "    float m_new = m;\n    if (m_new == -INFINITY) return;\n    m = m_new + s[0];\n}\n"
              "__global__ void k(const float* s, float* y, int n) {\n    float m = -1.f, l = 0.f;\n"
              "    for (int i = 0; i < n; ++i) {\n        upd(s, m);\n        l += 1.f;\n    }\n"
              "    if (n > 0) { y[0] = m; y[1] = l; }\n}\n")
PAST_MACRO_TEXT = ('candidate.cu(10): error: identifier "m" is undefined\n          upd(s, m);\n                 ^\n\n'
                   'candidate.cu(13): error: identifier "m" is undefined\n      if (n > 0) { y[0] = m; y[1] = l; }\n'
                   '                          ^\n\n2 errors detected in the compilation of "candidate.cu".')


def test_a_line_past_a_system_macro_keeps_its_scopes():
    broken, text = mutations.break_identifier(PAST_MACRO, "cuda", 0)
    assert broken != PAST_MACRO and text == PAST_MACRO_TEXT


@needs_nvcc
def test_the_scopes_past_a_system_macro_are_nvccs():
    broken, text = mutations.break_identifier(PAST_MACRO, "cuda", 0)
    assert tool_text(compile_cuda(broken, "sm_80").log) == text


def test_no_semicolon_site_before_a_statement_that_ends_with_a_block():
    """EDG skips to the next `;` outside brackets: past `for (...) { ... }` into the declaration
    after it, whose name is then undefined (nvcc 13.0 printed a second error for `r`)."""
    assert slips.site_lines("semicolon", BLOCK) == []


@needs_nvcc
def test_a_skipped_block_takes_the_next_declaration_with_it():
    lines = BLOCK.split("\n")
    lines[1] = lines[1].rstrip(";")
    log = tool_text(compile_cuda("\n".join(lines), "sm_80").log)
    assert 'expected a ";"' in log and 'identifier "r" is undefined' in log


HELPERS = '''import triton
import triton.language as tl


@triton.jit
def _step(acc, x):
    scaled = x * 2.0
    return acc + scaled


@triton.jit
def _block(acc, x_ptr, offs, n, MASKED: tl.constexpr):
    if MASKED:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        return _step(acc, x)
    x = tl.load(x_ptr + offs)
    return _step(acc, x)


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc = _block(acc, x_ptr, offs, n, False)
    acc = _block(acc, x_ptr, offs, n, True)
    tl.store(y_ptr + offs, acc)


def run(x, y):
    k[(1,)](x, y, x.numel(), BLOCK=1024)
'''


def test_a_constexpr_branch_the_first_call_does_not_take_is_not_compiled():
    lines = HELPERS.split("\n")
    block, step = lines.index("def _block(acc, x_ptr, offs, n, MASKED: tl.constexpr):"), lines.index("def _step(acc, x):")
    assert triton_slips.static_arguments(lines, block) == {"MASKED": False}
    # the error inside _block: at the unmasked load (its 5th line), not the masked one
    assert triton_slips.first_use(lines, block + 1, "offs", block) == (block + 4, 24)
    # the call of _step that Triton compiles first is the unmasked branch's (6th line of _block),
    # from k's first call of _block
    assert triton_slips.call_chain(lines, step) == [(block, block + 5, 11), (block + 9, block + 12, 10)]


def test_the_helper_chain_text_is_tritons():
    pytest.importorskip("triton", reason="triton not installed: pip install 'kernelstrain[verify]'")
    from kernelstrain.compilers import compile_triton
    from kernelstrain.ops.base import KernelSpec
    typo = mutations.find_typo(HELPERS, "triton", 0)
    assert typo.name == "scaled"
    text = messages.typo_error(typo, "triton")
    spec = KernelSpec("k", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 1024}, 4, 1,
                      {"n": 4096})
    real = compile_triton("\n".join(typo.lines), [spec], "sm_80")
    assert not real.ok and tool_text(real.log) == text


def _hip_cases(n):
    rng = random.Random(28)
    names = sorted(m for m in REGISTRY if REGISTRY[m].impl == "cuda")
    out = []
    for name in rng.sample(names, len(names)):
        m = REGISTRY[name]
        dtype = next((d for d in m.dtypes if m.supports(make_task(m, "MI300X", d, m.shapes[0]).gpu, d)), None)
        if dtype is None:
            continue
        task = make_task(m, "MI300X", dtype, m.shapes[0])
        v = next((v for v in m.variants if not v.needs - task.gpu.features and v.offered(dtype)), None)
        if v is None:
            continue
        code = m.render(v, rng.choice(list(param_grid(v))), task)
        if mutations.typo_sites(code, "cuda"):
            out.append((name, code, rng.randrange(slips.SITE)))
        if len(out) == n:
            return out
    return out


def test_no_hip_rename_leaves_clang_a_correction():
    for name, code, pick in _hip_cases(12):
        typo = mutations.find_typo(code, "cuda", pick)
        words = set("\n".join(typo.lines).replace("(", " ").split()) | mutations.corpus.hip_names()
        assert not mutations.correction_tried(typo.name, {w for w in words if w.isidentifier()} - {typo.name}), name


@needs_hip
def test_hip_typo_texts_are_clangs():
    for name, code, pick in _hip_cases(4):
        broken, text = mutations.break_identifier(code, "cuda", pick, "gfx942")
        real = compile_hip(broken, "gfx942", f"{REGISTRY[name].op}_kernel")
        assert not real.ok and tool_text(real.log) == text, name


MASKED_ONLY = '''import triton
import triton.language as tl


@triton.jit
def _block(acc, x_ptr, offs, n, MASKED: tl.constexpr):
    if MASKED:
        x = tl.load(x_ptr + offs, mask=offs < limit, other=0.0)
        return acc + x
    x = tl.load(x_ptr + offs)
    return acc + x


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc = _block(acc, x_ptr, offs, n, False)
    acc = _block(acc, x_ptr, offs, n, True)
    tl.store(y_ptr + offs, acc)


def run(x, y):
    k[(1,)](x, y, x.numel(), BLOCK=1024)
'''


def _masked_only_text(lines, block):
    j, col = triton_slips.first_use(lines, block, "limit", block)
    text = triton_slips.compilation_error(lines, block, j, col, "NameError('limit is not defined')")
    calls = [triton_slips.compilation_error(lines, d, i, c, None)
             for d, i, c in triton_slips.use_chain(lines, block, "limit", block)]
    return triton_slips.CHAINED.join([text, *calls])


def test_a_name_only_the_second_calls_branch_compiles_fails_at_that_call():
    """A helper called with MASKED False, then True: its `if MASKED:` body is compiled, and its undefined name
    raised, only at the second call (verify on ks_13535: flash_prefill_triton tma_descriptors' _attend, whose text
    named the first call, `at 19:20`, where Triton 3.9 names the second, `at 20:20`)."""
    lines = MASKED_ONLY.split("\n")
    block, kernel = lines.index("def _block(acc, x_ptr, offs, n, MASKED: tl.constexpr):"), lines.index(
        "def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):")
    assert triton_slips.first_use(lines, block, "limit", block) == (block + 2, 46)
    assert triton_slips.call_chain(lines, block) == [(kernel, kernel + 3, 10)]              # the first call
    assert triton_slips.use_chain(lines, block, "limit", block) == [(kernel, kernel + 4, 10)]   # the one that fails
    pytest.importorskip("triton", reason="triton not installed: pip install 'kernelstrain[verify]'")
    from kernelstrain.compilers import compile_triton
    from kernelstrain.ops.base import KernelSpec
    spec = KernelSpec("k", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 1024}, 4, 1,
                      {"n": 4096})
    real = compile_triton(MASKED_ONLY, [spec], "sm_80")
    assert not real.ok and tool_text(real.log) == _masked_only_text(lines, block)
