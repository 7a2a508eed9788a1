"""MoE dispatch in CUDA: count tokens per expert, build the stable expert-sorted order, permute rows.

Outputs: expert_offsets [E + 1], sorted_ids [T * topk] (assignment a = t * topk + j at its expert-sorted
position, ties kept in assignment order) and x_sorted [T * topk, K] with x_sorted[p] = x[sorted_ids[p] // topk].
Ladder: global-atomic histogram + serial scan + one thread per expert filling its slots + an
element-wise copy (4 kernels) -> per-block shared-memory histograms, a scan kernel, and a stable
in-block rank from warp peer masks that also copies each row (3 kernels) -> 16-byte uint4 row copies
-> warp-aggregated counting and the scan folded into the scatter kernel (2 kernels).
"""
from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude,
                    kernelbench_program)

THREADS = Param("threads", (128, 256, 512), 256)
SIG = ("void moe_scatter(const scalar_t* x, const int* topk_ids, scalar_t* x_sorted, int* sorted_ids, "
       "int* expert_offsets, int T, int E, int K, int topk, cudaStream_t stream)")


class MoeScatterCuda(OpModule):
    op, impl, family = "moe_scatter", "cuda", "moe"
    title = "MoE token dispatch (expert-sorted permutation)"
    desc = ("From topk_ids [T, topk] int32: expert_offsets [E + 1], sorted_ids (assignments a = t * topk + j "
            "grouped by expert, stable) and x_sorted[p, :] = x[sorted_ids[p] // topk, :].")
    dims = {"T": "tokens", "E": "experts", "topk": "experts per token", "K": "hidden size"}
    shapes = ({"T": 16, "E": 8, "topk": 2, "K": 4096}, {"T": 4096, "E": 8, "topk": 2, "K": 4096},
              {"T": 64, "E": 64, "topk": 6, "K": 2048}, {"T": 2048, "E": 64, "topk": 6, "K": 2048},
              {"T": 8192, "E": 128, "topk": 8, "K": 2048}, {"T": 512, "E": 256, "topk": 8, "K": 7168})
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("atomic_multi_kernel", "global atomicAdd histogram, 1-thread scan, per-expert serial fill, element copy",
                (Param("threads", (128, 256), 256),), memory_eff=0.7, bugs=("racy_update", "off_by_one")),
        Variant("block_rank_scan", "smem histograms per block, scan kernel, stable ranks from warp peer masks, row gather",
                (THREADS,), memory_eff=0.8, bugs=("missing_barrier", "off_by_one")),
        Variant("vectorized_uint4", "as block_rank_scan, rows gathered as 16-byte uint4 (8 elements a lane)",
                (THREADS,), memory_eff=0.88, bugs=("missing_barrier", "off_by_one")),
        Variant("warp_aggregated_fused", "one smem atomic per expert per warp (peer leader); scan folded into the "
                "scatter, each token row read once and written to its topk slots",
                (Param("threads", (128, 256), 256), Param("tokens_per_block", (4, 8, 16, 32, 64), 16)), memory_eff=0.9,
                smem="static", bugs=("missing_barrier", "off_by_one")),
    )

    def cost(self, task: Task) -> Cost:
        t, e, topk, k, elt = task["T"], task["E"], task["topk"], task["K"], DTYPE_BYTES[task.dtype]
        return Cost(flops=0, bytes=t * k * elt + t * topk * k * elt + t * topk * 8 + (e + 1) * 4)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, e, topk, k, elt = task["T"], task["E"], task["topk"], task["K"], DTYPE_BYTES[task.dtype]
        gpu, tag, base = task.gpu, variant.tag, self.cost(task).bytes
        n = t * topk
        threads = params["threads"]
        if tag == "atomic_multi_kernel":
            # each of the E fill threads walks all n ids (~8 ns a step, L1/L2 hits): serial time in byte terms
            serial_bytes = n * 8e-9 * gpu.bw_tbs * 1e12 * 0.7
            return Launch(grid=cdiv(n * k, threads), threads=threads, regs=16, bytes_per_access=elt,
                          traffic=1 + serial_bytes / base, launches=5)
        warps = cdiv(threads, gpu.warp)
        gather = (topk - 1) * t * k * elt * 0.3          # rungs that gather re-read each token row topk times
        if tag == "warp_aggregated_fused":
            tpb = params["tokens_per_block"]
            blocks = cdiv(t, tpb)
            # every block reads the count table of all blocks (from L2) to find its bases
            table = blocks * blocks * e * 4
            return Launch(grid=blocks, threads=threads, smem_bytes=warps * e * 4 + e * 4 + tpb * topk * 4,
                          regs=40, bytes_per_access=16, traffic=1 + 0.25 * table / base,
                          lane_util=min(1.0, k / 8 / threads), launches=2)
        vec = 16 if tag == "vectorized_uint4" else elt
        blocks = cdiv(n, threads)
        # main kernel: one block per sorted row copies K elements
        return Launch(grid=n, threads=threads, regs=32 if vec == 16 else 24, bytes_per_access=vec,
                      traffic=1 + (gather + blocks * e * 12) / base, lane_util=min(1.0, k * elt / vec / threads),
                      launches=4)

    def signature(self, task: Task) -> str:
        return SIG

    def reference(self, task: Task) -> str:
        body = ("flat = topk_ids.flatten().long()\n"
                "        sorted_ids = torch.argsort(flat, stable=True)\n"
                "        counts = torch.bincount(flat, minlength=E)\n"
                "        offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0)])\n"
                "        return x[sorted_ids // topk], sorted_ids.int(), offsets.int()")
        inputs = ("[torch.randn(T, K, dtype=DTYPE, device='cuda'),\n"
                  "            torch.rand(T, E, device='cuda').argsort(dim=1)[:, :topk].int().contiguous()]")
        return kernelbench_program(task, self.title, args="x, topk_ids", body=body, inputs=inputs)

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        head = f"#define E_MAX {task['E']}   // experts: per-block tables live in shared memory\n"
        if task.is_hip:
            head += "#define cudaGetSymbolAddress hipGetSymbolAddress\n"
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n{head}{body}"

    def _atomic_multi_kernel(self, p, task, bug):
        add = "counts[topk_ids[a] + 1] += 1;   // plain read-modify-write" if bug == "racy_update" \
            else "atomicAdd(&counts[topk_ids[a] + 1], 1);   // every assignment hits one of E hot words"
        last = "E" if bug == "off_by_one" else "E + 1"
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

{SIG} {{
    const int n = T * topk;
    cudaMemsetAsync(expert_offsets, 0, (E + 1) * sizeof(int), stream);
    moe_histogram<<<(n + 255) / 256, 256, 0, stream>>>(topk_ids, expert_offsets, n);
    moe_scan<<<1, 1, 0, stream>>>(expert_offsets, E);
    moe_fill<<<(E + 63) / 64, 64, 0, stream>>>(topk_ids, expert_offsets, sorted_ids, n, E);
    const size_t elems = (size_t)n * K;
    moe_scatter_kernel<<<(unsigned)((elems + THREADS - 1) / THREADS), THREADS, 0, stream>>>(x, sorted_ids, x_sorted, n, K, topk);
}}
"""

    def _peers(self, task) -> str:
        if task.is_hip:
            return """typedef unsigned long long lane_mask_t;
// Lanes of this wavefront holding the same key. No match_any on AMD: peel one key per round.
__device__ __forceinline__ lane_mask_t peers_of(int key) {
    lane_mask_t todo = __ballot(1), peers = 0;
    while (todo) {
        const int leader_key = __shfl(key, __ffsll((long long)todo) - 1);
        const lane_mask_t same = __ballot(key == leader_key);
        if (key == leader_key) peers = same;
        todo &= ~same;
    }
    return peers;
}
__device__ __forceinline__ int mask_popc(lane_mask_t m) { return __popcll(m); }
"""
        return """typedef unsigned int lane_mask_t;
// Lanes of this warp holding the same key (sm_70+: one instruction).
__device__ __forceinline__ lane_mask_t peers_of(int key) { return __match_any_sync(0xffffffffu, key); }
__device__ __forceinline__ int mask_popc(lane_mask_t m) { return __popc(m); }
"""

    @staticmethod
    def _rank_round() -> str:
        """Stable rank of one round of THREADS consecutive assignments; adds run[e] from earlier rounds."""
        return """
// Rank of assignment a among the block's earlier assignments of the same expert:
// earlier rounds (run[e]) + earlier warps of this round (warp_cnt) + earlier lanes (peer mask).
__device__ __forceinline__ int rank_round(int e, int (*warp_cnt)[E_MAX], const int* run) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const lane_mask_t peers = peers_of(e);                 // every lane takes part (e = -1 past the end)
    const int in_warp = mask_popc(peers & ((((lane_mask_t)1) << lane) - 1));
    if (e >= 0 && in_warp == 0) warp_cnt[warp][e] = mask_popc(peers);   // lowest peer speaks for the warp
    __syncthreads();
    int rank = -1;
    if (e >= 0) {
        rank = run[e] + in_warp;
        for (int w = 0; w < warp; ++w) rank += warp_cnt[w][e];
    }
    return rank;
}
"""

    def _rank_kernels(self, p, task, bug, vec: bool):
        last = "E - 1" if bug == "off_by_one" else "E"
        # the bug: the other threads read start[] while thread 0 is still scanning it
        published = "" if bug == "missing_barrier" else "\n    __syncthreads();                         // publish the scanned starts"
        copy = ("""    const uint4* src = reinterpret_cast<const uint4*>(x + (size_t)(sorted_ids[p] / topk) * K);
    uint4* dst = reinterpret_cast<uint4*>(x_sorted + (size_t)p * K);
    for (int c = threadIdx.x; c < K / 8; c += THREADS) dst[c] = src[c];     // 16 bytes a lane (K % 8 == 0)"""
                if vec else """    const scalar_t* src = x + (size_t)(sorted_ids[p] / topk) * K;
    scalar_t* dst = x_sorted + (size_t)p * K;
    for (int k = threadIdx.x; k < K; k += THREADS) dst[k] = src[k];""")
        blocks = cdiv(task["T"] * task["topk"], p["threads"])
        return f"""#define THREADS {p['threads']}
#define WARPS (THREADS / WARP_SIZE)
{self._peers(task)}{self._rank_round()}
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

{SIG} {{
    const int n = T * topk, blocks = (n + THREADS - 1) / THREADS;
    int* counts = nullptr;
    cudaGetSymbolAddress((void**)&counts, block_counts);
    moe_count<<<blocks, THREADS, 0, stream>>>(topk_ids, counts, n, E);
    moe_scan<<<1, 256, 0, stream>>>(counts, expert_offsets, blocks, E);
    moe_rank<<<blocks, THREADS, 0, stream>>>(topk_ids, counts, sorted_ids, n, E);
    moe_scatter_kernel<<<n, THREADS, 0, stream>>>(x, sorted_ids, x_sorted, K, topk);
}}
"""

    def _block_rank_scan(self, p, task, bug):
        return self._rank_kernels(p, task, bug, vec=False)

    def _vectorized_uint4(self, p, task, bug):
        return self._rank_kernels(p, task, bug, vec=True)

    def _warp_aggregated_fused(self, p, task, bug):
        tpb, threads = p["tokens_per_block"], p["threads"]
        blocks = cdiv(task["T"], tpb)
        add = "atomicAdd(&hist[e], mask_popc(peers));   // one atomic per expert per warp"
        cmp = "<=" if bug == "off_by_one" else "<"
        # the bug: warp_cnt (thread 0 reads the totals from it) is cleared while thread 0 still reads it
        published = "" if bug == "missing_barrier" else "\n    __syncthreads();                           // thread 0 is done with the totals"
        return f"""#define THREADS {threads}
#define WARPS (THREADS / WARP_SIZE)
#define TPB {tpb}                 // tokens per block: TPB * topk assignments, ranked in rounds of THREADS
#define MAX_ITEMS (TPB * {task['topk']})
{self._peers(task)}{self._rank_round()}
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
    if (threadIdx.x == 0) {{                   // expert starts: E adds, redundantly in every block
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

{SIG} {{
    const int blocks = (T + TPB - 1) / TPB;
    int* counts = nullptr;
    cudaGetSymbolAddress((void**)&counts, block_counts);
    moe_count<<<blocks, THREADS, 0, stream>>>(topk_ids, counts, T * topk, E);
    moe_scatter_kernel<<<blocks, THREADS, 0, stream>>>(x, topk_ids, counts, x_sorted, sorted_ids, expert_offsets,
                                                       T, E, K, topk, blocks);
}}
"""
