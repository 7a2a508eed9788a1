"""grouped_gemm_cuda's warp-specialized Hopper rung (CUTLASS's sm90 cp.async / TMA warp-specialized mainloops, on
an expert-sorted gather): a producer warpgroup fills a STAGES-deep ring -- its 128 threads gather the x rows with
16-byte cp.async straight into the 128-byte swizzle, one thread loads the expert's w tile with TMA -- and consumer
warpgroups run wgmma from the swizzled tiles, handing each slot back through an mbarrier with one wgmma group
still in flight.

Why it is faster than wgmma_pipeline's ring: there every thread both copies and multiplies, so each K trip runs
cp.async.wait_group -> the proxy fence (MEMBAR.ALL.CTA, which waits for the thread's copies in flight) -> a CTA
barrier -> wgmma -> wgmma.wait_group 0: the trip's loads and math serialize. Here the copy threads never fence or
wait on the math; their completion reaches the consumers through the full barrier (cp.async.mbarrier.arrive and
TMA's transaction bytes), and the consumers' own proxy fence has no copies of theirs to wait for.
"""
import math

from ..base import Launch, cdiv
from ..l2_reuse import l2_cost
from ..matmul._gemm_ptx import HOPPER_PTX, SMEM_U32, cp_async16, wgmma_fn
from ..matmul._gemm_wgmma import tensor_maps
from ._grouped_tc import ARGS, HOST, PTX, block_head, find_block

PTX_KIND = {"fp16": "f16", "bf16": "bf16"}


def consumers(p: dict) -> int:
    """Consumer warpgroups: one per 64 rows of the BM-row tile."""
    return p["BM"] // 64


# Every n-block of a tile row re-reads its gathered x rows and every m-block of an expert re-reads its w tile: those
# re-reads come through L2 (blocks run m-fastest, so resident blocks share a w column and the x rows stay warm), a
# MISS share of them from DRAM as the other single-launch rungs count it (grouped_gemm_cuda.tiling). The rung's ring
# streams at the L2's read bandwidth (l2_reuse.L2_READ_TBS), so at wide grids of narrow tiles those re-reads are
# its bound: the H100 ran T=4096 E=8 N=14336 at BM 128 in 2,904 / 2,064 / 1,518 us at BN 64 / 128 / 256 and BM 64
# BN 128 in 2,655 (roomC j1, measurements/h100_roomC_ws.json): 15 / 7.5 / 3.8 GB of x re-reads and 6.6 / 15 GB
# of w re-reads, 9-11 TB/s through L2.
MISS = 0.05
# The rung's efficiencies over the module's calibration. grouped_gemm_cuda's fit divides every rung's efficiencies by
# a ceiling of 1.42-2.85 (module 1.86): what its older rungs lose to their launch models (wgmma_pipeline's fenced
# fill among it). This rung's 16 rows of roomC j1 (H100: T=64 / 2048 / 4096, BM 64 / 128, BN 64-256, 3-6 stages)
# ran at 0.80-0.98x of its own uncalibrated roofline (the L2 re-reads above counted), so it carries the module's
# ceiling: compute_eff 0.72 and memory_eff 0.9 (wgmma_pipeline's) times WS_CEILING, priced under the module's
# calibration (no rung term of its own until a refit has its rows: --rungs needs > 200 module rows) and the fit's
# caps (0.73 of the fp16 peak, 0.91 of DRAM), which its memory-bound rows reach (T=64: 238-245 us for 0.82 GB).
# scripts/roomC_ws_fit.py: j1's 16 rows at model / measured 0.96-1.18 (geomean 1.05); j2's 12, out of sample,
# 1.06-1.08 at T=16, 1.02-1.25 at T=512, 0.75-0.89 at T=8192 E=128 (cp_async_pipeline's model is 0.82 there too);
# all 28 geomean 1.02, pairs > 5% apart ordered as the device 74 / 81.
WS_CEILING = 1.86


def wgmma_ws_launch(tiling, traffic_of):
    """The launch model of wgmma_ws over grouped_gemm_cuda's `tiling` (tiles, tile quantization, DRAM traffic,
    lookup) and `traffic_of` (rows, experts, rows an expert, w bytes, minimum bytes, element bytes)."""
    def launch(p, task):
        """wgmma_ws: 64-deep K tiles on a warp-specialized ring. A producer warpgroup streams and the consumers'
        math overlaps it (one wgmma group in flight, no CTA barrier a trip), so no serial fill floor: the
        roofline's memory side (the operand re-reads through L2, STAGES - 1 stages in flight a CTA) and its
        compute side."""
        bm, bn, stages = p["BM"], p["BN"], p["STAGES"]
        tiles, quant, _, lookup = tiling(p, task, bm)
        rows, _, per_expert, w_bytes, base, e = traffic_of(task)
        rereads = rows * task["K"] * e * (cdiv(task["N"], bn) - 1) + w_bytes * (cdiv(math.ceil(per_expert), bm) - 1)
        traffic = 1 + rereads * (MISS + (1 - MISS) * l2_cost(task.gpu)) / base
        threads = 128 * (consumers(p) + 1)
        stage = (bm + bn) * 128
        head = bm * 4 + 12 + 16 * stages                         # s_ids[BM] + slot[3] + full / empty barriers
        regs = 26 + bn // 2                                      # ptxas -v, sm_90a: 58 / 90 / 154 at BN 64 / 128 / 256
        scale = lookup * min(1.0, bn / 128) ** 0.3
        return Launch(grid=tiles, threads=threads, smem_bytes=stages * stage + 1024 + head, regs=regs,
                      bytes_per_access=max(16, stage * (stages - 1) // threads), traffic=traffic,
                      compute_scale=scale, tile_quant=quant)

    return launch


def producer_src(trips: str) -> str:
    """The producer warpgroup's loop: wait for the slot, TMA the w tile (thread 0), gather the x rows, and let the
    barrier count this thread's copies when they land."""
    return f"""        // this thread's gathered rows: r = tid / 8 + 16 j, 16-byte chunk tid % 8 of each 128-byte row
        const int chunk = tid & 7;
        int src[BM / 16];
        bool live[BM / 16];
#pragma unroll
        for (int j = 0; j < BM / 16; ++j) {{
            const int r = tid / 8 + 16 * j;
            live[j] = start + r < row_hi;
            src[j] = (s_ids[r] / topk) * K + chunk * 8;
        }}
        // 128-byte swizzle: chunk c of row r sits at chunk c ^ (r % 8) of its 128-byte line (r % 8 = (tid / 8) % 8)
        const int dst = (tid / 64) * 1024 + ((tid / 8) & 7) * 128 + ((chunk ^ ((tid / 8) & 7)) << 4);
        for (int kt = 0; kt < {trips}; ++kt) {{
            const int s = kt % STAGES;
            if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1) & 1);   // consumers freed the slot
            uint8_t* stage = smem + s * STAGE_BYTES;
            if (tid == 0) {{
                mbar_expect_tx(&full[s], BN * 128);
                tma_load_2d(stage + A_BYTES, &tmW, kt * BK, expert * N + n0, &full[s]);
            }}
#pragma unroll
            for (int j = 0; j < BM / 16; ++j) cp_async16(stage + dst + j * 2048, x + src[j] + kt * BK, live[j]);
            asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\\n" :: "r"(smem_u32(&full[s])) : "memory");
        }}
        asm volatile("cp.async.wait_all;\\n" ::: "memory");"""


def consumer_src(wait_full: bool, trips: str) -> str:
    """A consumer warpgroup's loop: wait for the slot's bytes, four k16 wgmmas down the 128-byte row, keep one group
    in flight and hand the previous slot back."""
    wait = ("mbar_wait(&full[s], (kt / STAGES) & 1);   // the x rows and the w tile have landed\n"
            "            asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");   // cp.async wrote them "
            "through the generic proxy") if wait_full else ""
    return f"""        float acc[BN / 2] = {{}};   // row 16 * warp + lane / 4 (+8), col 8 * j + 2 * (lane % 4) (+1)
        const uint8_t* a_rows = smem + c * 64 * 128;
        for (int kt = 0; kt < {trips}; ++kt) {{
            const int s = kt % STAGES;
            {wait}
            const uint64_t da = sw128_desc(a_rows + s * STAGE_BYTES), db = sw128_desc(smem + s * STAGE_BYTES + A_BYTES);
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < BK / 16; ++ks)    // a k16 step is 32 bytes along the swizzled row: +2 in the descriptor
                wgmma_tile(acc, da + 2 * ks, db + 2 * ks, 1);
            wgmma_commit();
            wgmma_wait<1>();   // trip kt - 1 has retired: its slot goes back to the producer
            if (kt > 0 && lane == 0) mbar_arrive(&empty[(kt - 1) % STAGES]);
        }}
        wgmma_wait<0>();
        fence_acc(acc);"""


def wgmma_ws_src(p, task, wait_full=True, trips="k_tiles"):
    """The warp-specialized rung's source. wait_full=False is missing_barrier (the consumers read a slot before its
    copies land); trips="k_tiles - 1" is off_by_one (the last K tile never summed)."""
    bn, c = p["BN"], consumers(p)
    kind = PTX_KIND[task.dtype]
    return f"""#define BM {p['BM']}
#define BN {bn}
#define BK 64                       // K elements a 128-byte swizzled row holds
#define STAGES {p['STAGES']}
#define CONSUMERS {c}                // consumer warpgroups, 64 rows each
#define THREADS (128 * (CONSUMERS + 1))
#define A_BYTES (BM * 128)
#define STAGE_BYTES ((BM + BN) * 128)
typedef {PTX[task.dtype][1]} pair_t;
{SMEM_U32}{HOPPER_PTX}{wgmma_fn(kind, bn)}{cp_async16("src-size 0 zero-fills: rows past the expert's end arrive as zeros")}{find_block()}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
grouped_gemm_kernel(const __grid_constant__ CUtensorMap tmW, {ARGS}) {{
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    // 128-byte-swizzled tiles need 1024-byte aligned buffers
    uint8_t* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
{block_head()}    const int k_tiles = K / BK, wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    if (threadIdx.x == 0) {{
        // full: 128 producer threads' copies (noinc arrivals) + thread 0's TMA bytes; empty: every consumer warp
        for (int s = 0; s < STAGES; ++s) {{ mbar_init(&full[s], 129); mbar_init(&empty[s], CONSUMERS * 4); }}
        asm volatile("fence.mbarrier_init.release.cluster;\\n" ::: "memory");
    }}
    __syncthreads();
    if (wg == 0) {{   // producer warpgroup
{producer_src(trips)}
    }} else {{        // consumer warpgroups
        const int c = wg - 1, warp = tid / 32, lane = tid % 32;
{consumer_src(wait_full, trips)}
#pragma unroll
        for (int h = 0; h < 2; ++h) {{
            const int r = 64 * c + 16 * warp + lane / 4 + 8 * h;
            if (start + r >= row_hi) continue;
            scalar_t* out = y + (size_t)s_ids[r] * N + n0 + (lane % 4) * 2;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
                *reinterpret_cast<pair_t*>(out + 8 * j) = pair_t(from_float(acc[j * 4 + 2 * h]), from_float(acc[j * 4 + 2 * h + 1]));
        }}
    }}
}}

{tensor_maps(kind)}{HOST} {{
    // w as one [E * N, K] matrix: an expert's BN-row tile is a box at row expert * N + n0
    const CUtensorMap tw = kmajor_map(w, E * N, K, BN);
    const int smem = STAGES * STAGE_BYTES + 1024;   // + slack for the 1024-byte alignment
    cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const dim3 grid((T * topk + BM - 1) / BM + E, N / BN);   // m-blocks fastest: w tiles shared in L2
    grouped_gemm_kernel<<<grid, THREADS, smem, stream>>>(tw, x, w, sorted_ids, expert_offsets, y, E, K, N, topk);
}}
"""
