"""The arguments of one kernel and the statements of its elementwise chains, for either language.

`kernel_args` lists what a kernel reads besides its main input: per-channel parameters, norm
weights, the skip tensor of a residual add, each with the PyTorch expression ModelNew passes.
`chain_lines` writes the statements of a run of steps on the register `v`.
"""
from __future__ import annotations

from .exprs import CHANNEL_PARAMS, ROUND, ROW_OPS, cuda_stmt, triton_stmt
from .kernels import Kernel, skip_source
from .view import ProgramView

GEMM_INPUTS = {"matmul": ("a", "b"), "bmm": ("a", "b")}
# ops whose result of a bf16 value is a bf16 value already (the grammar's clamp bounds are bf16 numbers)
EXACT_IN_BF16 = ("relu", "abs", "clamp", "hardtanh")


def kernel_args(view: ProgramView, k: Kernel) -> list[tuple[str, str]]:
    """[(name in the kernel, expression in ModelNew.forward)], the main input first."""
    steps, attrs = view.steps, view.attrs
    head = steps[k.steps[0]]
    if k.kind == "gemm" and head["op"] in GEMM_INPUTS:
        args = [("a", "a"), ("b", "b")]
    elif k.kind == "gemm":
        a = attrs[k.steps[0]]
        args = [("x", "x"), ("w", f"self.{a}.weight")] + ([("bias", f"self.{a}.bias")] if head["params"]["bias"] else [])
    else:
        args = [("x", "x")]
    for j in k.steps:
        op = steps[j]["op"]
        if op in CHANNEL_PARAMS:
            args.append((f"p{j}", f"self.{attrs[j]}"))
        elif op == "layer_norm":
            args += [(f"w{j}", f"self.{attrs[j]}.weight"), (f"b{j}", f"self.{attrs[j]}.bias")]
        elif op == "rms_norm":
            args.append((f"w{j}", f"self.{attrs[j]}.weight"))
        elif op == "residual_add" and skip_source(steps, k, j) == "memory":
            args.append(("skip", "skip"))
    return args


def chain_lines(view: ProgramView, k: Kernel, entry: int, part: list, lang: str, chan: str, idx: str, load,
                stored: bool = True) -> list[str]:
    """Statements applying the steps of `part` (one of chain_parts, entered by step `entry`'s
    output) to `v`: `chan` indexes a per-channel parameter, `idx` the element in a skip tensor,
    `load(ptr, index)` reads one value as fp32. A residual whose skip is a register of this
    chain saves it where it is made. In a bf16 program each step's result is rounded to bf16
    as the reference's tensor holds it (exprs.ROUND), but for the last when `stored` (its store
    rounds it)."""
    steps = view.steps
    keep = {steps[r]["params"]["skip_from"] for r in part if steps[r]["op"] == "residual_add"
            and skip_source(steps, k, r) == "chain"}
    save = "const float skip_v = v;" if lang == "cuda" else "skip_v = v"
    out = [save] if entry in keep else []
    stmt = cuda_stmt if lang == "cuda" else triton_stmt
    bf16 = view.dtype == "bf16"
    last = part[-1] if part else None
    for j in part:
        s = steps[j]
        op = s["op"]
        if op in CHANNEL_PARAMS:
            out.append(stmt(op, {}, p=load(f"p{j}", chan)))
        elif op == "residual_add":
            src = skip_source(steps, k, j)
            out.append(stmt(op, {}, skip="skip_v" if src == "chain" else load("skip" if src == "memory" else "x", idx)))
        elif op in ROW_OPS:
            continue          # the row step itself: written by the row kernel
        else:
            out.append(stmt(op, s["params"], bf16=bf16))
        if bf16 and op not in EXACT_IN_BF16 and not (stored and j == last):
            out.append(round_stmt(lang))
        if j in keep:
            out.append(save)
    return out


def round_stmt(lang: str) -> str:
    """`v` rounded to bf16, as the reference's bf16 tensor holds the value (exprs.ROUND)."""
    return f"v = {ROUND}(v);" if lang == "cuda" else f"v = {ROUND}(v)"


def rounded_entry(view: ProgramView, part: list, lang: str) -> list[str]:
    """Before an epilogue (`part`, after a row step or a GEMM): the entering value rounded as the
    reference's bf16 tensor holds it, where a step follows (else the store rounds it)."""
    return [round_stmt(lang)] if view.dtype == "bf16" and part else []
