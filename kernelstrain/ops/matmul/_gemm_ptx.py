"""Tensor-core GEMM building blocks shared by the CUDA matmul modules: operand kinds and PTX wrappers.

Every operand is K-major (A [M, K], B [N, K], the nn.Linear layout), so one byte layout serves
every type: an mma.sync consumes a 16x32-byte A and an 8x32-byte B fragment (m16n8k16 for
16-bit, m16n8k32 for 8-bit operands) and a wgmma k-step reads 32 bytes of a 128-byte swizzled
row. Kernels differ only in the instruction, the accumulator type and the module's epilogue.

>>> KINDS["e4m3"].elt, KINDS["bf16"].acc
(1, 'float')
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    elt: int          # bytes per operand element
    acc: str          # accumulator C type
    mma: str          # mma.sync instruction
    wgmma: str        # wgmma suffix after m64nN
    wgmma_tail: str   # scale-d predicate and immediates
    tma_type: str     # CUtensorMapDataType


KINDS = {
    "f16": Kind(2, "float", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "k16.f32.f16.f16", "p, 1, 1, 0, 0",
                "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"),
    "bf16": Kind(2, "float", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "k16.f32.bf16.bf16",
                 "p, 1, 1, 0, 0", "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"),
    "e4m3": Kind(1, "float", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "k32.f32.e4m3.e4m3", "p, 1, 1",
                 "CU_TENSOR_MAP_DATA_TYPE_UINT8"),
    "s8": Kind(1, "int", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "k32.s32.s8.s8", "p",
               "CU_TENSOR_MAP_DATA_TYPE_UINT8"),
    # sm_120a block-scaled MMA (the FP4-generation tensor-core instruction, here on e4m3 operands):
    # each row of A and column of B carries one ue8m0 exponent per 32 of K; mma.sync only (no wgmma)
    "mxf8": Kind(1, "float", "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
                 ".f32.e4m3.e4m3.f32.ue8m0", "", "", ""),
}

# Software e4m3 -> float/bf16: runs on every target (no cvt.e4m3x2 before sm_89).
E4M3_SOFT = """
// e4m3: s.eeee.mmm, bias 7; subnormals are m * 2^-9 (NaN encodings are not expected in inputs)
__device__ __forceinline__ float e4m3_to_float(uint32_t v) {
    const uint32_t e = (v >> 3) & 0xFu, m = v & 0x7u;
    const float mag = e ? __uint_as_float(((e + 120u) << 23) | (m << 20)) : (float)m * 0.001953125f;
    return (v & 0x80u) ? -mag : mag;
}
// 8 e4m3 bytes -> 8 bf16 (exact: 3 mantissa bits fit bf16's 7)
__device__ __forceinline__ uint4 dequant8(uint2 raw) {
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t w = i < 2 ? raw.x : raw.y, sh = (i & 1) * 16;
        __nv_bfloat162 p = __floats2bfloat162_rn(e4m3_to_float((w >> sh) & 0xFFu), e4m3_to_float((w >> (sh + 8)) & 0xFFu));
        out[i] = *reinterpret_cast<uint32_t*>(&p);
    }
    return make_uint4(out[0], out[1], out[2], out[3]);
}
"""

SMEM_U32 = """
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
"""

# The PTX wrappers below are also rendered by modules outside the mma_kernel path (gemm_int4_cuda,
# moe/grouped_gemm_cuda): each piece starts and ends with a newline so they concatenate cleanly.
LDMATRIX_X4 = """
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
"""

CP_ASYNC_COMMIT = """__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\\n" ::); }
"""

PTX_MMA = SMEM_U32 + LDMATRIX_X4 + """
// 16 bytes global -> shared without a register round trip; src_bytes = 0 zero-fills
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: "r"(smem_u32(dst)), "l"(src), "r"(src_bytes));
}
""" + CP_ASYNC_COMMIT + """template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\\n" :: "n"(N)); }
"""


def cp_async16(note: str) -> str:
    """cp_async16(smem, gmem, valid) (16 bytes; valid = false zero-fills), cp_async_commit() and
    cp_async_wait<PENDING>(). `note` is the comment inside cp_async16: what the zero-fill covers."""
    return """
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    // """ + note + """
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n"
                 :: "r"(smem_u32(smem)), "l"(gmem), "r"(valid ? 16 : 0));
}
""" + CP_ASYNC_COMMIT + """template <int PENDING> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\\n" :: "n"(PENDING));
}
"""


def mma_16816(kind: str, b_regs: bool = False) -> str:
    """mma_16816(d, a, b): one m16n8k16 mma.sync (kind "f16" or "bf16") into 4 fp32 accumulators;
    B is a uint32_t[2], or with b_regs two scalar registers b0, b1."""
    b_arg, b_in = (("uint32_t b0, uint32_t b1", '"r"(b0), "r"(b1)') if b_regs else
                   ("const uint32_t (&b)[2]", '"r"(b[0]), "r"(b[1])'))
    return f"""
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], {b_arg}) {{
    asm volatile("{KINDS[kind].mma} "
                 "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), {b_in});
}}
"""


def mma_fn(kind: str) -> str:
    k = KINDS[kind]
    c = "r" if k.acc == "int" else "f"
    if kind == "mxf8":
        return f"""
// ue8m0 of a power-of-two fp32 scale: its biased exponent byte
__device__ __forceinline__ uint32_t ue8m0(float s) {{ return (__float_as_uint(s) >> 23) & 0xFFu; }}
// Block-scaled mma (scale_vec::1X, byte 0, thread-id 0): the scale of A row r is read from lane
// 4 * (r % 8) + r / 8 and the scale of B column n from lane 4 * n (the main loop loads them so).
__device__ __forceinline__ void mma_tile(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                         uint32_t sfa, uint32_t sfb) {{
    asm volatile("{k.mma} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}}, "
                 "%10, {{0, 0}}, %11, {{0, 0}};\\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sfa), "r"(sfb));
}}
"""
    return f"""
__device__ __forceinline__ void mma_tile({k.acc} (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {{
    asm volatile("{k.mma} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\\n"
                 : "+{c}"(d[0]), "+{c}"(d[1]), "+{c}"(d[2]), "+{c}"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}}
"""


# mbarrier + TMA wrappers (the producer side), then wgmma's fence/commit/wait and the 128-byte-swizzle
# descriptor (the consumer side, also used alone by kernels that stage with cp.async)
MBAR_TMA_PTX = """
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\\n" :: "r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n" :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\\n" :: "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\nselp.u32 %0, 1, 0, p;\\n}\\n"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
}
// TMA: one box of a 2-D tensor map into shared memory; completion is counted in bytes on `bar`
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\\n"
                 :: "r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar)) : "memory");
}
"""
WGMMA_PTX = """
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\\n" :: "n"(N) : "memory"); }
// K-major operand in TMA's 128-byte swizzle: 8-row core groups 1024 B apart (SBO), LBO unused
__device__ __forceinline__ uint64_t sw128_desc(const void* tile) {
    return (uint64_t)((smem_u32(tile) & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
"""
HOPPER_PTX = MBAR_TMA_PTX + WGMMA_PTX[1:]



def wgmma_fn(kind: str, bn: int) -> str:
    """One m64nBNk(16|32) wgmma from shared-memory descriptors into BN/2 accumulator registers."""
    k = KINDS[kind]
    n, c = bn // 2, ("r" if k.acc == "int" else "f")
    regs = ", ".join(f"%{i}" for i in range(n))
    outs = ",\n                   ".join(", ".join(f'"+{c}"(d[{i}])' for i in range(j, min(n, j + 8))) for j in range(0, n, 8))
    return f"""
__device__ __forceinline__ void wgmma_tile({k.acc} (&d)[{n}], uint64_t da, uint64_t db, int scale_d) {{
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{n + 2}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{bn}{k.wgmma} {{{regs}}}, %{n}, %{n + 1}, {k.wgmma_tail};\\n}}\\n"
                 : {outs}
                 : "l"(da), "l"(db), "r"(scale_d));
}}
// keep the compiler from touching accumulators while an async wgmma owns them
__device__ __forceinline__ void fence_acc({k.acc} (&d)[{n}]) {{
#pragma unroll
    for (int i = 0; i < {n}; ++i) asm volatile("" : "+{c}"(d[i]) :: "memory");
}}
"""


def smem_fma_tail(a: str, b: str, out: str) -> str:
    """The K loop's FMA half and the epilogue of a 16 x 16-thread register-blocked tile (TM x TN
    outputs a thread, k-major smem tiles `a` [BK][BM] and `b` [BK][BN]; rows past M skipped)."""
    return f"""#pragma unroll 4
        for (int kk = 0; kk < BK; ++kk) {{
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = {a}[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = {b}[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }}
        __syncthreads();
    }}
#pragma unroll
    for (int i = 0; i < TM; ++i) {{
        const int row = m0 + ty + 16 * i;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {out}[(size_t)row * N + n0 + tx + 16 * j] = from_float(acc[i][j]);
    }}"""
