"""The typo slip (a rename at the declaration, the old name left at its uses) in each compiler's
own words, checked without the compilers against tests/fixtures/typo_compiler.json: real nvcc
13.0, clang-19 (HIP, gfx942) and Triton 3.9 logs of rendered candidates. The cases are a choice
from `scripts/slip_audit.py --kinds identifier --compilers nvcc,triton,hipcc --fixture FILE`
(seed 0): those whose first error line main's typo_error got wrong (a use later in the renamed
declaration, a second declaration in another scope, a C-library name, Triton's column), nvcc's
preprocessed lines (macros expanded) and one report per scope, Triton's helper errors with their
call chain and its 12-line excerpts, clang's order of a conditional's uses, a name in a comment
(the hipcc cases rebuilt when HIP renames began to avoid clang's typo corrections: the one
case with a correction dropped; and again when they began to avoid every declared name within
the reach of clang's correction, mutations.correction_tried: top_p_cuda's case, which has no
rename left, dropped, prefix_scan_cuda's pick now renames `t`). Rebuilt (the compilers run again, same fields) by
`slip_audit.write_fixture` on `slip_audit.run_case` of each case."""
import json
import re
from pathlib import Path

import pytest

from kernelstrain import slips
from kernelstrain.compilers import first_error, tool_text
from kernelstrain.mutations import find_typo
from kernelstrain.messages import typo_error
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task
from kernelstrain.verify import comparable, judge

FIXTURE = Path(__file__).parent / "fixtures" / "typo_compiler.json"
CASES = json.loads(FIXTURE.read_text())


def message(c):
    m = REGISTRY[c["module"]]
    task = make_task(m, c["gpu"], c["dtype"], c["shape"])
    code = m.render(m.variant(c["variant"]), c["params"], task)
    hip_arch = task.gpu.arch if task.is_hip else ""
    return slips.apply(code, m.impl, slips.encode(c["kind"], c["site"]), hip_arch, c["dtype"], c["shape"])[1]


def case_id(c):
    return f"{c['compiler']}:{c['module']}:{c['variant']}:{c['gpu']}:{c['site']}"


def test_fixture_covers_each_compiler_and_the_hard_cases():
    assert {c["compiler"] for c in CASES} == {"nvcc", "hipcc", "triton"}
    texts = [c["text"] for c in CASES]
    assert any("__attribute__((shared))" in t or re.search(r"\b\d+ [-+]", t) for t in texts if "candidate.cu" in t)
    assert any(t.count('is undefined') > 1 for t in texts)                # a later scope reports it again
    assert any("The above exception was the direct cause" in t for t in texts)   # in a @triton.jit helper


@pytest.mark.parametrize("c", CASES, ids=case_id)
def test_first_error_line_is_the_compilers(c):
    assert comparable(first_error(message(c))) == comparable(c["first_error"])


@pytest.mark.parametrize("c", CASES, ids=case_id)
def test_whole_text_is_the_compilers(c):
    # hipcc's too: a HIP rename is made only where clang's typo correction has nothing to offer
    # (mutations._hip_renames); its warnings (the installed headers' attributes) are left out
    assert tool_text(message(c)) == tool_text(c["text"])


def test_nvcc_reports_once_per_scope_on_the_preprocessed_line():
    code = ("#define THREADS 128\n__global__ void k(float* y, int n) {\n    const int row = blockIdx.x;\n"
            "    if (row < n) { y[row] = THREADS+row; }\n    for (int i = row; i < n; i++) { y[i] = row; }\n"
            "    y[n] = row;\n}\n")
    typo = find_typo(code, "cuda")
    text = typo_error(typo, "cuda")
    # the if's condition is in the function's scope: the name is declared there after line 4
    assert re.findall(r"candidate\.cu\((\d+)\)", text) == ["4"]
    code = code.replace("    if (row < n) { y[row] = THREADS+row; }\n", "    if (n) { y[0] = THREADS+row; }\n")
    text = typo_error(find_typo(code, "cuda"), "cuda")
    assert re.findall(r"candidate\.cu\((\d+)\)", text) == ["4", "5", "6"]
    assert "\n      if (n) { y[0] = 128 +row; }\n                           ^\n" in text    # nvcc 13.0's caret
    assert text.endswith('3 errors detected in the compilation of "candidate.cu".')


def test_triton_reports_a_helper_error_and_each_call_on_the_way():
    code = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef _scale(x, s):\n    t = x * s\n"
            "    return t + 1\n\n\n@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
            "    y = _scale(tl.load(x_ptr + offs), 2.0)\n    tl.store(x_ptr + offs, y)\n\n\ndef run(x):\n"
            "    k[(1,)](x, BLOCK=128)\n")
    text = typo_error(find_typo(code, "triton"), "triton")
    inner, outer = text.split("\n\nThe above exception was the direct cause of the following exception:\n\n")
    assert inner.startswith("triton.compiler.errors.CompilationError: at 3:11:\ndef _scale(x, s):\n")
    assert inner.endswith("NameError('t is not defined')")
    assert outer == ("triton.compiler.errors.CompilationError: at 3:8:\ndef k(x_ptr, BLOCK: tl.constexpr):\n"
                     "    offs = tl.arange(0, BLOCK)\n    y = _scale(tl.load(x_ptr + offs), 2.0)\n        ^")
    assert first_error(text) == "CompilationError: at 3:11: NameError('t is not defined')"


def test_verify_checks_the_first_error_line_of_a_typo():
    c = next(c for c in CASES if c["compiler"] == "nvcc")
    text = message(c)
    row = {"status": "compile_error", "module": c["module"], "tag": c["variant"], "gpu": c["gpu"], "failure": "syntax",
           "error": text, "compiled": False, "class": "syntax", "smem": None, "smem_bytes": 0,
           "first_error": c["first_error"]}
    assert judge(row) == []
    moved = re.sub(r"\((\d+)\)", lambda g: f"({int(g.group(1)) + 1})", c["first_error"], count=1)
    assert "first error" in judge({**row, "first_error": moved})[0]
    # clang's typo correction names what the installed HIP headers declare: left out of the
    # comparison (a dataset written before renames avoided it records none)
    hip = next(c for c in CASES if c["compiler"] == "hipcc")
    hip_row = {**row, "module": hip["module"], "tag": hip["variant"], "gpu": "MI300X", "error": message(hip)}
    assert judge({**hip_row, "first_error": hip["first_error"]}) == []
    assert judge({**hip_row, "first_error": hip["first_error"] + "; did you mean 'pow'?"}) == []
    shifted = re.sub(r":(\d+):(\d+):", lambda g: f":{g.group(1)}:{int(g.group(2)) + 1}:", hip["first_error"], count=1)
    assert "first error" in judge({**hip_row, "first_error": shifted})[0]


_HIP_HEAD = ("#include <hip/hip_runtime.h>\n__device__ float f1(float v) { return v * 2.f; }\n"
             "__device__ float h2(float a, float b) { return a + b; }\n"
             "__global__ void k(float* y, int n, int M) {\n    const int q = threadIdx.x;\n")
_HIP_USE = r"candidate\.hip:(\d+):(\d+): error: use of undeclared identifier 'q'"


def hip_uses(code):
    text = typo_error(find_typo(code, "cuda"), "cuda", "gfx942")
    return [(int(a), int(b)) for a, b in re.findall(_HIP_USE, text)], text


def test_hipcc_reports_every_use_in_clangs_order():
    # clang diagnoses an undeclared name when its full expression is complete, but a subscript
    # or a parenthesized name holding it at once, and then what the other operand holds
    code = _HIP_HEAD + ("    y[0] = q + h2(q, f1(q)) + q;\n    y[1] = q + 1 < M ? f1(y[q]) : 0.f;\n"
                        "    y[2] = q + n * y[q] * q;\n    y[q + 1] = q + (q) + y[q];\n    if (q < n) y[q] = f1(q);\n"
                        "    int z = q < n ? y[q] : y[q];\n    y[3] = z;\n}\n")
    uses, text = hip_uses(code)
    # as clang-19 printed them (a HIP device compile for gfx942, compilers.compile_hip)
    assert uses == [(6, 12), (6, 19), (6, 25), (6, 31), (7, 29), (7, 12), (8, 22), (8, 27), (8, 12), (9, 7), (9, 21),
                    (9, 16), (9, 28), (10, 9), (10, 18), (10, 26), (11, 23), (11, 13), (11, 30)]
    assert text.endswith("\n19 errors generated when compiling for gfx942.")


def test_hipcc_stops_at_clangs_error_limit():
    # the driver gives cc1 -ferror-limit 19: the 20th error is the fatal one
    uses, text = hip_uses(_HIP_HEAD + "".join(f"    y[{i}] = q;\n" for i in range(21)) + "}\n")
    assert uses == [(6 + i, 12 + (i >= 10)) for i in range(19)]
    assert text.endswith("\nfatal error: too many errors emitted, stopping now [-ferror-limit=]\n"
                         "20 errors generated when compiling for gfx942.")


def test_triton_reports_the_first_use_its_code_generator_visits():
    # a call's keyword arguments are visited before its positional ones: the `mask=` use is the one
    # Triton 3.9 reports (its text, compiled from this code, is the expected one)
    code = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr, T, BLOCK: tl.constexpr):\n"
            "    tok = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    x = tl.load(x_ptr + tok, mask=tok < T, other=0.0)\n"
            "    tl.store(x_ptr + tok, x * 2, mask=tok < T)\n\n\ndef run(x):\n    k[(1,)](x, x.numel(), BLOCK=128)\n")
    assert typo_error(find_typo(code, "triton"), "triton") == (
        "triton.compiler.errors.CompilationError: at 3:34:\ndef k(x_ptr, T, BLOCK: tl.constexpr):\n"
        "    tok_idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    x = tl.load(x_ptr + tok, mask=tok < T, other=0.0)\n"
        "                                  ^\nNameError('tok is not defined')")


def test_preprocessor_conditionals_leave_out_what_the_compilers_never_see():
    # an inactive #if / #ifdef branch is not compiled; the expected text is clang-19's (compile_hip of this code)
    code = ("#include <hip/hip_runtime.h>\n#define THREADS 32\n#define WARP_SIZE 32\n__global__ void k(float* y, int n) {\n"
            "    const int q = blockIdx.x;\n    y[q] = 1.f;\n#if THREADS > WARP_SIZE\n    y[q + 1] = 2.f;\n#else\n"
            "    y[q + 2] = 3.f;\n#endif\n#ifdef NOT_DEFINED\n    y[q + 3] = 4.f;\n#endif\n    y[n] = q;\n}\n")
    assert hip_uses(code)[1] == (
        "candidate.hip:6:7: error: use of undeclared identifier 'q'\n    6 |     y[q] = 1.f;\n      |       ^\n"
        "candidate.hip:10:7: error: use of undeclared identifier 'q'\n   10 |     y[q + 2] = 3.f;\n      |       ^\n"
        "candidate.hip:15:12: error: use of undeclared identifier 'q'\n   15 |     y[n] = q;\n      |            ^\n"
        "3 errors generated when compiling for gfx942.")
