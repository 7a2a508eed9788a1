"""Row steps as passes over a row: what each pass accumulates, how its result is named, and
what the last pass writes. Shared by the CUDA and the Triton kernels (the expressions differ
only in spelling: `exp` / `log` / `rsqrt` are filled per language).

A pass is (combine, term, result): combine is `sum` or `max` over the row of `term` (an
expression of the element `v` and earlier results), `result` names the reduced value
(`{acc}` is it). A row step either writes every element (`out`: a statement on v) or one value a
row (`value`).

>>> [p[2] for p in recipe("softmax", False).passes]
['m = {acc}', 's = {acc}']
>>> recipe("softmax", True).passes[0][1]    # no max subtracted: exp of the raw element
'{exp}(v)'
"""
from __future__ import annotations

from dataclasses import dataclass

from .exprs import LAYER_NORM_EPS, RMS_NORM_EPS, ROUND


@dataclass(frozen=True)
class Recipe:
    passes: tuple          # (combine, term, result)
    out: str = ""          # statement on v, every element (norms, softmax)
    value: str = ""        # the row's one value (reductions)


def recipe(op: str, unstable: bool = False, bf16: bool = False) -> Recipe:
    """The passes of a row step; `unstable`: softmax / log_softmax / logsumexp without the max.
    `bf16`: torch.logsumexp is several ops on bf16 tensors (amax, x - max, exp, sum, log, + max),
    each rounded; its terms, sum and log are rounded as they are ({rnd})."""
    if op == "layer_norm":
        return Recipe((("sum", "v", "mean = {acc} / {C}"),
                       ("sum", "(v - mean) * (v - mean)", f"rstd = {{rsqrt}}({{acc}} / {{C}} + {LAYER_NORM_EPS!r}{{f}})")),
                      out="v = (v - mean) * rstd * {w} + {b}")
    if op == "rms_norm":
        return Recipe((("sum", "v * v", f"rstd = {{rsqrt}}({{acc}} / {{C}} + {RMS_NORM_EPS!r}{{f}})"),),
                      out="v = v * rstd * {w}")
    if op in ("softmax", "log_softmax", "logsumexp"):
        if unstable:
            passes = (("sum", "{exp}(v)", "s = {acc}"),)
            shift = ""
        else:
            passes = (("max", "v", "m = {acc}"), ("sum", "{exp}(v - m)", "s = {acc}"))
            shift = " - m"
        if op == "softmax":
            return Recipe(passes, out=f"v = {{exp}}(v{shift}) / s")
        if op == "log_softmax":
            return Recipe(passes, out=f"v = v{shift} - {{log}}(s)")
        if bf16 and shift:
            return Recipe((passes[0], ("sum", "{rnd}({exp}({rnd}(v - m)))", "s = {rnd}({acc})")), value="m + {rnd}({log}(s))")
        return Recipe(passes, value=("m + " if shift else "") + "{log}(s)")
    if op == "sum":
        return Recipe((("sum", "v", "r = {acc}"),), value="r")
    if op == "mean":
        return Recipe((("sum", "v", "r = {acc} / {C}"),), value="r")
    if op == "amax":
        return Recipe((("max", "v", "r = {acc}"),), value="r")
    if op == "amin":
        return Recipe((("max", "-v", "r = -{acc}"),), value="r")
    raise ValueError(f"no row recipe for {op!r}")


CUDA_WORDS = {"exp": "expf", "log": "logf", "rsqrt": "rsqrtf", "f": "f", "rnd": ROUND}
TRITON_WORDS = {"exp": "tl.exp", "log": "tl.log", "rsqrt": "tl.rsqrt", "f": "", "rnd": ROUND}
