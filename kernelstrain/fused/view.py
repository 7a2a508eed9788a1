"""A composed program as the fused candidates see it: its steps (task-row form), the Model
attribute each step's parameters live in, and the geometry of a kernel's tensors.

Geometry: a tensor of shape (outer..., C, inner...) seen along its channel dim (features of a
vec/seq tensor: the last dim; channels of an image: dim 1): `C` and `inner`, the product of the
dims after it. A per-channel parameter of element i is p[(i // inner) % C]; a row step reduces
C elements `inner` apart.

>>> v = ProgramView.of(0, 4)
>>> v.ops, v.attrs[0]
(['conv_transpose2d', 'new_gelu', 'residual_add'], 'conv_transpose')
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from .grammar import Program, compose
from .kernels import Kernel, row_step
from .render import task_row
from .types import SPATIAL

_ATTR = re.compile(r"^self\.(\w+) = ")


@dataclass(frozen=True)
class Geometry:
    numel: int
    C: int          # channel (or row) length
    inner: int      # elements between two consecutive channels of one row
    rows: int       # numel // C: rows of a row step

    @property
    def outer(self) -> int:
        return self.rows // self.inner


@dataclass(frozen=True)
class ProgramView:
    program: Program
    row: dict

    @staticmethod
    @lru_cache(maxsize=4096)
    def of(seed: int, index: int) -> "ProgramView":
        p = compose(seed, index)
        return ProgramView(p, task_row(p))

    @property
    def steps(self) -> list:
        return self.row["program"]

    @property
    def ops(self) -> list:
        return self.row["ops"]

    @property
    def dtype(self) -> str:
        return self.row["dtype"]

    @property
    def attrs(self) -> dict:
        """step index -> the Model attribute its setup line creates."""
        out = {}
        for j, s in enumerate(self.program.steps):
            for line in s.setup:
                m = _ATTR.match(line)
                if m:
                    out[j] = m.group(1)
                    break
        return out

    def geometry(self, j: int, side: str = "in") -> Geometry:
        """Geometry of step j's input (or output) along its channel dim; a row step's own dim."""
        t = self.steps[j][side]
        shape = t["shape"]
        d = 1 if t["kind"] in SPATIAL else len(shape) - 1
        dim = self.steps[j]["params"].get("dim")
        if isinstance(dim, int) and self.steps[j]["role"] in ("softmax", "reduction", "norm"):
            d = dim % len(shape)
        numel = math.prod(shape)
        return Geometry(numel, shape[d], math.prod(shape[d + 1:]), numel // shape[d])

    def kernel_geometry(self, k: Kernel) -> Geometry:
        """The geometry a kernel runs over: its row step's input for a row kernel, else its first
        elementwise step's input (a GEMM: its output)."""
        r = row_step(self.steps, k)
        if r is not None:
            return self.geometry(r)
        j = k.steps[1] if k.kind == "gemm" and len(k.steps) > 1 else k.steps[0]
        return self.geometry(j, "out" if k.kind == "gemm" and len(k.steps) == 1 else "in")
