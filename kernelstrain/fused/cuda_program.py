"""A fused program's CUDA source: its kernels (rows and elementwise chains from cuda_src, a GEMM
with its epilogue from cuda_gemm, which builds on cuda_src's helpers) after the shared prelude."""
from __future__ import annotations

from .cuda_gemm import gemm_kernel
from .cuda_src import PRELUDE, REDUCE, SCALAR, VECTOR, ew_kernel, row_kernel
from .exprs import CUDA_ROUND_FN, ROUND
from .view import ProgramView


def cuda_source(view: ProgramView, kernels: list, params: dict, bug: str | None) -> tuple[str, list[str]]:
    """(the CUDA source of the candidate's kernels, their host functions' names)."""
    parts, hosts, names = [PRELUDE.format(scalar=SCALAR[view.dtype])], [], []
    if params.get("vec"):
        parts.append(VECTOR)
    if any(k.kind == "row" for k in kernels):
        parts.append(REDUCE)
    for n, k in enumerate(kernels, 1):
        name = f"k{n}_{k.kind}"
        kernel, host = {"row": row_kernel, "ew": ew_kernel, "gemm": gemm_kernel}[k.kind](view, k, name, params, bug)
        parts.append("\n" + kernel + "\n")
        hosts.append(host)
        names.append(name)
    if any(ROUND + "(" in p for p in parts):       # a bf16 program's kernels that round as the reference does
        parts.insert(1, CUDA_ROUND_FN)
    return "\n".join(parts) + "\n" + "\n\n".join(hosts) + "\n", names
