"""A persistent grid over a row kernel's rows, the next row's loads issued before this row's reduction: the top
rung the register-cached row kernels (rmsnorm_cuda, fp8_quant_cuda) climb to, as Apex's fast layer norm
(apex/contrib/csrc/layer_norm: `ctas_per_col` CTAs from the occupancy API stride over the rows) and
FasterTransformer's persistent norms do.

What it changes against one CTA a row group (register_cached):
- the grid: BLOCKS_PER_SM CTAs an SM (the host asks the SM count once), each walking every
  gridDim.x-th row group; the row-invariant operand (a norm's weight) loads once a CTA into registers;
- the latency chain: a one-row-group CTA waits a DRAM round trip for its row before it can reduce it,
  and the grid runs in waves of those (sim.latency_ratio: waves x one trip); here each thread issues its
  chunks of the next row group's row before it reduces the current one, so only a CTA's first row waits
  (Launch.rounds 1, one wave) and the next row's bytes are in flight behind the reduction and the stores;
- the registers: a second row of chunks (the prefetch) and the weight's, 4 each a uint4 (ptxas holds the
  packed 16-bit halves; sm_90a builds: scripts/roomC_build.py), so a wide row on few threads spills
  where register_cached did not, and fewer CTAs fit an SM.

A module's rung stays off the menus until a device job has checked it (CHECKED; KERNELSTRAIN_DEVICE_UNCHECKED=1
offers it before): `offered`.
"""
from __future__ import annotations

import os
from dataclasses import replace

from .base import DTYPE_BYTES, Launch, Param, Rung, cdiv

BLOCKS_PER_SM = Param("blocks_per_sm", (1, 2, 4, 8), 2)
PACK_REGS = 4            # registers of one cached uint4 chunk (8 x 16-bit values, packed)
MAX_REGS = 255


# the modules whose rung a device job ran correct, every bug caught, and not slower than the rung below where
# the model has it faster (scripts/roomC_device.py); the others only with KERNELSTRAIN_DEVICE_UNCHECKED=1
CHECKED = frozenset()


def offered(module: str, *rungs) -> tuple:
    """The rungs of `module`, on the menus once a device job has checked them (CHECKED)."""
    return rungs if module in CHECKED or os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1" else ()


def rung(below: Rung, render, carried: int, title: str) -> Rung:
    """persistent_prefetch over the register-cached rung `below`: its parameters and BLOCKS_PER_SM, its needs,
    efficiencies, bugs (the same slots in `render`) and calibration (fit_as); `carried`: uint4 chunk sets a
    thread holds beyond below's row (the prefetched rows, the weight)."""
    def launch(p, task):
        n = chunks_per_thread(task["D"], p["threads"], DTYPE_BYTES[task.dtype])
        return launch_over(below.launch(p, task), p, task, n * carried)
    return Rung("persistent_prefetch", title, below.params + (BLOCKS_PER_SM,), needs=below.needs,
                compute_eff=below.compute_eff, memory_eff=below.memory_eff, smem="static", launch=launch,
                render=render, fit_as=below.tag, bugs=dict(below.edits))


def climb(module: str, variants: tuple, below: str, render, carried: int, title: str) -> tuple:
    """`module`'s ladder with persistent_prefetch over its rung `below`, where offered."""
    return variants + offered(module, rung(next(v for v in variants if v.tag == below), render, carried, title))


def chunks_per_thread(d: int, threads: int, elt: int) -> int:
    """uint4 chunks of a D-long row each of a row's THREADS threads caches."""
    return max(1, cdiv(d, threads * (16 // elt)))


def launch_over(cached: Launch, p, task, carried: int) -> Launch:
    """The persistent grid of a register-cached row kernel whose one-row-group launch is `cached`: `carried`
    uint4 chunks more a thread than it (the prefetched row, the weight), the CTAs capped at BLOCKS_PER_SM an SM.

    >>> from kernelstrain.gpus import GPUS
    >>> class T(dict): gpu, dtype = GPUS["H100"], "bf16"
    >>> out = launch_over(Launch(grid=4096, threads=256, regs=48, bytes_per_access=16), {"blocks_per_sm": 2}, T(), 4)
    >>> out.grid, out.regs, out.rounds
    (264, 64, 1)
    """
    regs = cached.regs + PACK_REGS * carried
    spill = 1.0 + max(0, regs - MAX_REGS) / 64       # as register_cached: past 255 the rows spill to local memory
    return replace(cached, grid=min(cached.grid, task.gpu.sms * p["blocks_per_sm"]), regs=min(regs, MAX_REGS),
                   traffic=cached.traffic * spill, rounds=1)


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
