"""MoE grouped GEMM in CUDA: y[a] = x[a // topk] @ w[e]^T for every expert-sorted assignment a.

Same contract as the Triton module: sorted_ids (int32 assignment ids grouped by expert) and
expert_offsets [E + 1]. Ladder: the host reads the offsets and launches one tiled GEMM per expert
-> one launch whose blocks find their expert from the offsets (register-blocked CUDA cores) ->
mma.sync tensor cores fed by ldmatrix -> cp.async multi-stage pipeline -> Hopper wgmma on
shared-memory descriptors (warpgroup-wide 64 x BN x 16 MMAs, sm_90a only). The tensor-core
renders live in _grouped_tc.py.
"""
import math

from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude
from ..fragments import REGISTER_TILE_FMA
from ..ktile import BARRIER_STALL, WGMMA_DRAIN, trip_scale
from ..matmul._gemm_wgmma import TMA_INCLUDES
from ._grouped_tc import (ARGS, BARRIER, HALF_STEP, HOST, MMA_BK, WGMMA_BK, cp_async_pipeline_src, find_block,
                          mma_sync_src, wgmma_pipeline_src)
from ._grouped_ws import WS_CEILING, wgmma_ws_launch, wgmma_ws_src
from .grouped_gemm_spec import GroupedGemmSpec, routing

TC_NEEDS = frozenset({"mma", "ldmatrix", "inline_ptx"})


def traffic_of(task):
    """(rows, active experts, rows per expert, weight bytes, minimum bytes, element bytes)."""
    rows, active, per_expert = routing(task)
    e = DTYPE_BYTES[task.dtype]
    return rows, active, per_expert, active * task["N"] * task["K"] * e, GroupedGemmSpec().cost(task).bytes, e


# -- launch_per_expert ---------------------------------------------------------------------
def launch_per_expert_launch(p, task):
    k, n = task["K"], task["N"]
    rows, active, per_expert, w_bytes, base, e = traffic_of(task)
    tile = p["TILE"]
    m_blocks = cdiv(math.ceil(per_expert), tile)
    # each launch streams its expert's weights once per m-block row of tiles (L2 keeps some)
    traffic = 1 + (w_bytes * (m_blocks - 1) * 0.3 + rows * k * e * cdiv(n, tile) * 0.1) / base
    return Launch(grid=cdiv(n, tile) * m_blocks, threads=tile * tile, smem_bytes=2 * tile * (tile + 1) * 4,
                  regs=32, bytes_per_access=e, traffic=traffic, lane_util=min(1.0, per_expert / tile),
                  launches=max(1, round(active)) + 1)


def launch_per_expert_src(p, task, last="rows", acc="float"):
    # the host reads the offsets back: HIP spells the sync and the copy kind its own way
    return task.dialect.aliases("StreamSynchronize", "MemcpyDeviceToHost") + f"""#define TILE {p['TILE']}
#define MAX_EXPERTS 1024

// One expert's rows: gathered x rows times w_e^T, one output per thread, shared-memory tiles.
extern "C" __global__ void __launch_bounds__(TILE * TILE)
grouped_gemm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ w_e, const int* __restrict__ ids,
                    int rows, scalar_t* __restrict__ y, int K, int N, int topk) {{
    __shared__ float sx[TILE][TILE + 1];
    __shared__ float sw[TILE][TILE + 1];      // +1: sw[tx][kk] reads are conflict free
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int r = blockIdx.y * TILE + ty, n0 = blockIdx.x * TILE;
    const bool live = r < {last};
    const int a_id = live ? ids[r] : 0;
    const scalar_t* xr = x + (size_t)(a_id / topk) * K;
    {acc} acc = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {{
        sx[ty][tx] = live ? to_float(xr[k0 + tx]) : 0.f;
        sw[ty][tx] = to_float(w_e[(size_t)(n0 + ty) * K + k0 + tx]);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += ({acc})(sx[ty][kk] * sw[tx][kk]);
        __syncthreads();
    }}
    if (live) y[(size_t)a_id * N + n0 + tx] = from_float((float)acc);
}}

{HOST} {{
    static int offs[MAX_EXPERTS + 1];
    // the host needs every expert's row count to size its grid: a device-to-host copy and a sync
    cudaMemcpyAsync(offs, expert_offsets, (E + 1) * sizeof(int), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    for (int e = 0; e < E; ++e) {{
        const int rows = offs[e + 1] - offs[e];
        if (rows == 0) continue;
        const dim3 grid(N / TILE, (rows + TILE - 1) / TILE);
        grouped_gemm_kernel<<<grid, dim3(TILE, TILE), 0, stream>>>(x, w + (size_t)e * N * K, sorted_ids + offs[e],
                                                                   rows, y, K, N, topk);
    }}
}}
"""


# -- the single-launch rungs: blocks over (m-block, n-block) tiles of the expert-sorted rows -
def tiling(p, task, bm):
    """(tiles, tile quantization, DRAM traffic factor, expert-lookup efficiency) of BM x BN blocks."""
    k, n, experts = task["K"], task["N"], task["E"]
    rows, active, per_expert, w_bytes, base, e = traffic_of(task)
    bn = p["BN"]
    m_blocks = active * cdiv(math.ceil(per_expert), bm)
    n_blocks = cdiv(n, bn)
    quant = rows / (m_blocks * bm) * n / (n_blocks * bn)
    # blocks are m-fastest (blockIdx.x): resident blocks share one w[e] tile column in L2
    traffic = 1 + (w_bytes * (m_blocks / active - 1) * 0.05 + rows * k * e * (n_blocks - 1) * 0.05) / base
    lookup = 1 / (1 + experts * 4 / (k * bm * bn / 4096))     # per-block scan of E offsets vs. tile work
    return int(m_blocks) * n_blocks, quant, traffic, lookup


def expert_lookup_single_launch(p, task):
    bm, bn = p["BM"], p["BN"]
    tiles, quant, traffic, lookup = tiling(p, task, bm)
    tm, tn = bm // 16, bn // 16
    return Launch(grid=tiles, threads=256, smem_bytes=32 * (bm + 1) * 4 + 32 * bn * 4 + 12,
                  regs=28 + 3 * tm * tn // 2, bytes_per_access=8, traffic=traffic,
                  compute_scale=lookup * min(1.0, tm * tn / (tm + tn) / 2.7), tile_quant=quant)


# The ring's 32-byte row slices (BK 16, 16-bit): each stage reads every tile row in one 32-byte sector (half a
# 64-byte DRAM burst) and waits a barrier twice as often as BK 32. Every H100 / H200 row measured (measurements/*.json,
# this model without the term): BK 16 ran at 0.873x its model (geomean of 6 rows, 0.84-0.90: T=16 E=8 N=14336 and
# T=64 E=64 N=2816), BK 32 at 1.007x (31 rows) -- the fit's BK exponent (0.25 a doubling) had BK 16 16% ahead of BK
# 32 where the device ran them level (BM 64 BN 128 3 stages T=16: 518.3 vs 516.2-520.8 us). On both roofline sides.
SHORT_SLICE = 1.17
# The register-staged loop (mma_sync: no ring, each trip loads its gathered x rows and w tile into registers, stores
# them to shared memory, barriers and runs its MMAs) waits a global round trip every trip: a deeper BK halves the
# trips over the same bytes. H100 (sim j2 = plan j4, measurements/h100_sim_s11_j2.json, T=64 E=64 K=2048 N=2816
# top-6, bf16, BN 128): BM 32 BK 16 / 32 / 64 481.0 / 440.9 / 312.5 us, BM 64 569.2 / 409.5 / 312.0 -- BK 64 0.735x
# BK 32's time, BK 16 1.23x (geomean of the two); the model had them 415.6 / 440.4 / 466.8 and 405.6 / 451.5 / 478.5,
# every pair the wrong way round (the module's BK exponent, +0.084 a doubling, was fitted on the ring's rows and the
# ring's barrier stall), as in the held-out rows (s62828 / s98282: BK 64 at BM 32 301.9 / 312.4 us, BK 32 401.6 at
# s95252). The rows are memory-bound, so the trip's wait shows on both roofline sides (as SHORT_SLICE); the rung's
# stored fit rows are all BK 32, where the factor is 1: no fit row moves.
REG_STAGED_TRIP = {16: 1.23, 32: 1.0, 64: 0.735}


# wgmma_pipeline's operand stream: every stored row of the rung (40, H100 and H200, T=16-4096, BN 64-256, BK 32-128,
# 1-5 blocks an SM; measurements/*.json, h100_roomK_j1.json among them) pulled its tiles' real bytes (the expert's
# rows of the x tile, zero-filled rows not counted, and the w tile) at 9.5-15.6 GB/s an SM (geomean 12.3): ~1.6 TB/s
# over 132 SMs whether the bytes came from DRAM (T=16 / 64: each w tile read once) or L2 (T=2048: three m-blocks
# share it) and on both cards, whose DRAM differs 1.43x. So the limit is the SM's, not the memory's: at T >= 512
# the H100 ran it 1.9-3.5x slower than the roofline said (T=2048 E=64 K=2048 N=2816 top-6, BN 128 BK 64 4 stages:
# 1,859 us at BM 64, 1,419 at BM 128, beside cp_async_pipeline's 927; modelled 635 / 592). What the compiler
# emits (nvcc 13.0 -arch=sm_90a, cuobjdump -sass): each trip is DEPBAR (cp.async.wait_group) -> MEMBAR.ALL.CTA +
# FENCE.VIEW.ASYNC.S (fence.proxy.async, which orders the thread's earlier memory operations, the ring's copies in
# flight too) -> BAR.SYNC -> 12 LDGSTS.128 a thread (an x row's id from smem, a division by topk, 64-bit address)
# -> 4 HGMMA -> WARPGROUP.DEPBAR gsb0 0; and the 16-byte copies of a 128-byte row slice land in the no-swizzle
# core-matrix layout 128 bytes apart, all eight in the same four banks. The rate is the measured one (the share
# of each cause is not; plan sim j1 times the trip without the fence): a floor beside the roofline (Launch.issue_s).
# At 13.0 GB/s an SM the 34 stored rows outside the held-out seeds sit at geomean 1.00, all within 0.8-1.25x
# (without the floor: 0.81, rms log error 0.42 -> 0.10); the module's 138 stored rows order 0.931 -> 0.938 (pairs
# > 3% apart), Spearman 0.836 -> 0.893. Per row: scripts/sim_wgmma_stream.py; the module: scripts/sim_stored_pool.py
# grouped_gemm_cuda --held-out s61717 s62828 s91331 s92442.
WGMMA_STREAM_BPS_SM = 13.0e9


def wgmma_stream_s(p, task, bm: int, tiles: int) -> float:
    """Seconds the busiest SM takes to pull its blocks' operand tiles at WGMMA_STREAM_BPS_SM: per trip each block
    copies its expert's real x rows (rows / m-blocks of them on average) and BN w rows, BK deep."""
    rows, active, per_expert, _, _, e = traffic_of(task)
    real_rows = rows / (active * cdiv(math.ceil(per_expert), bm))
    bk = p.get("BK", WGMMA_BK.default)
    trip_bytes = (real_rows + p["BN"]) * bk * e
    return cdiv(tiles, task.gpu.sms) * (task["K"] / bk) * trip_bytes / WGMMA_STREAM_BPS_SM


def tc_launch(wgmma: bool):
    """mma_sync / cp_async_pipeline (2 x 2 warps of mma.sync) or wgmma_pipeline (one 64-row warpgroup).
    BK: a deeper K tile a trip takes more smem a stage and synchronises fewer times (ops/ktile.py)."""
    def launch(p, task):
        e, bn, stages = DTYPE_BYTES[task.dtype], p["BN"], p.get("STAGES", 1)
        bk = p.get("BK", (WGMMA_BK if wgmma else MMA_BK).default)
        bm = p.get("BM", 64) if wgmma else p["BM"]
        tiles, quant, traffic, lookup = tiling(p, task, bm)
        threads = 2 * bm if wgmma else 128        # wgmma: a 128-thread warpgroup per 64 rows
        if wgmma:
            stage = (bm + bn) * bk * e
            regs = 40 + bn // 2 + 24
            scale = lookup * min(1.0, bn / 128) ** 0.3 * trip_scale(bk, WGMMA_BK.default, WGMMA_DRAIN)
        else:
            stage = (bm + bn) * (bk + 8) * e
            wm, wn = bm // 2, bn // 2
            regs = 40 + (wm // 16) * (wn // 8) * 4 + (wm // 16) * 4 + (wn // 8) * 2   # past 255: sim.cap_registers spills
            scale = lookup * min(1.0, (wm * wn / (wm + wn)) / 32) ** 0.4 * trip_scale(bk, MMA_BK.default, BARRIER_STALL)
            scale *= task.gpu.mma_sync_scale("fp16")       # Hopper: mma.sync below its wgmma rate
        head = bm * 4 + 12                                   # s_ids[BM] + slot[3]
        align = 128 if wgmma else 16                         # static part rounds to the dynamic buffer's alignment
        smem = stage + head if stages == 1 else stage * stages + cdiv(head, align) * align
        if not wgmma and stages > 1 and bk * e < 64:
            traffic, scale = traffic * SHORT_SLICE, scale / SHORT_SLICE
        if not wgmma and stages == 1:        # the register-staged loop's trips: measured on both sides, not the ring's stall
            trip = REG_STAGED_TRIP[bk] * trip_scale(bk, MMA_BK.default, BARRIER_STALL)
            traffic, scale = traffic * REG_STAGED_TRIP[bk], scale / trip
        return Launch(grid=tiles, threads=threads, smem_bytes=smem, regs=regs,
                      bytes_per_access=max(16, stage * max(1, stages - 1) // (threads * 2)), traffic=traffic,
                      compute_scale=scale, tile_quant=quant, issue_s=wgmma_stream_s(p, task, bm, tiles) if wgmma else 0.0)
    return launch


def expert_lookup_single_src(p, task, cmp="<", barrier=BARRIER):
    return f"""#define BM {p['BM']}
#define BN {p['BN']}
#define BK 32
#define TM (BM / 16)
#define TN (BN / 16)
{find_block(cmp)}
extern "C" __global__ void __launch_bounds__(256)
grouped_gemm_kernel({ARGS}) {{
    __shared__ float sx[BK][BM + 1];          // k-major tiles: each thread reads TM + TN values per k
    __shared__ float sw[BK][BN];
    __shared__ int slot[3];                   // expert, first row, end row of this block
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    if (tid == 0) find_block(offsets, E, blockIdx.x, slot);
    __syncthreads();
    const int expert = slot[0], start = slot[1], row_hi = slot[2];
    if (expert < 0) return;                   // the grid is an upper bound on the m-blocks
    const int n0 = blockIdx.y * BN;
    const scalar_t* w_e = w + (size_t)expert * N * K;
    float acc[TM][TN] = {{}};
    for (int k0 = 0; k0 < K; k0 += BK) {{
        for (int i = tid; i < BM * BK; i += 256) {{
            const int r = i / BK, c = i % BK;
            sx[c][r] = start + r < row_hi ? to_float(x[(size_t)(sorted_ids[start + r] / topk) * K + k0 + c]) : 0.f;
        }}
        for (int i = tid; i < BN * BK; i += 256) {{
            const int r = i / BK, c = i % BK;
            sw[c][r] = to_float(w_e[(size_t)(n0 + r) * K + k0 + c]);
        }}{barrier}{REGISTER_TILE_FMA}
        __syncthreads();
    }}
#pragma unroll
    for (int i = 0; i < TM; ++i) {{
        const int r = start + ty + 16 * i;
        if (r >= row_hi) continue;
        const size_t out = (size_t)sorted_ids[r] * N + n0 + tx;
#pragma unroll
        for (int j = 0; j < TN; ++j) y[out + 16 * j] = from_float(acc[i][j]);
    }}
}}

{HOST} {{
    // m-blocks fastest; upper bound without a host sync: each expert adds at most one partial block
    const dim3 grid((T * topk + BM - 1) / BM + E, N / BN);
    grouped_gemm_kernel<<<grid, 256, 0, stream>>>(x, w, sorted_ids, expert_offsets, y, E, K, N, topk);
}}
"""


# CUTLASS's sm90 warp-specialized mainloop on the expert gather (ops/moe/_grouped_ws.py), on the menus since roomC
# j1 / j2 (H100: 28 runs of 26 configurations at T=16 / 64 / 512 / 2048 / 4096 / 8192, bf16 and fp16, all correct,
# their 17 bug runs failing; its best 1.7-3.1x faster than cp_async_pipeline's model-best configuration at every
# shape; measurements/h100_roomC_ws.json, h100_roomC_ws_j2.json)
WGMMA_WS = Rung("wgmma_ws", "sm_90a warp-specialized: a producer warpgroup gathers x rows with cp.async into the "
         "128-byte swizzle and TMA-loads w tiles; consumer warpgroups run wgmma on an mbarrier ring",
         (Param("BM", (64, 128), 128), Param("BN", (64, 128, 256), 128), Param("STAGES", (3, 4, 5, 6), 4)),
         needs=TC_NEEDS | {"cp_async", "wgmma", "tma"}, path="fp16", compute_eff=0.72 * WS_CEILING,
         memory_eff=0.9 * WS_CEILING, smem="dynamic", launch=wgmma_ws_launch(tiling, traffic_of), render=wgmma_ws_src,
         bugs={"missing_barrier": {"wait_full": False}, "off_by_one": {"trips": "k_tiles - 1"}},
         # missing_barrier crashes: the H100 said "unspecified launch failure" at every config of j1 / j2 (likely the
         # consumers finishing before the last TMA / cp.async copies land, the CTA exiting under them)
         faults=("missing_barrier",))


# Not offered: 256-wide N tiles on the mma.sync rungs (the room tables' BN+ edge). 64 x 256 builds without spill (ptxas
# sm_90a: 237-240 registers) and the model has it 4-18% ahead of 64 x 128 on the H100, behind on the A100; but 128 x 256
# spills (255 registers, 580-1,912 bytes of spill stores), and the engine's smem-overflow repair lands there (it
# shrinks the ring, not the tile), measures the rung >= 2x slow and leaves it: default profile seed 9191, 20 episodes,
# geomean speedup 11.28 -> 11.00 with them. Plans k8 / k9 time 64 x 256 beside 64 x 128 for when that is settled.
class GroupedGemmCuda(GroupedGemmSpec):
    impl = "cuda"
    variants = (
        Rung("launch_per_expert", "host syncs on the offsets, then one smem-tiled GEMM launch per expert",
             (Param("TILE", (16, 32), 16),), path="fp32", compute_eff=0.25, memory_eff=0.7, smem="static",
             launch=launch_per_expert_launch, render=launch_per_expert_src,
             bugs={"off_by_one": {"last": "rows - 1"}, "half_accumulator": {"acc": "scalar_t"}}),
        Rung("expert_lookup_single", "single launch: each block scans the offsets for its expert; register-blocked FMA",
             (Param("BM", (32, 64, 128), 64), Param("BN", (64, 128, 256), 128)), path="fp32", compute_eff=0.5,
             memory_eff=0.8, smem="static", launch=expert_lookup_single_launch, render=expert_lookup_single_src,
             bugs={"off_by_one": {"cmp": "<="}, "missing_barrier": {"barrier": ""}}),
        Rung("mma_sync", "mma.sync m16n8k16 tensor cores, x rows gathered to smem, ldmatrix fragments",
             (Param("BM", (32, 64, 128), 64), Param("BN", (64, 128), 128), MMA_BK), needs=TC_NEEDS, path="fp16",
             compute_eff=0.55, memory_eff=0.82, smem="static", launch=tc_launch(False), render=mma_sync_src,
             bugs={"missing_barrier": {"barrier": ""}, "half_accumulator": {"step": HALF_STEP}}),
        Rung("cp_async_pipeline", "STAGES-deep cp.async ring (gathered rows copy 16 bytes at a time) under the mma",
             (Param("BM", (32, 64, 128), 128), Param("BN", (64, 128), 128), Param("STAGES", (2, 3, 4, 5), 3), MMA_BK),
             needs=TC_NEEDS | {"cp_async"}, path="fp16", compute_eff=0.76, memory_eff=0.88, smem="dynamic",
             launch=tc_launch(False), render=cp_async_pipeline_src,
             bugs={"missing_barrier": {"barrier": ""}, "off_by_one": {"trips": "k_tiles - 1"}}),
        # No off_by_one on the ring's wait (cp_async_wait<STAGES - 1>, one tile too few landed): a race, not a
        # deterministic error. H100 (final gpu-check of 2026-12-06, seed 98282, T=64 E=64 K=2048 N=2816 topk=6, BM 128
        # BN 128 STAGES 3) ran it correct; earlier checks saw 92 to 1M elements wrong. A wrong_result label must fail.
        # missing_barrier here leaves s_ids unpublished: the gather reads garbage ids and faults
        Rung("wgmma_pipeline", "warpgroup wgmma.mma_async m64nBNk16 on smem descriptors, cp.async ring (sm_90a)",
             # BM 128 (two consumer warpgroups: the render and launch model take it) is off the menu until a device
             # times it (plans k8 / k10 of scripts/roomK_device.py)
             (Param("BN", (64, 128, 256), 128), Param("STAGES", (3, 4, 5, 6), 4), WGMMA_BK),
             needs=TC_NEEDS | {"cp_async", "wgmma"}, path="fp16", compute_eff=0.72, memory_eff=0.9,
             smem="dynamic", launch=tc_launch(True), render=wgmma_pipeline_src,
             bugs={"missing_barrier": {"publish_ids": False}},
             faults=("missing_barrier",)),
        WGMMA_WS,
    )

    def assemble(self, body, variant, params, task):
        return f"{prelude(task, TMA_INCLUDES if 'tma' in variant.needs else ())}\n{body}"
