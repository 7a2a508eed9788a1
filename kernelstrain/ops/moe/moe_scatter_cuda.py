"""MoE dispatch in CUDA: count tokens per expert, build the stable expert-sorted order, permute rows.
Outputs: expert_offsets [E + 1], sorted_ids [T * topk] (assignment a = t * topk + j at its expert-sorted
position, ties kept in assignment order) and x_sorted [T * topk, K] with x_sorted[p] = x[sorted_ids[p] // topk].
Ladder: atomic histogram, serial scan, per-expert fill, copy (4 kernels) -> smem histograms, scan, stable
ranks from warp peer masks with the row copy (3) -> uint4 row copies -> warp-aggregated counts, scan folded
into the scatter (2) -> decode batches: a block per assignment recounts its own slot (_scatter_recount.py).
"""
from functools import partial

from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude
from ._moe import RANK_ROUND, peers, starts_read_past_warp0
from ._scatter_recount import RECOUNT
from .moe_scatter_spec import ENTRY, MoeScatterSpec

THREADS = Param("threads", (128, 256, 512), 256)
ATOMIC_COUNT = "atomicAdd(&counts[topk_ids[a] + 1], 1);   // every assignment hits one of E hot words"
# missing_barrier drops: the other threads read start[] while thread 0 is still scanning it
PUBLISH_STARTS = "\n    __syncthreads();                         // publish the scanned starts"
# missing_barrier drops it: warp 0 clears warp_cnt[0] (the totals) while the last warp's scan reads them
TOTALS_READ = "\n    __syncthreads();                           // the scanning thread is done with the totals"


def sizes(task):
    """(tokens, experts, topk, K, element bytes, minimum bytes): what every launch model reads."""
    return *(task[d] for d in ("T", "E", "topk", "K")), DTYPE_BYTES[task.dtype], MoeScatterSpec().cost(task).bytes


def atomic_multi_kernel_launch(p, task):
    t, e, topk, k, elt, base = sizes(task)
    # each of the E fill threads walks all n ids (~8 ns a step, L1/L2 hits): serial time in byte terms
    serial_bytes = t * topk * 8e-9 * task.gpu.bw_tbs * 1e12 * 0.7
    return Launch(grid=cdiv(t * topk * k, p["threads"]), threads=p["threads"], regs=16, bytes_per_access=elt,
                  traffic=1 + serial_bytes / base, launches=5)


def rank_launch(vectorized: bool):
    """block_rank_scan / vectorized_uint4: one block per sorted row copies K elements (scalar or uint4)."""
    def launch(p, task):
        t, e, topk, k, elt, base = sizes(task)
        threads, vec = p["threads"], 16 if vectorized else elt
        gather = (topk - 1) * t * k * elt * 0.3          # rungs that gather re-read each token row topk times
        blocks = cdiv(t * topk, threads)
        return Launch(grid=t * topk, threads=threads, regs=32 if vec == 16 else 24, bytes_per_access=vec, launches=4,
                      traffic=1 + (gather + blocks * e * 12) / base, lane_util=min(1.0, k * elt / vec / threads))
    return launch


def warp_aggregated_fused_launch(p, task):
    t, e, topk, k, elt, base = sizes(task)
    threads, tpb = p["threads"], p["tokens_per_block"]
    warps, blocks = cdiv(threads, task.gpu.warp), cdiv(t, tpb)
    table = blocks * blocks * e * 4     # every block reads the count table of all blocks (from L2) to find its bases
    return Launch(grid=blocks, threads=threads, smem_bytes=warps * e * 4 + e * 4 + tpb * topk * 4,
                  regs=32, bytes_per_access=16, traffic=1 + 0.25 * table / base,  # regs: ptxas sm_90a (doc simB s8)
                  lane_util=min(1.0, k / 8 / threads), launches=2)


# -- atomic_multi_kernel -------------------------------------------------------------------
def atomic_multi_kernel_src(p, task, add=ATOMIC_COUNT, last="E + 1"):
    return f"""#define THREADS {p['threads']}

__global__ void moe_histogram(const int* __restrict__ topk_ids, int* counts, int n) {{
    const int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a < n) {add}
}}

// One thread turns the counts (in offsets[1..E]) into offsets: serial, E steps.
__global__ void moe_scan(int* offsets, int E) {{
    for (int e = 1; e < {last}; ++e) offsets[e] += offsets[e - 1];
}}

// One thread per expert walks every assignment in order: stable, but n steps per thread.
__global__ void moe_fill(const int* __restrict__ topk_ids, const int* __restrict__ offsets, int* sorted_ids, int n, int E) {{
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    int pos = offsets[e];
    for (int a = 0; a < n; ++a)
        if (topk_ids[a] == e) sorted_ids[pos++] = a;
}}

// Row copy, one thread per element: x_sorted[p, k] = x[sorted_ids[p] / topk, k].
extern "C" __global__ void __launch_bounds__(THREADS)
moe_scatter_kernel(const scalar_t* __restrict__ x, const int* __restrict__ sorted_ids, scalar_t* __restrict__ x_sorted,
                   int n, int K, int topk) {{
    const size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;
    if (i >= (size_t)n * K) return;
    const int p = (int)(i / K), k = (int)(i % K);
    x_sorted[i] = x[(size_t)(sorted_ids[p] / topk) * K + k];
}}

{ENTRY.prototype(task)} {{
    const int n = T * topk;
    cudaMemsetAsync(expert_offsets, 0, (E + 1) * sizeof(int), stream);
    moe_histogram<<<(n + 255) / 256, 256, 0, stream>>>(topk_ids, expert_offsets, n);
    moe_scan<<<1, 1, 0, stream>>>(expert_offsets, E);
    moe_fill<<<(E + 63) / 64, 64, 0, stream>>>(topk_ids, expert_offsets, sorted_ids, n, E);
    const size_t elems = (size_t)n * K;
    moe_scatter_kernel<<<(unsigned)((elems + THREADS - 1) / THREADS), THREADS, 0, stream>>>(x, sorted_ids, x_sorted, n, K, topk);
}}
"""

# -- block_rank_scan, vectorized_uint4: stable ranks from warp peer masks -----------------
def rank_kernels(p, task, last="E", published=PUBLISH_STARTS, vec: bool = False):
    copy = ("""    const uint4* src = reinterpret_cast<const uint4*>(x + (size_t)(sorted_ids[p] / topk) * K);
    uint4* dst = reinterpret_cast<uint4*>(x_sorted + (size_t)p * K);
    for (int c = threadIdx.x; c < K / 8; c += THREADS) dst[c] = src[c];     // 16 bytes a lane (K % 8 == 0)"""
            if vec else """    const scalar_t* src = x + (size_t)(sorted_ids[p] / topk) * K;
    scalar_t* dst = x_sorted + (size_t)p * K;
    for (int k = threadIdx.x; k < K; k += THREADS) dst[k] = src[k];""")
    blocks = cdiv(task["T"] * task["topk"], p["threads"])
    return f"""#define THREADS {p['threads']}
#define WARPS (THREADS / WARP_SIZE)
{peers(task)}{RANK_ROUND}
// Kernel 1: this block's per-expert counts, shared-memory atomics.
__global__ void __launch_bounds__(THREADS) moe_count(const int* __restrict__ topk_ids, int* block_counts, int n, int E) {{
    __shared__ int hist[E_MAX];
    for (int e = threadIdx.x; e < E; e += THREADS) hist[e] = 0;
    __syncthreads();
    const int a = blockIdx.x * THREADS + threadIdx.x;
    if (a < n) atomicAdd(&hist[topk_ids[a]], 1);
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += THREADS) block_counts[blockIdx.x * E + e] = hist[e];
}}

// Kernel 2 (one block): thread e scans its column over the blocks; then the expert starts.
__global__ void moe_scan(int* block_counts, int* offsets, int blocks, int E) {{
    __shared__ int start[E_MAX + 1];
    for (int e = threadIdx.x; e < E; e += blockDim.x) {{
        int run = 0;
        for (int b = 0; b < blocks; ++b) {{ const int c = block_counts[b * E + e]; block_counts[b * E + e] = run; run += c; }}
        start[e + 1] = run;
    }}
    __syncthreads();
    if (threadIdx.x == 0) {{
        start[0] = 0;
        for (int e = 1; e <= {last}; ++e) start[e] += start[e - 1];
    }}{published}
    for (int e = threadIdx.x; e <= E; e += blockDim.x) offsets[e] = start[e];
    for (int i = threadIdx.x; i < blocks * E; i += blockDim.x) block_counts[i] += start[i % E];
}}

// Kernel 3: stable slot of every assignment -> sorted_ids.
__global__ void __launch_bounds__(THREADS)
moe_rank(const int* __restrict__ topk_ids, const int* __restrict__ block_base, int* __restrict__ sorted_ids, int n, int E) {{
    __shared__ int warp_cnt[WARPS][E_MAX];
    for (int i = threadIdx.x; i < WARPS * E_MAX; i += THREADS) (&warp_cnt[0][0])[i] = 0;
    __syncthreads();
    const int a = blockIdx.x * THREADS + threadIdx.x;
    const int e = a < n ? topk_ids[a] : -1;
    const int rank = rank_round(e, warp_cnt, block_base + blockIdx.x * E);   // bases: slots before this block
    if (e >= 0) sorted_ids[rank] = a;
}}

// Kernel 4: one block per sorted row gathers its token's hidden state.
extern "C" __global__ void __launch_bounds__(THREADS)
moe_scatter_kernel(const scalar_t* __restrict__ x, const int* __restrict__ sorted_ids, scalar_t* __restrict__ x_sorted,
                   int K, int topk) {{
    const int p = blockIdx.x;
{copy}
}}

__device__ int block_counts[{blocks} * E_MAX];   // per-block expert counts, then slot bases

{ENTRY.prototype(task)} {{
    const int n = T * topk, blocks = (n + THREADS - 1) / THREADS;
    int* counts = nullptr;
    cudaGetSymbolAddress((void**)&counts, block_counts);
    moe_count<<<blocks, THREADS, 0, stream>>>(topk_ids, counts, n, E);
    moe_scan<<<1, 256, 0, stream>>>(counts, expert_offsets, blocks, E);
    moe_rank<<<blocks, THREADS, 0, stream>>>(topk_ids, counts, sorted_ids, n, E);
    moe_scatter_kernel<<<n, THREADS, 0, stream>>>(x, sorted_ids, x_sorted, K, topk);
}}
"""

# -- warp_aggregated_fused -----------------------------------------------------------------
def warp_aggregated_fused_src(p, task, cmp="<", published=TOTALS_READ):
    tpb, threads = p["tokens_per_block"], p["threads"]
    blocks = cdiv(task["T"], tpb)
    add = "atomicAdd(&hist[e], mask_popc(peers));   // one atomic per expert per warp"
    return f"""#define THREADS {threads}
#define WARPS (THREADS / WARP_SIZE)
#define TPB {tpb}                 // tokens per block: TPB * topk assignments, ranked in rounds of THREADS
#define MAX_ITEMS (TPB * {task['topk']})
{peers(task)}{RANK_ROUND}
// Kernel 1: per-block counts; each warp's peers elect one lane that adds the whole group.
__global__ void __launch_bounds__(THREADS) moe_count(const int* __restrict__ topk_ids, int* block_counts, int n, int E) {{
    __shared__ int hist[E_MAX];
    for (int e = threadIdx.x; e < E; e += THREADS) hist[e] = 0;
    __syncthreads();
    const int lane = threadIdx.x % WARP_SIZE;
    for (int i = threadIdx.x; i < (MAX_ITEMS + THREADS - 1) / THREADS * THREADS; i += THREADS) {{
        const int a = blockIdx.x * MAX_ITEMS + i;
        const int e = i < MAX_ITEMS && a < n ? topk_ids[a] : -1;
        const lane_mask_t peers = peers_of(e);
        if (e >= 0 && mask_popc(peers & ((((lane_mask_t)1) << lane) - 1)) == 0) {add}
    }}
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += THREADS) block_counts[blockIdx.x * E + e] = hist[e];
}}

// Kernel 2: each block derives its slot bases from the count table (no scan kernel), ranks its
// assignments, then reads each of its TPB token rows once and writes it to its topk slots.
extern "C" __global__ void __launch_bounds__(THREADS)
moe_scatter_kernel(const scalar_t* __restrict__ x, const int* __restrict__ topk_ids, const int* __restrict__ block_counts,
                   scalar_t* __restrict__ x_sorted, int* __restrict__ sorted_ids, int* __restrict__ offsets,
                   int T, int E, int K, int topk, int blocks) {{
    __shared__ int warp_cnt[WARPS][E_MAX];
    __shared__ int run[E_MAX];                 // slots of each expert taken before the current round
    __shared__ int dest[MAX_ITEMS];
    const int n = T * topk;
    for (int e = threadIdx.x; e < E; e += THREADS) {{
        int before = 0, total = 0;
        for (int b = 0; b < blocks; ++b) {{
            const int c = block_counts[b * E + e];
            before += b {cmp} blockIdx.x ? c : 0;
            total += c;
        }}
        run[e] = before;
        warp_cnt[0][e] = total;
    }}
    __syncthreads();
    if (threadIdx.x == THREADS - 1) {{         // expert starts: E adds, redundantly in every block
        int start = 0;
        for (int e = 0; e < E; ++e) {{
            const int total = warp_cnt[0][e];
            run[e] += start;
            if (blockIdx.x == 0) offsets[e] = start;
            start += total;
        }}
        if (blockIdx.x == 0) offsets[E] = start;
    }}{published}
    for (int i = threadIdx.x; i < WARPS * E_MAX; i += THREADS) (&warp_cnt[0][0])[i] = 0;
    __syncthreads();
    const int first = blockIdx.x * MAX_ITEMS;
    for (int i0 = 0; i0 < MAX_ITEMS; i0 += THREADS) {{
        const int i = i0 + threadIdx.x, a = first + i;
        const int e = i < MAX_ITEMS && a < n ? topk_ids[a] : -1;
        const int rank = rank_round(e, warp_cnt, run);
        if (e >= 0) {{ sorted_ids[rank] = a; dest[i] = rank; }}
        __syncthreads();
        for (int f = threadIdx.x; f < E; f += THREADS) {{   // this round's counts advance the running slots
            int add = 0;
            for (int w = 0; w < WARPS; ++w) {{ add += warp_cnt[w][f]; warp_cnt[w][f] = 0; }}
            run[f] += add;
        }}
        __syncthreads();
    }}
    const int tokens = min(TPB, T - blockIdx.x * TPB);
    for (int t = 0; t < tokens; ++t) {{
        const uint4* src = reinterpret_cast<const uint4*>(x + (size_t)(blockIdx.x * TPB + t) * K);
        for (int c = threadIdx.x; c < K / 8; c += THREADS) {{
            const uint4 v = src[c];                          // read once, written topk times
            for (int j = 0; j < topk; ++j)
                reinterpret_cast<uint4*>(x_sorted + (size_t)dest[t * topk + j] * K)[c] = v;
        }}
    }}
}}

__device__ int block_counts[{blocks} * E_MAX];

{ENTRY.prototype(task)} {{
    const int blocks = (T + TPB - 1) / TPB;
    int* counts = nullptr;
    cudaGetSymbolAddress((void**)&counts, block_counts);
    moe_count<<<blocks, THREADS, 0, stream>>>(topk_ids, counts, T * topk, E);
    moe_scatter_kernel<<<blocks, THREADS, 0, stream>>>(x, topk_ids, counts, x_sorted, sorted_ids, expert_offsets,
                                                       T, E, K, topk, blocks);
}}
"""


class MoeScatterCuda(MoeScatterSpec):
    impl = "cuda"
    shapes = ({"T": 16, "E": 8, "topk": 2, "K": 4096}, {"T": 4096, "E": 8, "topk": 2, "K": 4096},
              {"T": 64, "E": 64, "topk": 6, "K": 2048}, {"T": 2048, "E": 64, "topk": 6, "K": 2048},
              {"T": 8192, "E": 128, "topk": 8, "K": 2048}, {"T": 512, "E": 256, "topk": 8, "K": 7168})
    variants = (
        Rung("atomic_multi_kernel", "global atomicAdd histogram, 1-thread scan, per-expert serial fill, element copy",
             (Param("threads", (128, 256), 256),), memory_eff=0.7,
             launch=atomic_multi_kernel_launch, render=atomic_multi_kernel_src,
             bugs={"racy_update": {"add": "counts[topk_ids[a] + 1] += 1;   // plain read-modify-write"},
                   "off_by_one": {"last": "E"}}),
        Rung("block_rank_scan", "smem histograms per block, scan kernel, stable ranks from warp peer masks, row gather",
             (THREADS,), memory_eff=0.8, launch=rank_launch(False), render=rank_kernels,
             bugs={"off_by_one": {"last": "E - 1"}}),
        Rung("vectorized_uint4", "as block_rank_scan, rows gathered as 16-byte uint4 (8 elements a lane)",
             (THREADS,), memory_eff=0.88, launch=rank_launch(True), render=partial(rank_kernels, vec=True),
             bugs={"missing_barrier": {"published": ""}, "off_by_one": {"last": "E - 1"}}, bug_tasks=(("missing_barrier", starts_read_past_warp0),)),
        Rung("warp_aggregated_fused", "one smem atomic per expert per warp (peer leader); scan folded into the "
             "scatter, each token row read once and written to its topk slots",
             (Param("threads", (64, 128, 256, 512), 256), Param("tokens_per_block", (4, 8, 16, 32, 64), 16)), memory_eff=0.9,
             smem="static", launch=warp_aggregated_fused_launch, render=warp_aggregated_fused_src,
             bugs={"missing_barrier": {"published": ""}, "off_by_one": {"cmp": "<="}}),
        RECOUNT,
    )

    def assemble(self, body, variant, params, task):
        head = f"#define E_MAX {task['E']}   // experts: per-block tables live in shared memory\n"
        return f"{prelude(task)}\n{head}{task.dialect.aliases('GetSymbolAddress')}{body}"
