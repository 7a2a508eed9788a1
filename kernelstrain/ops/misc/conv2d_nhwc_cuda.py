"""2-D convolution (NHWC input, KRSC weight) in CUDA, fp32 accumulation.

Ladder: direct convolution, a thread per output element with scalar loads -> direct with
16-byte uint4 loads of 8 channels of input and filter -> implicit GEMM with shared-memory tiles
(BM pixels x BN filters x BK channels) and a register-blocked fp32 micro-tile -> tensor-core
implicit GEMM (ldmatrix + mma.sync m16n8k16, im2col tiles gathered in 16-byte chunks) -> the
same with a STAGES-deep cp.async pipeline in dynamic shared memory -> (sm_90a) the warp-specialized
wgmma implicit GEMM: a producer warpgroup gathers the im2col tile with cp.async into the 128-byte
swizzle and TMA-loads the weight tile, consumer warpgroups run wgmma on an mbarrier ring.
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude
from ..ktile import BARRIER_STALL, trip_scale
from ..matmul._gemm_wgmma import TMA_INCLUDES
from ._conv_tc import ARGS, KSLICE, conv_mma_kernel
from ._conv_ws import WS_CEILING, wgmma_ws_launch, wgmma_ws_src
from .conv2d_nhwc_spec import ENTRY, Conv2dNhwcSpec, gemm_dims

KERNEL = f"""extern "C" __global__ void __launch_bounds__(THREADS) conv2d_nhwc_kernel({ARGS})"""
HALF_ACC = {"acc_t": "scalar_t", "term": "xr[c] * wr[c]"}      # half_accumulator: 16-bit sums


def host(task, grid: str, block: str, smem: str = "0", pre: str = "") -> str:
    return ENTRY.host(task, "conv2d_nhwc_kernel", grid, block, smem, pre)


def conv_traffic(task, bm: int, bn: int) -> float:
    """DRAM bytes / minimum: weight re-read per pixel tile and input per filter tile (L2 catches most)."""
    m, n, k = gemm_dims(task)
    x_bytes = task["N"] * task["H"] * task["W"] * task["C"]
    w, out = n * k, m * n
    return (x_bytes * (1 + 0.15 * (cdiv(n, bn) - 1)) + w * (1 + 0.02 * (cdiv(m, bm) - 1)) + out) / (x_bytes + w + out)


# -- direct, direct_uint4 --------------------------------------------------------------------
def direct_launch(vec: bool):
    def launch(p, task):
        m, n, _ = gemm_dims(task)
        th = p["threads"]
        # every FMA needs two loads (L1 hits mostly); 16-byte loads feed 8 FMAs each
        return Launch(grid=cdiv(m * n, th), threads=th, regs=56 if vec else 32, bytes_per_access=16 if vec else 2,
                      traffic=conv_traffic(task, 1, 1) if not vec else conv_traffic(task, 1, 8),
                      compute_scale=0.22 if vec else 0.07)
    return launch


DIRECT_HEAD = """    const int64_t idx = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= (int64_t)N * P * Q * K) return;
    const int k = (int)(idx % K), pix = (int)(idx / K);       // K fastest: a warp shares one pixel
    const int q = pix % Q, p = (pix / Q) % P, n = pix / (P * Q);"""
TAPS = """    for (int r = 0; r < R; ++r) {
        const int ih = p * U - PD + r;
        if (ih < 0 || ih >= H) continue;                        // zero padding
        for (int s = 0; s < S; ++s) {
            const int iw = q * U - PD + s;
            if (iw < 0 || iw >= W) continue;
            const scalar_t* xr = x + (((size_t)n * H + ih) * W + iw) * C;
            const scalar_t* wr = weight + (((size_t)k * R + r) * S + s) * C;"""


def direct_src(p, task, acc_t="float", term="to_float(xr[c]) * to_float(wr[c])", stop="C"):
    return f"""
#define THREADS {p['threads']}

// Direct convolution: one thread per output element, the R x S x C window walked with scalar loads.
{KERNEL} {{
{DIRECT_HEAD}
    {acc_t} acc = 0.f;
{TAPS}
            for (int c = 0; c < {stop}; ++c) acc += {term};
        }}
    }}
    y[idx] = from_float(acc);
}}
{host(task, "(int)(((int64_t)N * P * Q * K + THREADS - 1) / THREADS)", "THREADS")}"""


def direct_uint4_src(p, task, acc_t="float", stop="C"):
    term = "to_float(xv.h[j]) * to_float(wv.h[j])" if acc_t == "float" else "xv.h[j] * wv.h[j]"
    return f"""
#define THREADS {p['threads']}
union Pack {{ uint4 u; scalar_t h[8]; }};                       // 8 channels in one 16-byte load

// Direct convolution, 8 channels of input and filter per 16-byte uint4 load.
{KERNEL} {{
{DIRECT_HEAD}
    {acc_t} acc = 0.f;
{TAPS}
            for (int c = 0; c < {stop}; c += 8) {{
                Pack xv, wv;
                xv.u = *reinterpret_cast<const uint4*>(xr + c);
                wv.u = *reinterpret_cast<const uint4*>(wr + c);
#pragma unroll
                for (int j = 0; j < 8; ++j) acc += {term};
            }}
        }}
    }}
    y[idx] = from_float(acc);
}}
{host(task, "(int)(((int64_t)N * P * Q * K + THREADS - 1) / THREADS)", "THREADS")}"""


# -- smem_tiled ------------------------------------------------------------------------------
def smem_tiled_launch(p, task):
    m, n, _ = gemm_dims(task)
    bm, bn, bk = p["BM"], p["BN"], p["BK"]
    micro = bm * bn // 256
    return Launch(grid=cdiv(m, bm) * cdiv(n, bn), threads=256, smem_bytes=4 * bk * (bm + bn),
                  regs=min(255, 40 + micro + (bm + bn) // 16), bytes_per_access=2, traffic=conv_traffic(task, bm, bn),
                  compute_scale=min(0.8, 0.3 + 0.03 * micro), tile_quant=m / (cdiv(m, bm) * bm))


def smem_tiled_src(p, task, init="0.f", kk_stop="BK"):
    return f"""
#define BM {p['BM']}
#define BN {p['BN']}
#define BK {p['BK']}
#define THREADS 256
#define TM (BM / 16)                 // outputs per thread: TM pixels x TN filters
#define TN (BN / 16)

// Implicit GEMM on CUDA cores: the block stages a BM-pixel x BK-channel im2col tile and a
// BN x BK filter tile in shared memory (fp32, transposed for broadcast reads); each thread
// accumulates a TM x TN micro-tile in registers.
{KERNEL} {{
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int M = N * P * Q, RSC = R * S * C, taps_c = C / BK;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = {init};
    for (int kt = 0; kt < R * S * taps_c; ++kt) {{
        const int rs = kt / taps_c, c0 = (kt % taps_c) * BK, r = rs / S, s = rs % S;
        for (int i = threadIdx.x; i < BM * BK; i += THREADS) {{
            const int m = i / BK, kc = i % BK, pix = m0 + m;
            const int q = pix % Q, p = (pix / Q) % P, n = pix / (P * Q);
            const int ih = p * U - PD + r, iw = q * U - PD + s;
            const bool ok = pix < M && ih >= 0 && ih < H && iw >= 0 && iw < W;
            As[kc][m] = ok ? to_float(x[(((size_t)n * H + ih) * W + iw) * C + c0 + kc]) : 0.f;
        }}
        for (int i = threadIdx.x; i < BN * BK; i += THREADS) {{
            const int nn = i / BK, kc = i % BK;
            Bs[kc][nn] = n0 + nn < K ? to_float(weight[(size_t)(n0 + nn) * RSC + kt * BK + kc]) : 0.f;
        }}
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < {kk_stop}; ++kk) {{
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ty + i * 16];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + j * 16];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }}
        __syncthreads();
    }}
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {{
            const int row = m0 + ty + i * 16, col = n0 + tx + j * 16;
            if (row < M && col < K) y[(size_t)row * K + col] = from_float(acc[i][j]);
        }}
}}
{host(task, "dim3((N * P * Q + BM - 1) / BM, (K + BN - 1) / BN)", "THREADS")}"""


# -- mma_sync, cp_async_pipeline -------------------------------------------------------------
def tc_launch(pipelined: bool):
    def launch(p, task):
        m, n, _ = gemm_dims(task)
        bm, bn, bk, st, gpu = p["BM"], p["BN"], p.get(KSLICE.name, KSLICE.default), p.get("stages", 1), task.gpu
        frags = (bm // 32) * (bn // 16)                       # MI x NI fragments per warp
        reuse = min(1.0, 0.45 + 0.07 * frags)                 # operand reuse of the warp tile
        depth = min(1.0, 0.7 + 0.12 * st) if pipelined else 0.55
        # BK: a deeper slice stages (bk + 8)-element rows (16-byte pad) and synchronises less often
        return Launch(grid=cdiv(m, bm) * cdiv(n, bn), threads=128,
                      smem_bytes=st * (bm + bn) * (bk + 8) * DTYPE_BYTES[task.dtype],
                      regs=min(255, 48 + 4 * frags + 36 * pipelined),
                      bytes_per_access=16 * st * bk // 32, traffic=conv_traffic(task, bm, bn),
                      compute_scale=reuse * depth * gpu.mma_sync_scale("fp16") * trip_scale(bk, KSLICE.default, BARRIER_STALL),
                      tile_quant=m / (cdiv(m, bm) * bm) * n / (cdiv(n, bn) * bn))
    return launch


def mma_sync_src(p, task, kt_end="KT", init="0.f"):
    return conv_mma_kernel(task, p, False, kt_end, init) + host(
        task, "dim3((N * P * Q + BM - 1) / BM, (K + BN - 1) / BN)", "THREADS")


SMEM_PRE = """
    const int smem = STAGES * STAGE_ELEMS * (int)sizeof(scalar_t);   // past 48 KB only with the opt-in
    cudaFuncSetAttribute(conv2d_nhwc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);"""


def cp_async_pipeline_src(p, task, kt_end="KT", init="0.f"):
    return conv_mma_kernel(task, p, True, kt_end, init) + host(
        task, "dim3((N * P * Q + BM - 1) / BM, (K + BN - 1) / BN)", "THREADS", "smem", SMEM_PRE)


TILE = (Param("BM", (32, 64, 128), 128), Param("BN", (32, 64, 128), 64), KSLICE)
TC = frozenset({"mma", "ldmatrix"})

# The sm_90a warp-specialized implicit GEMM (ops/misc/_conv_ws.py): grouped_gemm_cuda's device-checked wgmma_ws
# mainloop with the im2col gather for its A tile. On the menus since roomC j3 (plan w2 of scripts/roomC_device.py, H100,
# measurements/h100_roomC_w2.json): 21 runs at all six menu shapes, bf16 and fp16, BM 64 / 128, BN 64-256 (BN 128 over
# K = 64 filters too), 3-6 stages, all correct (rel_l2 ~1e-4), its 4 bug runs failing; its best beside
# cp_async_pipeline's model-best configuration: N=16 C=256 14x14 23.9 vs 47.1 us, N=8 C=128 28x28 15.3 vs 26.7, N=8
# C=64 56x56 19.9 vs 24.8, N=1 C=64 6.9 vs 11.3, 1x1 C=256 11.5 vs 20.1, stride 2 11.5 vs 26.4: 1.25-2.3x.
WGMMA_WS = Rung("wgmma_ws", "sm_90a warp-specialized implicit GEMM: a producer warpgroup gathers the im2col tile "
                "with cp.async into the 128-byte swizzle and TMA-loads the filter tile; consumer warpgroups run wgmma "
                "on an mbarrier ring",
                (Param("BM", (64, 128), 128), Param("BN", (64, 128, 256), 64), Param("STAGES", (3, 4, 5, 6), 4)),
                needs=TC | {"cp_async", "wgmma", "tma"}, path="fp16", compute_eff=0.7 * WS_CEILING,
                memory_eff=0.85 * WS_CEILING,
                smem="dynamic", launch=wgmma_ws_launch(lambda task, bm, bn: conv_traffic(task, bm, bn)),
                render=wgmma_ws_src,
                bugs={"wrong_init": {"init": "1.f"}, "off_by_one": {"trips": "k_tiles - 1"}})


class Conv2dNhwcCuda(Conv2dNhwcSpec):
    impl = "cuda"
    variants = (
        Rung("direct", "direct convolution: thread per output element, scalar loads of the R x S x C window",
             (Param("threads", (128, 256, 512), 256),), compute_eff=0.5, memory_eff=0.5,
             launch=direct_launch(False), render=direct_src,
             bugs={"off_by_one": {"stop": "C - 1"}, "half_accumulator": HALF_ACC}),
        Rung("direct_uint4", "direct convolution, 8 channels of input and filter per uint4 load",
             (Param("threads", (64, 128, 256, 512), 128),), compute_eff=0.5, memory_eff=0.6,
             launch=direct_launch(True), render=direct_uint4_src,
             bugs={"off_by_one": {"stop": "C - 8"}, "half_accumulator": {"acc_t": "scalar_t"}}),
        Rung("smem_tiled", "implicit GEMM, BM x BN x BK shared-memory tiles, TM x TN fp32 register micro-tiles",
             (Param("BM", (32, 64, 128), 64), Param("BN", (32, 64), 64), Param("BK", (8, 16, 32), 16)),
             compute_eff=0.7, memory_eff=0.7, smem="static", launch=smem_tiled_launch, render=smem_tiled_src,
             bugs={"off_by_one": {"kk_stop": "BK - 1"}, "wrong_init": {"init": "1.f"}}),
        Rung("mma_sync", "tensor-core implicit GEMM: im2col tiles in 16-byte chunks, ldmatrix + mma.sync m16n8k16",
             TILE, needs=TC, path="fp16", compute_eff=0.55, memory_eff=0.8, smem="static",
             launch=tc_launch(False), render=mma_sync_src,
             bugs={"off_by_one": {"kt_end": "KT - 1"}, "wrong_init": {"init": "1.f"}}),
        Rung("cp_async_pipeline", "mma.sync implicit GEMM fed by a STAGES-deep cp.async ring in dynamic smem",
             (*TILE, Param("stages", (2, 3, 4), 3)), needs=TC | {"cp_async"}, path="fp16", compute_eff=0.7,
             memory_eff=0.85, smem="dynamic", launch=tc_launch(True), render=cp_async_pipeline_src,
             bugs={"wrong_init": {"init": "1.f"}, "off_by_one": {"kt_end": "KT - 1"}}),
        WGMMA_WS,
    )

    def assemble(self, body, variant, params, task):
        return f"{prelude(task, TMA_INCLUDES if 'tma' in variant.needs else ())}\n{body}"
