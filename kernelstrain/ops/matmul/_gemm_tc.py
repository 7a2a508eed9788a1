"""Launch models of the tensor-core GEMM rungs of the CUDA matmul modules (not an op module).

The kernels they model: _gemm_ptx.py (operand kinds, PTX wrappers), _gemm_mma.py (mma.sync
mainloop and host), _gemm_wgmma.py (Hopper TMA + wgmma kernel and host).
"""
from __future__ import annotations

from dataclasses import replace

from ..base import Launch, Task, cdiv
from ..occupancy import blocks_per_sm
from ._gemm_wgmma import wgmma_consumers

# -- launch model shared by the tensor-core rungs ------------------------------------

def tc_traffic(task: Task, bm: int, bn: int, miss: float, elt: float = 2, out_elt: float = 2) -> float:
    """DRAM bytes / minimum bytes: A is re-read once per N tile and B once per M tile, L2 catching 1 - miss."""
    m, n, k = task["M"], task["N"], task["K"]
    a, b, c = m * k * elt, n * k * elt, m * n * out_elt
    return (a * (1 + (cdiv(n, bn) - 1) * miss) + b * (1 + (cdiv(m, bm) - 1) * miss) + c) / (a + b + c)


def tc_launch(path: str, elt: float, out_elt: float, *, wgmma: bool = False, promote: bool = False,
              smem_elt: float | None = None, persistent: bool = False, tile=None):
    """Launch model factory of the mma_kernel / wgmma_kernel rungs: launch(p, task) -> Launch.
    path: the rung's datapath (mma.sync rate on Hopper); tile(p): the tile params when the rung
    fixes some of them (BK).
    """
    def launch(p, task):
        return _tc_model(tile(p) if tile else p, task, path, elt, out_elt, wgmma, promote, smem_elt, persistent)
    return launch


def _tc_model(p: dict, task: Task, path: str, elt: float, out_elt: float, wgmma: bool, promote: bool,
              smem_elt: float | None, persistent: bool) -> Launch:
    """Launch model of mma_kernel / wgmma_kernel candidates.

    compute_scale: operand reuse of the warp (warpgroup) tile and of the CTA tile, pipeline depth,
    the BK slice per barrier, mma.sync's lower issue rate on Hopper, and spills past ~200
    accumulator registers a thread. bytes_per_access carries the bytes each thread keeps in flight.
    """
    gpu, bm, bn = task.gpu, p["BM"], p["BN"]
    m, n = task["M"], task["N"]
    quant = m * n / (cdiv(m, bm) * bm * cdiv(n, bn) * bn)
    stages = p.get("stages", 1)
    if wgmma:
        consumers = wgmma_consumers(p)
        threads, wtm, wtn = 128 * (consumers + 1), bm // consumers, bn
        acc = wtm * bn // 128 * (2 if promote else 1)
        smem = stages * (bm + bn) * 128 + 1024
        stage_bytes = (bm + bn) * 128
        pipe = {2: 0.8, 3: 0.93}.get(stages, 1.0)
        regs = min(168 if consumers == 2 else 255, acc + 40)
        scale = pipe * min(1.0, (wtm * wtn / (wtm + wtn) / 48) ** 0.3)
    else:
        warps = p["warps"]
        threads, wtm, wtn = warps * 32, bm // 2, bn // (warps // 2)
        acc = wtm * wtn // 32 * (2 if promote else 1)
        stage_bytes = (bm + bn) * (p["BK"] * (smem_elt or elt) + 16)
        smem = stage_bytes * stages
        pipe = {2: 0.82, 3: 0.95}.get(stages, 1.0) if "stages" in p else 1.0
        bk = 1.0 if p["BK"] * (smem_elt or elt) >= 128 else 0.93
        hopper = gpu.mma_sync_scale(path)           # sm_90: mma.sync below wgmma's rate (catalog)
        regs = min(255, acc + wtm // 4 + wtn // 4 + (72 if promote else 40))   # + the promotion's scale arrays
        scale = pipe * bk * hopper * min(1.0, (wtm * wtn / (wtm + wtn) / 32) ** 0.3)
    scale *= min(1.0, (bm * bn / (bm + bn) / 80) ** 0.2)
    if acc > 200:
        scale *= 0.35   # accumulators spill to local memory
    if promote:         # scale loads + FMAs every 128-wide K block; wgmma also drains its queue per block
        scale *= 0.75 if wgmma else 0.9
    grid = tiles = cdiv(m, bm) * cdiv(n, bn)
    if persistent:      # host sizes the grid to the resident CTAs; leftover tiles form a ragged last round
        slots = gpu.sms * max(1, min(gpu.smem_per_sm // smem, gpu.max_threads_per_sm // threads,
                                     gpu.regs_per_sm // (threads * regs)))
        grid = min(tiles, slots)
        scale *= tiles / (cdiv(tiles, grid) * grid) * 1.04   # epilogue overlaps the next tile's TMA
    in_flight = max(1, stages - 1) * stage_bytes / threads / 2
    return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=regs,
                  bytes_per_access=max(16, int(in_flight)), traffic=tc_traffic(task, bm, bn, 0.05, elt, out_elt),
                  compute_scale=scale, tile_quant=quant)


WAVE = 0.9      # register_terms' single-CTA stall: grids of about a wave of SMs or more


def register_terms(base, *, one_cta: float = 1.0, short_k: float = 1.0, deep_k: float = 1.0, elt: float = 2,
                   chain: bool = False):
    """tc_launch's model with two terms the H100/H200 measured on the mma.sync rungs (gemm_int8_cuda, gemm_fp16_cuda;
    the figures where they are used): `one_cta` where the launch leaves one CTA on each SM (registers: 128 x 256 x 8
    warps, ~200 a thread; shared memory: a deep ring; or a grid of about one wave) over a grid of at least WAVE of
    the SMs, so every __syncthreads of the K loop stalls all the SM's warps where two CTAs would take turns: int8
    128 x 128 x BK 128 at 4 stages (one CTA for its smem) ran 273.6 us against 3 stages' 234.5 at 4096^3, level at
    M=128 K=14336 (110.9 vs 110.7; 32 CTAs, most SMs idle, which the wave terms already time); 128 x 256 x 8 warps
    ran 1.17x 128 x 128 at 2048^3 (128 CTAs against 256). `short_k` on the register-staged loop (no `stages`) whose K
    slice is under 128 bytes, which waits a global load, a barrier and an smem store each trip, twice as often as at
    128 bytes (`deep_k` on the others: a module whose default slice is the short one splits the measured ratio).
    `chain`: that loop's K steps are a chain of round trips (Launch.serial_trips = K / BK, sim.chain_floor_s), the
    floor of a grid under a wave of SMs: gemm_fp16_cuda mma_sync at M=128 N=4096 K=14336 (sim j2, H100) ran 0.8-1.8 us
    a step, 214-801 us where the roofline terms gave 116-413 (the chain: 161-413; Spearman over the 8 tiles 0.40 -> 0.63)."""
    def launch(p, task):
        one = base(p, task)
        scale = one.compute_scale
        if min(blocks_per_sm(one, task.gpu), -(-one.grid // task.gpu.sms)) == 1 and one.grid >= WAVE * task.gpu.sms:
            scale *= one_cta
        trips = 0.0
        if "stages" not in p:
            scale *= short_k if p["BK"] * elt < 128 else deep_k
            trips = -(-task["K"] // p["BK"]) if chain else 0.0
        return replace(one, compute_scale=scale, serial_trips=max(one.serial_trips, trips))
    return launch


def naive_launch(regs: int = 30, elt: float = 2, out_elt: float = 2):
    """Launch model of thread-per-output rungs (params block_x, block_y): a warp load touches 32/bx
    rows of A and bx rows of B (both K-major), so square-ish warp footprints touch the fewest cache lines."""
    def launch(p, task):
        return _naive_model(task, p["block_x"], p["block_y"], regs, elt, out_elt)
    return launch


def _naive_model(task: Task, bx: int, by: int, regs: int, elt: float, out_elt: float) -> Launch:
    m, n = task["M"], task["N"]
    bx32 = min(bx, 32)
    return Launch(grid=cdiv(m, by) * cdiv(n, bx), threads=bx * by, regs=regs, bytes_per_access=int(elt) or 1,
                  traffic=tc_traffic(task, by, bx, 0.02, elt, out_elt),
                  compute_scale=min(1.0, (12 / (32 // bx32 + bx32)) ** 0.5),
                  tile_quant=m * n / (cdiv(m, by) * by * cdiv(n, bx) * bx))
