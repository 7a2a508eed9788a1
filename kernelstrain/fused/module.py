"""A fused program as an op module the engine drives unchanged: rungs with Params, launch
models, renders (complete KernelBench solutions) and bugs, synthesized from the program's
operator graph.

The ladder, as an engineer fuses (rungs whose kernels would be the same as the rung below are
left out):
  eager              the program in PyTorch, as ModelNew (the baseline: speedup vs eager 1.0)
  op_kernels         one custom kernel per elementwise / row step, the library calls kept
  fused_elementwise  each elementwise run in one kernel
  fused_row          the runs fused into the norm / softmax / reduction they border (one row kernel)
  vectorized_loads   (CUDA) vector loads with a scalar tail, rows cached in registers
  multi_row_tiles    (Triton) several rows a program (where the row kernel has >= MULTI_ROW_MIN_ROWS rows)
  fused_rows         (Triton) consecutive row kernels over the same rows in one (kernels.merge_rows): a norm's
                     row kept in registers for the softmax / norm / reduction after it, one launch fewer
  gemm_epilogue      a GEMM kernel with the elementwise run in its epilogue (Triton: tl.dot; CUDA: cuda_gemm.py)
  cuda_graph         the leanest fused plan's call (library GEMMs kept) captured in a CUDA graph and replayed
  cuda_graph_gemm    ... and gemm_epilogue's call (graphs.py; checked on an H100: fused j1)

A bug is offered only where it breaks this program's output (module docstrings of cuda_src and
triton_src): a per-channel index on a tensor with spatial dims, a row shorter than its power-of-two
tile, an exp whose input surely overflows, a row op along a dim that is not the last.

Module names: `fused_s{seed}_{index:05d}_{impl}` (REGISTRY makes them on demand: ops.Registry).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from ..calibration import FIT
from ..ops import REGISTRY
from ..ops.base import Cost, Launch, OpModule, Param, Rung, Task
from ..sim import SimResult, noise_cv
from .cost import fused_cost
from .cuda_gemm import cuda_gemm_ms, gemm_threads
from .cuda_program import cuda_source
from .cuda_src import cached_row, prototypes
from .exprs import CHANNEL_PARAMS, EXP_ROWS
from .graphs import graph_host_calls, input_copies_ms, on_current_stream
from .kernels import GEMM_HEADS, Kernel, kernels_of, plan, row_step, row_steps
from .magnitude import exp_overflows, magnitudes
from .precision import SUM_PASSES, gemm_breaks, row_breaks, tf32_gemm_breaks
from .solution import cuda_solution, eager_solution, triton_solution
from .recipes import recipe
from .render import task_id
from .timing import (call_ms, compiled_ms, custom_kernel_ms, eager_ms, gemm_dims, host_calls, host_us,
                     torch_kernels, torch_launches, triton_gemm_ms)
from .triton_src import next_pow2, triton_source
from .types import DTYPE_BYTES
from .view import ProgramView

# steps that carry an inf or NaN to the output unchanged in kind (a saturating one, tanh of inf, would hide it)
CARRY_NONFINITE = ("scale", "divide", "add_scalar", "bias_add", "scale_param", "residual_add", "abs")
MAX_BLOCK_THREADS = 1024     # threads a block on every NVIDIA GPU
BIG_GEMM_TILES = 64      # 128x128 output tiles from which a GEMM starts on the large config (half an H100's SMs)
# several rows a Triton program pays where a row a program makes a grid of waves; under two programs an SM
# of the largest GPU (132 SMs) the grid is under one wave already, and packing rows only idles SMs (the
# model agrees: on seed 0's first 750 episodes, no program under 256 rows gained 0.3% from it)
MULTI_ROW_MIN_ROWS = 256
NAME = re.compile(r"^fused_s(\d+)_(\d{5,})_(cuda|triton)$")
IMPLS = ("cuda", "triton")
FAMILIES = {"linear": "gemm", "matmul": "gemm", "bmm": "gemm", "gram": "gemm", "sdpa": "attention",
            "embedding": "embedding"}
TITLES = {
    "eager": "the program in PyTorch eager mode (ModelNew = the reference)",
    "op_kernels": "one custom kernel per elementwise and row step, library calls kept",
    "fused_elementwise": "each run of elementwise steps fused into one kernel",
    "fused_row": "elementwise runs fused into the row kernel (norm / softmax / reduction) they border",
    "vectorized_loads": "vector loads with a scalar tail; rows cached in registers",
    "multi_row_tiles": "several rows per program, each row whole in registers",
    "fused_rows": "consecutive row steps over the same rows in one kernel, the row kept in registers between them",
    "gemm_epilogue": "a GEMM kernel with the elementwise run in its epilogue",
    "cuda_graph": "the call captured once in a CUDA graph and replayed: the host issues one replay, not each launch",
    "cuda_graph_gemm": "the GEMM-epilogue call captured once in a CUDA graph and replayed",
}
GRAPHED = ("cuda_graph", "cuda_graph_gemm")       # rungs that replay another rung's plan from a CUDA graph (graphs.py)


def family(ops: list) -> str:
    """The program's family for reports: its first library head (gemm, conv, attention,
    embedding), else pointwise_reduce."""
    for op in ops:
        if op in FAMILIES:
            return FAMILIES[op]
        if op.startswith("conv"):
            return "conv"
    return "pointwise_reduce"


@dataclass(frozen=True)
class FusedRung(Rung):
    """A rung whose half_accumulator bug breaks the output at some parameters and not at others
    (how many terms one bf16 accumulator takes): `half_breaks(params)` decides, per candidate;
    with no params, at the parameters that give it the most terms (precision.py)."""
    half_breaks: Callable = field(default=None, compare=False, repr=False)

    def bugs_for(self, dtype: str, params: dict | None = None) -> tuple:
        return tuple(b for b in super().bugs_for(dtype, params) if b != "half_accumulator" or self.half_breaks(params))


@dataclass(frozen=True)
class Output:
    """The one output the correctness check compares (messages._output_shape reads entry.outputs)."""
    shape: tuple
    dtype: str
    # the tensors feasibility's alignment rules read (ops' contract Args): none declared here; a
    # fused program's vector widths are chosen to divide its rows where the ladder is built
    args: tuple = ()

    def outputs(self, task) -> list:
        return [("y", self.shape, self.dtype)]


class FusedModule(OpModule):
    """One fused program in one language."""
    captures = GRAPHED

    def __init__(self, seed: int, index: int, impl: str):
        self.view = ProgramView.of(seed, index)
        row = self.view.row
        self.op, self.impl = row["id"], impl
        self.family = family(row["ops"])
        self.title = " -> ".join(row["ops"])
        self.desc = (f"Fused program of {len(row['ops'])} PyTorch operators ({self.title}); write ModelNew with "
                     "custom kernels that computes the same output faster.")
        self.dims = {k: k for k, v in row["shapes"].items() if isinstance(v, int)}
        self.shapes = ({k: v for k, v in row["shapes"].items() if isinstance(v, int)},)
        self.dtypes = (row["dtype"],)
        self.entry = Output(tuple(row["output"]["shape"]), row["dtype"])
        self.inputs = tuple(i["name"] for i in row["inputs"])
        self._plans, self._half, self._gemm_half, self._graph_base = {}, {}, {}, {}
        self.variants = tuple(self._ladder())

    # -- the ladder ---------------------------------------------------------------------
    def _ladder(self) -> list:
        steps = self.view.steps
        rungs = [self._rung("eager", (), [])]
        seen = set()
        structural = ["op_kernels", "fused_elementwise", "fused_row"]
        for tag in structural:
            items = plan(steps, tag)
            key = tuple(items)
            if not kernels_of(items) or key in seen:
                continue
            seen.add(key)
            self._plans[tag] = items
            rungs.append(self._rung(tag, self._params(items, tag), items))
        top = self._plans.get("fused_row") or self._plans.get("fused_elementwise") or self._plans.get("op_kernels")
        has_row = top is not None and any(k.kind == "row" for k in kernels_of(top))
        if top is not None and self.impl == "cuda":
            self._plans["vectorized_loads"] = top
            rungs.append(self._rung("vectorized_loads", self._params(top, "vectorized_loads"), top))
        if top is not None and self.impl == "triton" and has_row and self._most_rows(top) >= MULTI_ROW_MIN_ROWS:
            self._plans["multi_row_tiles"] = top
            rungs.append(self._rung("multi_row_tiles", self._params(top, "multi_row_tiles"), top))
        if top is not None and self.impl == "triton" and has_row:
            items = plan(steps, "fused_rows")
            if len(kernels_of(items)) < len(kernels_of(top)):
                self._plans["fused_rows"] = items
                rungs.append(self._rung("fused_rows", self._params(items, "fused_rows"), items))
        lean = rungs[-1].tag        # the leanest plan keeping the library's GEMMs, at its last rung's parameters
        if any(s["op"] in GEMM_HEADS for s in steps):
            items = plan(steps, "gemm_epilogue")
            self._plans["gemm_epilogue"] = items
            rungs.append(self._rung("gemm_epilogue", self._params(items, "gemm_epilogue"), items))
        if top is not None:
            # the leanest plan that keeps the library's GEMMs (vectorized_loads, multi_row_tiles, fused_rows ...) and
            # the GEMM-epilogue plan: the graph removes the host's calls, the plan the GPU's passes
            rungs.append(self._graph_rung("cuda_graph", lean))
        if "gemm_epilogue" in self._plans:
            rungs.append(self._graph_rung("cuda_graph_gemm", "gemm_epilogue"))
        return rungs

    def _graph_rung(self, tag: str, base: str) -> Rung:
        """A rung replaying `base`'s plan from a CUDA graph, tuned by the same parameters."""
        self._graph_base[tag] = base
        items = self._plans[tag] = self._plans[base]
        return self._rung(tag, self._params(items, base), items)

    def _kernel_tag(self, tag: str) -> str:
        """The rung whose kernels a rung's code runs: a graphed rung's base, else itself."""
        return self._graph_base.get(tag, tag)

    def _most_rows(self, items: list) -> int:
        """Rows of the longest-gridded row kernel of a plan (one program a row)."""
        return max(self.view.geometry(row_step(self.view.steps, k)).rows for k in kernels_of(items) if k.kind == "row")

    def _params(self, items: list, tag: str) -> tuple:
        kinds = {k.kind for k in kernels_of(items)}
        out = []
        if self.impl == "cuda":
            if "ew" in kinds:
                out.append(Param("threads", (128, 256, 512, 1024), 256))
            if "row" in kinds:
                out.append(Param("row_threads", (32, 64, 128, 256, 512, 1024), 128))
                if tag == "vectorized_loads":       # short rows: a warp (or a few) a row, several rows a block
                    out.append(Param("rows_per_block", (1, 2, 4, 8), 1))
            if tag == "vectorized_loads" and "ew" in kinds:
                out.append(Param("vec", (2, 4, 8) if self.view.dtype == "bf16" else (2, 4), 4))
            if "gemm" in kinds:
                # the classic register-tiled SGEMM's start: 64x64 tiles, 16 deep, a 4x4 patch a thread (256 threads)
                out += [Param("BLOCK_M", (32, 64, 128), 64), Param("BLOCK_N", (32, 64, 128), 64), Param("BLOCK_K", (8, 16, 32), 16),
                        Param("THREAD_M", (2, 4, 8), 4), Param("THREAD_N", (2, 4, 8), 4)]
            return tuple(out)
        if "ew" in kinds:
            out += [Param("BLOCK", (256, 512, 1024, 2048, 4096), 1024), Param("num_warps", (1, 2, 4, 8), 4)]
        if "row" in kinds:
            out.append(Param("row_warps", (1, 2, 4, 8), 4))
            if tag in ("multi_row_tiles", "gemm_epilogue") or \
                    (tag == "fused_rows" and self._most_rows(items) >= MULTI_ROW_MIN_ROWS):
                out.append(Param("ROWS", (2, 4, 8, 16), 4))
        if "gemm" in kinds:
            # the start an engineer takes from Triton's matmul tutorial: 128x128x64 tiles on 8 warps for a
            # product of many tiles, 64x64x32 on 4 for a small one; the sweep explores around it
            big = self._gemm_tiles(items, 128) >= BIG_GEMM_TILES
            out += [Param("BLOCK_M", (32, 64, 128, 256), 128 if big else 64), Param("BLOCK_N", (32, 64, 128, 256), 128 if big else 64),
                    Param("BLOCK_K", (32, 64, 128), 64 if big else 32), Param("gemm_warps", (2, 4, 8), 8 if big else 4),
                    Param("num_stages", (2, 3, 4, 5), 3)]
        return tuple(out)

    def _gemm_tiles(self, items: list, tile: int) -> int:
        """Output tiles of the rung's largest GEMM at tile x tile."""
        dims = [gemm_dims(self.view.steps[k.steps[0]]) for k in kernels_of(items) if k.kind == "gemm"]
        return max(b * math.ceil(m / tile) * math.ceil(n / tile) for b, m, n, _ in dims)

    def _rung(self, tag: str, params: tuple, items: list) -> Rung:
        bugs, bug_params = self._bugs(self._kernel_tag(tag), items)
        path = "fp16" if self.view.dtype == "bf16" else "fp32"
        if self._half_accumulates(items):
            bugs.append("half_accumulator")
        return FusedRung(tag, TITLES[tag], params=params, path=path, launch=self._launch_of(tag), render=self._render_of(tag),
                         bugs={b: {"bug": b} for b in bugs}, bug_params=bug_params,
                         half_breaks=lambda p: self._half_breaks(tag, items, params, p))

    def _half_accumulates(self, items: list) -> bool:
        """Whether a rung's code sums something a bf16 accumulator could keep: a bf16 program's row
        kernel with a sum pass, or its Triton GEMM."""
        steps = self.view.steps
        return self.view.dtype == "bf16" and any(
            any(steps[r]["op"] in SUM_PASSES for r in row_steps(steps, k)) or k.kind == "gemm" for k in kernels_of(items))

    def _half_breaks(self, tag: str, items: list, declared: tuple, params: dict | None) -> bool:
        """Whether the rung's kernels, accumulating in bf16 at `params` (None: at the declared values
        giving one accumulator the most terms: the fewest lanes, the smallest BLOCK_K), break the output."""
        if params is None:
            params = {p.name: min(p.values) for p in declared}
        key = (tag, tuple(sorted(params.items())))
        if key not in self._half:
            self._half[key] = any(self._kernel_half_breaks(k, params) for k in kernels_of(items))
        return self._half[key]

    def _kernel_half_breaks(self, k: Kernel, params: dict) -> bool:
        view, steps = self.view, self.view.steps
        mags = magnitudes(steps)
        if k.kind == "gemm":
            # Triton adds each BLOCK_K step's fp32 dot to the bf16 accumulator; the CUDA GEMM every product (at any
            # parameters: one verdict a kernel)
            block_k = params["BLOCK_K"] if self.impl == "triton" else 1
            key = (k.steps, block_k)
            if key not in self._gemm_half:
                b, m, n, kk = gemm_dims(steps[k.steps[0]])
                w_rms = 1.0 / math.sqrt(3.0 * kk) if steps[k.steps[0]]["op"] == "linear" else 1.0
                self._gemm_half[key] = gemm_breaks(steps, mags, k.steps[0], kk, block_k, w_rms, self.op)
            return self._gemm_half[key]
        return any(self._row_half_breaks(r, params) for r in row_steps(steps, k) if steps[r]["op"] in SUM_PASSES)

    def _row_half_breaks(self, r: int, params: dict) -> bool:
        steps, mags = self.view.steps, magnitudes(self.view.steps)
        C = self.view.geometry(r).C
        if self.impl == "cuda":
            return row_breaks(steps, mags, r, C, min(params["row_threads"], C), "float", self.op)
        block_c = next_pow2(C)
        per_thread = max(1, block_c // (32 * params["row_warps"]))
        return row_breaks(steps, mags, r, C, block_c // per_thread, "tree", self.op)

    def _bugs(self, tag: str, items: list) -> tuple[list, tuple]:
        """The bugs a rung's code can carry here, each only where it breaks this program."""
        view, steps, out, bug_params = self.view, self.view.steps, [], ()
        mags = magnitudes(steps)
        for k in kernels_of(items):
            g = view.kernel_geometry(k)
            if k.kind == "ew" and g.inner > 1 and g.C > 1 and any(steps[j]["op"] in CHANNEL_PARAMS for j in k.steps):
                out.append("broadcast_index")
            if k.kind == "gemm" and view.dtype == "fp32" and self.impl == "triton":     # the CUDA GEMM multiplies on FMA
                head = steps[k.steps[0]]
                if tf32_gemm_breaks(steps, mags, k.steps[0], gemm_dims(head)[3], head["op"] == "linear", self.op):
                    out.append("tf32_dot")
            for r in row_steps(steps, k):          # (a fused_rows kernel has several; the bug is written into each)
                if steps[r]["op"] in EXP_ROWS and exp_overflows(*mags[r], g.numel) \
                        and all(s["op"] in CARRY_NONFINITE for s in steps[r + 1:]):
                    out.append("no_max_subtraction")
                if g.inner > 1:
                    out.append("wrong_reduce_dim")
                if self.impl == "triton" and g.C != next_pow2(g.C):
                    out.append("no_bounds_check")
        if tag == "vectorized_loads":
            tails = [view.kernel_geometry(k).numel for k in kernels_of(items) if k.kind == "ew"]
            if tails:
                least = min(2 * (n & -n) for n in tails)      # the smallest vec that leaves a tail somewhere
                if least <= 8:
                    out.append("missing_tail")
                    bug_params = (("missing_tail", "vec", least),)
        return list(dict.fromkeys(out)), bug_params

    # -- launch model and time -------------------------------------------------------------
    def _launch_of(self, tag: str):
        def launch(params: dict, task: Task) -> Launch:
            kernels = self._kernel_models(tag, params, task)
            if not kernels:
                return Launch(grid=1, threads=128, launches=max(1, self._torch_launches(tag)))
            # the heaviest kernel stands for the candidate (one that asks for a block over the limit first), each
            # kernel's shared memory is checked against the limit (the most any asks)
            over = [km[1] for km in kernels if km[1].threads > MAX_BLOCK_THREADS]
            heavy = over[0] if over else max(kernels, key=lambda km: (km[2].bytes, km[2].flops))[1]
            return Launch(grid=heavy.grid, threads=heavy.threads, smem_bytes=max(km[1].smem_bytes for km in kernels), regs=heavy.regs,
                          bytes_per_access=heavy.bytes_per_access, unrolled=max(km[1].unrolled for km in kernels),
                          launches=len(kernels) + self._torch_launches(tag) + self._copies(tag))
        return launch

    def _copies(self, tag: str) -> int:
        """Copy kernels a graphed rung's call runs: one an input, into the graph's static inputs."""
        return len(self.view.program.inputs) if tag in self._graph_base else 0

    def _torch_launches(self, tag: str) -> int:
        items = self._plans.get(tag)
        steps = self.view.steps
        torch_steps = range(len(steps)) if items is None else [it for it in items if not isinstance(it, Kernel)]
        return sum(torch_launches(steps[j], self.view.dtype) for j in torch_steps)

    def _kernel_models(self, tag: str, params: dict, task: Task) -> list:
        """[(Kernel, Launch, Cost, analog)] of the rung's custom kernels."""
        items = self._plans.get(tag)
        return [] if items is None else [self._kernel_model(k, self._kernel_tag(tag), params, task) for k in kernels_of(items)]

    def _kernel_model(self, k: Kernel, tag: str, params: dict, task: Task):
        view, steps, nb = self.view, self.view.steps, DTYPE_BYTES[self.view.dtype]
        gpu = task.gpu
        flops = sum(steps[j]["flops"] for j in k.steps)
        weights = sum(steps[j]["weights"] for j in k.steps if steps[j]["op"] not in GEMM_HEADS)
        reads_skip = any(steps[j]["op"] == "residual_add" for j in k.steps)
        g = view.kernel_geometry(k)
        if k.kind == "gemm":
            b, m, n, kk = gemm_dims(steps[k.steps[0]])
            out_numel = b * m * n
            moved = (b * (m * kk) + steps[k.steps[0]]["weights"] + (b * kk * n if steps[k.steps[0]]["op"] != "linear" else 0)
                     + out_numel * (2 if reads_skip else 1) + weights) * nb
            bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
            if self.impl == "cuda":
                threads, patch = gemm_threads(params), params["THREAD_M"] * params["THREAD_N"]
                launch = Launch(grid=b * math.ceil(m / bm) * math.ceil(n / bn), threads=threads, smem_bytes=(bm + bn) * bk * 4,
                                regs=min(255, 32 + patch + params["THREAD_M"] + params["THREAD_N"]), bytes_per_access=nb,
                                unrolled=patch * bk)
                return k, launch, Cost(flops, moved), ("cuda_gemm", kk)
            warps, stages = params["gemm_warps"], params["num_stages"]
            tiles = b * math.ceil(m / bm) * math.ceil(n / bn)
            elem = 4 if self.view.dtype == "fp32" else nb
            launch = Launch(grid=tiles, threads=32 * warps, smem_bytes=max(1, stages - 1) * (bm * bk + bk * bn) * elem,
                            regs=min(255, 32 + bm * bn // (32 * warps)), bytes_per_access=16,
                            compute_scale=min(1.0, (bm * bn / (128 * 128)) ** 0.35) * (1.0 if self.view.dtype == "bf16" else 0.9),
                            tile_quant=(m * n) / (math.ceil(m / bm) * bm * math.ceil(n / bn) * bn),
                            traffic=1.0 + 0.5 * (max(1, math.ceil(n / bn)) - 1) / max(1, math.ceil(n / bn)) * (bm < 64),
                            unrolled=bm * bn // (32 * warps))
            return k, launch, Cost(flops, moved), ("triton_gemm", (bm, bn, stages, warps, bk, kk,
                                                                  steps[k.steps[0]]["op"] == "linear"))
        numel_in = g.numel
        out_numel = math.prod(steps[k.steps[-1]]["out"]["shape"])
        moved = (numel_in + out_numel + weights + (out_numel if reads_skip else 0)) * nb
        if k.kind == "ew":
            if self.impl == "cuda":
                threads, vec = params["threads"], params.get("vec", 0) if tag == "vectorized_loads" else 0
                per = threads * max(1, vec)
                grid = math.ceil(numel_in / per)
                launch = Launch(grid=grid, threads=threads, bytes_per_access=nb * max(1, vec), regs=24 + 4 * max(1, vec),
                                lane_util=numel_in / (grid * per))
                analog = ("bias_gelu_cuda", "vectorized_uint4" if vec else "thread_per_element")
            else:
                block, warps = params["BLOCK"], params["num_warps"]
                grid = math.ceil(numel_in / block)
                launch = Launch(grid=grid, threads=32 * warps, bytes_per_access=min(16, nb * max(1, block // (32 * warps))),
                                lane_util=numel_in / (grid * block), unrolled=block // (32 * warps))
                analog = ("swiglu_fwd_triton", "tile_2d")
            return k, launch, Cost(flops, moved), analog
        r = row_step(steps, k)
        op = steps[r]["op"]
        sector = 32 // nb                     # elements of one 32-byte DRAM sector
        norm_like = op in ("layer_norm", "rms_norm")
        if self.impl == "cuda":
            threads, per_block = params["row_threads"], params.get("rows_per_block", 1) if tag == "vectorized_loads" else 1
            cached = tag == "vectorized_loads" and cached_row({"cached": 1, "row_threads": threads}, g.C)
            reads = 1 if cached else len(recipe(op).passes) + (1 if op in ("layer_norm", "rms_norm", "softmax", "log_softmax") else 0)
            strided = 1.0 + 0.5 * (sector - 1) if g.inner > 1 else 1.0
            launch = Launch(grid=math.ceil(g.rows / per_block), threads=threads * per_block, bytes_per_access=nb,
                            smem_bytes=128 * per_block, regs=32 + (4 * math.ceil(g.C / threads) if cached else 0),
                            traffic=strided * (1.0 + 0.15 * (reads - 1)), lane_util=min(1.0, g.C / threads))
            analog = ("layernorm_cuda", "register_cached" if cached else "welford_shuffle") if norm_like else \
                ("softmax_cuda", "vectorized_online" if cached else "warp_shuffle")
        else:
            warps, rows = params["row_warps"], params.get("ROWS", 1) if tag in ("multi_row_tiles", "gemm_epilogue", "fused_rows") else 1
            block_c = next_pow2(g.C)
            strided = 1.0 + 0.5 * (sector / min(rows, sector) - 1) if g.inner > 1 else 1.0
            launch = Launch(grid=math.ceil(g.rows / rows), threads=32 * warps, bytes_per_access=16 if g.inner == 1 else nb,
                            traffic=strided, lane_util=g.C / block_c, unrolled=rows * block_c // (32 * warps),
                            regs=min(255, 32 + rows * block_c // (32 * warps)))
            analog = ("layernorm_triton" if norm_like else "softmax_triton", "whole_row_registers") if rows == 1 else \
                ("rmsnorm_triton", "multi_row_tile")
        return k, launch, Cost(flops, moved), analog

    def simulate(self, variant: Rung, params: dict, task: Task) -> SimResult:
        """Compile-check and time one candidate (sim.simulate defers to this for fused modules)."""
        launch = variant.launch(params, task)
        gpu = task.gpu
        if launch.smem_bytes > gpu.smem_per_block:
            from ..messages import smem_error
            return SimResult(False, None, launch.smem_bytes, launch.regs,
                             smem_error(launch.smem_bytes, gpu.smem_per_block, variant, self, task), "smem")
        if launch.threads > MAX_BLOCK_THREADS:      # rows_per_block x row_threads: it builds; the launch is refused
            from ..messages import resources_error
            return SimResult(False, None, launch.smem_bytes, launch.regs, resources_error(launch, self, task), "resources")
        return SimResult(True, self.candidate_ms(variant.tag, params, task), launch.smem_bytes, launch.regs)

    def candidate_ms(self, tag: str, params: dict, task: Task) -> float:
        return call_ms(self.kernels_ms(tag, params, task), self.host_us(tag), task.gpu)

    def kernels_ms(self, tag: str, params: dict, task: Task) -> list[float]:
        """Core times (ms) of the kernels a rung's call runs on the GPU: the kept PyTorch steps' (the eager
        rung's: every step's) and its own."""
        steps, dtype, gpu = self.view.steps, self.view.dtype, task.gpu
        items = self._plans.get(tag, range(len(steps)))
        kernels = [t for it in items if not isinstance(it, Kernel) for t in torch_kernels(steps[it], dtype, gpu)]
        for k, launch, work, analog in self._kernel_models(tag, params, task):
            if analog[0] == "cuda_gemm":
                kernels.append(cuda_gemm_ms(launch.grid, params, analog[1], gpu, work.bytes, launch.regs))
            elif analog[0] == "triton_gemm":
                kernels.append(triton_gemm_ms(work.flops, work.bytes, launch.grid, launch.tile_quant, *analog[1][:4], gpu, dtype,
                                              *analog[1][4:]))
            else:
                kernels.append(custom_kernel_ms(analog, launch, work, gpu, dtype))
        if tag in self._graph_base:
            kernels += input_copies_ms(self.view.program.inputs, gpu)
        return kernels

    def host_us(self, tag: str) -> float:
        """The host's time to issue one call of a rung's ModelNew (timing.host_calls): the same at every
        parameter of the rung."""
        return host_us(self.host_calls(tag))

    def host_calls(self, tag: str) -> dict:
        items = self._plans.get(tag)
        if items is None:
            return host_calls(self.view.program.steps, range(len(self.view.steps)), 0, self.impl)
        if tag in self._graph_base:
            return graph_host_calls(self.view.program.inputs)
        kept = [it for it in items if not isinstance(it, Kernel)]
        return host_calls(self.view.program.steps, kept, len(kernels_of(items)), self.impl)

    def floor_ms(self, task: Task, path: str) -> float:
        """No candidate's measurement is faster than the program's roofline (its least work, cost()) nor
        than the host's time to issue the leanest rung's call (timing.call_ms), read at the fastest a
        noisy timer reads a call that long (sim.measure: 2.5 sigma fast)."""
        cost, gpu = self.cost(task), task.gpu
        roofline = max(cost.flops / gpu.peak(path) if cost.flops else 0.0, cost.bytes / (gpu.bw_tbs * 1e12)) * 1e3
        host_ms = min(self.host_us(v.tag) for v in self.variants) * 1e-3
        # the engine's floor is this plus one launch (engine.floor_ms): the host's floor holds its launches already
        return max(roofline, host_ms * (1.0 - 2.5 * noise_cv(host_ms)) - FIT.overhead_us(gpu.vendor, 1) * 1e-3)

    def torch_ms(self, task: Task) -> tuple[float, float]:
        """(eager, torch.compile) time of the reference program on the task's GPU."""
        steps = self.view.steps
        return eager_ms(steps, self.view.program.steps, self.view.dtype, task.gpu), compiled_ms(steps, self.view.dtype, task.gpu)

    # -- renders ----------------------------------------------------------------------------
    def _render_of(self, tag: str):
        def render(params: dict, task: Task, bug: str | None = None) -> str:
            if tag == "eager":
                return eager_solution(self.view)
            items = self._plans[tag]
            kernels = kernels_of(items)
            title = f"{self.title}: {TITLES[tag]}."
            p, graphed = dict(params), tag in self._graph_base
            if self.impl == "cuda":
                if self._kernel_tag(tag) == "vectorized_loads":
                    p["cached"] = 1
                else:
                    p.pop("vec", None)
                src, names = cuda_source(self.view, kernels, p, bug)
                if graphed:
                    src = on_current_stream(src)
                return cuda_solution(self.view, items, src, prototypes(src, names), names, title, graphed)
            src, names = triton_source(self.view, kernels, p, bug)
            return triton_solution(self.view, items, src, names, title, graphed)
        return render

    def assemble(self, body: str, variant, params: dict, task: Task) -> str:
        """A rung's render is the whole solution file already (no CUDA prelude in front of Python)."""
        return body

    def cost(self, task: Task) -> Cost:
        """The program's least work: its FLOPs, and the bytes of a full fusion (cost.fused_cost)."""
        return fused_cost(self.view.row)[1]

    def reference(self, task: Task) -> str:
        return self.view.row["source"]

    def signature(self, task: Task) -> str:
        args = ", ".join(self.inputs)
        return f"class ModelNew(nn.Module): forward(self, {args}) -> Tensor {list(self.entry.shape)} {self.view.dtype}"


@lru_cache(maxsize=2048)
def fused_module(name: str) -> FusedModule | None:
    """The module of a fused program by its name (None for any other name)."""
    m = NAME.match(name)
    if m is None:
        return None
    return FusedModule(int(m.group(1)), int(m.group(2)), m.group(3))


def fused_op(name: str) -> str | None:
    """The op of a fused program's module (FusedModule.op: its program's id, render.task_id) from its name alone,
    without building the module (~12 ms each: stats.json's op lists asked it of all ~6,000 a fused run's plan
    holds); None for any other name."""
    m = NAME.match(name)
    return None if m is None else task_id(int(m.group(1)), int(m.group(2)))


def module_name(seed: int, index: int, impl: str) -> str:
    return f"fused_s{seed}_{index:05d}_{impl}"


REGISTRY.make_with(fused_module)      # REGISTRY["fused_s0_00001_cuda"] finds the program's module
