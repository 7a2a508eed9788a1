"""Triton slips in the masking of loads and stores, each with Triton's CompilationError text.

Both are raised while the code generator calls the builtin: the error is at the call
(`at LINE:COL:` of `tl.load`/`tl.store`), its message the builtin's own exception text.

>>> src = ("import triton\\nimport triton.language as tl\\n\\n\\n@triton.jit\\n"
...        "def k(x_ptr, y_ptr, D, BLOCK_D: tl.constexpr):\\n    cols = tl.arange(0, BLOCK_D)\\n"
...        "    v = tl.load(x_ptr + cols, mask=cols < D, other=0.0)\\n"
...        "    tl.store(y_ptr + cols, v * 2.0, mask=cols < D)\\n\\n\\ndef twice(x, y):\\n"
...        "    k[(1,)](x, y, x.numel(), BLOCK_D=1024)\\n")
>>> print(store_other(src, 0)[1])
triton.compiler.errors.CompilationError: at 4:4:
def k(x_ptr, y_ptr, D, BLOCK_D: tl.constexpr):
    cols = tl.arange(0, BLOCK_D)
    v = tl.load(x_ptr + cols, mask=cols < D, other=0.0)
    tl.store(y_ptr + cols, v * 2.0, mask=cols < D, other=0.0)
    ^
store() got an unexpected keyword argument 'other'
>>> broken, text = load_unmasked(src, 0)
>>> broken.splitlines()[7], text.splitlines()[-1]
('    v = tl.load(x_ptr + cols, other=0.0)', '`other` cannot be provided without `mask`')
>>> masked_calls(src, "store"), masked_calls(src, "load")
([(8, 4, 5)], [(7, 8, 5)])
"""
from __future__ import annotations

import ast
import functools

from .triton_slips import _always_runs, _kernels, compilation_error, parsed


@functools.lru_cache(maxsize=16)     # asked again of the same code by the chosen slip's _site
def masked_calls(code: str, builtin: str) -> list:
    """(line, column, def line) of each one-line `tl.<builtin>(...)` call with a `mask=`
    keyword (for a load: and an `other=` one) in a launched kernel, on a line that always
    compiles, in source order. Each launched kernel's function is read alone and its sites kept
    by its text (_kernel_masked): a rung's configs, and a module's tasks, render the same kernels
    around other launch constants (12 Triton rungs sampled: 4-14 distinct codes each, one kernel
    text), and parsing each new code whole was ~6% of a kernelinfer run. A kernel that does not
    parse alone is read from the whole code's tree, as every kernel was before (tests/test_speed_engine.py
    compares the two over the registry's renders); the codes asked are rendered candidates, which parse."""
    lines = code.split("\n")
    out = []
    for d, _, body, end in _kernels(lines):
        found = _kernel_masked("\n".join(lines[d:end]), body - d, builtin)
        if found is None:
            return masked_calls_whole(code, builtin)
        out += [(d + j, col, d) for j, col in found]
    return sorted(out)


@functools.lru_cache(maxsize=512)    # a run's distinct kernel texts (a rung's, at any config and shape)
def _kernel_masked(text: str, body: int, builtin: str) -> tuple | None:
    """masked_calls' (line, column) of one kernel's function `text` (its `def` line first, the body from
    line `body`), lines counted from the `def`; None where it does not parse alone."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    lines = text.split("\n")
    return tuple((j, col) for j, col in _masked_nodes(tree, builtin) if body <= j and _always_runs(lines, body, j))


def masked_calls_whole(code: str, builtin: str) -> list:
    """masked_calls read from the whole code's tree (each kernel's sites among every call of the code)."""
    try:
        tree = parsed(code)
    except SyntaxError:
        return []
    lines = code.split("\n")
    spans = [(d, body, end) for d, _, body, end in _kernels(lines)]
    out = []
    for j, col in _masked_nodes(tree, builtin):
        span = next(((d, body) for d, body, end in spans if body <= j < end), None)
        if span is not None and _always_runs(lines, span[1], j):
            out.append((j, col, span[0]))
    return sorted(out)


def _masked_nodes(tree, builtin: str):
    """(line, column) of each one-line `tl.<builtin>(...)` call of `tree` with a `mask=` keyword (a load: and an
    `other=`; a store: no `other=`), lines from 0."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == builtin
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "tl"
                and node.lineno == node.end_lineno):
            continue
        keys = {k.arg for k in node.keywords}
        if "mask" not in keys or "other" in keys and builtin == "store" or builtin == "load" and "other" not in keys:
            continue
        yield node.lineno - 1, node.col_offset


def _site(code: str, site: int, builtin: str):
    """(lines, line, column, def line, the ast.Call) of the `site`-th masked call, or None."""
    sites = masked_calls(code, builtin)
    if not sites:
        return None
    j, col, d = sites[site % len(sites)]
    call = next(n for n in ast.walk(parsed(code)) if isinstance(n, ast.Call) and n.lineno == j + 1
                and n.col_offset == col and isinstance(n.func, ast.Attribute) and n.func.attr == builtin)
    return code.split("\n"), j, col, d, call


# -- the load's masking copied onto the store: tl.store takes no `other` ------------------------
def store_other(code: str, site: int, dtype: str = ""):
    got = _site(code, site, "store")
    if got is None:
        return None
    lines, j, col, d, call = got
    close = call.end_col_offset - 1          # the call's `)`
    lines[j] = lines[j][:close].rstrip() + ", other=0.0" + lines[j][close:]
    return "\n".join(lines), compilation_error(lines, d, j, col, "store() got an unexpected keyword argument 'other'")


# -- a load taken as in bounds: its mask dropped, its `other` left behind ----------------------
def load_unmasked(code: str, site: int, dtype: str = ""):
    got = _site(code, site, "load")
    if got is None:
        return None
    lines, j, col, d, call = got
    mask = next(k for k in call.keywords if k.arg == "mask")
    nxt = min(a.col_offset for a in [*call.args, *call.keywords] if a.col_offset > mask.col_offset)   # other= at least
    lines[j] = lines[j][:mask.col_offset] + lines[j][nxt:]
    return "\n".join(lines), compilation_error(lines, d, j, col, "`other` cannot be provided without `mask`")
