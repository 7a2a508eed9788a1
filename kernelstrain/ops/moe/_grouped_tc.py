"""The tensor-core rungs of grouped_gemm_cuda (mma.sync, cp.async ring, wgmma) and the block
lookup every single-launch rung shares: a block finds its expert from the offsets, stages its rows'
assignment ids in smem, gathers x rows and scatters y rows by assignment id.
"""
from ..base import Param
from ..matmul._gemm_ptx import LDMATRIX_X4, SMEM_U32, cp_async16, mma_16816

# K depth of a trip: mma.sync tiles stage BK + 8 (padded) columns; wgmma tiles BK in core matrices
MMA_BK = Param("BK", (16, 32, 64), 32)
WGMMA_BK = Param("BK", (32, 64, 128), 64)

PTX = {"fp16": ("f16", "__half2"), "bf16": ("bf16", "__nv_bfloat162")}
ARGS = ("const scalar_t* __restrict__ x, const scalar_t* __restrict__ w, const int* __restrict__ sorted_ids, "
        "const int* __restrict__ offsets, scalar_t* __restrict__ y, int E, int K, int N, int topk")
# the entry's prototype as the renders spell it (two lines)
HOST = ("void grouped_gemm(const scalar_t* x, const scalar_t* w, const int* sorted_ids, const int* expert_offsets,\n"
        "                  scalar_t* y, int T, int E, int K, int N, int topk, cudaStream_t stream)")
BARRIER = "\n        __syncthreads();"      # between the smem tile stores and the reads; missing_barrier drops it


def find_block(cmp: str = "<") -> str:
    return f"""
// Block mb of the expert-sorted rows: walk the experts' block counts until mb falls inside one.
// One thread does it and shares the answer; the offsets are a few hundred bytes, read from L2.
__device__ __forceinline__ void find_block(const int* __restrict__ offsets, int E, int mb, int* slot) {{
    int first = 0;
    slot[0] = -1;
    for (int e = 0; e < E; ++e) {{
        const int lo = offsets[e], hi = offsets[e + 1];
        const int blocks = (hi - lo + BM - 1) / BM;
        if (mb {cmp} first + blocks) {{ slot[0] = e; slot[1] = lo + (mb - first) * BM; slot[2] = hi; return; }}
        first += blocks;
    }}
}}
"""


def ptx_helpers(task, cp_async: bool) -> str:
    text = SMEM_U32 + LDMATRIX_X4 + mma_16816(PTX[task.dtype][0], b_regs=True)
    if cp_async:
        text += cp_async16("src-size 0 zero-fills: rows past the expert's end arrive as zeros")
    return text


def mma_defs(p, task) -> str:
    bk = p.get(MMA_BK.name, MMA_BK.default)      # records measured before the knob lack BK
    return f"""#define BM {p['BM']}
#define BN {p['BN']}
#define BK {bk}
#define LDS (BK + 8)              // padded smem row ({(bk + 8) * 2} bytes): ldmatrix rows hit distinct banks
#define WM (BM / 2)               // 2 x 2 warps
#define WN (BN / 2)
#define MT (WM / 16)
#define NT (WN / 8)
typedef {PTX[task.dtype][1]} pair_t;
"""

MMA_TILE = """
// One BK slice: x fragments (16 x 16) and w fragments (two n8 tiles per ldmatrix.x4) from smem.
__device__ __forceinline__ void mma_tile(float (&acc)[MT][NT][4], const scalar_t* sx, const scalar_t* sw) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
        uint32_t a[MT][4], b[NT / 2][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            ldmatrix_x4(a[mt], sx + (wm * WM + mt * 16 + lane % 16) * LDS + kk * 16 + (lane / 16) * 8);
#pragma unroll
        for (int j = 0; j < NT / 2; ++j)       // w rows are n, k contiguous: exactly the .col B operand
            ldmatrix_x4(b[j], sw + (wn * WN + j * 16 + (lane / 16) * 8 + lane % 8) * LDS + kk * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) mma_16816(acc[mt][nt], a[mt], b[nt / 2][(nt % 2) * 2], b[nt / 2][(nt % 2) * 2 + 1]);
    }
}
"""

def epilogue() -> str:
    cvt = "pair_t(from_float(acc[mt][nt][h * 2]), from_float(acc[mt][nt][h * 2 + 1]))"
    return f"""    // epilogue: c0,c1 = (row g, cols 2t, 2t+1), c2,c3 = row g + 8; rows scatter to y by assignment id
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {{
            const int r = wm * WM + mt * 16 + lane / 4 + h * 8;
            if (start + r >= row_hi) continue;
            scalar_t* out = y + (size_t)s_ids[r] * N + n0 + wn * WN + (lane % 4) * 2;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) *reinterpret_cast<pair_t*>(out + nt * 8) = {cvt};
        }}"""

def block_head(publish_ids: bool = True) -> str:
    """Find this block's expert and rows, stage the rows' assignment ids in smem.
    publish_ids=False is the missing_barrier bug: threads that stage no id (BM < blockDim.x) go
    straight to the gather and read s_ids before the other threads have stored them."""
    barrier = "\n    __syncthreads();                          // s_ids visible to every thread" if publish_ids else ""
    return f"""    __shared__ int slot[3];
    __shared__ int s_ids[BM];                 // assignment id of each tile row (gather x, scatter y)
    if (threadIdx.x == 0) find_block(offsets, E, blockIdx.x, slot);
    __syncthreads();
    const int expert = slot[0], start = slot[1], row_hi = slot[2];
    if (expert < 0) return;
    const int n0 = blockIdx.y * BN;
    for (int r = threadIdx.x; r < BM; r += blockDim.x) s_ids[r] = start + r < row_hi ? sorted_ids[start + r] : 0;{barrier}
    const scalar_t* w_e = w + ((size_t)expert * N + n0) * K;
"""

# -- mma_sync ------------------------------------------------------------------------------
HALF_STEP = ("float part[MT][NT][4] = {};\n        mma_tile(part, sx, sw);\n"
             "        for (int i = 0; i < MT * NT * 4; ++i)   // running sum kept in the storage type\n"
             "            (&acc[0][0][0])[i] = to_float(from_float((&acc[0][0][0])[i] + (&part[0][0][0])[i]));")


def mma_sync_src(p, task, barrier=BARRIER, step="mma_tile(acc, sx, sw);"):
    return mma_defs(p, task) + ptx_helpers(task, False) + find_block() + MMA_TILE + f"""
extern "C" __global__ void __launch_bounds__(128)
grouped_gemm_kernel({ARGS}) {{
    __shared__ __align__(16) scalar_t sx[BM * LDS];
    __shared__ __align__(16) scalar_t sw[BN * LDS];
{block_head()}    float acc[MT][NT][4] = {{}};
    for (int k0 = 0; k0 < K; k0 += BK) {{
        for (int i = threadIdx.x; i < BM * (BK / 8); i += 128) {{      // gathered x rows, 16 bytes a thread
            const int r = i / (BK / 8), c = i % (BK / 8);
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (start + r < row_hi) v = *reinterpret_cast<const uint4*>(x + (size_t)(s_ids[r] / topk) * K + k0 + c * 8);
            *reinterpret_cast<uint4*>(sx + r * LDS + c * 8) = v;
        }}
        for (int i = threadIdx.x; i < BN * (BK / 8); i += 128) {{
            const int r = i / (BK / 8), c = i % (BK / 8);
            *reinterpret_cast<uint4*>(sw + r * LDS + c * 8) = *reinterpret_cast<const uint4*>(w_e + (size_t)r * K + k0 + c * 8);
        }}{barrier}
        {step}
        __syncthreads();
    }}
{epilogue()}
}}

{HOST} {{
    const dim3 grid((T * topk + BM - 1) / BM + E, N / BN);   // m-blocks fastest: w tiles shared in L2
    grouped_gemm_kernel<<<grid, 128, 0, stream>>>(x, w, sorted_ids, expert_offsets, y, E, K, N, topk);
}}
"""

# -- cp_async_pipeline ---------------------------------------------------------------------
RING_BARRIER = "\n        __syncthreads();                  // ...and everyone's; slot (kt - 1) % STAGES is free"


def pipeline_loop(wait: str, barrier: str, load: str, compute: str, fence: str = "", trips: str = "k_tiles") -> str:
    """The ring's K loop; trips="k_tiles - 1" is cp_async_pipeline's off_by_one (the last K tile never summed:
    every output wrong, on every run)."""
    return f"""    const int k_tiles = K / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {{    // prologue: STAGES - 1 tiles in flight
        if (s < k_tiles) {load.format(slot="s", k="s * BK")};
        cp_async_commit();
    }}
    for (int kt = 0; kt < {trips}; ++kt) {{
        cp_async_wait<{wait}>();          // this thread's copies of tile kt have landed{fence}{barrier}
        const int next = kt + STAGES - 1;
        if (next < k_tiles) {load.format(slot="next % STAGES", k="next * BK")};
        cp_async_commit();
        {compute}
    }}
"""

LOAD = "load_tile(smem, {slot}, x, w_e, s_ids, start, row_hi, {k}, K, topk)"


def cp_async_pipeline_src(p, task, wait="STAGES - 2", barrier=RING_BARRIER, trips="k_tiles"):
    return mma_defs(p, task) + f"#define STAGES {p['STAGES']}\n#define STAGE_ELEMS ((BM + BN) * LDS)\n" \
        + ptx_helpers(task, True) + find_block() + MMA_TILE + f"""
// cp.async one K tile (gathered x rows, then w rows) into ring slot `slot`.
__device__ __forceinline__ void load_tile(scalar_t* smem, int slot, const scalar_t* __restrict__ x,
                                          const scalar_t* __restrict__ w_e, const int* s_ids, int start, int row_hi,
                                          int k0, int K, int topk) {{
    scalar_t* sx = smem + slot * STAGE_ELEMS;
    scalar_t* sw = sx + BM * LDS;
    for (int i = threadIdx.x; i < BM * (BK / 8); i += 128) {{
        const int r = i / (BK / 8), c = i % (BK / 8);
        cp_async16(sx + r * LDS + c * 8, x + (size_t)(s_ids[r] / topk) * K + k0 + c * 8, start + r < row_hi);
    }}
    for (int i = threadIdx.x; i < BN * (BK / 8); i += 128) {{
        const int r = i / (BK / 8), c = i % (BK / 8);
        cp_async16(sw + r * LDS + c * 8, w_e + (size_t)r * K + k0 + c * 8, true);
    }}
}}

extern "C" __global__ void __launch_bounds__(128)
grouped_gemm_kernel({ARGS}) {{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    scalar_t* smem = reinterpret_cast<scalar_t*>(smem_raw);
{block_head()}    float acc[MT][NT][4] = {{}};
{pipeline_loop(wait, barrier, LOAD, "mma_tile(acc, smem + (kt % STAGES) * STAGE_ELEMS, smem + (kt % STAGES) * STAGE_ELEMS + BM * LDS);", trips=trips)}
{epilogue()}
}}

{HOST} {{
    const int smem = STAGES * STAGE_ELEMS * (int)sizeof(scalar_t);
    cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const dim3 grid((T * topk + BM - 1) / BM + E, N / BN);
    grouped_gemm_kernel<<<grid, 128, smem, stream>>>(x, w, sorted_ids, expert_offsets, y, E, K, N, topk);
}}
"""

# -- wgmma_pipeline ------------------------------------------------------------------------
# cp.async wrote through the generic proxy; wgmma reads shared memory through the async proxy
PROXY_FENCE = '\n        asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");'
WGMMA_STEP = """const unsigned char* sa = smem + (kt % STAGES) * STAGE_BYTES;
        asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)     // k16 step = two core matrices along K = 256 bytes
            wgmma_tile(acc, make_desc(sa + kk * 256), make_desc(sa + A_BYTES + kk * 256));
        asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");   // slot reusable, acc final"""


def wgmma_pipeline_src(p, task, wait="STAGES - 2", publish_ids=True):
    bn, ptx = p["BN"], PTX[task.dtype][0]
    outs = ", ".join(f"%{i}" for i in range(bn // 2))
    regs = ", ".join(f'"+f"(d[{i}])' for i in range(bn // 2))
    # BM 128 (off the menu until a device times it): two consumer warpgroups, each its 64 A rows of one B tile
    two = p.get("BM", 64) == 128
    threads, step = ("THREADS", WGMMA_STEP.replace("make_desc(sa + kk", "make_desc(sa + wg * WG_A_BYTES + kk")) if two \
        else ("128", WGMMA_STEP)
    head = ("#define BM 128                    // two warpgroups, 64 rows each, share the B tile\n"
            "#define THREADS (BM * 2)          // 128 threads a warpgroup\n"
            "#define WG_A_BYTES (64 * BK * 2)  // one warpgroup's 64 A rows in the tile (core-matrix order)") if two \
        else "#define BM 64                     // one warpgroup: a 64-row wgmma tile"
    wg = "    const int wg = threadIdx.x / 128;         // warpgroup wg multiplies A rows 64 * wg .. 64 * wg + 63\n" \
        if two else ""
    return f"""{head}
#define BN {bn}
#define BK {p.get(WGMMA_BK.name, WGMMA_BK.default)}
#define STAGES {p['STAGES']}
#define A_BYTES (BM * BK * 2)
#define STAGE_BYTES ((BM + BN) * BK * 2)
typedef {PTX[task.dtype][1]} pair_t;
{ptx_helpers(task, True)}{find_block()}
// No-swizzle K-major layout: a core matrix is 8 rows x 16 bytes stored in 128 contiguous bytes;
// core matrices run along K first (LBO = 128 B), then 8-row groups (SBO = BK / 8 * 128 B).
__device__ __forceinline__ int core_offset(int r, int chunk) {{ return ((r >> 3) * (BK / 8) + chunk) * 128 + (r & 7) * 16; }}

__device__ __forceinline__ uint64_t make_desc(const void* smem) {{
    const uint64_t addr = smem_u32(smem);
    return ((addr & 0x3FFFF) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)((BK / 8 * 128) >> 4) << 32);
}}

// D[64 x BN] += A[64 x 16] * B[BN x 16]^T, both operands read from shared memory by descriptor.
__device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], uint64_t desc_a, uint64_t desc_b) {{
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{bn // 2 + 2}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{ptx}.{ptx} "
                 "{{{outs}}}, %{bn // 2}, %{bn // 2 + 1}, p, 1, 1, 0, 0;\\n}}\\n"
                 : {regs}
                 : "l"(desc_a), "l"(desc_b), "r"(1));
}}

// cp.async one K tile into ring slot `slot`, in core-matrix order (gathered x rows, then w rows).
__device__ __forceinline__ void load_tile(unsigned char* smem, int slot, const scalar_t* __restrict__ x,
                                          const scalar_t* __restrict__ w_e, const int* s_ids, int start, int row_hi,
                                          int k0, int K, int topk) {{
    unsigned char* sa = smem + slot * STAGE_BYTES;
    for (int i = threadIdx.x; i < BM * (BK / 8); i += {threads}) {{
        const int r = i / (BK / 8), c = i % (BK / 8);
        cp_async16(sa + core_offset(r, c), x + (size_t)(s_ids[r] / topk) * K + k0 + c * 8, start + r < row_hi);
    }}
    for (int i = threadIdx.x; i < BN * (BK / 8); i += {threads}) {{
        const int r = i / (BK / 8), c = i % (BK / 8);
        cp_async16(sa + A_BYTES + core_offset(r, c), w_e + (size_t)r * K + k0 + c * 8, true);
    }}
}}

extern "C" __global__ void __launch_bounds__({threads})
grouped_gemm_kernel({ARGS}) {{
    extern __shared__ __align__(128) unsigned char smem[];
{block_head(publish_ids)}{wg}    float acc[BN / 2] = {{}};                // row 16 * warp + lane / 4 (+8), col 8 * j + 2 * (lane % 4) (+1)
{pipeline_loop(wait, RING_BARRIER, LOAD, step, PROXY_FENCE)}
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {{
        const int r = 16 * warp + lane / 4 + 8 * h;
        if (start + r >= row_hi) continue;
        scalar_t* out = y + (size_t)s_ids[r] * N + n0 + (lane % 4) * 2;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
            *reinterpret_cast<pair_t*>(out + 8 * j) = pair_t(from_float(acc[j * 4 + 2 * h]), from_float(acc[j * 4 + 2 * h + 1]));
    }}
}}

{HOST} {{
    const int smem = STAGES * STAGE_BYTES;
    cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const dim3 grid((T * topk + BM - 1) / BM + E, N / BN);
    grouped_gemm_kernel<<<grid, {threads}, smem, stream>>>(x, w, sorted_ids, expert_offsets, y, E, K, N, topk);
}}
"""
