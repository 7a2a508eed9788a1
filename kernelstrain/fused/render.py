"""A composed program as a KernelBench-form source file and as a task row.

The source has the KernelBench contract: `class Model(nn.Module)` whose `__init__` takes
the values of `get_init_inputs()`, module-level shape constants, `get_inputs()` and
`get_init_inputs()`.
"""
from __future__ import annotations

import hashlib

from .catalog import HELPERS
from .cost import fused_cost
from .grammar import Program, compose
from .similarity import normalized_hash
from .types import TORCH_DTYPE

SCHEMA = "kernelstrain/fused_task@1"
TITLES = {"residual_add": "residual add", "sdpa": "scaled dot-product attention", "gram": "x @ x^T"}


def task_id(seed: int, index: int) -> str:
    """Stable id of candidate `index` of the stream of `seed`.

    >>> task_id(0, 42)
    'fused_s0_00042'
    """
    return f"fused_s{seed}_{index:05d}"


def _literal(value) -> str:
    return repr(tuple(value)) if isinstance(value, (tuple, list)) else repr(value)


def render_source(p: Program) -> str:
    ctx = p.ctx
    helpers = []
    for s in p.steps:
        helpers += [h for h in s.helpers if h not in helpers]
    forward_args = ", ".join(i["name"] for i in p.inputs)
    body = []
    if p.skip_from == -1:
        body.append("skip = x")
    for j, s in enumerate(p.steps):
        body += s.lines
        if p.skip_from == j:
            body.append("skip = x")
    setup = [line for s in p.steps for line in s.setup]
    if p.dtype != "fp32":
        setup.append("self.to(dtype)")
    title = " -> ".join(TITLES.get(s.op, s.op.replace("_", " ")) for s in p.steps)
    init_sig = "".join(f", {a}" for a in ctx.init_args)
    out = ["import math\n" if "NewGELU" in helpers else "", "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"]
    out += [f"\n{HELPERS[h]}\n\n" for h in helpers]
    out.append(f"\nclass Model(nn.Module):\n    \"\"\"{title[0].upper() + title[1:]}.\"\"\"\n\n"
               f"    def __init__(self{init_sig}):\n        super().__init__()\n")
    out += [f"        {line}\n" for line in setup]
    out.append(f"\n    def forward(self, {forward_args}):\n")
    out += [f"        {line}\n" for line in body]
    out.append("        return x\n\n\n")
    out += [f"{name} = {ctx.exprs.get(name, _literal(value))}\n" for name, value in ctx.consts.items()]
    if p.dtype != "fp32":
        out.append(f"dtype = {TORCH_DTYPE[p.dtype]}\n")
    out.append(f"\n\ndef get_inputs():\n    return [{', '.join(i['expr'] for i in p.inputs)}]\n\n\n"
               f"def get_init_inputs():\n    return [{', '.join(ctx.init_args)}]\n")
    return "".join(out)


def _type(t) -> dict:
    return {"kind": t.kind, "shape": list(t.shape)}


def task_row(p: Program) -> dict:
    """The task row (schema kernelstrain/fused_task@1) of a program, before filtering."""
    source = render_source(p)
    row = {"schema": SCHEMA, "id": task_id(p.seed, p.index), "index": p.index, "seed": p.seed,
           "ops": [s.op for s in p.steps],
           "program": [{"op": s.op, "role": s.role, "params": s.params, "in": _type(s.t_in), "out": _type(s.t_out),
                        "flops": s.flops, "bytes": s.bytes, "weights": s.weights} for s in p.steps],
           "inputs": [{"name": i["name"], "shape": i["shape"], "dtype": i["dtype"]} for i in p.inputs],
           "output": {"shape": list(p.output.shape), "dtype": p.dtype},
           "shapes": {k: list(v) if isinstance(v, tuple) else v for k, v in p.ctx.consts.items()},
           "dtype": p.dtype,
           "dtypes": sorted({i["dtype"] for i in p.inputs} | {p.dtype}),
           "source": source,
           "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
           "normalized_sha256": normalized_hash(source)}
    unfused, fused = fused_cost(row)
    row.update({"flops": unfused.flops, "bytes": fused.bytes, "unfused_bytes": unfused.bytes,
                "eager_ms": None, "compiled_ms": None, "device": None, "filter": None})
    return row


def candidate(seed: int, index: int) -> dict:
    """Candidate `index` of the deterministic stream of `seed`: its task row."""
    return task_row(compose(seed, index))
