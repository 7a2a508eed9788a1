"""conv2d_nhwc_cuda's warp-specialized Hopper rung: the implicit GEMM (M = N*P*Q pixels, N_gemm = K filters,
K_gemm = R*S*C) on CUTLASS's sm90 warp-specialized mainloop, the shape grouped_gemm_cuda's wgmma_ws has
(ops/moe/_grouped_ws.py; device-checked there): a producer warpgroup fills a STAGES-deep ring -- its 128 threads
gather the im2col A tile (BM pixels x 64 channels of one filter tap, zero-filled in the padding) with 16-byte
cp.async straight into the 128-byte swizzle, one thread TMA-loads the BN x 64 weight tile from the KRSC weight seen
as the K-major [K, R*S*C] matrix -- and BM / 64 consumer warpgroups run m64nBNk16 wgmma from the swizzled tiles,
handing each slot back through an mbarrier with one wgmma group still in flight.

Why it is faster than cp_async_pipeline (4 warps of mma.sync, 2 x 2 over at most a 128 x 128 tile): there every
thread copies and multiplies, and each 64-deep K trip waits on its own copies and a CTA barrier before ldmatrix
feeds the mma.sync chain; here the copies never wait on the math, and a 64 x BN wgmma reads its operands straight
from shared memory (no ldmatrix, no register fragments), at the wgmma rate.
"""
from ..base import Launch, cdiv, DTYPE_BYTES
from ..l2_reuse import l2_cost
from ..matmul._gemm_ptx import HOPPER_PTX, SMEM_U32, cp_async16, wgmma_fn
from ..matmul._gemm_wgmma import tensor_maps
from ._conv_tc import ARGS
from .conv2d_nhwc_spec import ENTRY, gemm_dims

PTX_KIND = {"fp16": "f16", "bf16": "bf16"}
# The rung's efficiencies over the module's calibration: conv2d_nhwc_cuda's fit divides every rung's efficiencies by a
# ceiling (module 4.17; cp_async_pipeline 4.54, mma_sync 3.56): what the older rungs lose to their launch models. This
# rung has no fit rows of its own, so its efficiencies carry a factor fitted to its 21 rows of roomC j3 (H100, every
# shape of the menu; measurements/h100_roomC_w2.json; scripts/roomC_ws_fit.py), under the module's calibration and the
# fit's caps (a constant fitted to device rows, as grouped_gemm_cuda's WS_CEILING is): model / measured geomean 0.99
# over the 19 timed rows (0.67-1.55: the one-image shape's rows 0.67-0.74, too fast; the 1 x 1 shape's BM 64 1.55),
# pairs more than 5% apart (cp_async_pipeline's rows beside) ordered as the device 33 / 37.
WS_CEILING = 1.85
PAIR = {"fp16": "__half2", "bf16": "__nv_bfloat162"}


def consumers(p: dict) -> int:
    """Consumer warpgroups: one per 64 pixels of the BM-pixel tile."""
    return p["BM"] // 64


def ws_traffic(task, bm: int, bn: int, dram_traffic: float) -> float:
    """Launch.traffic of the ring: the DRAM share as the other tiled rungs count it (`dram_traffic`, conv_traffic), and
    the rest of what the gathers read -- every n-block gathers its pixels' R*S taps (each input element R*S / U^2
    times), every m-block reads its filters' weight tile -- through L2 at the L2's cost of a DRAM byte."""
    m, n, k = gemm_dims(task)
    e = DTYPE_BYTES[task.dtype]
    base = (task["N"] * task["H"] * task["W"] * task["C"] + n * k + m * n) * e
    gathered = (m * k * cdiv(n, bn) + n * k * cdiv(m, bm)) * e + m * n * e
    return dram_traffic + max(0.0, gathered - dram_traffic * base) * l2_cost(task.gpu) / base


def wgmma_ws_launch(dram_traffic_of):
    """The launch model of wgmma_ws; `dram_traffic_of(task, BM, BN)` is the module's conv_traffic."""
    def launch(p, task):
        """64-deep K tiles on a warp-specialized ring: the producer streams while the consumers' wgmma overlaps it
        (one wgmma group in flight, no CTA barrier a trip). Memory side: the gathers through L2 (ws_traffic), STAGES - 1
        stages in flight a CTA; compute side: the tile's quantization over M and K, and a 64 x BN wgmma narrower than
        128 columns re-reading its A rows from shared memory as often again."""
        m, n, _ = gemm_dims(task)
        bm, bn, stages = p["BM"], p["BN"], p["STAGES"]
        threads = 128 * (consumers(p) + 1)
        stage = (bm + bn) * 128
        # ptxas -v, sm_90a: 58 / 90 / 154 at BM 64 and BN 64 / 128 / 256 (the consumers' BN / 2 accumulators), 70 / 90 /
        # 154 at BM 128 (the producer's 3 x BM / 16 gather coordinates)
        regs = max(26 + bn // 2, 22 + 3 * bm // 8)
        return Launch(grid=cdiv(m, bm) * cdiv(n, bn), threads=threads, smem_bytes=stages * stage + 1024 + 16 * stages,
                      regs=regs, bytes_per_access=max(16, stage * (stages - 1) // threads),
                      traffic=ws_traffic(task, bm, bn, dram_traffic_of(task, bm, bn)),
                      compute_scale=min(1.0, bn / 128) ** 0.3,
                      tile_quant=m / (cdiv(m, bm) * bm) * n / (cdiv(n, bn) * bn))
    return launch


def producer_src(trips: str) -> str:
    """The producer warpgroup's loop: wait for the slot, TMA the weight tile (thread 0), gather this thread's im2col
    chunks for the trip's filter tap, and let the barrier count this thread's copies when they land."""
    return f"""        // this thread's pixels: row r = tid / 8 + 16 j of the tile, 16-byte chunk tid % 8 of its 64 channels
        const int chunk = tid & 7;
        int nh[BM / 16], ih0[BM / 16], iw0[BM / 16];
#pragma unroll
        for (int j = 0; j < BM / 16; ++j) {{
            const int pix = m0 + tid / 8 + 16 * j, q = pix % Q, p = (pix / Q) % P;
            nh[j] = pix < M ? (pix / (P * Q)) * H : -1;   // -1: past the last pixel, never gathered
            ih0[j] = p * U - PD;
            iw0[j] = q * U - PD;
        }}
        // 128-byte swizzle: chunk c of row r sits at chunk c ^ (r % 8) of its 128-byte line (r % 8 = (tid / 8) % 8)
        const int dst = (tid / 64) * 1024 + ((tid / 8) & 7) * 128 + ((chunk ^ ((tid / 8) & 7)) << 4);
        for (int kt = 0; kt < {trips}; ++kt) {{
            const int s = kt % STAGES;
            if (kt >= STAGES) mbar_wait(&empty[s], (kt / STAGES - 1) & 1);   // consumers freed the slot
            uint8_t* stage = smem + s * STAGE_BYTES;
            if (tid == 0) {{
                mbar_expect_tx(&full[s], BN * 128);
                tma_load_2d(stage + A_BYTES, &tmW, kt * BK, n0, &full[s]);
            }}
            // K trip kt: filter tap (r, s) = (rs / S, rs % S), channels c0 .. c0 + 63
            const int rs = kt / taps_c, c0 = (kt - rs * taps_c) * BK, r = rs / S, sx = rs - r * S;
#pragma unroll
            for (int j = 0; j < BM / 16; ++j) {{
                const int ih = ih0[j] + r, iw = iw0[j] + sx;
                const bool ok = nh[j] >= 0 && (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
                const scalar_t* src = x + ((size_t)(nh[j] + ih) * W + iw) * C + c0 + chunk * 8;
                cp_async16(stage + dst + j * 2048, ok ? (const void*)src : (const void*)x, ok);
            }}
            asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\\n" :: "r"(smem_u32(&full[s])) : "memory");
        }}
        asm volatile("cp.async.wait_all;\\n" ::: "memory");"""


def consumer_src(trips: str, init: str) -> str:
    """A consumer warpgroup's loop: wait for the slot's bytes, four k16 wgmmas down the 128-byte row, keep one group
    in flight and hand the previous slot back."""
    return f"""        float acc[BN / 2];   // row 16 * warp + lane / 4 (+8), col 8 * j + 2 * (lane % 4) (+1)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = {init};
        const uint8_t* a_rows = smem + c * 64 * 128;
        for (int kt = 0; kt < {trips}; ++kt) {{
            const int s = kt % STAGES;
            mbar_wait(&full[s], (kt / STAGES) & 1);   // the im2col rows and the weight tile have landed
            asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");   // cp.async wrote them through the generic proxy
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


def wgmma_ws_src(p, task, trips="k_tiles", init="0.f"):
    """The warp-specialized rung's source. trips="k_tiles - 1" is off_by_one (the last filter tap's last 64 channels
    never summed), init="1.f" wrong_init (every output one too large). No missing_barrier: without the consumers' wait
    on the full barrier the H100 hung (roomC j1: no result in 60 s; the consumers run ahead, their arrivals on the
    empty barriers pass phases the producer then waits on forever), and the simulator has no hang outcome."""
    bn, c = p["BN"], consumers(p)
    kind = PTX_KIND[task.dtype]
    return f"""#define BM {p['BM']}                       // output pixels per block
#define BN {bn}                       // filters per block
#define BK 64                       // channels of one filter tap a 128-byte swizzled row holds
#define STAGES {p['STAGES']}
#define CONSUMERS {c}                // consumer warpgroups, 64 pixels each
#define THREADS (128 * (CONSUMERS + 1))
#define A_BYTES (BM * 128)
#define STAGE_BYTES ((BM + BN) * 128)
typedef {PAIR[task.dtype]} pair_t;
{SMEM_U32}{HOPPER_PTX}{wgmma_fn(kind, bn)}{cp_async16("src-size 0 zero-fills: the padding and pixels past the last arrive as zeros")}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
conv2d_nhwc_kernel(const __grid_constant__ CUtensorMap tmW, {ARGS}) {{
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    // 128-byte-swizzled tiles need 1024-byte aligned buffers
    uint8_t* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
    const int M = N * P * Q, taps_c = C / BK, k_tiles = R * S * taps_c;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    if (threadIdx.x == 0) {{
        // full: 128 producer threads' copies (noinc arrivals) + thread 0's TMA bytes; empty: every consumer warp
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {{ mbar_init(&full[s], 129); mbar_init(&empty[s], CONSUMERS * 4); }}
        asm volatile("fence.mbarrier_init.release.cluster;\\n" ::: "memory");
    }}
    __syncthreads();
    if (wg == 0) {{   // producer warpgroup
{producer_src(trips)}
    }} else {{        // consumer warpgroups
        const int c = wg - 1, warp = tid / 32, lane = tid % 32;
{consumer_src(trips, init)}
#pragma unroll
        for (int h = 0; h < 2; ++h) {{
            const int row = m0 + 64 * c + 16 * warp + lane / 4 + 8 * h;
            if (row >= M) continue;
            scalar_t* out = y + (size_t)row * K + n0 + (lane % 4) * 2;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j)
                if (n0 + 8 * j < K)   // a filter tile past K (K = 64 under BN 128): TMA zero-filled it, nothing to store
                    *reinterpret_cast<pair_t*>(out + 8 * j) = pair_t(from_float(acc[j * 4 + 2 * h]), from_float(acc[j * 4 + 2 * h + 1]));
        }}
    }}
}}

{tensor_maps(kind)}{ENTRY.host_head(task)} {{
    // the KRSC weight as one [K, R * S * C] K-major matrix: a filter tile is a BN x 64 box at (kt * 64, n0)
    const CUtensorMap tw = kmajor_map(weight, K, R * S * C, BN);
    const int smem = STAGES * STAGE_BYTES + 1024;   // + slack for the 1024-byte alignment
    cudaFuncSetAttribute(conv2d_nhwc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const dim3 grid((N * P * Q + BM - 1) / BM, (K + BN - 1) / BN);   // pixel blocks fastest: filter tiles shared in L2
    conv2d_nhwc_kernel<<<grid, THREADS, smem, stream>>>(tw, {ENTRY.call_args()});
}}
"""
