"""Warp-specialized Hopper GEMM (TMA producer warp, wgmma consumer warpgroups on an mbarrier ring)
and its host wrapper, shared by the CUDA matmul modules; operands K-major (see _gemm_ptx.py)."""
from __future__ import annotations

from ._gemm_ptx import HOPPER_PTX, KINDS, SMEM_U32, wgmma_fn


UNSCALED = ("", "")   # promote= with no scales: two-level fp32 accumulation only


def wgmma_consumers(p: dict) -> int:
    """Consumer warpgroups of the wgmma kernel: BM 64 -> one, else two (each BM/2 rows)."""
    return 1 if p["BM"] == 64 else 2


def wgmma_kernel(op: str, kind: str, p: dict, *, args: str, epilogue: str, promote: tuple | None = None,
                 persistent: bool = False, prologue: str = "", kt_end: str = "KT", wait_full: bool = True,
                 fresh: bool = True, split_k: bool = False) -> str:
    """Warp-specialized Hopper GEMM: a producer warp streams A/B boxes with TMA into a STAGES-deep
    ring (full/empty mbarriers); consumer warpgroups run wgmma from the swizzled tiles.

    promote: (row_scale, col_scale) as in mma_kernel, evaluated per 128-wide K block (BK = 128 here);
    col_scale is taken at n0, so BN must divide 128. UNSCALED promotes with no scales: fp8 wgmma
    accumulates with reduced precision, so each 128-wide K block's partial is added into fp32 acc.
    split_k: blockIdx.y owns an equal share of the K tiles, [KT0, KT); `epilogue` writes that
    split's (promoted) fp32 partial sums. Unpromoted (16-bit kinds, fp32 accumulators), a split's
    first K tile is KT0: the slot hand-back waits for kt > KT0, not kt > 0.
    """
    assert not (split_k and persistent), "split-K: one tile per CTA"
    k = KINDS[kind]
    consumers = wgmma_consumers(p)
    mb = p["BM"] // consumers // 64
    tile_loop = ("for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {   // persistent: static round robin"
                 if persistent else "{\n        const int tile = blockIdx.x;")
    kb = "\n        const int KB = (K + 127) / 128;   // 128-wide scale blocks along K" if promote not in (None, UNSCALED) else ""
    tiles = "\n    const int tiles = tiles_m * ((N + BN - 1) / BN);" if persistent else ""
    tile_loop_c = tile_loop.replace("\n        ", "\n            ")
    wait_full = "mbar_wait(&full[s], (it / STAGES) & 1);   // TMA bytes landed" if wait_full else ""
    regs = ("        asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\\n\");    // producer keeps few registers\n",
            "        asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\\n\");   // ... consumers take them\n"
            ) if consumers == 2 else ("", "")
    acc_t = "float" if promote else k.acc
    k0 = "KT0" if split_k else "0"
    if promote:
        scale_d = "ks > 0" if fresh else "1"
        scale_loads = "" if promote == UNSCALED else f"""
                float rs[MB][2];   // row scales load while the wgmmas run
#pragma unroll
                for (int mb = 0; mb < MB; ++mb)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {{
                        const int row = m0 + c * WG_M + mb * 64 + warp * 16 + (lane >> 2) + h * 8, kb = kt;
                        rs[mb][h] = {promote[0]};
                    }}
                const float cs = [&] {{ const int col = n0, kb = kt; return {promote[1]}; }}();"""
        scale_mul = "" if promote == UNSCALED else " * (rs[mb][(i >> 1) & 1] * cs)"
        mainloop = f"""                wgmma_fence();
#pragma unroll
                for (int mb = 0; mb < MB; ++mb)
#pragma unroll
                    for (int ks = 0; ks < 4; ++ks)   // ks == 0 overwrites: a fresh partial per 128-wide K block
                        wgmma_tile(part[mb], sw128_desc(a_tile + mb * 64 * 128) + 2 * ks, db + 2 * ks, {scale_d});
                wgmma_commit();{scale_loads}
                wgmma_wait<0>();
#pragma unroll
                for (int mb = 0; mb < MB; ++mb) fence_acc(part[mb]);
                if (lane == 0) mbar_arrive(&empty[s]);   // tiles consumed: TMA may refill while we promote
#pragma unroll
                for (int mb = 0; mb < MB; ++mb)
#pragma unroll
                    for (int i = 0; i < BN / 2; ++i) acc[mb][i] += part[mb][i]{scale_mul};"""
        tail = ""
        decl = "\n            float part[MB][BN / 2];"
    else:
        mainloop = """                wgmma_fence();
#pragma unroll
                for (int mb = 0; mb < MB; ++mb)
#pragma unroll
                    for (int ks = 0; ks < 4; ++ks)   // 4 k-steps of 32 bytes across the 128-byte row
                        wgmma_tile(acc[mb], sw128_desc(a_tile + mb * 64 * 128) + 2 * ks, db + 2 * ks, 1);
                wgmma_commit();
                wgmma_wait<1>();   // k-tile kt-1 has retired: hand its slot back to the producer
                if (kt > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % STAGES]);"""
        tail = """
            wgmma_wait<0>();
            if (lane == 0) mbar_arrive(&empty[(it - 1) % STAGES]);"""
        decl = ""
        if split_k:     # this split's first K tile is KT0; a split with no K tiles hands back no slot
            mainloop = mainloop.replace("if (kt > 0 && lane == 0)", "if (kt > KT0 && lane == 0)")
            tail = tail.replace("if (lane == 0)", "if (KT > KT0 && lane == 0)")
    return f"""
#define BM {p['BM']}
#define BN {p['BN']}
#define BK {128 // k.elt}                   // K elements per 128-byte swizzled row
#define STAGES {p['stages']}
#define CONSUMERS {consumers}             // consumer warpgroups, WG_M rows each
#define WG_M (BM / CONSUMERS)
#define MB (WG_M / 64)              // m64 wgmma blocks per consumer
#define A_STAGE (BM * 128)
#define STAGE_BYTES ((BM + BN) * 128)
#define THREADS (128 * (CONSUMERS + 1))
{SMEM_U32}{HOPPER_PTX}{wgmma_fn(kind, p['BN'])}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
{op}_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, {args}) {{
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    // 128-byte-swizzled TMA boxes need 1024-byte aligned buffers
    uint8_t* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    {KT_SPLIT if split_k else "const int KT = (K + BK - 1) / BK, tiles_m = (M + BM - 1) / BM;"}{tiles}
    if (threadIdx.x == 0) {{
        for (int s = 0; s < STAGES; ++s) {{ mbar_init(&full[s], 1); mbar_init(&empty[s], CONSUMERS * 4); }}
        asm volatile("fence.mbarrier_init.release.cluster;\\n" ::: "memory");
    }}
    __syncthreads();
    if (wg == 0) {{   // producer warpgroup: one thread drives the copy engine
{regs[0]}        if (tid != 0) return;
        int it = 0;
        {tile_loop}
            const int m0 = (tile % tiles_m) * BM, n0 = (tile / tiles_m) * BN;
            for (int kt = {k0}; kt < KT; ++kt, ++it) {{
                const int s = it % STAGES;
                if (it >= STAGES) mbar_wait(&empty[s], (it / STAGES - 1) & 1);   // consumers freed the slot
                mbar_expect_tx(&full[s], STAGE_BYTES);
                tma_load_2d(smem + s * STAGE_BYTES, &tmA, kt * BK, m0, &full[s]);
                tma_load_2d(smem + s * STAGE_BYTES + A_STAGE, &tmB, kt * BK, n0, &full[s]);
            }}
        }}
    }} else {{   // consumer warpgroups
{regs[1]}        const int c = wg - 1, warp = tid / 32, lane = tid % 32;{kb}{prologue.replace(chr(10), chr(10) + '    ')}
        int it = 0;
        {tile_loop_c}
            const int m0 = (tile % tiles_m) * BM, n0 = (tile / tiles_m) * BN;
            {acc_t} acc[MB][BN / 2] = {{}};{decl}
            for (int kt = {k0}; kt < {kt_end}; ++kt, ++it) {{
                const int s = it % STAGES;
                {wait_full}
                const uint8_t* a_tile = smem + s * STAGE_BYTES + c * WG_M * 128;
                const uint64_t db = sw128_desc(smem + s * STAGE_BYTES + A_STAGE);
{mainloop}
            }}{tail}
#pragma unroll
            for (int mb = 0; mb < MB; ++mb) fence_acc(acc[mb]);
            // epilogue: warp w owns rows 16w..16w+15 of each m64 block; d[4j..4j+3] as in mma.sync's C
#pragma unroll
            for (int mb = 0; mb < MB; ++mb)
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {{
                        const int row = m0 + c * WG_M + mb * 64 + warp * 16 + (lane >> 2) + h * 8;
                        const int col = n0 + j * 8 + (lane & 3) * 2;
                        if (row < M && col < N) {{
                            const auto v0 = acc[mb][4 * j + 2 * h], v1 = acc[mb][4 * j + 2 * h + 1];
                            {epilogue}
                        }}
                    }}
        }}
    }}
}}
"""


# split-K bounds: global K tile indices, so TMA coordinates and the scale block kb = kt hold as is
KT_SPLIT = ("const int KT_ALL = (K + BK - 1) / BK, KT_PER = (KT_ALL + gridDim.y - 1) / gridDim.y, tiles_m = (M + BM - 1) / BM;\n"
            "    const int KT0 = min(KT_ALL, (int)blockIdx.y * KT_PER), KT = min(KT_ALL, KT0 + KT_PER);   // this split's K tiles")

TMA_INCLUDES = ("#include <cuda.h>", "#include <cudaTypedefs.h>")


def wgmma_host(op: str, kind: str, proto: str, call: str, persistent: bool = False) -> str:
    """Host wrapper of wgmma_kernel: tensor maps for A and B, smem opt-in, grid of tiles (or of SMs)."""
    grid = ("    int dev = 0, sms = 0, per_sm = 0;\n    cudaGetDevice(&dev);\n"
            "    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);\n"
            f"    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, {op}_kernel, THREADS, smem);\n"
            "    // persistent: exactly the CTAs that fit at once, each walking tiles grid-stride\n"
            "    const int grid = tiles < sms * per_sm ? tiles : sms * per_sm;\n"
            if persistent else "    const int grid = tiles;\n")
    return f"""
{tensor_maps(kind)}{proto} {{
    const CUtensorMap ta = kmajor_map(A, M, K, BM), tb = kmajor_map(B, N, K, BN);
    const int smem = STAGES * STAGE_BYTES + 1024;   // + slack for the 1024-byte alignment
    cudaFuncSetAttribute({op}_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
{grid}    {op}_kernel<<<grid, THREADS, smem, stream>>>(ta, tb, {call});
}}
"""


def tensor_maps(kind: str) -> str:
    """Host helpers of the wgmma hosts: the driver's tensor-map encoder and K-major TMA maps."""
    k = KINDS[kind]
    return f"""// The driver's tensor-map encoder, reached through the runtime (no -lcuda needed).
static PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    if (!fn) {{
        cudaDriverEntryPointQueryResult q;
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&fn), 12000, cudaEnableDefault, &q);
    }}
    return fn;
}}

// rows x K, K-major: boxes of box_rows x 128 bytes, swizzled the way wgmma's descriptors expect
static CUtensorMap kmajor_map(const void* base, int rows, int K, int box_rows) {{
    CUtensorMap map;
    const cuuint64_t dims[2] = {{(cuuint64_t)K, (cuuint64_t)rows}}, strides[1] = {{(cuuint64_t)K * {k.elt}}};
    const cuuint32_t box[2] = {{BK, (cuuint32_t)box_rows}}, unit[2] = {{1, 1}};
    tensor_map_encoder()(&map, {k.tma_type}, 2, const_cast<void*>(base), dims, strides, box, unit,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return map;
}}

"""


def wgmma_split_host(op: str, kind: str, proto: str, call: str, reduce_call: str) -> str:
    """Host wrapper of a split-K wgmma_kernel: SPLITS CTAs per output tile along y write fp32 partial
    slices into a stream-ordered workspace; `{op}_reduce` sums them in a fixed order."""
    return f"""
{tensor_maps(kind)}{proto} {{
    const CUtensorMap ta = kmajor_map(A, M, K, BM), tb = kmajor_map(B, N, K, BN);
    const int smem = STAGES * STAGE_BYTES + 1024;   // + slack for the 1024-byte alignment
    cudaFuncSetAttribute({op}_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    const size_t MN = (size_t)M * N;
    float* ws = nullptr;                       // SPLITS fp32 [M, N] slices, stream-ordered scratch
    cudaMallocAsync((void**)&ws, SPLITS * MN * sizeof(float), stream);
    {op}_kernel<<<dim3(tiles, SPLITS), THREADS, smem, stream>>>(ta, tb, {call});
    {op}_reduce<<<(unsigned)((MN / 2 + 255) / 256), 256, 0, stream>>>({reduce_call});
    cudaFreeAsync(ws, stream);
}}
"""


def split_reduce(op: str, args: str, alpha: str, combine_end: str = "SPLITS") -> str:
    """The reduce kernel of a split-K wgmma rung: the SPLITS partials of each output pair summed in a
    fixed order (deterministic), times `alpha` (per-tensor scales; "" where the partials are scaled), one bf16 rounding."""
    scale = f"\n    const float alpha = {alpha};   // per-tensor scales, applied once after the sum" if alpha else ""
    mul = " * alpha" if alpha else ""
    return f"""
__global__ void {op}_reduce({args}, __nv_bfloat16* __restrict__ C, size_t MN) {{
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 2;   // N even: a pair never straddles rows
    if (i >= MN) return;{scale}
    float2 t = make_float2(0.f, 0.f);
    for (int s = 0; s < {combine_end}; ++s) {{
        const float2 v = *reinterpret_cast<const float2*>(ws + (size_t)s * MN + i);
        t.x += v.x;
        t.y += v.y;
    }}
    *reinterpret_cast<__nv_bfloat162*>(C + i) = __floats2bfloat162_rn(t.x{mul}, t.y{mul});
}}
"""
