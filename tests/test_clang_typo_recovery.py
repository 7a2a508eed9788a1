"""clang's recovery from an undeclared name in HIP code, the two `verify --text` misses of issue 28
on fresh seeds, each checked against what clang-19 printed and recompiled where a HIP compiler is
installed (skipped, with the reason, where it is not):
- a parenthesized expression holding the name is diagnosed at its `)` (slips/clang.py), so
  `(int)(grid < 1 ? 1 : (grid > 65535 ? 65535 : grid))` reports 34, 57, then 18; and a name that
  begins a statement is diagnosed first (`temp_bytes = (temp_bytes + 255) & ~(size_t)255;`);
- clang's typo correction tries every declared name within (len + 2) // 3 edits: it offers one
  that makes the expression valid (`!live` in rmsnorm_cuda: "did you mean 'div'?", 2 edits from 4
  letters), and in an inline device function the trial of a host function (`rand` for `lane`) is left behind
  as an error pointing into the installed headers: a HIP rename is made only where no declared
  name is within that reach (mutations.correction_tried)."""
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


# `lane`, `live` and `twofold` are declared once in a device function; the kernel before it
# makes them typo sites. BODY_LINES: the lines using each (the others' left out of its clang check)
HEAD = """#include <hip/hip_runtime.h>
#define WARP_SIZE 64
extern "C" __global__ void scale(float* x, float s) { x[threadIdx.x] *= s; }

QUALIFIERS float block_reduce(float v, float* red, int n) {
    const int warp = threadIdx.x / WARP_SIZE;
"""
BODY_LINES = {
    "lane": ["    const int lane = threadIdx.x % WARP_SIZE;", "    if (lane == 0) red[warp] = v;",
             "    v = lane < 8 ? red[lane] : 0.f;"],
    "live": ["    const bool live = warp < n;", "    if (!live) return 0.f;"],
    "twofold": ["    const float twofold = v * 2.f;", "    red[warp] = twofold;"],
}
TAIL = """    __syncthreads();
    return v;
}

extern "C" __global__ void total(float* x, float* out, int n) {
    __shared__ float red[32];
    out[0] = block_reduce(x[threadIdx.x], red, n);
}
"""
DEFERRED = ("__device__ __forceinline__", "__device__ inline", "static __device__")
EMITTED = ("__device__", "__device__ __noinline__")


def _code(qualifiers: str, names=tuple(BODY_LINES)) -> str:
    body = [line for name in names for line in BODY_LINES[name][:1]] + \
        [line for name in names for line in BODY_LINES[name][1:]]
    return HEAD.replace("QUALIFIERS", qualifiers) + "\n".join(body) + "\n" + TAIL


def test_no_rename_leaves_a_declared_name_within_clangs_reach():
    names = mutations.corpus.hip_names()
    assert mutations.correction_tried("lane", names) and mutations.correction_tried("live", names)   # rand, div
    for qualifiers in DEFERRED + EMITTED:
        sites = [m.group(2) for _, m, _ in mutations.typo_sites(_code(qualifiers), "cuda")]
        assert "twofold" in sites and not {"lane", "live"} & set(sites), (qualifiers, sites)


@needs_hip
def test_clang_offers_or_leaves_behind_what_it_tries():
    for qualifiers in DEFERRED + EMITTED:
        log = tool_text(compile_hip(_code(qualifiers, ("lane",)).replace("lane =", "lane_val =")).log)
        assert ("reference to __host__ function 'rand' in __device__ function" in log) == (qualifiers in DEFERRED), \
            qualifiers
        log = tool_text(compile_hip(_code(qualifiers, ("live",)).replace("live =", "live_val =")).log)
        assert "did you mean '" in log or "reference to __host__ function '" in log, qualifiers


@needs_hip
def test_the_renames_kept_in_device_functions_are_clangs_text():
    for qualifiers in DEFERRED + EMITTED:
        broken, text = mutations.break_identifier(_code(qualifiers), "cuda", 0, "gfx942")
        real = compile_hip(broken)
        assert not real.ok and tool_text(real.log) == text, qualifiers
