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
    compiles, in source order."""
    try:
        tree = parsed(code)
    except SyntaxError:
        return []
    lines = code.split("\n")
    spans = [(d, body, end) for d, _, body, end in _kernels(lines)]
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == builtin
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "tl"
                and node.lineno == node.end_lineno):
            continue
        keys = {k.arg for k in node.keywords}
        if "mask" not in keys or "other" in keys and builtin == "store" or builtin == "load" and "other" not in keys:
            continue
        j = node.lineno - 1
        span = next(((d, body) for d, body, end in spans if body <= j < end), None)
        if span is not None and _always_runs(lines, span[1], j):
            out.append((j, node.col_offset, span[0]))
    return sorted(out)


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
