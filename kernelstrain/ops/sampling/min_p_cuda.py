"""Min-p sampling in CUDA: keep the tokens with p >= min_p * p_max (x >= M + log(min_p)), and
draw one by inverse CDF over the kept mass in vocabulary order.

Ladder: three kernels (row stats; probabilities filtered into a scratch row; a block-per-row
cumulative pick) -> one block per row, three fused passes (max, kept mass, pick) with a
shared-memory Hillis-Steele scan -> warp-shuffle scans and float4 loads -> chunk masses: the
kept-mass pass records one mass per 4 x THREADS chunk, a scan over chunks finds the crossing
chunk and only that chunk is re-read -> split rows: SPLIT blocks per row (max and mass
partials), a combine kernel picks the slice and walks it (fills the GPU at small B).
"""

from ..base import Launch, Param, Rung, cdiv
from ..dialect import prelude
from ._sampling import BLOCK_REDUCE, KEY_HELPERS, THREADS, row_l2_miss
from ._select import block_incl_scan, cdf_pick_row
from ._min_p_split import PICK4, THRESH, W4, select_part, split_last_combine_src, split_launch, split_row_combine_src
from ._min_p_chunks import chunk_vecs_kernel
from .min_p_spec import ENTRY, NO_MIN_P_ROWS, MinPSpec

NO_MIN_P = {"thresh": "M"}                     # missing_scale: min_p dropped, only the max survives
ARGS = ("const float* __restrict__ logits, const float* __restrict__ min_p, const float* __restrict__ uniform,\n"
        "             int* __restrict__ tokens, int B, int V")
MAX4 = """const float4* row4 = reinterpret_cast<const float4*>(row);
    for (int c = threadIdx.x; c < V / 4; c += THREADS) { const float4 v = row4[c]; mx = fmaxf(mx, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w))); }"""


def host(task, grid: str) -> str:
    return ENTRY.host(task, "min_p_kernel", grid, "THREADS")


# -- multi_kernel ---------------------------------------------------------------------------
def multi_kernel_launch(p, task):
    th = p["threads"]
    # stats read + filtered-row write + pick read of the scratch row: ~4 row passes over DRAM
    return Launch(grid=task["B"], threads=th, smem_bytes=4 * th + 4 * cdiv(th, task.gpu.warp) + 4, regs=32, bytes_per_access=4,
                  traffic=2 + 2.2 * max(row_l2_miss(task, th), 0.5), compute_scale=0.3, launches=3)


def multi_kernel_src(p, task, thresh="min_p[row_id] / Z", carry0="0.f"):
    return f"""{block_incl_scan(task, False)}
// kernel 1: softmax statistics (max M, denominator Z) of each row
extern "C" __global__ void __launch_bounds__(THREADS)
min_p_stats_kernel(const float* __restrict__ logits, float* __restrict__ stats, int V) {{
    __shared__ float slots[WARPS];
    float M, Z;
    row_stats(logits + (size_t)blockIdx.x * V, V, slots, &M, &Z);
    if (threadIdx.x == 0) {{ stats[2 * blockIdx.x] = M; stats[2 * blockIdx.x + 1] = Z; }}
}}

// kernel 2: one thread per logit: p = exp(x - M) / Z, zeroed below min_p * p_max (= min_p / Z)
extern "C" __global__ void __launch_bounds__(THREADS)
min_p_filter_kernel(const float* __restrict__ logits, const float* __restrict__ min_p, const float* __restrict__ stats,
                    float* __restrict__ probs, int B, int V) {{
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (i >= (int64_t)B * V) return;
    const int row_id = (int)(i / V);
    const float M = stats[2 * row_id], Z = stats[2 * row_id + 1];
    const float p = expf(logits[i] - M) / Z;
    probs[i] = p >= {thresh} ? p : 0.f;
}}

// kernel 3: block per row: kept mass, then the inverse-CDF walk over the filtered row
extern "C" __global__ void __launch_bounds__(THREADS)
min_p_kernel(const float* __restrict__ probs, const float* __restrict__ uniform, int* __restrict__ tokens, int V) {{
    __shared__ float fbuf[THREADS];
    __shared__ float slots[WARPS];
    __shared__ int pick;
    const float* row = probs + (size_t)blockIdx.x * V;
    if (threadIdx.x == 0) pick = -1;
    float kept = 0.f;
    for (int i = threadIdx.x; i < V; i += THREADS) kept += row[i];
    const float target = uniform[blockIdx.x] * block_sum(kept, slots);
    float carry = {carry0};
    for (int start = 0; start < V; start += THREADS) {{
        const int i = start + threadIdx.x;
        const float w = i < V ? row[i] : 0.f;
        float total;
        const float incl = block_incl_scan(w, fbuf, &total);
        if (w > 0.f && carry + incl - w < target) atomicMax(&pick, i);
        carry += total;
        if (carry >= target) break;
    }}
    __syncthreads();
    if (threadIdx.x == 0) tokens[blockIdx.x] = pick;
}}

{ENTRY.host_head(task)} {{
    float* scratch = nullptr;                                 // B x (M, Z), then the filtered rows
    cudaMallocAsync((void**)&scratch, ((size_t)B * V + 2 * B) * sizeof(float), stream);
    float* stats = scratch;
    float* probs = scratch + 2 * B;
    min_p_stats_kernel<<<B, THREADS, 0, stream>>>(logits, stats, V);
    min_p_filter_kernel<<<(int)(((int64_t)B * V + THREADS - 1) / THREADS), THREADS, 0, stream>>>(logits, min_p, stats, probs, B, V);
    min_p_kernel<<<B, THREADS, 0, stream>>>(probs, uniform, tokens, V);
    cudaFreeAsync(scratch, stream);
}}
"""


# -- fused_block_row, warp_scan_float4 --------------------------------------------------------
def fused_launch(vec: bool):
    def launch(p, task):
        th = p["threads"]
        slots = cdiv(th, task.gpu.warp) if vec else th
        return Launch(grid=task["B"], threads=th, smem_bytes=4 * slots + 4 * cdiv(th, task.gpu.warp) + 4, regs=40 if vec else 32,
                      bytes_per_access=16 if vec else 4, traffic=1 + 1.6 * row_l2_miss(task, th),
                      compute_scale=0.8 if vec else 0.4)
    return launch


def fused_src(vec: bool):
    def render(p, task, thresh=THRESH, carry0="0.f"):
        if vec:
            maxl, mass = MAX4, f"""for (int c = threadIdx.x; c < V / 4; c += THREADS) {{
        const float4 v = row4[c];
        const float xs[4] = {{v.x, v.y, v.z, v.w}};
#pragma unroll
        for (int j = 0; j < 4; ++j) kept += {W4};
    }}"""
        else:
            maxl = "for (int i = threadIdx.x; i < V; i += THREADS) mx = fmaxf(mx, row[i]);"
            mass = "for (int i = threadIdx.x; i < V; i += THREADS) kept += key_of(row[i]) >= thresh ? expf(row[i] - M) : 0.f;"
        return f"""{block_incl_scan(task, vec)}{cdf_pick_row(carry0, vec)}
// One block per row, three passes over it (the later two mostly from L2): max, kept mass, pick.
extern "C" __global__ void __launch_bounds__(THREADS) min_p_kernel({ARGS}) {{
    __shared__ float fbuf[{'WARPS' if vec else 'THREADS'}];
    __shared__ float slots[WARPS];
    __shared__ int pick;
    const int row_id = blockIdx.x;
    const float* row = logits + (size_t)row_id * V;
    if (threadIdx.x == 0) pick = -1;
    float mx = -INFINITY;
    {maxl}
    const float M = block_max(mx, slots);
    const uint32_t thresh = key_of({thresh});
    float kept = 0.f;
    {mass}
    const float target = uniform[row_id] * block_sum(kept, slots);
    cdf_pick_row(row, V, thresh, M, target, fbuf, &pick);
    if (threadIdx.x == 0) tokens[row_id] = pick;
}}
{host(task, "B")}"""
    return render


# -- chunk_mass_pick ---------------------------------------------------------------------------
def chunk_launch(p, task):
    # VECS float4s a thread a chunk: VECS loads in flight, the pick's 4 x VECS weights in registers, the
    # block sum (a fifth of a one-float4 chunk's work) once a chunk, a crossing chunk VECS times as long re-read
    th, vecs = p["threads"], p["vecs"]
    return Launch(grid=task["B"], threads=th, smem_bytes=4096 + 8 * cdiv(th, task.gpu.warp) + 16, regs=40 + 6 * (vecs - 1),
                  bytes_per_access=16 * vecs, traffic=1 + 0.9 * row_l2_miss(task, th) + 4 * th * vecs / task["V"],
                  compute_scale=1 - 0.2 / vecs)


def chunk_mass_pick_src(p, task, thresh=THRESH, prefix="acc"):
    if p["vecs"] > 1:
        return f"{block_incl_scan(task, True)}{select_part(prefix)}{chunk_vecs_kernel(p['vecs'], ARGS, MAX4, thresh, W4)}\n{host(task, 'B')}"
    return f"""{block_incl_scan(task, True)}{select_part(prefix)}
// Block per row. Pass 1: max. Pass 2: kept mass of every 4 x THREADS chunk into shared memory.
// Thread 0 scans the chunk masses to the chunk where the CDF crosses uniform x mass; pass 3
// re-reads that one chunk only.
extern "C" __global__ void __launch_bounds__(THREADS) min_p_kernel({ARGS}) {{
    __shared__ float cmass[1024];                            // V / (4 * THREADS) chunks
    __shared__ float fbuf[WARPS];
    __shared__ float slots[WARPS];
    __shared__ int pick, s_chunk;
    __shared__ float s_carry, s_target;
    const int row_id = blockIdx.x;
    const float* row = logits + (size_t)row_id * V;
    if (threadIdx.x == 0) pick = -1;
    float mx = -INFINITY;
    {MAX4}
    const float M = block_max(mx, slots);
    const uint32_t thresh = key_of({thresh});
    const int nchunks = (V / 4 + THREADS - 1) / THREADS;
    for (int ch = 0; ch < nchunks; ++ch) {{
        const int c = ch * THREADS + threadIdx.x;
        float local = 0.f;
        if (c < V / 4) {{
            const float4 v = row4[c];
            const float xs[4] = {{v.x, v.y, v.z, v.w}};
#pragma unroll
            for (int j = 0; j < 4; ++j) local += {W4};
        }}
        const float s = block_sum(local, slots);
        if (threadIdx.x == 0) cmass[ch] = s;
    }}
    if (threadIdx.x == 0) select_part(cmass, nchunks, uniform[row_id], &s_chunk, &s_carry, &s_target);
    __syncthreads();
    const int c = s_chunk * THREADS + threadIdx.x, hi = V / 4;
    const float target = s_target, carry = s_carry;
    {{
        const float4 v = c < hi ? row4[c] : make_float4(0.f, 0.f, 0.f, 0.f);
        const float xs[4] = {{v.x, v.y, v.z, v.w}};
{PICK4}
    }}
    __syncthreads();
    if (threadIdx.x == 0) tokens[row_id] = pick;
}}
{host(task, "B")}"""


# last_combine 1: the combine folded into the mass kernel's last block of a row (an atomic arrival count, the
# threadFenceReduction pattern): one launch fewer, the same kernels and bytes. On the menus since the H100 ran it (plan
# m8, roomM j2, 2026-12-07: correct at split 2 / 8 / 32 and B=1 / 4 / 64, both bugs failing), ahead of last_combine 0 as
# modelled: B=1 V=128256 split 32 12.3 against 15.0 us, B=4 V=32000 10.6 / 12.5, B=64 34.0 / 35.0
LAST_COMBINE = (Param("last_combine", (0, 1), 0),)


def split_src(p, task, **slots):
    return (split_last_combine_src if p.get("last_combine") else split_row_combine_src)(p, task, **slots)


class MinPCuda(MinPSpec):
    impl = "cuda"
    variants = (
        Rung("multi_kernel", "three kernels: row stats, filtered probabilities in a scratch row, block-per-row pick",
             (THREADS,), compute_eff=0.3, memory_eff=0.6, smem="static", launch=multi_kernel_launch,
             render=multi_kernel_src, bugs={"missing_scale": {"thresh": "1.f / Z"}, "wrong_init": {"carry0": "1.f"}},
             bug_tasks=NO_MIN_P_ROWS),
        Rung("fused_block_row", "one block per row, fused passes (max, kept mass, pick), shared-memory scan",
             (THREADS,), compute_eff=0.35, memory_eff=0.72, smem="static", launch=fused_launch(False),
             render=fused_src(False), bugs={"missing_scale": NO_MIN_P, "wrong_init": {"carry0": "1.f"}},
             bug_tasks=NO_MIN_P_ROWS),
        Rung("warp_scan_float4", "warp-shuffle reductions and scans, float4 loads in every pass",
             (THREADS,), compute_eff=0.5, memory_eff=0.88, smem="static", launch=fused_launch(True),
             render=fused_src(True), bugs={"missing_scale": NO_MIN_P, "wrong_init": {"carry0": "1.f"}},
             bug_tasks=NO_MIN_P_ROWS),
        Rung("chunk_mass_pick", "per-chunk kept masses in smem, chunk-level CDF search, only the crossing chunk re-read",
             (Param("threads", (128, 256, 512, 1024), 512), Param("vecs", (1, 2, 4), 1)), compute_eff=0.5,
             memory_eff=0.9, smem="static", launch=chunk_launch, render=chunk_mass_pick_src,
             bugs={"missing_scale": NO_MIN_P, "bad_combine_index": {"prefix": "acc + mass[i]"}},
             bug_tasks=NO_MIN_P_ROWS),
        Rung("split_row_combine", "SPLIT blocks per row (max and mass partials) and a combine kernel walking one slice",
             (Param("threads", (128, 256, 512), 256), Param("split", (2, 4, 8, 16, 32), 8)) + LAST_COMBINE,
             compute_eff=0.5, memory_eff=0.9, smem="static", launch=split_launch, render=split_src,
             bugs={"bad_combine_index": {"prefix": "acc + mass[i]"}, "missing_scale": NO_MIN_P},
             bug_tasks=NO_MIN_P_ROWS),
    )

    def assemble(self, body, variant, params, task):
        from ._select import ROW_STATS
        return f"{prelude(task)}\n#define THREADS {params['threads']}\n{KEY_HELPERS}{BLOCK_REDUCE}{ROW_STATS}{body}"
