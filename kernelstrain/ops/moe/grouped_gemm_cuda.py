"""MoE grouped GEMM in CUDA: y[a] = x[a // topk] @ w[e]^T for every expert-sorted assignment a.

Same contract as the Triton module: sorted_ids (int32 assignment ids grouped by expert) and
expert_offsets [E + 1]. Ladder: the host reads the offsets and launches one tiled GEMM per expert
-> one launch whose blocks find their expert from the offsets (register-blocked CUDA cores) ->
mma.sync tensor cores fed by ldmatrix -> cp.async multi-stage pipeline -> Hopper wgmma on
shared-memory descriptors (warpgroup-wide 64 x BN x 16 MMAs, sm_90a only).
"""
import math

from ..base import Launch, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude
from ..matmul._gemm_tc import LDMATRIX_X4, SMEM_U32, cp_async16, mma_16816
from .grouped_gemm_spec import GroupedGemmSpec, routing

TC_NEEDS = frozenset({"mma", "ldmatrix", "inline_ptx"})
PTX = {"fp16": ("f16", "__half2"), "bf16": ("bf16", "__nv_bfloat162")}
ARGS = ("const scalar_t* __restrict__ x, const scalar_t* __restrict__ w, const int* __restrict__ sorted_ids, "
        "const int* __restrict__ offsets, scalar_t* __restrict__ y, int E, int K, int N, int topk")


class GroupedGemmCuda(GroupedGemmSpec):
    impl = "cuda"
    variants = (
        Variant("launch_per_expert", "host syncs on the offsets, then one smem-tiled GEMM launch per expert",
                (Param("TILE", (16, 32), 16),), path="fp32", compute_eff=0.25, memory_eff=0.7, smem="static",
                bugs=("off_by_one", "half_accumulator")),
        Variant("expert_lookup_single", "single launch: each block scans the offsets for its expert; register-blocked FMA",
                (Param("BM", (32, 64), 64), Param("BN", (64, 128), 128)), path="fp32", compute_eff=0.5,
                memory_eff=0.8, smem="static", bugs=("off_by_one", "missing_barrier")),
        Variant("mma_sync", "mma.sync m16n8k16 tensor cores, x rows gathered to smem, ldmatrix fragments",
                (Param("BM", (32, 64, 128), 64), Param("BN", (64, 128), 128)), needs=TC_NEEDS, path="fp16",
                compute_eff=0.55, memory_eff=0.82, smem="static", bugs=("missing_barrier", "half_accumulator")),
        Variant("cp_async_pipeline", "STAGES-deep cp.async ring (gathered rows copy 16 bytes at a time) under the mma",
                (Param("BM", (64, 128), 128), Param("BN", (64, 128), 128), Param("STAGES", (2, 3, 4), 3)),
                needs=TC_NEEDS | {"cp_async"}, path="fp16", compute_eff=0.76, memory_eff=0.88, smem="dynamic",
                bugs=("off_by_one", "missing_barrier")),
        Variant("wgmma_pipeline", "warpgroup wgmma.mma_async m64nBNk16 on smem descriptors, cp.async ring (sm_90a)",
                (Param("BN", (64, 128), 128), Param("STAGES", (3, 4), 4)),
                needs=TC_NEEDS | {"cp_async", "wgmma"}, path="fp16", compute_eff=0.72, memory_eff=0.9,
                smem="dynamic", bugs=("off_by_one", "missing_barrier")),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        k, n, e, experts = task["K"], task["N"], DTYPE_BYTES[task.dtype], task["E"]
        gpu, tag, base = task.gpu, variant.tag, self.cost(task).bytes
        rows, active, per_expert = routing(task)
        w_bytes = active * n * k * e
        if tag == "launch_per_expert":
            tile = params["TILE"]
            m_blocks = cdiv(math.ceil(per_expert), tile)
            # each launch streams its expert's weights once per m-block row of tiles (L2 keeps some)
            traffic = 1 + (w_bytes * (m_blocks - 1) * 0.3 + rows * k * e * cdiv(n, tile) * 0.1) / base
            return Launch(grid=cdiv(n, tile) * m_blocks, threads=tile * tile, smem_bytes=2 * tile * (tile + 1) * 4,
                          regs=32, bytes_per_access=e, traffic=traffic, lane_util=min(1.0, per_expert / tile),
                          launches=max(1, round(active)) + 1)
        bm, bn = params.get("BM", 64), params["BN"]
        m_blocks = active * cdiv(math.ceil(per_expert), bm)
        n_blocks = cdiv(n, bn)
        tiles = int(m_blocks) * n_blocks
        quant = rows / (m_blocks * bm) * n / (n_blocks * bn)
        # blocks are m-fastest (blockIdx.x): resident blocks share one w[e] tile column in L2
        traffic = 1 + (w_bytes * (m_blocks / active - 1) * 0.05 + rows * k * e * (n_blocks - 1) * 0.05) / base
        lookup = 1 / (1 + experts * 4 / (k * bm * bn / 4096))     # per-block scan of E offsets vs. tile work
        if tag == "expert_lookup_single":
            tm, tn = bm // 16, bn // 16
            return Launch(grid=tiles, threads=256, smem_bytes=32 * (bm + 1) * 4 + 32 * bn * 4 + 12,
                          regs=28 + 3 * tm * tn // 2, bytes_per_access=8, traffic=traffic,
                          compute_scale=lookup * min(1.0, tm * tn / (tm + tn) / 2.7), tile_quant=quant)
        stages = params.get("STAGES", 1)
        if tag == "wgmma_pipeline":
            bm, threads = 64, 128
            stage = (bm + bn) * 64 * e
            regs = 40 + bn // 2 + 24
            scale = lookup * min(1.0, bn / 128) ** 0.3
        else:
            threads = 128
            stage = (bm + bn) * (32 + 8) * e
            wm, wn = bm // 2, bn // 2
            regs = min(255, 40 + (wm // 16) * (wn // 8) * 4 + (wm // 16) * 4 + (wn // 8) * 2)
            scale = lookup * min(1.0, (wm * wn / (wm + wn)) / 32) ** 0.4
            scale *= gpu.mma_sync_scale(variant.path)      # Hopper: mma.sync below its wgmma rate
        head = bm * 4 + 12                                   # s_ids[BM] + slot[3]
        align = 128 if tag == "wgmma_pipeline" else 16      # static part rounds to the dynamic buffer's alignment
        smem = stage + head if stages == 1 else stage * stages + cdiv(head, align) * align
        return Launch(grid=tiles, threads=threads, smem_bytes=smem, regs=regs,
                      bytes_per_access=max(16, stage * max(1, stages - 1) // (threads * 2)), traffic=traffic,
                      compute_scale=scale, tile_quant=quant)

    def signature(self, task: Task) -> str:
        return ("void grouped_gemm(const scalar_t* x, const scalar_t* w, const int* sorted_ids, "
                "const int* expert_offsets, scalar_t* y, int T, int E, int K, int N, int topk, cudaStream_t stream)")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        if task.is_hip and variant.tag == "launch_per_expert":
            body = ("#define cudaStreamSynchronize hipStreamSynchronize\n"
                    "#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost\n") + body
        return f"{cuda_prelude(task)}\n{body}"

    def _launch_per_expert(self, p, task, bug):
        acc = "scalar_t" if bug == "half_accumulator" else "float"
        last = "rows - 1" if bug == "off_by_one" else "rows"
        return f"""#define TILE {p['TILE']}
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

void grouped_gemm(const scalar_t* x, const scalar_t* w, const int* sorted_ids, const int* expert_offsets,
                  scalar_t* y, int T, int E, int K, int N, int topk, cudaStream_t stream) {{
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

    @staticmethod
    def _find_block(bug=None) -> str:
        cmp = "<=" if bug == "off_by_one" else "<"
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

    def _expert_lookup_single(self, p, task, bug):
        barrier = "" if bug == "missing_barrier" else "\n        __syncthreads();"
        return f"""#define BM {p['BM']}
#define BN {p['BN']}
#define BK 32
#define TM (BM / 16)
#define TN (BN / 16)
{self._find_block(bug if bug == "off_by_one" else None)}
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
        const int r = start + ty + 16 * i;
        if (r >= row_hi) continue;
        const size_t out = (size_t)sorted_ids[r] * N + n0 + tx;
#pragma unroll
        for (int j = 0; j < TN; ++j) y[out + 16 * j] = from_float(acc[i][j]);
    }}
}}

void grouped_gemm(const scalar_t* x, const scalar_t* w, const int* sorted_ids, const int* expert_offsets,
                  scalar_t* y, int T, int E, int K, int N, int topk, cudaStream_t stream) {{
    // m-blocks fastest; upper bound without a host sync: each expert adds at most one partial block
    const dim3 grid((T * topk + BM - 1) / BM + E, N / BN);
    grouped_gemm_kernel<<<grid, 256, 0, stream>>>(x, w, sorted_ids, expert_offsets, y, E, K, N, topk);
}}
"""

    # -- tensor-core rungs ----------------------------------------------------------------
    @staticmethod
    def _ptx_helpers(task, cp_async: bool) -> str:
        text = SMEM_U32 + LDMATRIX_X4 + mma_16816(PTX[task.dtype][0], b_regs=True)
        if cp_async:
            text += cp_async16("src-size 0 zero-fills: rows past the expert's end arrive as zeros")
        return text

    def _mma_defs(self, p, task) -> str:
        return f"""#define BM {p['BM']}
#define BN {p['BN']}
#define BK 32
#define LDS (BK + 8)              // padded smem row (80 bytes): ldmatrix rows hit distinct banks
#define WM (BM / 2)               // 2 x 2 warps
#define WN (BN / 2)
#define MT (WM / 16)
#define NT (WN / 8)
typedef {PTX[task.dtype][1]} pair_t;
"""

    _MMA_TILE = """
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

    @staticmethod
    def _epilogue() -> str:
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

    @staticmethod
    def _block_head(publish_ids: bool = True) -> str:
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

    def _mma_sync(self, p, task, bug):
        barrier = "" if bug == "missing_barrier" else "\n        __syncthreads();"
        step = ("float part[MT][NT][4] = {};\n        mma_tile(part, sx, sw);\n"
                "        for (int i = 0; i < MT * NT * 4; ++i)   // running sum kept in the storage type\n"
                "            (&acc[0][0][0])[i] = to_float(from_float((&acc[0][0][0])[i] + (&part[0][0][0])[i]));"
                if bug == "half_accumulator" else "mma_tile(acc, sx, sw);")
        return self._mma_defs(p, task) + self._ptx_helpers(task, False) + self._find_block() + self._MMA_TILE + f"""
extern "C" __global__ void __launch_bounds__(128)
grouped_gemm_kernel({ARGS}) {{
    __shared__ __align__(16) scalar_t sx[BM * LDS];
    __shared__ __align__(16) scalar_t sw[BN * LDS];
{self._block_head()}    float acc[MT][NT][4] = {{}};
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
{self._epilogue()}
}}

void grouped_gemm(const scalar_t* x, const scalar_t* w, const int* sorted_ids, const int* expert_offsets,
                  scalar_t* y, int T, int E, int K, int N, int topk, cudaStream_t stream) {{
    const dim3 grid((T * topk + BM - 1) / BM + E, N / BN);   // m-blocks fastest: w tiles shared in L2
    grouped_gemm_kernel<<<grid, 128, 0, stream>>>(x, w, sorted_ids, expert_offsets, y, E, K, N, topk);
}}
"""

    def _pipeline_loop(self, bug, load: str, compute: str, fence: str = "") -> str:
        wait = "STAGES - 1" if bug == "off_by_one" else "STAGES - 2"
        barrier = "" if bug == "missing_barrier" else "\n        __syncthreads();                  // ...and everyone's; slot (kt - 1) % STAGES is free"
        return f"""    const int k_tiles = K / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {{    // prologue: STAGES - 1 tiles in flight
        if (s < k_tiles) {load.format(slot="s", k="s * BK")};
        cp_async_commit();
    }}
    for (int kt = 0; kt < k_tiles; ++kt) {{
        cp_async_wait<{wait}>();          // this thread's copies of tile kt have landed{fence}{barrier}
        const int next = kt + STAGES - 1;
        if (next < k_tiles) {load.format(slot="next % STAGES", k="next * BK")};
        cp_async_commit();
        {compute}
    }}
"""

    def _cp_async_pipeline(self, p, task, bug):
        load = "load_tile(smem, {slot}, x, w_e, s_ids, start, row_hi, {k}, K, topk)"
        return self._mma_defs(p, task) + f"#define STAGES {p['STAGES']}\n#define STAGE_ELEMS ((BM + BN) * LDS)\n" \
            + self._ptx_helpers(task, True) + self._find_block() + self._MMA_TILE + f"""
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
{self._block_head()}    float acc[MT][NT][4] = {{}};
{self._pipeline_loop(bug, load, "mma_tile(acc, smem + (kt % STAGES) * STAGE_ELEMS, smem + (kt % STAGES) * STAGE_ELEMS + BM * LDS);")}
{self._epilogue()}
}}

void grouped_gemm(const scalar_t* x, const scalar_t* w, const int* sorted_ids, const int* expert_offsets,
                  scalar_t* y, int T, int E, int K, int N, int topk, cudaStream_t stream) {{
    const int smem = STAGES * STAGE_ELEMS * (int)sizeof(scalar_t);
    cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const dim3 grid((T * topk + BM - 1) / BM + E, N / BN);
    grouped_gemm_kernel<<<grid, 128, smem, stream>>>(x, w, sorted_ids, expert_offsets, y, E, K, N, topk);
}}
"""

    # cp.async wrote through the generic proxy; wgmma reads shared memory through the async proxy
    _PROXY_FENCE = '\n        asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");'

    def _wgmma_pipeline(self, p, task, bug):
        bn, ptx = p["BN"], PTX[task.dtype][0]
        outs = ", ".join(f"%{i}" for i in range(bn // 2))
        regs = ", ".join(f'"+f"(d[{i}])' for i in range(bn // 2))
        load = "load_tile(smem, {slot}, x, w_e, s_ids, start, row_hi, {k}, K, topk)"
        compute = """const unsigned char* sa = smem + (kt % STAGES) * STAGE_BYTES;
        asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)     // k16 step = two core matrices along K = 256 bytes
            wgmma_tile(acc, make_desc(sa + kk * 256), make_desc(sa + A_BYTES + kk * 256));
        asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");   // slot reusable, acc final"""
        return f"""#define BM 64                     // one warpgroup: a 64-row wgmma tile
#define BN {bn}
#define BK 64
#define STAGES {p['STAGES']}
#define A_BYTES (BM * BK * 2)
#define STAGE_BYTES ((BM + BN) * BK * 2)
typedef {PTX[task.dtype][1]} pair_t;
{self._ptx_helpers(task, True)}{self._find_block()}
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
    for (int i = threadIdx.x; i < BM * (BK / 8); i += 128) {{
        const int r = i / (BK / 8), c = i % (BK / 8);
        cp_async16(sa + core_offset(r, c), x + (size_t)(s_ids[r] / topk) * K + k0 + c * 8, start + r < row_hi);
    }}
    for (int i = threadIdx.x; i < BN * (BK / 8); i += 128) {{
        const int r = i / (BK / 8), c = i % (BK / 8);
        cp_async16(sa + A_BYTES + core_offset(r, c), w_e + (size_t)r * K + k0 + c * 8, true);
    }}
}}

extern "C" __global__ void __launch_bounds__(128)
grouped_gemm_kernel({ARGS}) {{
    extern __shared__ __align__(128) unsigned char smem[];
{self._block_head(bug != "missing_barrier")}    float acc[BN / 2] = {{}};                // row 16 * warp + lane / 4 (+8), col 8 * j + 2 * (lane % 4) (+1)
{self._pipeline_loop(bug if bug != "missing_barrier" else None, load, compute, self._PROXY_FENCE)}
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

void grouped_gemm(const scalar_t* x, const scalar_t* w, const int* sorted_ids, const int* expert_offsets,
                  scalar_t* y, int T, int E, int K, int N, int topk, cudaStream_t stream) {{
    const int smem = STAGES * STAGE_BYTES;
    cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const dim3 grid((T * topk + BM - 1) / BM + E, N / BN);
    grouped_gemm_kernel<<<grid, 128, smem, stream>>>(x, w, sorted_ids, expert_offsets, y, E, K, N, topk);
}}
"""
