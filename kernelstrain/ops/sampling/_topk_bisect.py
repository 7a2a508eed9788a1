"""topk_cuda's pivot_count rung (not an op module itself): the K-th largest logit found without a histogram
of the row, the count-only form of top_p_cuda's pivot_bisect.

Why: every one-block-a-row rung of topk bumps one shared-memory count atomic a logit into the ~30 11-bit key
bins randn x 2 logits fill, so the bumps of a bin are applied nearly one at a time (the H100 ran the ladder's
best 3-5x the DRAM floor at B >= 128). Here no pass over the row touches shared memory but to store a
candidate:
- pass 0 (DRAM, 16-byte loads): the row max M, and a lower bound of the K-th largest logit: the least of
  GROUPS (64 >= K) lane-group maxima (each group's maximum is a different logit of the row, so at least 64
  logits are >= the least of them); on the module's inputs it leaves a few hundred logits at or above it;
- pass 1 (L2): the logits >= the bound compacted to shared memory (warp-aggregated slots: one ballot, one
  atomic a warp that holds any), all of them counted;
- only where more than CAP are >= the bound (clustered rows): pivot_bisect's search loop with the mass terms
  dropped, a count-only P-ary search on the value in [bound, M] (PIVOTS counters a thread, warp shuffles, one
  shared row of partials) until at most CAP logits are >= the bracket's low end, and the compaction again;
  after SEARCH_PASSES passes the exact select reads the row;
- the K-th largest key among the candidates by three radix digits over shared memory, the kept ones (K plus
  ties) gathered and histogram_refine's pick_by_rank samples among them.
The technique is the pivot / bucket select of FlashInfer's sampling kernels and RAFT / AIR top-k, with a
bound from pass 0 that makes the search a fallback (code written here for this op's contract).
"""
from ..base import Launch, Param, Rung, cdiv
from ._sampling import CAP, row_l2_miss
from ._select import COUNT_SELECT, DIGITS, RANK_PICK, block_incl_scan
from ._top_p_bisect import row_pass

PIVOTS = 8                 # values splitting the bracket a search pass (the fallback only: no knob)
SEARCH_PASSES = 6          # the most search passes; each leaves at most a ninth of the bracket's logits
GROUPS = 64                # lane groups whose maxima bound the K-th largest from below (K <= 64)
KCAP = 128                 # kept slots of the rank pick: K <= 64 plus ties
THREADS = Param("threads", (256, 512, 1024), 512)   # 64 groups of 4 / 8 / 16 lanes

# instructions a logit costs each pass: estimates from the loops' source (the device job times them)
PASS0_INSTR = 3            # fmax, its share of the 16-byte load, the loop
COMPACT_INSTR = 5          # compare, ballot, its share of the load and the loop (slots only where a warp holds one)
# the exact select over the few hundred candidates: 3 radix digits (clear, count, block scan: ~6 barrier phases each),
# the gather and the rank pick (~8 phases): about 26 dependent block-wide phases of ~50 ns (an estimate: the device
# job times the rung at B=1, where it is most of the kernel)
SELECT_S = 26 * 50e-9
# search passes on the module's inputs: none (scripts/roomC_topk_emulate.py, 64 rows a shape: 280-320 logits are >= the
# bound on average, at most 730, at every shape and thread count; CAP 1024 holds them all, the search never runs)
FALLBACK_PASSES = 0


def registers(threads: int, cap: int) -> int:
    """ptxas sm_90a (nvcc 13.0, scripts/roomC_topk_build.py): 40 registers at 256 / 512 threads (48 at 256 x CAP
    4096), 42 at 1024; 0 stack, 0 spill (the search's 8 counters and pivots live in registers)."""
    return 48 if (threads, cap) == (256, 4096) else 42 if threads == 1024 else 40


def count_launch(p, task):
    """One block a row. Pass 0 is the DRAM read (the roofline's bytes, re-reads that miss L2 as traffic); pass 1
    streams the row again from L2 at the SM's pull (SM_BW_SHARE_CAP x its DRAM share while few SMs run rows, its plain
    share when every SM does: L2 priced as conservatively as DRAM) or at the SM's fp32 lane issue, whichever binds;
    rows of one SM one after another (`issue_s`), each with the exact select's fixed phases."""
    threads, cap, b, v, gpu = p["threads"], p["cap"], task["B"], task["V"], task.gpu
    warps = cdiv(threads, gpu.warp)
    pass_s = row_pass(task, b, v)
    per_row = pass_s(PASS0_INSTR) + pass_s(COMPACT_INSTR) + SELECT_S
    smem = 2048 * 4 + 8 * cap + 8 * KCAP + 4 * warps * (2 + PIVOTS) + 12 * PIVOTS + 48
    return Launch(grid=b, threads=threads, smem_bytes=smem, regs=registers(threads, cap), bytes_per_access=16,
                  traffic=1 + (1 + FALLBACK_PASSES) * row_l2_miss(task, threads), issue_s=cdiv(b, gpu.sms) * per_row)


ATOMIC_STORE = "const unsigned s = atomicAdd(&count, 1u);\n            if (s < KCAP) { kkey[s] = k; kidx[s] = j; }"


def count_kernel(p, task, u: str = "uniform[blockIdx.x]", keep: str = "k >= thresh") -> str:
    """topk_kernel of the rung; `u` the pick's uniform, `keep` the gather's test of a key against the K-th's."""
    d = task.dialect
    ballot, popc, lt = d.ballot.format(p="in"), d.popc, d.lanes_below.format(lane="lane")
    shfl0 = d.shfl.format(v="base", o=0)
    gshfl = d.shfl_xor.format(v="g", o="o")
    cshfl = d.shfl_xor.format(v="ct[j]", o="o")
    return f"""#define CAP {p['cap']}                 // candidate slots in shared memory
#define PIVOTS {PIVOTS}               // values splitting the bracket a search pass (only when the bound leaves > CAP)
#define SEARCH_PASSES {SEARCH_PASSES}
#define GROUPS {GROUPS}               // lane groups whose maxima bound the K-th largest from below (K <= GROUPS)
#define KCAP {KCAP}                // kept slots: K <= 64 plus ties
{block_incl_scan(task, True)}{COUNT_SELECT}{RANK_PICK}
// the logits >= lo to ckey / cidx while they fit (warp-aggregated slots), every one counted in *n_c
__device__ __forceinline__ void compact_from(const float4* row4, int V4, float lo, uint32_t* ckey, int* cidx,
                                             unsigned* n_c) {{
    const int lane = threadIdx.x % WARP_SIZE;
    for (int start = 0; start < V4; start += THREADS) {{      // every lane to the ballots
        const int c = start + threadIdx.x;
        const float4 v = c < V4 ? row4[c] : make_float4(0.f, 0.f, 0.f, 0.f);
        const float xs[4] = {{v.x, v.y, v.z, v.w}};
#pragma unroll
        for (int e = 0; e < 4; ++e) {{
            const bool in = c < V4 && xs[e] >= lo;
            const auto bits = {ballot};
            if (bits) {{                                      // warp-uniform: most warps hold none
                unsigned base = 0u;
                if (lane == 0) base = atomicAdd(n_c, (unsigned){popc}(bits));
                base = {shfl0};
                const unsigned s = base + {popc}(bits & {lt});
                if (in && s < CAP) {{ ckey[s] = key_of(xs[e]); cidx[s] = 4 * c + e; }}
            }}
        }}
    }}
}}

struct Bracket {{ float lo, hi; unsigned above, inside; }};   // K-th largest in [lo, hi); logits >= hi; in it

extern "C" __global__ void __launch_bounds__(THREADS)
topk_kernel(const float* __restrict__ logits, const float* __restrict__ uniform, int* __restrict__ tokens,
            int V, int K) {{
    __shared__ unsigned hist[2048];
    __shared__ uint32_t ckey[CAP];
    __shared__ int cidx[CAP];
    __shared__ uint32_t kkey[KCAP];
    __shared__ int kidx[KCAP];
    __shared__ unsigned ubuf[WARPS];
    __shared__ float slots[WARPS];
    __shared__ unsigned part[WARPS][PIVOTS];                  // per warp: count at or above each pivot
    __shared__ unsigned tot[PIVOTS];
    __shared__ float piv[PIVOTS];
    __shared__ Bracket br;
    __shared__ Sel sel;
    __shared__ unsigned n_c, count;
    __shared__ int pick;
    const float* row = logits + (size_t)blockIdx.x * V;
    const float4* row4 = reinterpret_cast<const float4*>(row);
    const int V4 = V / 4, lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;

    // pass 0 (DRAM): the row max, and the least of GROUPS lane-group maxima (each a different logit: at least
    // GROUPS >= K logits are >= it, so the K-th largest is too)
    float m = -INFINITY;
    for (int c = threadIdx.x; c < V4; c += THREADS) {{
        const float4 v = row4[c];
        m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }}
    float g = m;
#pragma unroll
    for (int o = 1; o < THREADS / GROUPS; o <<= 1) g = fmaxf(g, {gshfl});
    const float M = block_max(m, slots);
    const float bound = -block_max(-g, slots);
    if (threadIdx.x == 0) {{ br.lo = bound; br.hi = INFINITY; br.above = 0u; n_c = 0u; count = 0u; pick = -1; }}
    __syncthreads();

    // pass 1 (L2): the logits >= the bound to shared memory
    compact_from(row4, V4, bound, ckey, cidx, &n_c);
    __syncthreads();
    if (n_c > CAP) {{                                         // block-uniform: a clustered row
        if (threadIdx.x == 0) br.inside = n_c;
        __syncthreads();
        // count-only search (L2): split [lo, hi) at PIVOTS values, keep the piece where the count reaches K
        for (int pass = 0; pass < SEARCH_PASSES && br.above + br.inside > CAP; ++pass) {{
            const float lo = br.lo, hi = br.hi;
            if (threadIdx.x < PIVOTS)                         // no logit lies above M
                piv[threadIdx.x] = lo + (fminf(hi, M) - lo) * (float)(threadIdx.x + 1) / (float)(PIVOTS + 1);
            __syncthreads();
            float pv[PIVOTS];
            unsigned ct[PIVOTS];
#pragma unroll
            for (int j = 0; j < PIVOTS; ++j) {{ pv[j] = piv[j]; ct[j] = 0u; }}
            for (int c = threadIdx.x; c < V4; c += THREADS) {{
                const float4 v = row4[c];
                const float xs[4] = {{v.x, v.y, v.z, v.w}};
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (xs[e] >= lo && xs[e] < hi) {{          // logits outside the bracket are settled
#pragma unroll
                        for (int j = 0; j < PIVOTS; ++j) ct[j] += xs[e] >= pv[j];
                    }}
            }}
#pragma unroll
            for (int j = 0; j < PIVOTS; ++j) {{
#pragma unroll
                for (int o = WARP_SIZE / 2; o > 0; o >>= 1) ct[j] += {cshfl};
                if (lane == 0) part[warp][j] = ct[j];
            }}
            __syncthreads();
            if (threadIdx.x < PIVOTS) {{
                unsigned r = 0u;
                for (int w = 0; w < WARPS; ++w) r += part[w][threadIdx.x];
                tot[threadIdx.x] = r;                         // logits of [piv[j], hi)
            }}
            __syncthreads();
            if (threadIdx.x == 0) {{
                int j = PIVOTS - 1;                           // the highest pivot with K logits at or above it
                while (j >= 0 && br.above + tot[j] < (unsigned)K) --j;
                if (j == PIVOTS - 1) {{ br.lo = piv[j]; br.inside = tot[j]; }}
                else if (j >= 0) {{
                    br.lo = piv[j]; br.hi = piv[j + 1]; br.above += tot[j + 1]; br.inside = tot[j] - tot[j + 1];
                }} else {{ br.hi = piv[0]; br.above += tot[0]; br.inside -= tot[0]; }}
                n_c = 0u;
            }}
            __syncthreads();
        }}
        compact_from(row4, V4, br.lo, ckey, cidx, &n_c);      // the logits >= the bracket's low end
        __syncthreads();
    }}
    const bool in_smem = n_c <= CAP;                          // else the select reads the row
    const int n = in_smem ? (int)n_c : V;
    if (threadIdx.x == 0) {{ sel.prefix = 0u; sel.mask = 0u; sel.need = K; }}
    __syncthreads();
    // the K-th largest key among the candidates: three radix digits of counts
    {DIGITS}
#pragma unroll
    for (int d = 0; d < 3; ++d) {{                            // unrolled: SHIFT / NBINS stay constants
        for (int i = threadIdx.x; i < 2048; i += THREADS) hist[i] = 0u;
        __syncthreads();
        const uint32_t prefix = sel.prefix, mask = sel.mask;
        for (int i = threadIdx.x; i < n; i += THREADS) {{
            const uint32_t k = in_smem ? ckey[i] : key_of(row[i]);
            if ((k & mask) == prefix) atomicAdd(&hist[(k >> SHIFT[d]) & (NBINS[d] - 1)], 1u);
        }}
        __syncthreads();
        select_bin(hist, NBINS[d], SHIFT[d], &sel, ubuf);
    }}
    const uint32_t thresh = sel.prefix;                       // key of the K-th largest logit
    for (int i = threadIdx.x; i < n; i += THREADS) {{          // the kept: K plus ties
        const uint32_t k = in_smem ? ckey[i] : key_of(row[i]);
        const int j = in_smem ? cidx[i] : i;
        if ({keep}) {{
            {ATOMIC_STORE}
        }}
    }}
    __syncthreads();
    pick_by_rank(kkey, kidx, min(count, (unsigned)KCAP), {u}, tokens + blockIdx.x, slots, &pick);
}}"""


def count_rung(last_kept_rows: tuple, dropped_kth_rows) -> Rung:
    """The rung; topk_cuda's missing_scale (cdf_pick's) and off_by_one (histogram_refine's) bugs and their rows."""
    def render(p, task, u="uniform[blockIdx.x]", keep="k >= thresh"):
        return count_kernel(p, task, u, keep)
    return Rung("pivot_count", "K-th largest bounded by pass 0's lane-group maxima, the logits above compacted to "
                "smem (a count-only pivot search where too many), radix select and rank pick there, float4 loads",
                (THREADS, CAP), compute_eff=0.5, memory_eff=0.9, smem="static", launch=count_launch, render=render,
                bugs={"missing_scale": {"u": "1.f"}, "off_by_one": {"keep": "k > thresh"}},
                bug_tasks=last_kept_rows + (("off_by_one", dropped_kth_rows),))
