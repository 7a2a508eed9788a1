"""softmax_cuda's split_row_online rung (not an op module itself): few long rows split over CTAs.

split_row_online: a block (or a few) per row leaves SMs idle when the rows are few (R=32 on 108-170
SMs) and each block walks a 32k-150k-element row alone. Pass 1, grid (SPLITS, R): each CTA's online
(max, sum) over its part of the row; pass 2, the same grid: each CTA merges its row's SPLITS partials
in one fixed order (every CTA gets the same bits) and writes its part. The row is read twice, as in
online_softmax, but by SPLITS times more SMs. (A row staged in shared memory, PyTorch's
cunn_SoftMaxForwardSmem, is not a rung: at this module's shapes the rows a GPU holds at once fit its
L2, so the online rungs' second read is an L2 hit already and staging saves little DRAM traffic.)
"""
from dataclasses import replace

from ..base import Launch, Param, DTYPE_BYTES
from ..norms._norms import block_row_rounds
from .softmax_spec import ENTRY

VEC_PACK = """constexpr int VEC = 16 / sizeof(scalar_t);      // elements per 16-byte load
union Pack { uint4 u; scalar_t h[VEC]; };

// Online (max, sum) of one 16-byte vector folded into (m, d): one max, one rescale, VEC exps.
__device__ __forceinline__ void md_vector(float& m, float& d, const Pack& v) {
    float cm = NEG_BIG;
#pragma unroll
    for (int k = 0; k < VEC; ++k) cm = fmaxf(cm, to_float(v.h[k]));
    const float m_new = fmaxf(m, cm);
    d *= __expf(m - m_new);
#pragma unroll
    for (int k = 0; k < VEC; ++k) d += __expf(to_float(v.h[k]) - m_new);
    m = m_new;
}
"""


BLOCK_MD = """
// (m, d) of the whole block: shuffles inside each warp, warp partials merged in one fixed order.
__device__ __forceinline__ void block_md(float& m, float& d, float* red_m, float* red_d) {
    shfl_md(m, d);
    if (threadIdx.x % WARP_SIZE == 0) { red_m[threadIdx.x / WARP_SIZE] = m; red_d[threadIdx.x / WARP_SIZE] = d; }
    __syncthreads();
    m = NEG_BIG; d = 0.f;
    for (int w = 0; w < WARPS; ++w) md_merge(m, d, red_m[w], red_d[w]);
}
"""


# -- split_row_online ------------------------------------------------------------------------
# The split rungs' second kernel waits on two dependent round trips before it writes: the row's
# partials, then its part of the row. With SPLIT_MEMORY_EFF (a grid of a few CTAs a row streaming
# short parts: ~2 CTAs an SM at R=32) they put the rungs' times where an H100 (80GB HBM3,
# scripts/gpu_check_rounds.sh, default params) measured them: softmax_cuda 0.0162 / 0.0096 / 0.0939 ms
# and softmax_triton 0.0204 / 0.0087 / 0.1092 ms at R=32 C=128256 / R=32 C=32000 / R=256 C=151936,
# where the model without them said 0.0119 / 0.0063 / 0.0809 and 0.0131 / 0.0062 / 0.0913 ms.
PASS2_ROUNDS = 2
SPLIT_MEMORY_EFF = 0.7

# A thread's md_merge of one (m, d) partial costs ~30 fp32-lane issue slots: two __expf (MUFU.EX2, 16 a clock an
# SM against 128 FMA lanes: 8 slots each), two shared-memory (or L2) loads of the partial (32 lanes a clock: 4
# each) and ~6 ALU ops. The online rungs' block merge has EVERY thread of a block merge all WARPS warp partials
# (not warp 0 alone), so a row of THREADS threads issues THREADS x WARPS merges: at 1,024 threads (32 warps), 32x
# the one warp's. R=16384 C=1024, 16384 x 1024 x 32 merges: H100 vectorized_online 464.8 us (fresh seed 96161,
# gpu-check; the roofline model said 83.8), H200 online_softmax 411.9 / 412.6 (fp16 / bf16, h200 gpu-checks), and
# H100 split_row_online 256 threads x 8 splits 456.2 (16384 x 8 x 256 x (8 + 8) merges; modelled 314): 28 slots
# puts them at 450 / 450 / 452 us (30: 482 / 482 / 484).
MERGE_LANE_SLOTS = 28


def merge_issue_s(task, merges: float) -> float:
    """Launch.issue_s of `merges` thread-level md_merge calls (MERGE_LANE_SLOTS each; fp32 lane slots a second are
    the fp32 peak over 2 FLOPs an FMA)."""
    return merges * MERGE_LANE_SLOTS / (task.gpu.peak("fp32") / 2)


def split_row_launch(p, task):
    threads, splits, vec = p["threads"], p["splits"], 16 // DTYPE_BYTES[task.dtype]
    # smem_bytes: the entry kernel's (softmax_kernel, pass 2: none); pass 1's WARPS x 8 B reduction buffer is too
    # small to change an occupancy, and ptxas reports the entry kernel's figure
    # pass 1's block merge (every thread merges WARPS partials), pass 2's (every thread merges the row's SPLITS)
    merges = task["R"] * splits * threads * (threads // task.gpu.warp + splits)
    return Launch(grid=task["R"] * splits, threads=threads, smem_bytes=0, regs=32,
                  bytes_per_access=16, traffic=1.5, lane_util=min(1.0, task["C"] / (splits * threads * vec)),
                  launches=2, rounds=block_row_rounds(threads, task.gpu.warp, 1) + PASS2_ROUNDS,
                  issue_s=merge_issue_s(task, merges))


def split_row_src(md_helpers, p, task):
    return f"""
#define THREADS {p['threads']}
#define WARPS (THREADS / WARP_SIZE)
#define SPLITS {p['splits']}            // CTAs per row
{md_helpers}{VEC_PACK}{BLOCK_MD}
// The 16-byte vectors [lo, hi) of a row that CTA `part` owns; the scalar tail goes to the last part.
__device__ __forceinline__ void part_range(int C, int part, int& lo, int& hi) {{
    const int chunks = C / VEC, per = (chunks + SPLITS - 1) / SPLITS;
    lo = min(chunks, part * per);
    hi = min(chunks, lo + per);
}}

// Pass 1, grid (SPLITS, R): the online (max, sum) of each CTA's part of its row.
extern "C" __global__ void __launch_bounds__(THREADS)
softmax_stats_kernel(const scalar_t* __restrict__ x, float2* __restrict__ part_md, int R, int C) {{
    __shared__ float red_m[WARPS], red_d[WARPS];
    const scalar_t* xr = x + (size_t)blockIdx.y * C;
    const uint4* xv = reinterpret_cast<const uint4*>(xr);
    int lo, hi;
    part_range(C, blockIdx.x, lo, hi);
    float m = NEG_BIG, d = 0.f;
    for (int c = lo + threadIdx.x; c < hi; c += THREADS) {{ Pack v; v.u = xv[c]; md_vector(m, d, v); }}
    if (blockIdx.x == SPLITS - 1)
        for (int i = C / VEC * VEC + threadIdx.x; i < C; i += THREADS) md_merge(m, d, to_float(xr[i]), 1.f);
    block_md(m, d, red_m, red_d);
    if (threadIdx.x == 0) part_md[(size_t)blockIdx.y * SPLITS + blockIdx.x] = make_float2(m, d);
}}

// Pass 2, the same grid: every CTA of a row merges the row's partials in the same order, then
// writes its own part.
extern "C" __global__ void __launch_bounds__(THREADS)
softmax_kernel(const scalar_t* __restrict__ x, const float2* __restrict__ part_md, scalar_t* __restrict__ y,
               int R, int C) {{
    const size_t row = blockIdx.y;
    float m = NEG_BIG, d = 0.f;
    for (int s = 0; s < SPLITS; ++s) {{ const float2 q = part_md[row * SPLITS + s]; md_merge(m, d, q.x, q.y); }}
    const float inv = 1.f / d;
    const scalar_t* xr = x + row * C;
    const uint4* xv = reinterpret_cast<const uint4*>(xr);
    uint4* yv = reinterpret_cast<uint4*>(y + row * C);
    int lo, hi;
    part_range(C, blockIdx.x, lo, hi);
    for (int c = lo + threadIdx.x; c < hi; c += THREADS) {{
        Pack v, o; v.u = xv[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float(__expf(to_float(v.h[k]) - m) * inv);
        yv[c] = o.u;
    }}
    if (blockIdx.x == SPLITS - 1)
        for (int i = C / VEC * VEC + threadIdx.x; i < C; i += THREADS) y[row * C + i] = from_float(__expf(to_float(xr[i]) - m) * inv);
}}

{ENTRY.prototype(task)} {{
    float2* part_md = nullptr;
    cudaMallocAsync((void**)&part_md, (size_t)R * SPLITS * sizeof(float2), stream);
    softmax_stats_kernel<<<dim3(SPLITS, R), THREADS, 0, stream>>>(x, part_md, R, C);
    softmax_kernel<<<dim3(SPLITS, R), THREADS, 0, stream>>>(x, part_md, y, R, C);
    cudaFreeAsync(part_md, stream);
}}
"""


SPLITS = Param("splits", (2, 4, 8, 16, 32), 8)
ROW_THREADS = Param("threads", (128, 256, 512, 1024), 256)


def with_block_merge(launch_of_p):
    """online_softmax's launch with its block merge's issue: every thread merges the WARPS warp partials."""
    def launch(p, task):
        base = launch_of_p(p, task)
        threads = p["threads"]
        return replace(base, issue_s=merge_issue_s(task, task["R"] * threads * (threads // task.gpu.warp)))
    return launch
