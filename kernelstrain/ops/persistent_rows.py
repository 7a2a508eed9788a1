"""A persistent grid over a row kernel's rows, the next row's loads issued before this row's reduction: the top
rung the register-cached row kernels (rmsnorm_cuda, fp8_quant_cuda) climb to, as Apex's fast layer norm
(apex/contrib/csrc/layer_norm: `ctas_per_col` CTAs from the occupancy API stride over the rows) and
FasterTransformer's persistent norms do.

What it changes against one CTA a row group (register_cached), as the launch model prices it:
- the grid: BLOCKS_PER_SM CTAs an SM (the host asks the SM count once), each walking every gridDim.x-th row
  group in turn (Launch.rounds: a CTA's row groups); the row-invariant operand (a norm's weight, bias) loads once
  a CTA into registers;
- bytes in flight: each thread issues its chunks of the next row group's row before it reduces the current one,
  twice a one-row thread's loads outstanding (Launch.bytes_per_access x 2, sim's in-flight term);
- the latency chain mostly stays: a CTA's rows each still wait out a reduction and its barriers (the prefetch hides
  the next row's DRAM trip only: PREFETCH_EXPOSED), and the one-row-group grid already overlapped one CTA's wait
  with its SM's other CTAs. The H100 ran it so (roomC j1-j3, 2026-12-07, measurements/h100_roomC_persistent.json:
  132 cases, every value correct, every bug caught): the best persistent configuration 0.975-1.02x the rung below
  at 512-8192 rows of 1-5K, 1.03-1.11x at 16384 x 8192 and add_rmsnorm 4096 x 4096, where crediting the prefetch
  with the whole chain (rounds 1) had it 0.88-0.97x and ordered 101 of the 150 pairs >5% apart as the device
  (scripts/roomC_fit.py); now 140;
- the registers: the prefetched row and the weight's chunks, fitted to ptxas -v (nvcc 13, sm_90a: carried chunk
  sets a thread, scripts/roomC_build.py), so a wide row on few threads spills where register_cached did not.

A module's rung stays off the menus until a device job has checked it (CHECKED; KERNELSTRAIN_DEVICE_UNCHECKED=1
offers it before): `offered`.
"""
from __future__ import annotations

import os

from ..records import replaced
from .base import DTYPE_BYTES, Launch, Param, Rung, cdiv

BLOCKS_PER_SM = Param("blocks_per_sm", (1, 2, 4, 8), 2)
PACK_REGS = 4            # registers of one cached uint4 chunk (8 x 16-bit values, packed)
MAX_REGS = 255
# the share of a CTA's later row groups whose wait stays exposed in its chain (Launch.rounds): the prefetch hides
# each next row's DRAM trip, not its reduction's barriers and shuffles. Fitted on the H100's 100 timed rows
# (scripts/roomC_fit.py): pair order 0.660 / 0.820 / 0.887 / 0.933 / 0.920 at 0 / 0.25 / 0.5 / 0.75 / 1, the best
# persistent config over the rung below within rms 0.069 / 0.042 / 0.039 / 0.046 / 0.074 (log) of the device's
PREFETCH_EXPOSED = 0.75


# the modules whose rung a device job ran correct, every bug caught, and not slower than the rung below where
# the model has it faster (scripts/roomC_device.py); the others only with KERNELSTRAIN_DEVICE_UNCHECKED=1. All four:
# the H100's roomC j1-j3 (2026-12-07 07:51 UTC; 132 cases, 0 problems), priced as it ran them (launch_over)
CHECKED = frozenset({"rmsnorm_cuda", "add_rmsnorm_cuda", "layernorm_cuda", "fp8_quant_cuda"})


def offered(module: str, *rungs) -> tuple:
    """The rungs of `module`, on the menus once a device job has checked them (CHECKED)."""
    return rungs if module in CHECKED or os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1" else ()


def rung(below: Rung, render, carried: int, title: str, slot_sets: int = 2) -> Rung:
    """persistent_prefetch over the register-cached rung `below`: its parameters and BLOCKS_PER_SM, its needs,
    efficiencies, bugs (the same slots in `render`, offered where below's are) and calibration (fit_as); `carried`: uint4 chunk sets a
    thread holds beyond below's row (the prefetched rows, the weight); `slot_sets`: the shared arrays of warp
    totals the kernel declares, each as big as below's one (two a reduction: the row groups' parities)."""
    def launch(p, task):
        n = chunks_per_thread(task["D"], p["threads"], DTYPE_BYTES[task.dtype])
        return launch_over(below.launch(p, task), p, task, n * carried, slot_sets)
    return Rung("persistent_prefetch", title, below.params + (BLOCKS_PER_SM,), needs=below.needs,
                compute_eff=below.compute_eff, memory_eff=below.memory_eff, smem="static", launch=launch,
                render=render, fit_as=below.tag, bugs=dict(below.edits), bug_tasks=below.bug_tasks,
                bug_params=below.bug_params, bug_dtypes=below.bug_dtypes)   # where below's bugs are wrong, as below


def climb(module: str, variants: tuple, below: str, render, carried: int, title: str, slot_sets: int = 2) -> tuple:
    """`module`'s ladder with persistent_prefetch over its rung `below`, where offered."""
    return variants + offered(module, rung(next(v for v in variants if v.tag == below), render, carried, title,
                                           slot_sets))


def chunks_per_thread(d: int, threads: int, elt: int) -> int:
    """uint4 chunks of a D-long row each of a row's THREADS threads caches."""
    return max(1, cdiv(d, threads * (16 // elt)))


def launch_over(cached: Launch, p, task, carried: int, slot_sets: int = 2) -> Launch:
    """The persistent grid of a register-cached row kernel whose one-row-group launch is `cached`: the CTAs capped
    at BLOCKS_PER_SM an SM, each taking its row groups in turn (Launch.rounds: PREFETCH_EXPOSED of the later ones
    wait), twice the bytes a thread keeps in flight (its row's chunks and the next row's), `carried` uint4 chunks
    more a thread in registers, and `slot_sets` arrays of warp totals in shared memory where the one-row kernel
    has one (two a reduction, by the row group's parity: ptxas 64 B where register_cached has 32, rmsnorm_cuda 256
    threads; layernorm's two reductions 128 B).

    >>> from kernelstrain.gpus import GPUS
    >>> class T(dict): gpu, dtype = GPUS["H100"], "bf16"
    >>> out = launch_over(Launch(grid=4096, threads=256, regs=48, bytes_per_access=16), {"blocks_per_sm": 2}, T(), 4)
    >>> out.grid, out.rounds, out.bytes_per_access, out.regs
    (264, 12, 32, 64)
    """
    regs = cached.regs + PACK_REGS * carried
    spill = 1.0 + max(0, regs - MAX_REGS) / 64       # as register_cached: past 255 the rows spill to local memory
    grid = min(cached.grid, task.gpu.sms * p["blocks_per_sm"])
    rounds = 1 + round((cdiv(cached.grid, grid) - 1) * PREFETCH_EXPOSED)
    return replaced(cached, grid=grid, rounds=rounds, bytes_per_access=cached.bytes_per_access * 2,
                   regs=min(regs, MAX_REGS), traffic=cached.traffic * spill, smem_bytes=slot_sets * cached.smem_bytes)


def host(entry, task, kernel: str) -> str:
    """The host function: BLOCKS_PER_SM CTAs an SM (the SM count asked once), never more than the row groups."""
    return f"""
{entry.host_head(task)} {{
    static int sms = 0;  // asked once
    if (sms == 0) {{
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    }}
    const int groups = (T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    const int grid = groups < sms * BLOCKS_PER_SM ? groups : sms * BLOCKS_PER_SM;
    {kernel}<<<grid, THREADS * ROWS_PER_BLOCK, 0, stream>>>({entry.call_args()});
}}
"""


def head(p, task) -> str:
    """The #defines and the chunk loader of a persistent row kernel (VEC and Pack come from the module)."""
    d, threads = task["D"], p["threads"]
    return f"""#define THREADS {threads}          // threads per row
#define ROWS_PER_BLOCK {p['rows_per_block']}
#define BLOCKS_PER_SM {p['blocks_per_sm']}
#define CHUNKS_PER_THREAD {chunks_per_thread(d, threads, DTYPE_BYTES[task.dtype])}  // ceil(D / (THREADS * VEC)) for D = {d}"""


LOAD_ROW = """
// This thread's chunks of one row (zeros past the row's end, or for a row past T).
__device__ __forceinline__ void load_row(Pack (&cache)[CHUNKS_PER_THREAD], const scalar_t* __restrict__ base,
                                         int row, int T, int D, int tid) {
    const uint4* r = reinterpret_cast<const uint4*>(base + (size_t)min(row, T - 1) * D);
    const int chunks = D / VEC;
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {
        const int c = tid + j * THREADS;
        cache[j].u = (row < T && c < chunks) ? r[c] : make_uint4(0u, 0u, 0u, 0u);
    }
}
"""
