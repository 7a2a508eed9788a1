"""How an engineer splits a fused program into kernels, rung by rung.

A program is a list of steps (task rows' `program`). Steps our kernels can compute
(exprs.fusible) are grouped into Kernels; every other step (GEMM, conv, attention, pooling,
batch/group norm ...) stays the PyTorch call the reference makes. The plans, in the order an
engineer climbs them:

  op_kernels         one custom kernel per fusible step
  fused_elementwise  each run of elementwise steps in one kernel; row steps alone
  fused_row          a row step (norm, softmax, reduction) with the elementwise runs around it
                     in one row kernel: prologue applied as the row is loaded, epilogue as it is stored
  fused_rows         (Triton) consecutive row kernels over the same rows in one: the row stays in registers from
                     one row step to the next (a norm, then a softmax or a reduction of the normalized row)
  gemm_epilogue      a GEMM (linear, matmul, bmm) with the elementwise run after it in its epilogue

A residual add reads a tensor saved earlier: inside one kernel's chain it is a register; else
it must exist in memory, so the kernel that computes it ends there (`materialize`).

>>> prog = [{"op": "linear", "role": "contraction", "params": {}}, {"op": "relu", "role": "elementwise", "params": {}},
...         {"op": "softmax", "role": "softmax", "params": {"dim": -1}}, {"op": "scale", "role": "elementwise", "params": {}}]
>>> [(k.kind, k.steps) for k in plan(prog, "fused_row") if isinstance(k, Kernel)]
[('row', (1, 2, 3))]
>>> [(k.kind, k.steps) for k in plan(prog, "gemm_epilogue") if isinstance(k, Kernel)]
[('gemm', (0, 1)), ('row', (2, 3))]
"""
from __future__ import annotations

from dataclasses import dataclass

from .exprs import ELEMENTWISE, ROW_OPS, fusible
from .types import SPATIAL

PLANS = ("op_kernels", "fused_elementwise", "fused_row", "fused_rows", "gemm_epilogue")
ROW_OUT = ("layer_norm", "rms_norm", "softmax", "log_softmax")      # row steps that write every element of the row
GEMM_HEADS = ("linear", "matmul", "bmm")


@dataclass(frozen=True)
class Kernel:
    """One custom kernel: its kind (ew | row | gemm) and the steps it computes, in order."""
    kind: str
    steps: tuple


def _is_row(step: dict) -> bool:
    return step["op"] in ROW_OPS


def _is_ew(step: dict) -> bool:
    return step["op"] in ELEMENTWISE


def _runs(program: list) -> list[list[int]]:
    """Maximal runs of consecutive fusible steps."""
    runs, cur = [], []
    for j, s in enumerate(program):
        if fusible(s):
            cur.append(j)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    return runs


def _group_run(program: list, run: list[int], how: str) -> list[Kernel]:
    if how == "op_kernels":
        return [Kernel("row" if _is_row(program[j]) else "ew", (j,)) for j in run]
    if how == "fused_elementwise":
        out, cur = [], []
        for j in run:
            if _is_row(program[j]):
                if cur:
                    out.append(Kernel("ew", tuple(cur)))
                    cur = []
                out.append(Kernel("row", (j,)))
            else:
                cur.append(j)
        if cur:
            out.append(Kernel("ew", tuple(cur)))
        return out
    # fused_row: elementwise steps join the row step after them (prologue) until one is met,
    # then the one before them (epilogue)
    out, cur, has_row = [], [], False
    for j in run:
        if _is_row(program[j]):
            if has_row:
                out.append(Kernel("row", tuple(cur)))
                cur = []
            has_row = True
        cur.append(j)
    out.append(Kernel("row" if has_row else "ew", tuple(cur)))
    return out


def plan(program: list, how: str) -> list:
    """The program as a list of items in order: a step index (a PyTorch call) or a Kernel."""
    if how not in PLANS:
        raise ValueError(f"unknown plan {how!r}")
    if how == "fused_rows":
        return materialize(program, merge_rows(program, plan(program, "fused_row")))
    grouping = "fused_row" if how == "gemm_epilogue" else how
    items, runs = [], {r[0]: r for r in _runs(program)}
    j = 0
    while j < len(program):
        if how == "gemm_epilogue" and program[j]["op"] in GEMM_HEADS:
            run = runs.pop(j + 1, [])
            chain = []
            for k in run:
                if not _is_ew(program[k]):
                    break
                chain.append(k)
            items.append(Kernel("gemm", (j, *chain)))
            rest = run[len(chain):]
            if rest:
                items += _group_run(program, rest, grouping)
            j = (run[-1] if run else j) + 1
            continue
        if j in runs:
            run = runs.pop(j)
            items += _group_run(program, run, grouping)
            j = run[-1] + 1
            continue
        items.append(j)
        j += 1
    return materialize(program, items)


def _last_dim(step: dict) -> bool:
    """A row step reduces its input's last dim: its `dim`, or a norm's own (the features of a vector or sequence
    tensor; an image's channels are dim 1: view.geometry)."""
    dim, rank = step["params"].get("dim"), len(step["in"]["shape"])
    if isinstance(dim, int):
        return dim % rank == rank - 1
    return step["in"].get("kind") not in SPATIAL


def merge_rows(program: list, items: list) -> list:
    """Adjacent row kernels joined where the first's row steps all write the row (a norm, a softmax) along
    the last dim and the next one's row step reduces the same last-dim rows: the row stays in the
    program's registers from one row step to the next (fused_rows).

    >>> prog = [{"op": "layer_norm", "role": "norm", "params": {}, "in": {"shape": [4, 64]}, "out": {"shape": [4, 64]}},
    ...         {"op": "relu", "role": "elementwise", "params": {}, "in": {"shape": [4, 64]}, "out": {"shape": [4, 64]}},
    ...         {"op": "softmax", "role": "softmax", "params": {"dim": -1}, "in": {"shape": [4, 64]}, "out": {"shape": [4, 64]}}]
    >>> [(k.kind, k.steps) for k in plan(prog, "fused_row")], [(k.kind, k.steps) for k in plan(prog, "fused_rows")]
    ([('row', (0, 1)), ('row', (2,))], [('row', (0, 1, 2))])
    """
    out = []
    for it in items:
        prev = out[-1] if out else None
        if isinstance(it, Kernel) and it.kind == "row" and isinstance(prev, Kernel) and prev.kind == "row" \
                and prev.steps[-1] + 1 == it.steps[0] and _rows_carry(program, prev, it):
            out[-1] = Kernel("row", prev.steps + it.steps)
        else:
            out.append(it)
    return out


def _rows_carry(program: list, first: Kernel, second: Kernel) -> bool:
    """`first`'s row steps each write their whole last-dim row, and `second`'s row step reads rows of that length."""
    rows = [j for j in first.steps if _is_row(program[j])]
    nxt = next(j for j in second.steps if _is_row(program[j]))
    width = program[rows[0]]["in"]["shape"][-1]
    return all(program[j]["op"] in ROW_OUT and _last_dim(program[j]) for j in rows) and _last_dim(program[nxt]) \
        and program[nxt]["in"]["shape"][-1] == width and program[first.steps[-1]]["out"]["shape"][-1] == width


def last_step(item) -> int:
    return item.steps[-1] if isinstance(item, Kernel) else item


def first_step(item) -> int:
    return item.steps[0] if isinstance(item, Kernel) else item


def skip_source(program: list, kernel: Kernel, r: int) -> str:
    """Where the residual step r of `kernel` finds its skip tensor: 'chain' (a register of the
    chain it is in), 'input' (the kernel's input tensor) or 'memory' (a saved tensor)."""
    j = program[r]["params"]["skip_from"]
    for entry, part in chain_parts(program, kernel):
        if r in part and (j == entry or j in part[:part.index(r)]):
            return "chain"
    return "input" if j == kernel.steps[0] - 1 else "memory"


def chain_parts(program: list, kernel: Kernel) -> list[tuple[int, list[int]]]:
    """The runs of steps one register value flows through, each with the step whose output
    enters it: (input, prologue + row step) and (row step, epilogue) of a row kernel, (input,
    all) of an elementwise kernel, (GEMM, epilogue) of a GEMM kernel."""
    steps = list(kernel.steps)
    if kernel.kind == "row":      # (input, prologue + first row step), (each row step, the steps up to the next one's end)
        rows = [i for i, j in enumerate(steps) if _is_row(program[j])]
        ends = [b + 1 for b in rows[1:]] + [len(steps)]
        return [(steps[0] - 1, steps[:rows[0] + 1])] + [(steps[a], steps[a + 1:e]) for a, e in zip(rows, ends)]
    if kernel.kind == "gemm":
        return [(steps[0], steps[1:])]
    return [(steps[0] - 1, steps)]


def materialize(program: list, items: list) -> list:
    """Split kernels so that every skip tensor read from memory exists there: the kernel that
    computes it ends at it (an engineer writes the saved tensor out, or fuses less)."""
    while True:
        ends = {last_step(it) for it in items} | {-1}
        need = None
        for it in items:
            if not isinstance(it, Kernel):
                continue
            for r in it.steps:
                if program[r]["op"] == "residual_add" and skip_source(program, it, r) == "memory":
                    j = program[r]["params"]["skip_from"]
                    if j not in ends:
                        need = j
        if need is None:
            return items
        out = []
        for it in items:
            if isinstance(it, Kernel) and need in it.steps[:-1]:
                at = it.steps.index(need) + 1
                out += [_kernel(program, it.steps[:at], it.kind), _kernel(program, it.steps[at:], it.kind)]
            else:
                out.append(it)
        items = out


def _kernel(program: list, steps: tuple, kind: str) -> Kernel:
    """A part of a split kernel: a GEMM keeps its head, a row kernel its row step; the rest is elementwise."""
    if kind == "gemm" and program[steps[0]]["op"] in GEMM_HEADS:
        return Kernel("gemm", tuple(steps))
    if any(_is_row(program[j]) for j in steps):
        return Kernel("row", tuple(steps))
    return Kernel("ew", tuple(steps))


def row_step(program: list, kernel: Kernel) -> int | None:
    """A row kernel's first row step (its geometry's; a fused_rows kernel has more: row_steps)."""
    return next((j for j in kernel.steps if _is_row(program[j])), None) if kernel.kind == "row" else None


def row_steps(program: list, kernel: Kernel) -> list[int]:
    """Every row step of a row kernel, in order."""
    return [j for j in kernel.steps if _is_row(program[j])] if kernel.kind == "row" else []


def kernels_of(items: list) -> list[Kernel]:
    return [it for it in items if isinstance(it, Kernel)]
