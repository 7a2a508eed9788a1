"""A fused candidate as a complete KernelBench solution: one file, `class ModelNew`, kernels
built in the file (CUDA through load_inline from a readable source string, or Triton), nothing
that needs `__file__`.

ModelNew builds the same modules and parameters as the reference Model, in the same order (the
harness seeds both constructions alike, so their weights agree), and its forward runs the plan:
a PyTorch call for each step no kernel of ours computes, one call a custom kernel.

CUDA: the source string opens on line 4, so nvcc's line numbers in load_inline's build log
(cuda.cu: three include lines, then the string) are this file's line numbers.
"""
from __future__ import annotations

import hashlib

from .catalog import HELPERS
from .graphs import graph_methods
from .kernels import Kernel, kernels_of, last_step, skip_source
from .types import TORCH_DTYPE
from .view import ProgramView


def _helpers(view: ProgramView) -> list[str]:
    names = []
    for s in view.program.steps:
        names += [h for h in s.helpers if h not in names]
    return [HELPERS[h] for h in names]


def _needs_saved_skip(view: ProgramView, items: list) -> bool:
    return any(view.steps[r]["op"] == "residual_add" and skip_source(view.steps, k, r) == "memory"
               for k in kernels_of(items) for r in k.steps)


def forward_lines(view: ProgramView, items: list, call) -> list[str]:
    """ModelNew.forward's body: `call(kernel, n)` -> the expression calling the n-th kernel."""
    p = view.program
    save = _needs_saved_skip(view, items)
    body = ["skip = x"] if save and p.skip_from == -1 else []
    n = 0
    for it in items:
        if isinstance(it, Kernel):
            n += 1
            body.append(f"x = {call(it, n)}")
        else:
            body += p.steps[it].lines
        if save and p.skip_from is not None and p.skip_from >= 0 and last_step(it) == p.skip_from:
            body.append("skip = x")
    return body


def model_new(view: ProgramView, body: list[str], title: str, graphed: bool = False) -> str:
    """The ModelNew class (and what it needs: helpers, dtype) around a forward body; `graphed`: the body
    is `run`, which forward captures in a CUDA graph and replays (graphs.graph_methods)."""
    p, ctx = view.program, view.program.ctx
    setup = [line for s in p.steps for line in s.setup]
    if p.dtype != "fp32":
        setup.append("self.to(dtype)")
    if graphed:
        setup.append("self.graph = None")
    out = [f"\n\n{h}\n" for h in _helpers(view)]
    if p.dtype != "fp32":
        out.append(f"\n\ndtype = {TORCH_DTYPE[p.dtype]}\n")
    init_sig = "".join(f", {a}" for a in ctx.init_args)
    args = ", ".join(i["name"] for i in p.inputs)
    out.append(f"\n\nclass ModelNew(nn.Module):\n    \"\"\"{title}\"\"\"\n\n    def __init__(self{init_sig}):\n"
               "        super().__init__()\n" + "".join(f"        {line}\n" for line in setup) + "\n"
               + (graph_methods(args, body) if graphed else
                  f"    def forward(self, {args}):\n" + "".join(f"        {line}\n" for line in body) + "        return x\n"))
    return "".join(out)


def _imports(view: ProgramView) -> str:
    helpers = {h for s in view.program.steps for h in s.helpers}
    return ("import math\n" if "NewGELU" in helpers else "") + "import torch.nn.functional as F\n"


def eager_solution(view: ProgramView) -> str:
    """The baseline: the reference program as ModelNew (what the engineer starts from)."""
    p = view.program
    body = ["skip = x"] if p.skip_from == -1 else []
    for j, s in enumerate(p.steps):
        body += s.lines
        if p.skip_from == j:
            body.append("skip = x")
    return ("import torch\nimport torch.nn as nn\n" + _imports(view)
            + model_new(view, body, "The program in PyTorch eager mode: the baseline to beat."))


def cuda_solution(view: ProgramView, items: list, source: str, prototypes: str, names: list[str], title: str,
                  graphed: bool = False) -> str:
    digest = hashlib.sha256(source.encode()).hexdigest()[:10]
    module = f"fused_{view.row['id']}_{digest}"
    functions = ", ".join(f'"{n}"' for n in names)
    head = ("import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
            f'cuda_source = r"""\n{source}"""\n\ncpp_source = """\n{prototypes}\n"""\n\n'
            f"fused_ops = load_inline(\n    name=\"{module}\",\n    cpp_sources=cpp_source,\n    cuda_sources=cuda_source,\n"
            f"    functions=[{functions}],\n    extra_cuda_cflags=[\"-O3\"],\n    verbose=False,\n)\n\n" + _imports(view))

    def call(k: Kernel, n: int) -> str:
        from .chain import kernel_args
        return f"fused_ops.{names[n - 1]}({', '.join(e for _, e in kernel_args(view, k))})"
    return head + model_new(view, forward_lines(view, items, call), title, graphed)


def triton_solution(view: ProgramView, items: list, source: str, names: list[str], title: str, graphed: bool = False) -> str:
    head = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n" + _imports(view)

    def call(k: Kernel, n: int) -> str:
        from .chain import kernel_args
        return f"{names[n - 1]}({', '.join(e for _, e in kernel_args(view, k))})"
    return head + "\n\n" + source + model_new(view, forward_lines(view, items, call), title, graphed)
