"""W4A16 GEMM in CUDA: y = x @ dequant(W)^T, int4 weights packed 8 per uint32, fp16/bf16 group scales.

Weight format: qweight [N, K/8] uint32, nibble j of word w holds k = 8w + j (unsigned, zero point 8);
scales [N, K/128]; W[n, k] = (q - 8) * scales[n, k / 128].
Ladder: dequantize all of W to a 16-bit buffer then a tiled GEMM (2 launches) -> one kernel that
dequantizes while staging tiles (CUDA cores) -> mma.sync tensor cores with in-register dequant
(prmt + lop3 magic-exponent trick) -> cp.async multi-stage pipeline -> split-K for small M.
"""
from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude,
                    kernelbench_program)
from ._gemm_ptx import LDMATRIX_X4, SMEM_U32, cp_async16, mma_16816

GROUP = 128
BK = 64                                    # K per tensor-core tile: half a quantization group
MMA_BM = Param("BM", (16, 32, 64), 32)
MMA_BN = Param("BN", (64, 128), 64)
MMA_NEEDS = frozenset({"mma", "ldmatrix", "inline_ptx"})
TYPES = {"fp16": ("__half2", "f16", "0x64006400u", "0x64086408u", "__half2half2"),
         "bf16": ("__nv_bfloat162", "bf16", "0x43004300u", "0x43084308u", "__bfloat162bfloat162")}


class GemmInt4Cuda(OpModule):
    op, impl, family = "gemm_int4", "cuda", "matmul"
    title = "W4A16 GEMM (int4 weights, group-128 scales)"
    desc = ("y[M, N] = x[M, K] @ W^T with W[n, k] = (q[n, k] - 8) * scales[n, k // 128]; q packed 8 per uint32 "
            "along K (nibble j of word w is k = 8w + j); fp32 accumulation, y in the activation dtype.")
    dims = {"M": "tokens (rows of x)", "N": "output features", "K": "input features (multiple of 128)"}
    shapes = ({"M": 1, "N": 4096, "K": 4096}, {"M": 1, "N": 14336, "K": 4096}, {"M": 16, "N": 4096, "K": 14336},
              {"M": 128, "N": 4096, "K": 4096}, {"M": 1024, "N": 14336, "K": 4096}, {"M": 4096, "N": 4096, "K": 4096})
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("dequant_then_gemm", "kernel 1 writes W as 16-bit to a buffer, kernel 2 is a smem-tiled GEMM",
                (Param("TILE", (16, 32), 16),), path="fp32", compute_eff=0.25, memory_eff=0.75, smem="static",
                bugs=("missing_scale", "half_accumulator")),
        Variant("fused_dequant_tiled", "one kernel: W unpacked and scaled while staged to smem, register-blocked FMA",
                (Param("BM", (16, 32, 64), 32), Param("BN", (64, 128), 128)), path="fp32", compute_eff=0.5,
                memory_eff=0.8, smem="static", bugs=("missing_barrier", "missing_scale")),
        Variant("mma_lop3_dequant", "mma.sync m16n8k16 tensor cores, ldmatrix for x, W dequantized in registers (prmt/lop3)",
                (MMA_BM, MMA_BN), needs=MMA_NEEDS, path="fp16", compute_eff=0.5, memory_eff=0.82, smem="static",
                bugs=("missing_scale", "missing_barrier")),
        Variant("cp_async_pipeline", "STAGES-deep cp.async ring of x and packed-W tiles overlapping loads with mma",
                (MMA_BM, MMA_BN, Param("STAGES", (2, 3, 4), 3)), needs=MMA_NEEDS | {"cp_async"}, path="fp16",
                compute_eff=0.68, memory_eff=0.88, smem="dynamic", bugs=("off_by_one", "missing_scale")),
        Variant("split_k_small_m", "K split over blockIdx.z into fp32 partials plus a combine kernel: fills the GPU at small M",
                (MMA_BM, MMA_BN, Param("STAGES", (3, 4), 3), Param("SPLITS", (1, 2, 4, 8), 4)),
                needs=MMA_NEEDS | {"cp_async"}, path="fp16", compute_eff=0.68, memory_eff=0.9, smem="dynamic",
                bugs=("bad_combine_index", "off_by_one")),
    )

    def cost(self, task: Task) -> Cost:
        m, n, k, e = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype]
        return Cost(flops=2 * m * n * k, bytes=m * k * e + n * k // 2 + n * (k // GROUP) * e + m * n * e)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        m, n, k, e = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype]
        gpu, tag, base = task.gpu, variant.tag, self.cost(task).bytes
        if tag == "dequant_then_gemm":
            tile = params["TILE"]
            # the 16-bit copy of W is written once and read back once per M tile (4x the packed bytes each)
            w16 = n * k * e
            extra = w16 + w16 * cdiv(m, tile) * 0.3 + m * k * e * cdiv(n, tile) * 0.1
            return Launch(grid=cdiv(n, tile) * cdiv(m, tile), threads=tile * tile, smem_bytes=2 * tile * (tile + 1) * 4,
                          regs=30, bytes_per_access=e, traffic=1 + extra / base,
                          lane_util=min(1.0, m / tile), launches=2)
        bm, bn = params["BM"], params["BN"]
        splits = params.get("SPLITS", 1)
        tiles = cdiv(n, bn) * cdiv(m, bm)
        rereads = m * k * e * (cdiv(n, bn) - 1) + n * k / 2 * (cdiv(m, bm) - 1)
        quant = m * n / (cdiv(m, bm) * bm * cdiv(n, bn) * bn)
        if tag == "fused_dequant_tiled":
            smem = 32 * (bm + 1) * 4 + 32 * bn * 4
            intensity = (bm // 16) * (bn // 16) / ((bm // 16) + (bn // 16))   # FMAs per smem load per thread
            return Launch(grid=tiles, threads=256, smem_bytes=smem, regs=28 + 3 * (bm // 16) * (bn // 16) // 2,
                          bytes_per_access=8, traffic=1 + 0.15 * rereads / base,
                          compute_scale=min(1.0, intensity / 2.7), tile_quant=quant)
        warps_m = 2 if bm >= 64 else 1
        wm, wn = bm // warps_m, bn // (4 // warps_m)
        mt, nt = wm // 16, wn // 8
        regs = 44 + 5 * mt * nt + 6 * nt          # 4 fp32 accumulators per mma tile, scales, x fragments
        stage = bm * (BK + 8) * e + bn * BK // 2
        stages = params.get("STAGES", 1)
        scale = min(1.0, (wm * wn / (wm + wn)) / 21.3) ** 0.5      # a 32x64 warp tile reuses fragments fully
        scale *= gpu.mma_sync_scale(variant.path)      # Hopper: mma.sync below its wgmma rate
        partial_bytes = 2 * m * n * 4 * splits if splits > 1 else 0
        return Launch(grid=tiles * splits, threads=128, smem_bytes=stage * stages, regs=regs,
                      bytes_per_access=max(16, stage * max(1, stages - 1) // 256),
                      traffic=1 + (0.1 * rereads + partial_bytes) / base, compute_scale=scale,
                      tile_quant=quant, lane_util=min(1.0, k / (BK * splits * 2)), launches=2 if splits > 1 else 1)

    def signature(self, task: Task) -> str:
        return ("void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y, "
                "int M, int N, int K, cudaStream_t stream)")

    def reference(self, task: Task) -> str:
        body = ("shifts = torch.arange(0, 32, 4, device=x.device, dtype=torch.int32)\n"
                "        q = (self.qweight.unsqueeze(-1) >> shifts) & 0xF            # [N, K/8, 8], k = 8w + j\n"
                "        s = self.scales.float().repeat_interleave(128, dim=1)      # [N, K]\n"
                "        w = (q.reshape(N, K).float() - 8.0) * s\n"
                "        return (x.float() @ w.t()).to(x.dtype)")
        init = ("self.register_buffer('qweight', torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int32))\n"
                "        self.register_buffer('scales', (torch.rand(N, K // 128) * 0.01 + 0.005).to(DTYPE))")
        return kernelbench_program(task, self.title, args="x", body=body, init=init,
                                   inputs="[torch.randn(M, K, dtype=DTYPE, device='cuda')]")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n#define GROUP {GROUP}   // K elements per scale\n{body}"

    def _dequant_then_gemm(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * s"
        acc = "scalar_t" if bug == "half_accumulator" else "float"
        return f"""#define TILE {p['TILE']}
union Pack {{ uint4 u; scalar_t h[8]; }};

// Kernel 1: one thread per packed word -> 8 scaled 16-bit weights, one 16-byte store.
__global__ void dequant_int4(const uint32_t* __restrict__ qweight, const scalar_t* __restrict__ scales,
                             scalar_t* __restrict__ w, int N, int K) {{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * (K / 8)) return;
    const size_t n = i / (K / 8);
    const int k = (int)(i % (K / 8)) * 8;
    const float s = to_float(scales[n * (K / GROUP) + k / GROUP]);
    const uint32_t q = qweight[i];
    Pack out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.h[j] = from_float((float)((int)((q >> (4 * j)) & 0xFu) - 8){scale});
    reinterpret_cast<uint4*>(w)[i] = out.u;
}}

// Kernel 2: classic shared-memory tiled GEMM, one output per thread, y = x @ w^T.
extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_int4_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ w, scalar_t* __restrict__ y,
                 int M, int N, int K) {{
    __shared__ float sx[TILE][TILE + 1];     // +1: column reads are bank-conflict free
    __shared__ float sw[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, n0 = blockIdx.x * TILE;
    {acc} acc = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {{
        sx[ty][tx] = row < M ? to_float(x[(size_t)row * K + k0 + tx]) : 0.f;
        sw[ty][tx] = to_float(w[(size_t)(n0 + ty) * K + k0 + tx]);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += ({acc})(sx[ty][kk] * sw[tx][kk]);
        __syncthreads();
    }}
    if (row < M) y[(size_t)row * N + n0 + tx] = from_float((float)acc);
}}

void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {{
    scalar_t* w = nullptr;                   // N x K 16-bit copy: 4x the packed bytes, written then re-read
    cudaMallocAsync((void**)&w, (size_t)N * K * sizeof(scalar_t), stream);
    const size_t words = (size_t)N * (K / 8);
    dequant_int4<<<(unsigned)((words + 255) / 256), 256, 0, stream>>>(qweight, scales, w, N, K);
    gemm_int4_kernel<<<dim3(N / TILE, (M + TILE - 1) / TILE), dim3(TILE, TILE), 0, stream>>>(x, w, y, M, N, K);
    cudaFreeAsync(w, stream);
}}
"""

    def _fused_dequant_tiled(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * s"
        barrier = "" if bug == "missing_barrier" else "\n        __syncthreads();"
        return f"""#define BM {p['BM']}
#define BN {p['BN']}
#define BK 32
#define TM (BM / 16)              // rows per thread (16 x 16 threads)
#define TN (BN / 16)              // columns per thread

extern "C" __global__ void __launch_bounds__(256)
gemm_int4_kernel(const scalar_t* __restrict__ x, const uint32_t* __restrict__ qweight,
                 const scalar_t* __restrict__ scales, scalar_t* __restrict__ y, int M, int N, int K) {{
    __shared__ float sx[BK][BM + 1];          // k-major: a thread's TM rows are one broadcast each
    __shared__ float sw[BK][BN];              // dequantized, k-major: lanes read consecutive columns
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM][TN] = {{}};
    for (int k0 = 0; k0 < K; k0 += BK) {{
        for (int i = tid; i < BM * BK; i += 256) {{          // k fastest: coalesced reads of x
            const int r = i / BK, c = i % BK;
            sx[c][r] = m0 + r < M ? to_float(x[(size_t)(m0 + r) * K + k0 + c]) : 0.f;
        }}
        for (int i = tid; i < BN * (BK / 8); i += 256) {{    // unpack 8 weights per word while staging
            const int r = i % BN, c = i / BN;
            const uint32_t q = qweight[(size_t)(n0 + r) * (K / 8) + k0 / 8 + c];
            const float s = to_float(scales[(size_t)(n0 + r) * (K / GROUP) + k0 / GROUP]);
#pragma unroll
            for (int j = 0; j < 8; ++j) sw[c * 8 + j][r] = (float)((int)((q >> (4 * j)) & 0xFu) - 8){scale};
        }}{barrier}
#pragma unroll 4
        for (int kk = 0; kk < BK; ++kk) {{
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = sx[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = sw[kk][tx + 16 * j];
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
        for (int j = 0; j < TN; ++j) y[(size_t)row * N + n0 + tx + 16 * j] = from_float(acc[i][j]);
    }}
}}

void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {{
    gemm_int4_kernel<<<dim3(N / BN, (M + BM - 1) / BM), 256, 0, stream>>>(x, qweight, scales, y, M, N, K);
}}
"""

    # -- tensor-core rungs: shared pieces ------------------------------------------------
    def _mma_common(self, p, task, bug, stages: int = 0) -> str:
        pair, ptx, magic, bias, splat = TYPES[task.dtype]
        scaled = "v" if bug == "missing_scale" else f"__hmul2(v, *reinterpret_cast<const {pair}*>(&scale2))"
        async_helpers = (cp_async16("src-size 0 zero-fills the 16 bytes: rows past M arrive as zeros without a branch")
                         if stages else "")
        warps_m = 2 if p["BM"] >= 64 else 1
        return f"""#define BM {p['BM']}
#define BN {p['BN']}
#define BK {BK}                   // K per tile: half a group, so one scale per column per tile
#define WARPS_M {warps_m}
#define WARPS_N (4 / WARPS_M)
#define WM (BM / WARPS_M)         // warp tile
#define WN (BN / WARPS_N)
#define MT (WM / 16)              // m16n8k16 tiles per warp
#define NT (WN / 8)
#define XS (BK + 8)               // padded x row: 144-byte stride keeps ldmatrix conflict-free
typedef {pair} pair_t;
{SMEM_U32}{LDMATRIX_X4}{mma_16816(ptx)}
template <int LUT> __device__ __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {{
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, %4;\\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(LUT));
    return d;
}}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {{
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;\\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}}
{async_helpers}
// B fragment of m16n8k16 for lane (g, t): k = 2t, 2t+1 of each 8-wide half of the k16 step, which is
// byte t of the packed word. prmt moves that byte down; lop3 ((a & b) | c, LUT 0xEA) drops each nibble
// into the mantissa of a 16-bit float whose exponent makes it MAGIC + q exactly; one hsub2 removes
// MAGIC + 8 (the zero point) and one hmul2 applies the group scale.
__device__ __forceinline__ uint32_t dequant_pair(uint32_t word, uint32_t sel, uint32_t scale2) {{
    const uint32_t byte = prmt(word, 0u, sel);
    uint32_t h = lop3<0xEA>(byte, 0x0000000Fu, {magic});
    h = lop3<0xEA>(byte << 12, 0x000F0000u, h);
    const uint32_t bias = {bias};
    const pair_t v = __hsub2(*reinterpret_cast<const pair_t*>(&h), *reinterpret_cast<const pair_t*>(&bias));
    const pair_t r = {scaled};
    return *reinterpret_cast<const uint32_t*>(&r);
}}

// One BK tile from shared memory: x fragments by ldmatrix, W fragments dequantized in registers.
__device__ __forceinline__ void mma_tile(float (&acc)[MT][NT][4], const scalar_t* sx, const uint32_t* sw,
                                         const scalar_t* __restrict__ scales, int n0, int k0, int N, int K) {{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N, g = lane / 4, t = lane % 4;
    const uint32_t sel = 0x4440u | t;        // prmt: byte t -> byte 0, zeros above
    uint32_t sc[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {{
        const int n = min(n0 + wn * WN + nt * 8 + g, N - 1);
        const pair_t s2 = {splat}(scales[(size_t)n * (K / GROUP) + k0 / GROUP]);
        sc[nt] = *reinterpret_cast<const uint32_t*>(&s2);
    }}
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {{
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            ldmatrix_x4(a[mt], sx + (wm * WM + mt * 16 + lane % 16) * XS + kk * 16 + (lane / 16) * 8);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {{
            const uint32_t* wrow = sw + (wn * WN + nt * 8 + g) * (BK / 8) + kk * 2;
            const uint32_t b[2] = {{dequant_pair(wrow[0], sel, sc[nt]), dequant_pair(wrow[1], sel, sc[nt])}};
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) mma_16816(acc[mt][nt], a[mt], b);
        }}
    }}
}}
"""

    @staticmethod
    def _store(target: str) -> str:
        """Epilogue: c0,c1 are (row g, cols 2t, 2t+1), c2,c3 the same columns of row g + 8."""
        if target == "partials":
            put = ("*reinterpret_cast<float2*>(out + (size_t)row * N + col) = make_float2(acc[mt][nt][h * 2], "
                   "acc[mt][nt][h * 2 + 1]);")
        else:
            put = ("*reinterpret_cast<pair_t*>(y + (size_t)row * N + col) = "
                   "pair_t(from_float(acc[mt][nt][h * 2]), from_float(acc[mt][nt][h * 2 + 1]));")
        return f"""    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {{
                const int row = m0 + wm * WM + mt * 16 + lane / 4 + h * 8;
                const int col = n0 + wn * WN + nt * 8 + (lane % 4) * 2;
                if (row < M && col < N) {put}
            }}"""

    def _mma_lop3_dequant(self, p, task, bug):
        barrier = "" if bug == "missing_barrier" else "\n        __syncthreads();"
        return self._mma_common(p, task, bug) + f"""
extern "C" __global__ void __launch_bounds__(128)
gemm_int4_kernel(const scalar_t* __restrict__ x, const uint32_t* __restrict__ qweight,
                 const scalar_t* __restrict__ scales, scalar_t* __restrict__ y, int M, int N, int K) {{
    __shared__ __align__(16) scalar_t sx[BM * XS];
    __shared__ __align__(16) uint32_t sw[BN * (BK / 8)];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[MT][NT][4] = {{}};
    for (int k0 = 0; k0 < K; k0 += BK) {{
        for (int i = threadIdx.x; i < BM * (BK / 8); i += 128) {{     // x tile, 16 bytes a thread
            const int r = i / (BK / 8), c = i % (BK / 8);
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (m0 + r < M) v = *reinterpret_cast<const uint4*>(x + (size_t)(m0 + r) * K + k0 + c * 8);
            *reinterpret_cast<uint4*>(sx + r * XS + c * 8) = v;
        }}
        for (int i = threadIdx.x; i < BN * (BK / 32); i += 128) {{    // packed W tile, still 4-bit
            const int r = i / (BK / 32), c = i % (BK / 32);
            *reinterpret_cast<uint4*>(sw + r * (BK / 8) + c * 4) =
                *reinterpret_cast<const uint4*>(qweight + (size_t)(n0 + r) * (K / 8) + k0 / 8 + c * 4);
        }}{barrier}
        mma_tile(acc, sx, sw, scales, n0, k0, N, K);
        __syncthreads();
    }}
{self._store("y")}
}}

void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {{
    gemm_int4_kernel<<<dim3(N / BN, (M + BM - 1) / BM), 128, 0, stream>>>(x, qweight, scales, y, M, N, K);
}}
"""

    def _pipelined_kernel(self, p, task, bug, splits: int) -> str:
        stages = p["STAGES"]
        # the bug: the main loop stops one K tile early (the last tile is loaded but never multiplied)
        kt_end = "k_tiles - 1" if bug == "off_by_one" else "k_tiles"
        out = "partials" if splits > 1 else "y"   # partials: the epilogue writes this split's fp32 slice
        out_arg = "float* __restrict__ partials" if splits > 1 else "scalar_t* __restrict__ y"
        k_range = ("    const int tiles_per_split = (K / BK + SPLITS - 1) / SPLITS;\n"
                   "    const int kt_begin = blockIdx.z * tiles_per_split;\n"
                   "    const int k_tiles = min(K / BK - kt_begin, tiles_per_split);\n"
                   "    float* out = partials + (size_t)blockIdx.z * M * N;   // this split's [M][N] slice\n"
                   if splits > 1 else "    const int kt_begin = 0, k_tiles = K / BK;\n")
        return self._mma_common(p, task, bug, stages) + f"""#define STAGES {stages}
#define SPLITS {splits}
#define STAGE_BYTES (BM * XS * 2 + BN * (BK / 8) * 4)

// Issue the cp.async copies of one K tile into ring slot `slot` (16 bytes a copy, no register staging).
__device__ __forceinline__ void load_tile(unsigned char* smem, int slot, const scalar_t* __restrict__ x,
                                          const uint32_t* __restrict__ qweight, int m0, int n0, int k0, int M, int K) {{
    scalar_t* sx = reinterpret_cast<scalar_t*>(smem + slot * STAGE_BYTES);
    uint32_t* sw = reinterpret_cast<uint32_t*>(smem + slot * STAGE_BYTES + BM * XS * 2);
    for (int i = threadIdx.x; i < BM * (BK / 8); i += 128) {{
        const int r = i / (BK / 8), c = i % (BK / 8);
        const bool valid = m0 + r < M;
        cp_async16(sx + r * XS + c * 8, x + (size_t)(valid ? m0 + r : 0) * K + k0 + c * 8, valid);
    }}
    for (int i = threadIdx.x; i < BN * (BK / 32); i += 128) {{
        const int r = i / (BK / 32), c = i % (BK / 32);
        cp_async16(sw + r * (BK / 8) + c * 4, qweight + (size_t)(n0 + r) * (K / 8) + k0 / 8 + c * 4, true);
    }}
}}

extern "C" __global__ void __launch_bounds__(128)
gemm_int4_kernel(const scalar_t* __restrict__ x, const uint32_t* __restrict__ qweight,
                 const scalar_t* __restrict__ scales, {out_arg}, int M, int N, int K) {{
    extern __shared__ __align__(16) unsigned char smem[];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
{k_range}    float acc[MT][NT][4] = {{}};
    // prologue: STAGES - 1 tiles in flight before the first mma
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {{
        if (s < k_tiles) load_tile(smem, s, x, qweight, m0, n0, (kt_begin + s) * BK, M, K);
        cp_async_commit();
    }}
    for (int kt = 0; kt < {kt_end}; ++kt) {{
        cp_async_wait<STAGES - 2>();   // this thread's copies of tile kt have landed
        __syncthreads();                   // everyone's have; slot (kt - 1) % STAGES is free again
        const int next = kt + STAGES - 1;
        if (next < k_tiles) load_tile(smem, next % STAGES, x, qweight, m0, n0, (kt_begin + next) * BK, M, K);
        cp_async_commit();
        const unsigned char* stage = smem + (kt % STAGES) * STAGE_BYTES;
        mma_tile(acc, reinterpret_cast<const scalar_t*>(stage), reinterpret_cast<const uint32_t*>(stage + BM * XS * 2),
                 scales, n0, (kt_begin + kt) * BK, N, K);
    }}
{self._store(out)}
}}
"""

    def _cp_async_pipeline(self, p, task, bug):
        return self._pipelined_kernel(p, task, bug, 1) + """
void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {
    const int smem = STAGES * STAGE_BYTES;
    cudaFuncSetAttribute(gemm_int4_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    gemm_int4_kernel<<<dim3(N / BN, (M + BM - 1) / BM), 128, smem, stream>>>(x, qweight, scales, y, M, N, K);
}
"""

    def _split_k_small_m(self, p, task, bug):
        splits = p["SPLITS"]
        if splits == 1:
            return self._cp_async_pipeline(p, task, bug if bug != "bad_combine_index" else None)
        idx = "(size_t)i * SPLITS + s" if bug == "bad_combine_index" else "(size_t)s * M * N + i"
        return self._pipelined_kernel(p, task, bug, splits) + f"""
// Combine: sum the SPLITS fp32 partial tiles of each output in a fixed order (deterministic).
__global__ void gemm_int4_combine(const float* __restrict__ partials, scalar_t* __restrict__ y, int M, int N) {{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    float total = 0.f;
#pragma unroll
    for (int s = 0; s < SPLITS; ++s) total += partials[{idx}];
    y[i] = from_float(total);
}}

void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {{
    const int smem = STAGES * STAGE_BYTES;
    float* partials = nullptr;                // [SPLITS][M][N] fp32, stream-ordered scratch
    cudaMallocAsync((void**)&partials, (size_t)SPLITS * M * N * sizeof(float), stream);
    cudaFuncSetAttribute(gemm_int4_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    gemm_int4_kernel<<<dim3(N / BN, (M + BM - 1) / BM, SPLITS), 128, smem, stream>>>(x, qweight, scales, partials, M, N, K);
    const size_t outputs = (size_t)M * N;
    gemm_int4_combine<<<(unsigned)((outputs + 255) / 256), 256, 0, stream>>>(partials, y, M, N);
    cudaFreeAsync(partials, stream);
}}
"""
