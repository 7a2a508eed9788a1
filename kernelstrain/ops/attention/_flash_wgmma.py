"""The Hopper rung of flash_prefill_cuda (not an op module itself): FlashAttention-3's core on
sm_90a without its warp specialization -- one warpgroup per 64 query rows; S = Q K^T by wgmma
from 128-byte-swizzled smem; the online softmax on the accumulator registers; P fed back as
wgmma's register A operand against V read transposed (MN-major) from its [keys][d] tile; K/V
tiles in a STAGES-deep cp.async ring; BLOCK_M 128: two warpgroups (FA3's two consumer warpgroups, without
its ping-pong) share each K/V stage, each issuing its own wgmmas on its 64 rows of the Q tile. The launch
model and the literal host function.
"""
from ..base import Launch, Param, DTYPE_BYTES
from ..matmul._gemm_ptx import SMEM_U32, WGMMA_PTX, wgmma_fn
from ._flash_mma import host
from .flash_prefill_spec import LOG2E, causal_work, query_tiles

BLOCK_M = 64     # one warpgroup: four warps x 16 query rows, the m64 of every wgmma
# BLOCK_M 128 (two warpgroups). H100 (scripts/roomA_device.py plan a1, 2026-12-06 13:44 UTC, every value correct,
# every off_by_one caught): chunked_prefill_cuda B=2 H=16 KVH=4 C=512 P=1536, 128 rows 54.1 us against 64 rows' 71.7
# (model 57.0 / 70.6) and the cp.async rung's best 65.6; B=1 H=32 KVH=8 C=512 P=3584 103.2 / 141.7 (model 117.8 /
# 145.7; cp.async 124.5); flash_prefill_cuda B=1 H=32 S=2048 131.3 / 136.2 (model 155.8 / 148.7: the causal balance
# the model charges 128-row tiles is too large here)
WARPGROUP_ROWS = (Param("BLOCK_M", (64, 128), 64),)


# two warpgroups a CTA: each K/V stage's fill, barrier and swizzled reads serve 128 query rows, and one warpgroup's
# softmax runs while the other's wgmmas do (as _flash_mma.warp_share's 64 -> 128 rows: 0.9 -> 1.0)
TWO_WARPGROUPS = 1 / 0.9


def warpgroups(p) -> int:
    """Warpgroups a CTA: BLOCK_M / 64 (BLOCK_M absent: one)."""
    return p.get("BLOCK_M", BLOCK_M) // BLOCK_M


def wgmma_launch(p, task):
    """One 128-thread CTA (a warpgroup) per 64 query rows, or 256 threads per 128; Q and STAGES K/V stages in
    dynamic smem. No mma.sync penalty on Hopper (wgmma runs at the tensor cores' full rate); each tile still waits
    for its S wgmma, the softmax and its PV wgmma in turn (no ping-pong between warpgroups), and a third
    stage keeps one more tile's loads in flight behind them."""
    s, d, elt, bn, stages = task["S"], task["D"], DTYPE_BYTES[task.dtype], p["BLOCK_N"], p["stages"]
    wg = warpgroups(p)
    bm = BLOCK_M * wg
    tiles, balance, reread = query_tiles(task, bm)
    shape = min(1.0, bn / (bn + 16) * 1.25) * (TWO_WARPGROUPS if wg == 2 else 1.0)
    return Launch(grid=tiles, threads=128 * wg, smem_bytes=1024 + (bm + 2 * stages * bn) * d * elt,
                  regs=min(255, 48 + bn // 2 + d // 2 + bn // 4), bytes_per_access=16 * (stages - 1), traffic=reread,
                  tile_quant=causal_work(s, bm, bn), compute_scale=balance * shape * (0.92 if stages == 2 else 1.0))


KERNEL = r"""#define BLOCK_M 64                      // one warpgroup: 4 warps x 16 query rows
#define BLOCK_N @BN@
#define DC (HEAD_DIM / 64)              // 64-column chunks: one 128-byte swizzled row each
#define STAGES @STAGES@                       // K/V tiles in flight
constexpr int THREADS = 128;
@PTX@
// O[64 x 64-column chunk] += P[64 x 16 keys] . V[16 keys x 64]: P from registers (the S accumulators
// re-packed), V the transposed (MN-major) operand read straight from its [keys][64] swizzled chunk
__device__ __forceinline__ void wgmma_pv(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.@TY@.@TY@ "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
__device__ __forceinline__ void fence_o(float (&d)[32]) {   // the compiler leaves O alone while wgmma owns it
#pragma unroll
    for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
    auto h = @PACK@(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
}
// A [rows][HEAD_DIM] tile as DC chunks of [rows][64], 128-byte swizzle: 16-byte piece c of row r at c ^ (r % 8)
__device__ __forceinline__ int sw_off(int rows, int r, int col) {
    return (col / 64) * rows * 128 + r * 128 + ((((col % 64) / 8) ^ (r & 7)) << 4);
}
__device__ __forceinline__ void load_tile(uint8_t* dst, const scalar_t* src, int rows) {   // 16 B per cp.async
    for (int i = threadIdx.x; i < rows * (HEAD_DIM / 8); i += THREADS) {
        const int r = i / (HEAD_DIM / 8), col = i % (HEAD_DIM / 8) * 8;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                     :: "r"(smem_u32(dst + sw_off(rows, r, col))), "l"(src + (size_t)r * HEAD_DIM + col));
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
flash_prefill_kernel(const scalar_t* __restrict__ q, const scalar_t* __restrict__ k, const scalar_t* __restrict__ v,
                     scalar_t* __restrict__ o, int S, float scale_log2) {
    extern __shared__ uint8_t smem_raw[];
    // swizzle atoms are 8 rows x 128 B: the tiles start on 1024-byte boundaries
    uint8_t* Qs = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
    uint8_t* KV = Qs + BLOCK_M * HEAD_DIM * 2;                 // STAGES x (K tile, V tile)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t2 = (lane & 3) * 2;
    const int m0 = (gridDim.y - 1 - blockIdx.y) * BLOCK_M;    // heaviest query tiles first
    const int row0 = m0 + warp * 16;
    const size_t base = (size_t)blockIdx.x * S * HEAD_DIM;
    // ceil: with BLOCK_N > BLOCK_M the last tile crosses the diagonal (its future keys are masked)
    const int ntiles = (m0 + BLOCK_M + BLOCK_N - 1) / BLOCK_N;
    auto stage = [&](int j) { return KV + (j % STAGES) * 2 * BLOCK_N * HEAD_DIM * 2; };
    auto issue = [&](int j) {
        load_tile(stage(j), k + base + (size_t)j * BLOCK_N * HEAD_DIM, BLOCK_N);
        load_tile(stage(j) + BLOCK_N * HEAD_DIM * 2, v + base + (size_t)j * BLOCK_N * HEAD_DIM, BLOCK_N);
    };
    load_tile(Qs, q + base + (size_t)m0 * HEAD_DIM, BLOCK_M);  // Q rides in the first group with tile 0
#pragma unroll
    for (int j = 0; j < STAGES - 1; ++j) {                      // prologue: STAGES - 1 tiles in flight
        if (j < ntiles) issue(j);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    float acc[DC][32] = {};                                     // O in wgmma's accumulator layout, per chunk
    float m_i[2] = {@M0@, @M0@}, l_i[2] = {@L0@, @L0@};        // rows g and g + 8 of this warp's 16
    for (int j = 0; j < ntiles; ++j) {
        if (j + STAGES - 1 < ntiles) issue(j + STAGES - 1);     // later tiles stream in under this one
        asm volatile("cp.async.commit_group;\n" ::);             // possibly empty: uniform counting
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 1));   // this thread's copies of tile j landed
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // ... visible to wgmma's async proxy
        __syncthreads();                                        // ... and everyone's
        const uint8_t* Ks = stage(j);
        const uint8_t* Vs = Ks + BLOCK_N * HEAD_DIM * 2;
        float s[BLOCK_N / 2] = {};
        wgmma_fence();
#pragma unroll
        for (int c = 0; c < DC; ++c)
#pragma unroll
            for (int ks = 0; ks < 4; ++ks)   // 4 k-steps of 16 across a 128-byte row; the first overwrites
                wgmma_tile(s, sw128_desc(Qs + c * BLOCK_M * 128) + 2 * ks, sw128_desc(Ks + c * BLOCK_N * 128) + 2 * ks,
                           c + ks);
        wgmma_commit();
        wgmma_wait<0>();
        fence_acc(s);
        // s[4 jn + e]: row row0 + g + 8 (e / 2), key n0 + 8 jn + t2 + e % 2 (as mma.sync's C, per warp)
        const int n0 = j * BLOCK_N;
        const bool diagonal = n0 + BLOCK_N - 1 > row0;   // only tiles crossing the warp's diagonal need a mask
        float mx[2] = {m_i[0], m_i[1]}, rs[2] = {0.f, 0.f};
#pragma unroll
        for (int jn = 0; jn < BLOCK_N / 8; ++jn)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (diagonal && n0 + jn * 8 + t2 + e % 2 @MASK@ row0 + g + e / 2 * 8) s[4 * jn + e] = -INFINITY;
                mx[e / 2] = fmaxf(mx[e / 2], s[4 * jn + e] * scale_log2);
            }
#pragma unroll
        for (int h = 0; h < 2; ++h) {            // the 4 lanes of a quad share a row
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            const float alpha = exp2f(m_i[h] - mx[h]);
            l_i[h] *= alpha;                     // l stays a per-lane partial; quads are summed at the end
#pragma unroll
            for (int c = 0; c < DC; ++c)
#pragma unroll
                for (int jd = 0; jd < 8; ++jd) { acc[c][4 * jd + 2 * h] *= alpha; acc[c][4 * jd + 2 * h + 1] *= alpha; }
            m_i[h] = mx[h];
        }
#pragma unroll
        for (int i = 0; i < BLOCK_N / 2; ++i) { s[i] = exp2f(s[i] * scale_log2 - mx[i % 4 / 2]); rs[i % 4 / 2] += s[i]; }
        l_i[0] += rs[0];
        l_i[1] += rs[1];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            // keys 16kk..16kk+15: the accumulators of n8 blocks 2kk, 2kk+1 are exactly wgmma's A fragment
            const uint32_t pa[4] = {pack2(s[8 * kk], s[8 * kk + 1]), pack2(s[8 * kk + 2], s[8 * kk + 3]),
                                    pack2(s[8 * kk + 4], s[8 * kk + 5]), pack2(s[8 * kk + 6], s[8 * kk + 7])};
#pragma unroll
            for (int c = 0; c < DC; ++c)        // 16 V rows = two 8-row swizzle atoms, 1024 B apart (SBO)
                wgmma_pv(acc[c], pa, sw128_desc(Vs + c * BLOCK_N * 128 + kk * 16 * 128));
        }
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int c = 0; c < DC; ++c) fence_o(acc[c]);
        __syncthreads();   // every warp is done with stage j % STAGES before iteration j + 1 refills it
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l_i[h] += __shfl_xor_sync(0xffffffffu, l_i[h], 1);
        l_i[h] += __shfl_xor_sync(0xffffffffu, l_i[h], 2);
        scalar_t* out = o + base + (size_t)(row0 + g + h * 8) * HEAD_DIM + t2;
#pragma unroll
        for (int c = 0; c < DC; ++c)
#pragma unroll
            for (int jd = 0; jd < 8; ++jd)
                *reinterpret_cast<unsigned*>(out + c * 64 + jd * 8) =
                    pack2(acc[c][4 * jd + 2 * h] / l_i[h], acc[c][4 * jd + 2 * h + 1] / l_i[h]);
    }
}
"""


# BLOCK_M 128: two warpgroups, each wgmma's A operand its own 64 rows of the swizzled Q chunk (8 KB apart)
TWO_WARPGROUP_TEXT = (
    ("#define BLOCK_M 64                      // one warpgroup: 4 warps x 16 query rows",
     "#define BLOCK_M 128                     // two warpgroups: 8 warps x 16 query rows"),
    ("constexpr int THREADS = 128;", "constexpr int THREADS = 256;"),
    ("wgmma_tile(s, sw128_desc(Qs + c * BLOCK_M * 128) + 2 * ks,",
     "wgmma_tile(s, sw128_desc(Qs + c * BLOCK_M * 128 + warp / 4 * 64 * 128) + 2 * ks,"),
)


def wgmma_kernel(p, task, mask=">", m0="-INFINITY", l0="0.f") -> str:
    """The kernel's text (flash_prefill_kernel over [B*H, S, D] tensors) for BLOCK_M / BLOCK_N / stages / dtype."""
    kind = "bf16" if task.dtype == "bf16" else "f16"
    kernel = KERNEL
    if warpgroups(p) == 2:
        for old, new in TWO_WARPGROUP_TEXT:
            assert old in kernel, old
            kernel = kernel.replace(old, new)
    return (kernel.replace("@BN@", str(p["BLOCK_N"])).replace("@STAGES@", str(p["stages"]))
            .replace("@PTX@", SMEM_U32 + WGMMA_PTX + wgmma_fn(kind, p["BLOCK_N"]))
            .replace("@TY@", kind).replace("@PACK@", "__floats2bfloat162_rn" if kind == "bf16" else "__floats2half2_rn")
            .replace("@MASK@", mask).replace("@M0@", m0).replace("@L0@", l0))


def wgmma_src(p, task, mask=">", m0="-INFINITY", l0="0.f"):
    kernel = wgmma_kernel(p, task, mask, m0, l0)
    return kernel + host(f"""\
    const int smem = 1024 + (BLOCK_M + 2 * STAGES * BLOCK_N) * HEAD_DIM * (int)sizeof(scalar_t);   // + alignment slack
    cudaFuncSetAttribute(flash_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    flash_prefill_kernel<<<dim3(B * H, S / BLOCK_M), THREADS, smem, stream>>>(q, k, v, o, S, scale * {LOG2E}f);
""")
