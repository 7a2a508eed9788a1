"""clang's recovery from an undeclared name in HIP code, the two `verify --text` misses of issue 28
on fresh seeds, each checked against what clang-19 printed and recompiled where a HIP compiler is
installed (skipped, with the reason, where it is not):
- a parenthesized expression holding the name is diagnosed at its `)` (slips/clang.py), so
  `(int)(grid < 1 ? 1 : (grid > 65535 ? 65535 : grid))` reports 34, 57, then 18; and a name that
  begins a statement is diagnosed first (`temp_bytes = (temp_bytes + 255) & ~(size_t)255;`);
- in a device function whose diagnostics clang defers (inline, __forceinline__, static), a host
  function its typo correction tries (`rand` for `lane`) is left behind as an error that points
  into the installed headers: such a rename is not made (mutations.correction_tried)."""
import re

import pytest

from kernelstrain import mutations
from kernelstrain.compilers import compile_hip, find_hip_compiler, tool_text
from kernelstrain.slips.clang import diagnosed_order
from kernelstrain.slips.cpp import tokens

needs_hip = pytest.mark.skipif(find_hip_compiler() is None, reason="no HIP compiler (hipcc, or clang-17+ with HIP headers)")

# statement -> columns (1-based) of `q` in the order clang-19 diagnosed them (HIP, gfx942), in a
# __global__ function with `float* y, int n`
ORDERS = {
    "y[0] = (int)(q < 1 ? 1 : (q > 65535 ? 65535 : q));": [27, 47, 14],
    "y[0] = q < 1 ? 1 : (q > 65535 ? 65535 : q);": [21, 41, 8],
    "y[0] = (int)(q + 1) + q;": [14, 23],
    "y[0] = q + (q > 1 ? 2 : q);": [13, 25, 8],
    "y[0] = q + (q + 1);": [13, 8],
    "y[0] = q * (n + 1) + q;": [8, 22],
    "y[0] = (q + 1) * (q + 2) + q;": [9, 19, 28],
    "y[0] = fmaxf((q + 1), y[q]) + q;": [15, 25, 31],
    "y[0] = q + 1 < n ? y[(q + 1)] : q;": [23, 8, 33],
    "int z = q < n ? (y[q] + q) : y[q], w = (q);": [20, 25, 9, 32, 41],
    "for (int i = (q); i < q; i += (q + 1)) y[i] = q;": [15, 23, 32, 47],
    "y[0] = (float)q + (q);": [20, 15],
    "q = (q + 1) & n;": [1, 6],
    "q = q + (q + 1);": [1, 10, 5],
    "q * n + y[q];": [1, 11],
    "if (n) { n = 1; } else q = (q);": [24, 29],
    "for (int i = 0; i < n; ++i) q = (q);": [29, 34],
}


def _model(statement: str) -> list:
    toks = tokens(statement)
    return [toks[k].col + 1 for k in diagnosed_order(toks, {k for k, t in enumerate(toks) if t.text == "q"})]


def _kernel(statement: str) -> str:
    return f"#include <hip/hip_runtime.h>\n__global__ void k(float* y, int n) {{\n{statement}\n}}\n"


def test_a_parenthesized_expression_is_diagnosed_at_its_close_a_statements_first_name_at_once():
    for statement, columns in ORDERS.items():
        assert _model(statement) == columns, statement


@needs_hip
def test_the_orders_are_clangs():
    for statement in ORDERS:
        log = compile_hip(_kernel(statement)).log
        real = [int(c) for c in re.findall(r"candidate\.hip:3:(\d+): error: use of undeclared identifier 'q'", log)]
        assert real == _model(statement), statement


# `lane` is declared once in a device function; the kernel before it makes it a typo site
REDUCE = """#include <hip/hip_runtime.h>
#define WARP_SIZE 64
extern "C" __global__ void scale(float* x, float s) { x[threadIdx.x] *= s; }

QUALIFIERS float block_reduce(float v, float* red) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < 8 ? red[lane] : 0.f;
    return v;
}

extern "C" __global__ void total(float* x, float* out) {
    __shared__ float red[32];
    out[0] = block_reduce(x[threadIdx.x], red);
}
"""
DEFERRED = ("__device__ __forceinline__", "__device__ inline", "static __device__")
EMITTED = ("__device__", "__device__ __noinline__")


def _renamed(qualifiers: str) -> list:
    code = REDUCE.replace("QUALIFIERS", qualifiers)
    return [m.group(2) for _, m, _ in mutations.typo_sites(code, "cuda")]


def test_a_deferred_device_function_keeps_no_rename_clang_tries_a_host_function_for():
    assert mutations.correction_tried("lane", mutations.corpus.hip_host_functions())       # rand
    for qualifiers in DEFERRED:
        assert "lane" not in _renamed(qualifiers), qualifiers
    for qualifiers in EMITTED:
        assert "lane" in _renamed(qualifiers), qualifiers


@needs_hip
def test_clang_leaves_the_tried_host_function_behind_only_in_a_deferred_function():
    for qualifiers in DEFERRED + EMITTED:
        broken = REDUCE.replace("QUALIFIERS", qualifiers).replace("const int lane =", "const int lane_val =")
        log = tool_text(compile_hip(broken).log)
        assert ("reference to __host__ function 'rand' in __device__ function" in log) == (qualifiers in DEFERRED), \
            qualifiers


@needs_hip
def test_the_renames_kept_in_device_functions_are_clangs_text():
    for qualifiers in DEFERRED + EMITTED:
        code = REDUCE.replace("QUALIFIERS", qualifiers)
        for pick in range(len(mutations.typo_sites(code, "cuda"))):
            broken, text = mutations.break_identifier(code, "cuda", pick, "gfx942")
            real = compile_hip(broken)
            assert not real.ok and tool_text(real.log) == text, (qualifiers, pick)
