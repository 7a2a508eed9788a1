"""The unroll knob of a streaming loop, shared by the op modules: how many iterations of a loop
whose loads are independent the compiler lays out one after another, so that their loads are all
issued before the first is used.

- CUDA: `#pragma unroll N` on the loop (`pragma`); nvcc keeps a remainder loop, so any N is legal
  for any trip count.
- Triton: `tl.range(start, stop, step, loop_unroll_factor=N)` for the loop's `range` (`trange`);
  Triton 3.9 replicates the body N times with an epilogue for the remainder (its PTX and AMDGCN
  show N times the global loads). Triton's software pipeliner leaves loads that feed no tl.dot
  alone (num_stages changes nothing in these kernels), so unrolling is how a streaming Triton
  loop gets more loads in flight.

Value 0 writes nothing: the loop as the module renders it, unrolled as the compiler chooses on its
own (COMPILER_DEPTH): nvcc unrolls a loop of unknown trip count 4x (the launch models of
embedding_gather, kv_append and grad_clip say so from H200 timings), Triton does not unroll (its
PTX has one iteration's loads). The launch model's default already holds that depth (the H200 fit
absorbed it), so the knob is modelled relative to it (`unrolled`):
- loads in flight: min(N, the loop's trips a thread) iterations' loads against min(default depth,
  trips), so Launch.bytes_per_access scales by that ratio: a pragma under nvcc's 4 loses loads in
  flight; more helps only where the resident grid does not already cover DRAM's bandwidth-latency
  product (few resident warps: big rows, short grids);
- registers: every load issued ahead holds its data until used, and the compiler allocates for
  the unrolled body whatever the trip count at run time, so a deep unroll of a short loop costs
  registers (occupancy, or spills past the cap) and buys nothing (a shallower one than the
  compiler's is not credited with registers it may free: its allocation has other live values);
- loop overhead: one compare-and-branch per N iterations (a few % where the loop is compute-bound).

Triton's unrolled copies keep more loads in flight only where ptxas issues them ahead of the previous copies' math,
which it mostly does not in the row kernels (TRITON_IN_FLIGHT, read off their sm_90a SASS): the knob's bytes in
flight and registers follow that compiled depth, not N.

Modules declare the knob on a rung (`PRAGMA_UNROLL` / `LOOP_UNROLL` in its params) and either
write `pragma(p)` / `trange(p, ...)` into their render, or wrap the rung's render and launch
(`render_of`, `launch_of`): the wrapped render writes the knob on every streaming loop of the
kernel (a CUDA loop stepping by THREADS, blockDim.x, WARP_SIZE, the grid or a stride; a Triton
loop stepping by a BLOCK constant). It is offered where the loop's loads are independent of its
stores (read-only reductions, or copies between __restrict__ arrays), so the unrolled loads can
all issue first.

>>> pragma({"pragma_unroll": 4}), pragma({})
('#pragma unroll 4\\n', '')
>>> trange({"loop_unroll": 2}, "0, C, BLOCK"), trange({}, "0, C, BLOCK")
('tl.range(0, C, BLOCK, loop_unroll_factor=2)', 'range(0, C, BLOCK)')
"""
from __future__ import annotations

import math
import re

from ..records import replaced
from .base import DTYPE_BYTES, Launch, Param

INDEX_REGS = 1            # registers of the index and address arithmetic per load issued ahead
LOOP_OVERHEAD = 0.03      # compute gained per doubling: one branch per N iterations

PRAGMA_UNROLL = Param("pragma_unroll", (0, 2, 4, 8), 0)     # CUDA: #pragma unroll N
LOOP_UNROLL = Param("loop_unroll", (0, 2, 4, 8), 0)           # Triton: tl.range(..., loop_unroll_factor=N)
NAMES = (PRAGMA_UNROLL.name, LOOP_UNROLL.name)
COMPILER_DEPTH = {PRAGMA_UNROLL.name: 4, LOOP_UNROLL.name: 1}   # iterations unrolled at the compiler's own choice
# The loads a Triton streaming loop keeps in flight at loop_unroll_factor N over the rolled loop's, as compiled
# (scripts/triton_unroll_depth.py: sm_90a, Triton 3.9's ptxas, bf16, each rung's defaults on a few-row menu shape;
# the LDG bytes a thread brings per round trip it waits on; per module the geometric mean over its rungs, each
# clipped to 1..N). Triton replicates the body N times, but in the row-norm, softmax and fp8 loops ptxas issues
# each copy's loads after the previous copy's reductions (softmax online_softmax at N = 8: 18 LDG.E.128, each
# waited on before the next issues; 16.0 -> 17.1 bytes a round trip, 32 -> 40 registers), so the unrolled loop
# holds what the rolled one held. An H100 timed it (scripts/room_device_check_triton.py, 2026-12-06 04:33 UTC):
# softmax_triton R=32 C=128256 bf16 online_softmax 57.4 us rolled, 52.8 us at loop_unroll 8 (0.92x), which the
# full credit (N times the bytes in flight) had put at 17.8 us; chunked_three_pass BLOCK 512 on 16 warps at 8
# ran 85.5 us (modelled 23.6). cross_entropy_fwd_triton's loops are the exception in Triton 3.9's SASS: their
# copies' loads issue ahead (online_softmax 16 -> 19 / 64 / 128 bytes a round trip, 58 -> 64 / 121 / 240 registers
# at 2 / 4 / 8; split_v_combine's rolled loop issues its 2-byte loads one at a time, its unrolled one 12x the bytes a
# trip; the script's geometric mean 1.34 / 2.77 / 4.0). The H100 with Triton 3.6 did not bear that out (sim's device
# call of 07:40 UTC, scripts/gpu_check_unroll.py, T=16 V=128256 bf16): online_softmax 26.4 us rolled, 34.5 / 36.1 /
# 36.3 at 2 / 4 / 8; split_v_combine 16.4, 18.9 / 18.2 / 26.2; chunked_two_pass 28.3, 35.7 at 8: slower, never
# faster, so the module takes no credit (1.0) until a device shows one. The same call held the others: softmax
# online 57.6 -> 59.3 / 55.8 / 53.0, three-pass (BLOCK 512, 16 warps) 99.3 -> 102.1 / 96.1 / 85.4, rmsnorm (T=64,
# BLOCK 256) 7.7 -> 7.4 / 7.4 / 7.8, layernorm three-pass 8.6 -> 7.2 at 8, fp8_quant 7.4 -> 7.6 at 8.
TRITON_IN_FLIGHT = {
    "add_rmsnorm_triton": {2: 1.0, 4: 1.0, 8: 1.0}, "cross_entropy_fwd_triton": {2: 1.0, 4: 1.0, 8: 1.0},
    "fp8_quant_triton": {2: 1.0, 4: 1.0, 8: 1.0}, "layernorm_triton": {2: 1.07, 4: 1.15, 8: 1.15},
    "rmsnorm_triton": {2: 1.0, 4: 1.0, 8: 1.0}, "softmax_triton": {2: 1.1, 4: 1.22, 8: 1.12},
}


def factor(params: dict) -> int:
    """The candidate's unroll factor (0: the compiler's choice)."""
    return params.get(PRAGMA_UNROLL.name, 0) or params.get(LOOP_UNROLL.name, 0)


def pragma(params: dict) -> str:
    """The line written before a CUDA loop: `#pragma unroll N` and a newline, or nothing."""
    n = params.get(PRAGMA_UNROLL.name, 0)
    return f"#pragma unroll {n}\n" if n else ""


def trange(params: dict, args: str) -> str:
    """The iterator of a Triton loop over `args` (range's arguments)."""
    n = params.get(LOOP_UNROLL.name, 0)
    return f"tl.range({args}, loop_unroll_factor={n})" if n else f"range({args})"


def triton_depth(module: str | None, n: int) -> float:
    """The iterations' loads a Triton loop unrolled N times keeps in flight, in rolled trips (TRITON_IN_FLIGHT;
    a module the table does not name: none beyond the rolled loop's)."""
    return min(n, max(1.0, TRITON_IN_FLIGHT.get(module, {}).get(n, 1.0)))


def unrolled(launch: Launch, params: dict, trips: float, load_regs: int, compiler: int | None = None,
             module: str | None = None, in_turn: bool = False) -> Launch:
    """`launch` with its streaming loop unrolled as `params` say: `trips` iterations a thread at
    run time, each holding `load_regs` registers of loaded data until it is used; `compiler`: the
    depth the compiler chooses on its own for this loop (COMPILER_DEPTH unless a module knows
    better), which the launch model's default holds. A Triton loop (`module` its op module) keeps
    triton_depth's iterations in flight, not N; a CUDA loop whose copies' loads wait behind the previous copy's
    store (`in_turn`: nvcc keeps the order where it cannot prove the arrays apart) keeps one.

    >>> base = Launch(grid=132, threads=256, regs=32, bytes_per_access=16)
    >>> u = unrolled(base, {"pragma_unroll": 8}, trips=16, load_regs=4)
    >>> u.bytes_per_access, u.regs
    (32.0, 52)
    >>> d = unrolled(base, {"pragma_unroll": 2}, trips=16, load_regs=4)   # under nvcc's own 4: fewer in flight
    >>> d.bytes_per_access, d.regs
    (8.0, 32)
    >>> unrolled(base, {"pragma_unroll": 8}, trips=1, load_regs=4).bytes_per_access   # one trip: nothing to overlap
    16
    >>> unrolled(base, {"loop_unroll": 4}, trips=16, load_regs=4, module="layernorm_triton").bytes_per_access
    18.4
    >>> r = unrolled(base, {"loop_unroll": 8}, trips=16, load_regs=4, module="rmsnorm_triton")   # issued in turn
    >>> r.bytes_per_access, r.regs
    (16, 32)
    """
    n = factor(params)
    if not n:
        return launch
    triton = not params.get(PRAGMA_UNROLL.name)
    if compiler is None:
        compiler = COMPILER_DEPTH[LOOP_UNROLL.name if triton else PRAGMA_UNROLL.name]
    # the copies whose loads the compiled loop really holds in flight (a CUDA pragma: all N of them)
    held = triton_depth(module, n) if triton else 1 if in_turn else n
    deep, own = min(held, max(1.0, trips)), min(compiler, max(1.0, trips))
    regs = launch.regs + round((load_regs + INDEX_REGS) * max(0, held - compiler))
    branches = min(n, max(1.0, trips)) / own           # one loop branch per N trips, whatever the loads do
    return replaced(launch, regs=regs, bytes_per_access=launch.bytes_per_access * deep / own if deep != own
                   else launch.bytes_per_access,
                   compute_scale=launch.compute_scale * (1 + LOOP_OVERHEAD * math.log2(branches)))


# a CUDA loop stepping by the block, a warp, the grid or a stride (not a tree reduction's halving loop)
_CUDA_STREAM = re.compile(r"^([ \t]*)for \((?=[^\n;]*;[^\n;]*;[^\n;]*\+= [^\n;]*?\b(?:THREADS|blockDim\.x|WARP_SIZE|stride)\b)",
                          re.M)
# a Triton loop stepping by a BLOCK constexpr
_TRITON_STREAM = re.compile(r"\bfor (\w+) in range\(([^()\n]*,[^()\n]*,\s*BLOCK\w*)\):")


def on_loops(code: str, params: dict) -> str:
    """`code` with the knob written on each streaming loop (none governed by a pragma already).

    >>> print(on_loops("s = 0;\\n  for (int i = threadIdx.x; i < n; i += THREADS) s += x[i];", {"pragma_unroll": 2}))
    s = 0;
    #pragma unroll 2
      for (int i = threadIdx.x; i < n; i += THREADS) s += x[i];
    >>> on_loops("    for off in range(0, C, BLOCK):", {"loop_unroll": 4})
    '    for off in tl.range(0, C, BLOCK, loop_unroll_factor=4):'
    """
    if params.get(LOOP_UNROLL.name, 0):
        return _TRITON_STREAM.sub(lambda m: f"for {m.group(1)} in {trange(params, m.group(2))}:", code)
    line = pragma(params)
    if not line:
        return code
    def put(m):
        before = code[:m.start()].rstrip().rsplit("\n", 1)[-1].strip()
        return m.group(0) if before.startswith("#pragma") else line + m.group(0)
    return _CUDA_STREAM.sub(put, code)


def render_of(render):
    """A rung's render with the knob written on its streaming loops."""
    def wrapped(params, task, **slots):
        return on_loops(render(params, task, **slots), params)
    return wrapped


def launch_of(launch, trips, load_regs, compiler: int | None = None, in_turn: bool = False):
    """A rung's launch model with the knob's effect: trips(params, task) iterations a thread of its
    streaming loop, each holding `load_regs` registers of loads (a number, or load_regs(params, task)),
    `compiler` deep at the compiler's own choice, its copies' loads issued `in_turn` or not (unrolled)."""
    def wrapped(params, task):
        regs = load_regs(params, task) if callable(load_regs) else load_regs
        return unrolled(launch(params, task), params, trips(params, task), regs, compiler, task.module, in_turn)
    return wrapped


def row_trips(dim: str = "D", vec: bool = False):
    """trips() of a block-per-row loop: the row's `dim` elements over the block's threads, one
    element a load (or 16 bytes of them with `vec`)."""
    def trips(params, task):
        return task[dim] / (params["threads"] * (16 // DTYPE_BYTES[task.dtype] if vec else 1))
    return trips


def chunk_trips(dim: str):
    """trips() of a Triton loop over `dim` in BLOCK-wide chunks (one program a row)."""
    def trips(params, task):
        return task[dim] / params["BLOCK"]
    return trips


def chunk_regs(params, task) -> int:
    """Registers one BLOCK-wide chunk of 16-bit (or wider) elements takes a thread of the program."""
    per = max(1, params["BLOCK"] // (params["num_warps"] * task.gpu.warp))
    return max(1, per * DTYPE_BYTES[task.dtype] // 4)
