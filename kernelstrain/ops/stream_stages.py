"""Software pipelining of a Triton streaming loop, shared by the row-kernel op modules: the loop
over a row in BLOCK-wide chunks written `tl.range(start, stop, BLOCK, num_stages=N)`.

The launch's `num_stages=` keyword pipelines tl.dot operands only; the loop's own attribute has
Triton 3.x stage *every* 16-byte-aligned load of the loop through shared memory with cp.async
(NVIDIA), N - 1 trips ahead of the trip being reduced. Triton 3.9, sm_90, rmsnorm's two-pass
loops, BLOCK 1024 bf16 on 4 warps (D divisible by 16): 0 cp.async and 3 ld.global.v4 at 1 stage,
6 / 9 / 12 cp.async and metadata.shared 4 / 8 / 12 KB at 2 / 3 / 4 stages: (N - 1) x the loads
of one trip (x and w: 2 x 1024 x 2 B), the two loops sharing one set of buffers. With
loop_unroll_factor=U beside it, the unrolled body's U x the loads are staged. A row whose
length is not a multiple of 16 elements leaves one-element loads, which cp.async cannot copy,
so the attribute is then a no-op (sim.narrowed already makes those rows one element a load).
On gfx942 the AMD pipeliner issues the trips ahead into registers instead (_kv_pipeline.py).

What it buys: bytes in flight without registers. Triton does not unroll a streaming loop on its
own (unroll.COMPILER_DEPTH): unpipelined, a thread has one trip's loads in flight and none while
it reduces them; pipelined, N - 1 trips stay in flight through the reduction. That matters where
the resident grid is short of DRAM's bandwidth-latency product (a program per row over a few
long rows: decode-time norms, softmax over a 128k vocabulary for 32 rows, a SwiGLU of 32 tokens);
where the grid already covers it, the staged buffers only cost occupancy.

Timed on an H100 (scripts/room_device_check_triton.py KNOBT_SET=stages, 04:33 UTC; every value correct, every
bug caught): 2 stages lose to the plain loop, 3 and 4 gain on short grids, less than the model first claimed
(TRIPS_IN_FLIGHT). The stacking with loop_unroll is an estimate the H100 did not bear out: softmax's three-pass
loop at unroll 8 ran 85.5-85.9 us at every depth (sim 27.1 -> 15.1).

>>> on_loops("    for off in range(0, D, BLOCK):", {"num_stages": 3})
'    for off in tl.range(0, D, BLOCK, num_stages=3):'
>>> on_loops("    for off in tl.range(0, D, BLOCK, loop_unroll_factor=2):", {"num_stages": 2})
'    for off in tl.range(0, D, BLOCK, loop_unroll_factor=2, num_stages=2):'
>>> on_loops("    for off in range(0, D, BLOCK):", {"num_stages": 1})
'    for off in range(0, D, BLOCK):'
"""
from __future__ import annotations

import re

from ..records import replaced
from .base import DTYPE_BYTES, Launch, Param
from .unroll import LOOP_UNROLL

# 1: the plain loop (Triton's default for a loop that feeds no tl.dot)
STREAM_STAGES = Param("num_stages", (1, 2, 3, 4), 1)
# The loads a thread keeps in flight at each depth, in units of the unpipelined loop's one trip, as an H100 timed
# them (room_device_check_triton, 04:33 UTC, 11 groups of 7 modules): at 2 stages the one buffer is waited on
# before every trip's reduction and each element takes a second trip through shared memory, so the loop ran
# 1.02-1.36x SLOWER than the plain one in all 11 (min_p B=64 V=128k 98.0 -> 127.2 us, softmax R=32 C=128k
# 57.4 -> 70.9, fp8_quant T=32 7.2 -> 9.8); 3 and 4 stages gained 0.59-1.0x on the short grids (swiglu T=32 9.2 ->
# 5.4, layernorm T=64 5.8 -> 4.3, softmax R=32 57.4 -> 41.1, min_p B=64 98.0 -> 93.6). The figures keep 2 a loss
# and 4 about half the gain the model had claimed (it had 1.5, 2.5, 3.5 trips: 0.44-0.87x at 4 stages).
TRIPS_IN_FLIGHT = {1: 1.0, 2: 0.8, 3: 1.4, 4: 1.7}
CP_ASYNC_BYTES = 16       # a row must be a multiple of cp.async's 16-byte copy for a stage to hold it
# cp.async copies 4, 8 or 16 bytes: a thread whose share of a trip's chunk is one 2-byte value (BLOCK no larger than
# the program's threads, bf16/fp16) loads it with LDG.U16 and Triton stages nothing. sm_90a SASS (Triton 3.9,
# softmax_triton chunked_three_pass R=32 C=128256 bf16 on 16 warps, num_stages 3): BLOCK 512 (one value a thread)
# 21 LDG.U16 and 0 LDGSTS, BLOCK 1024 and 2048 (2 and 4 values) 9 LDGSTS each. The H100 timed BLOCK 512 on 16 warps
# at 85.5-85.9 us at every depth 1-4 (room_device_check_triton, 2026-12-06) where the staging credit had it
# 91 / 107 / 72 / 63 us
CP_ASYNC_MIN_BYTES = 4
# A thread's share of a trip under 16 bytes is staged with cp.async.ca (4 / 8-byte copies that allocate in L1),
# not cp.async.cg (16 bytes, L2 only): Triton 3.9 sm_90a PTX of layernorm_triton chunked_three_pass / welford_chunked,
# bf16 BLOCK 1024 at 3 stages (scripts/sim_triton_ptx.py, compiled on the CPU): 2 and 4 warps (32 / 16 bytes a thread)
# 30 / 15 and 24 / 12 cp.async.cg, 8 warps (8 bytes) 15 and 12 cp.async.ca. The streamed copies then take the L1
# the row's re-reads hit in, at twice the copy instructions a byte. H100 bf16 T=8192 D=4096 (sim2 j2,
# measurements/h100_sim2_j2.json), 3 stages over 1: 8 warps chunked_three_pass 82.0 / 51.2 us (1.60x), welford_chunked
# 87.1 / 69.8 (1.25x); 16 bytes a thread 0.90x / 1.10x (4 warps), 1.14x (h100_sim30_checks T=4096 D=4096); the model
# had 1.00x throughout. CA_STAGED: the geomean of the two 8-byte pairs, on the memory side (Launch.narrow).
CA_STAGED = 1.4
CP_ASYNC_CG_BYTES = 16

# a Triton loop stepping by a BLOCK constexpr, plain or already unrolled (unroll.on_loops)
_STREAM = re.compile(r"\bfor (\w+) in (?:tl\.)?range\(([^()\n]*,[^()\n]*,\s*BLOCK\w*(?:, loop_unroll_factor=\d+)?)\):")


def stages(params: dict) -> int:
    return params.get(STREAM_STAGES.name, 1)


def on_loops(code: str, params: dict) -> str:
    """`code` with every streaming loop pipelined `num_stages` deep (unchanged at 1)."""
    n = stages(params)
    if n <= 1:
        return code
    return _STREAM.sub(lambda m: f"for {m.group(1)} in tl.range({m.group(2)}, num_stages={n}):", code)


def staged(launch: Launch, params: dict, task, trips: float, loads: int, block: int, apart: bool = False,
           row: str = "D", in_flight: dict = TRIPS_IN_FLIGHT) -> Launch:
    """`launch` with its streaming loop pipelined as `params` say: `trips` BLOCK-wide trips a
    program (before unrolling), `loads` arrays of `block` elements loaded per trip by the loop that
    loads the most. NVIDIA: the trips ahead are staged in shared memory (occupancy) and the bytes a
    thread keeps in flight move from one trip's to TRIPS_IN_FLIGHT's; gfx942: the copies
    ahead land in registers instead (each thread's share of them). The launch's own shared memory
    (a reduction's scratch) shares the buffers, or with `apart` (a tl.cumsum's) stays beside them.
    The loop streams rows of the task's `row` dim in its dtype (their alignment decides what cp.async can stage);
    the launch's loop_stages says the stages the loop really gets (1 + trips_ahead); `in_flight`: the loop's own trips-in-flight table where the H100 timed it apart from TRIPS_IN_FLIGHT.

    >>> base = Launch(grid=32, threads=128, regs=40, bytes_per_access=16)
    >>> from kernelstrain.tasks import make_task
    >>> from kernelstrain.ops import REGISTRY
    >>> t = make_task(REGISTRY["rmsnorm_triton"], "H100", "bf16", {"T": 1, "D": 8192})
    >>> s = staged(base, {"num_stages": 3}, t, trips=8, loads=2, block=1024)
    >>> s.bytes_per_access, s.smem_bytes
    (22.4, 8192)
    >>> s.loop_stages
    3
    >>> one = staged(base, {"num_stages": 3}, t, trips=1, loads=2, block=1024)     # nothing ahead to load
    >>> one.bytes_per_access, one.loop_stages
    (16, 1)
    """
    n = stages(params)
    unroll = max(1, params.get(LOOP_UNROLL.name, 0))
    ahead = trips_ahead(launch, params, task, trips, block, row)
    if ahead <= 0:
        return replaced(launch, loop_stages=1)
    buffer = (n - 1) * loads * block * unroll * DTYPE_BYTES[task.dtype]
    if task.is_hip:
        return replaced(launch, regs=launch.regs + buffer // (4 * launch.threads), loop_stages=int(ahead) + 1,
                       bytes_per_access=launch.bytes_per_access * in_flight[int(ahead) + 1])
    smem = launch.smem_bytes + buffer if apart else max(launch.smem_bytes, buffer)
    return replaced(launch, smem_bytes=smem, loop_stages=int(ahead) + 1,
                   bytes_per_access=launch.bytes_per_access * in_flight[int(ahead) + 1])


def trips_ahead(launch: Launch, params: dict, task, trips: float, block: int, row: str = "D") -> float:
    """The trips a pipelined loop loads ahead (0: nothing staged -- one stage, no trip ahead, rows cp.async cannot
    copy, or a thread share under its smallest copy)."""
    unroll = max(1, params.get(LOOP_UNROLL.name, 0))
    ahead = min(stages(params) - 1, max(0, trips / unroll - 1))
    if ahead <= 0 or _one_element_loads(task, row) or _under_cp_async(launch, task, block):
        return 0
    return ahead


def _one_element_loads(task, row: str) -> bool:
    """Rows that are not 16-byte multiples: Triton loads them an element at a time, which cp.async
    cannot copy, so the depth stages none of the row's data (Triton 3.9, rmsnorm at D = 4100:
    metadata.shared 2048 B at 2 and 3 stages alike, a layout scratch, against 4096 / 8192 B aligned)."""
    return task[row] * DTYPE_BYTES[task.dtype] % CP_ASYNC_BYTES != 0


def _under_cp_async(launch: Launch, task, block: int) -> bool:
    """A thread's share of one trip's chunk is under cp.async's smallest copy (CP_ASYNC_MIN_BYTES): NVIDIA only
    (gfx942's pipeliner issues the trips ahead into registers, whatever their width)."""
    return not task.is_hip and max(1, block // launch.threads) * DTYPE_BYTES[task.dtype] < CP_ASYNC_MIN_BYTES


def ca_staged(launch_of_p, trips, row: str = "D"):
    """A rung's launch (launch_of_p: p, task -> Launch, pipelined by launch_of over trips(p, task) trips of the task's
    `row` dim) with CA_STAGED on its memory side where the loop stages trips ahead (trips_ahead) and a thread's share of
    a trip is under cp.async.cg's 16 bytes (NVIDIA; gfx942 stages into registers)."""
    def wrapped(params, task):
        launch = launch_of_p(params, task)
        share = max(1, params["BLOCK"] // launch.threads) * DTYPE_BYTES[task.dtype]
        if task.is_hip or share >= CP_ASYNC_CG_BYTES:
            return launch
        if trips_ahead(launch, params, task, trips(params, task), params["BLOCK"], row) <= 0:
            return launch
        return replaced(launch, narrow=launch.narrow * CA_STAGED)
    return wrapped


def render_of(render):
    """A rung's render with every streaming loop pipelined as its params say."""
    def wrapped(params, task, **slots):
        return on_loops(render(params, task, **slots), params)
    return wrapped


def launch_of(launch, trips, loads: int, apart: bool = False, row: str = "D", in_flight: dict = TRIPS_IN_FLIGHT):
    """A rung's launch model with the loop pipelined: trips(params, task) BLOCK-wide trips a
    program, `loads` arrays a trip of the loop that loads the most (`apart`: staged), streaming
    rows of the task's `row` elements (`in_flight`: staged's)."""
    def wrapped(params, task):
        return staged(launch(params, task), params, task, trips(params, task), loads, params["BLOCK"], apart, row,
                      in_flight)
    return wrapped
