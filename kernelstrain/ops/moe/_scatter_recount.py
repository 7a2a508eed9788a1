"""moe_scatter_cuda's redundant_rank_one_launch rung (not an op module itself).

At decode batch sizes (T * topk of a few hundred assignments) the other rungs' grids are tiny or
their kernels wait on each other: the count, scan and rank launches cost more than the copy. Here
one launch has a block per assignment a = t * topk + j, and no block waits for another: each reads
all n expert ids (a few KB, from L2) and counts the assignments that go to a smaller expert or to
the same expert earlier, which is a's stable slot; block 0 also writes the expert offsets. Then the
block copies token t's row to its slot with 16-byte loads. The recount is n^2 id reads in all, so
it pays only where n is small (at T * topk = 65,536 it would read 17 GB from L2).
"""
from .. import l2_reuse
from ..base import Launch, Param, Rung, cdiv
from ..dialect import shfl_xor_macro
from .moe_scatter_spec import ENTRY, MoeScatterSpec

# Where the n expert ids (4 n bytes) fit an SM's L1 beside the block's shared memory, the blocks an SM runs re-read
# them from L1, not L2: the recount costs L1 bandwidth (~128 B a clock an SM, ~33 TB/s over an H100's 132 SMs), a
# tenth of a DRAM byte a byte on the H100. Measured (H100, sim30 call, 2026-12-06 09:38 UTC): T=4096 E=8 topk 2
# (n = 8,192, 32 KB of ids) 41.7 / 47.7 us at 128 / 512 threads, faster than the vectorized_uint4 rung's 56.6, where
# the L2 recount (3x DRAM) modelled 73.1 / 73.5; T=512 E=256 topk 8 (n = 4,096) 29.7 / 30.8, modelled 41.7 / 41.8;
# T=64 (n = 384) 4.4-4.9, modelled 4.2-4.5. Past L1 (T=8192 E=128 topk 8, 256 KB of ids) the ids come from L2.
L1_IDS_BYTES = 128 * 1024
L1_READ_TBS = 33.0


def recount_launch(p, task):
    t, topk, k, e = task["T"], task["topk"], task["K"], task["E"]
    n, threads, elt = t * topk, p["threads"], 2
    base = MoeScatterSpec().cost(task).bytes
    gather = (topk - 1) * t * k * elt * 0.3       # each token row is read once per assignment (mostly L2)
    per_byte = task.gpu.bw_tbs / L1_READ_TBS if n * 4 <= L1_IDS_BYTES else l2_reuse.l2_cost(task.gpu)
    recount = n * n * 4 * per_byte
    return Launch(grid=n, threads=threads, smem_bytes=(e + 1) * 4 + cdiv(threads, task.gpu.warp) * 4, regs=32,
                  bytes_per_access=16, traffic=1 + (gather + recount) / base, lane_util=min(1.0, k / 8 / threads))


PLAIN_COUNT = "atomicAdd(&hist[f], 1);"


def recount_src(p, task, cmp="<", count=PLAIN_COUNT):
    return f"""#define THREADS {p['threads']}
#define WARPS (THREADS / WARP_SIZE)
{shfl_xor_macro(task)}
__device__ __forceinline__ int block_sum_int(int v, int* warp_tot) {{
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1) v += SHFL_XOR(v, o);
    if (threadIdx.x % WARP_SIZE == 0) warp_tot[threadIdx.x / WARP_SIZE] = v;
    __syncthreads();
    int r = 0;
    for (int w = 0; w < WARPS; ++w) r += warp_tot[w];
    return r;
}}

// One launch, a block per assignment: its stable slot recounted from all n ids, then its row copied.
extern "C" __global__ void __launch_bounds__(THREADS)
moe_scatter_kernel(const scalar_t* __restrict__ x, const int* __restrict__ topk_ids, scalar_t* __restrict__ x_sorted,
                   int* __restrict__ sorted_ids, int* __restrict__ offsets, int T, int E, int K, int topk) {{
    __shared__ int hist[E_MAX + 1];
    __shared__ int warp_tot[WARPS];
    const int n = T * topk, a = blockIdx.x, e = topk_ids[a];
    if (blockIdx.x == 0) {{                      // block 0 also writes the expert offsets
        for (int f = threadIdx.x; f <= E; f += THREADS) hist[f] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < n; i += THREADS) {{ const int f = topk_ids[i]; {count} }}
        __syncthreads();
        if (threadIdx.x == 0) {{
            int start = 0;
            for (int f = 0; f < E; ++f) {{ const int c = hist[f]; offsets[f] = start; start += c; }}
            offsets[E] = start;
        }}
    }}
    int before = 0;                             // assignments sorted ahead of a: smaller expert, or same expert earlier
    for (int i = threadIdx.x; i < n; i += THREADS) {{
        const int f = topk_ids[i];
        before += f < e || (f == e && i {cmp} a);
    }}
    const int slot = block_sum_int(before, warp_tot);
    if (threadIdx.x == 0) sorted_ids[slot] = a;
    const uint4* src = reinterpret_cast<const uint4*>(x + (size_t)(a / topk) * K);
    uint4* dst = reinterpret_cast<uint4*>(x_sorted + (size_t)slot * K);
    for (int c = threadIdx.x; c < K / 8; c += THREADS) dst[c] = src[c];     // 16 bytes a lane (K % 8 == 0)
}}

{ENTRY.prototype(task)} {{
    moe_scatter_kernel<<<T * topk, THREADS, 0, stream>>>(x, topk_ids, x_sorted, sorted_ids, expert_offsets,
                                                         T, E, K, topk);
}}
"""


RECOUNT = Rung("redundant_rank_one_launch", "one launch, a block per assignment: each recounts its stable slot from "
               "all expert ids (L2), then copies its row as uint4", (Param("threads", (64, 128, 256, 512), 128),),
               memory_eff=0.88, smem="static", launch=recount_launch, render=recount_src,
               bugs={"off_by_one": {"cmp": "<="}, "racy_update": {"count": "++hist[f];"}})
