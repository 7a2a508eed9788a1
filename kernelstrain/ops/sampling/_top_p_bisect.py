"""top_p_cuda's pivot_bisect rung (not an op module itself): the nucleus threshold found by a P-ary search
on the logit VALUE with block reductions, no shared-memory histogram of the whole row.

Why: every other one-block-a-row rung builds a mass histogram of the row's 11-bit key bins with two
shared-memory atomics a logit, and the module's logits (randn x 4) fill a few dozen of those bins, so the
bumps of a bin are applied one at a time (split_mass_hist's H100 fit: ~0.6 ns a bump, the whole of pass 1).
Here (the sorting-free, histogram-free pivot search of FlashInfer's sampling kernels and the bucket select
of RAFT / AIR top-k, written for this op's deterministic inverse-CDF contract):
- pass 0 (DRAM, 16-byte loads): the row's max M and Z = sum exp(x - M), online;
- search passes (L2): the bracket [lo, hi) holds the threshold (the least kept logit); PIVOTS values split
  it evenly, each thread sums in registers the mass and count of its bracketed logits at or above each
  pivot (logits outside the bracket are settled and skipped), warp shuffles and one shared row of partials
  reduce them, and the sub-interval where the kept mass reaches top_p x Z becomes the bracket, until at
  most CAP logits are left in it (or SEARCH_PASSES passes ran: then the refine reads them from the row);
- the bracket's keys compacted to shared memory, three radix digits of mass over them (only the
  bracket's logits, the mass above it carried) pin the exact threshold key; the inverse-CDF pick of
  vectorized_float4 ends the kernel.
Finite |logit| < 256 (the op's contract): the first bracket is [-256, +inf).
"""
from ..base import Launch, Param, Rung, cdiv
from ..occupancy import SM_BW_SHARE_CAP
from ._sampling import CAP, row_l2_miss
from ._select import DIGITS, MASS_SELECT

PIVOTS = Param("pivots", (4, 8, 16), 8)
SEARCH_PASSES = 6          # the most search passes; the bracket shrinks >= PIVOTS + 1 times a pass

# instructions a logit costs each pass: estimates from the loops' source (device job roomC j3 times them), per logit
PASS0_INSTR = 7            # fmax, the online rescale test, expf (2), add, its share of the 16-byte load and the loop
SKIP_INSTR = 4             # a search pass over a settled logit: two compares, the branch, its share of the load
PIVOT_INSTR = 3            # a bracketed logit, per pivot: compare, predicated adds of mass and count
BRACKET_INSTR = 4          # a bracketed logit's subtract and expf
PICK_INSTR = 9             # the inverse-CDF pick (key, compare, expf, scan share) over the half row it walks
# 128 threads left out: ptxas sm_90a spills 4 bytes there at 8 pivots; one block a row walks it with too few threads
BISECT_THREADS = Param("threads", (256, 512, 1024), 512)


def search_passes(task, p) -> float:
    """Expected search passes on the module's inputs (randn x 4 logits, top_p in [0.5, 0.95]): the means of
    scripts/roomC_bisect_emulate.py (a torch emulation of this kernel's search, 64 rows a shape, seed 1; 256 rows at
    V 32000, 4 pivots, CAP 1024: 2.95)."""
    return EMULATED_PASSES[task["V"] > 65536][p["pivots"]][p["cap"]]


# [V > 65536][pivots][cap] -> mean search passes
EMULATED_PASSES = {False: {4: {1024: 2.92, 2048: 2.62, 4096: 2.11}, 8: {1024: 2.06, 2048: 2.0, 4096: 2.0},
                           16: {1024: 2.0, 2048: 2.0, 4096: 2.0}},
                   True: {4: {1024: 3.16, 2048: 3.02, 4096: 2.83}, 8: {1024: 2.27, 2048: 2.19, 4096: 2.08},
                          16: {1024: 2.03, 2048: 2.0, 4096: 2.0}}}


def registers(pivots: int) -> int:
    """ptxas sm_90a (nvcc 13.0) at 256-1024 threads: 32 / 40 / 64 registers at 4 / 8 / 16 pivots (48 at 8 pivots
    and 1024 threads): the mass, count and value of each pivot live in registers."""
    return max(32, 16 + 3 * pivots)


def row_pass(task, b: int, v: int):
    """The time one pass over a row of v fp32 logits takes on its SM, given the instructions a logit: the row streamed
    at the SM's pull (its DRAM share, up to SM_BW_SHARE_CAP while fewer than all SMs run rows) or the SM's fp32 lane
    issue rate, whichever binds (shared by pivot_bisect and topk's pivot_count)."""
    gpu = task.gpu
    busy = min(b, gpu.sms)
    pull = gpu.bw_tbs * 1e12 / gpu.sms * min(SM_BW_SHARE_CAP, gpu.sms / busy)      # bytes/s one SM streams
    lanes = gpu.peak_tflops["fp32"] * 1e12 / 2 / gpu.sms                           # lane-instructions/s an SM
    row_s = v * 4 / pull

    def pass_s(instr):
        return max(row_s, v * instr / lanes)
    return pass_s


def bisect_launch(p, task):
    """One block a row. Pass 0 is the DRAM read (the roofline's bytes, re-reads that miss L2 as traffic);
    each later pass streams the row again from L2 at the SM's pull (SM_BW_SHARE_CAP x its DRAM share while
    few SMs run rows, its plain share when every SM does: L2 priced as conservatively as DRAM) or at the
    SM's instruction issue (the fp32 lane rate), whichever binds, rows of one SM one after another."""
    threads, piv, cap, b, v, gpu = p["threads"], p["pivots"], p["cap"], task["B"], task["V"], task.gpu
    warps = cdiv(threads, gpu.warp)
    passes = search_passes(task, p)
    pass_s = row_pass(task, b, v)
    # the first search pass sees every logit in the bracket; later ones skip all but the bracket's
    per_row = (pass_s(PASS0_INSTR) + pass_s(BRACKET_INSTR + PIVOT_INSTR * piv)
               + (passes - 1) * pass_s(SKIP_INSTR) + pass_s(SKIP_INSTR) + 0.5 * pass_s(PICK_INSTR))
    smem = 2048 * 4 + 4 * cap + 4 * warps * (2 + 2 * piv) + 8 * piv + 40
    return Launch(grid=b, threads=threads, smem_bytes=smem, regs=registers(piv), bytes_per_access=16,
                  traffic=1 + (passes + 2) * row_l2_miss(task, threads), issue_s=cdiv(b, gpu.sms) * per_row)


def bisect_kernel(p, task, need: str, bracket: str = "x >= lo && x < hi") -> str:
    """top_p_kernel of the rung; `need` the kept mass to reach, `bracket` the search pass's test of a logit."""
    return f"""#define PIVOTS {p['pivots']}              // values splitting the bracket each search pass
#define CAP {p['cap']}                 // bracket logits the exact refine takes from shared memory
#define SEARCH_PASSES {SEARCH_PASSES}
{MASS_SELECT}
struct Bracket {{ float lo, hi, above, inside; }};   // threshold in [lo, hi); mass of x >= hi; logits in it

extern "C" __global__ void __launch_bounds__(THREADS)
top_p_kernel(const float* __restrict__ logits, const float* __restrict__ top_p, const float* __restrict__ uniform,
             int* __restrict__ tokens, int V) {{
    __shared__ float mass[2048];
    __shared__ uint32_t ckey[CAP];
    __shared__ float fbuf[WARPS];
    __shared__ float slots[WARPS];
    __shared__ float part[WARPS][2 * PIVOTS];                 // per warp: mass, then count, at each pivot
    __shared__ float tot[2 * PIVOTS];
    __shared__ float piv[PIVOTS];
    __shared__ Bracket br;
    __shared__ Sel sel;
    __shared__ int pick;
    __shared__ unsigned n_c;
    const float* row = logits + (size_t)blockIdx.x * V;
    const float4* row4 = reinterpret_cast<const float4*>(row);
    const int V4 = V / 4, lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;

    // pass 0 (DRAM): max M and Z = sum exp(x - M), online (rescale when the max grows)
    float m = -INFINITY, s = 0.f;
    for (int c = threadIdx.x; c < V4; c += THREADS) {{
        const float4 v = row4[c];
        const float mx = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
        if (mx > m) {{ s *= expf(m - mx); m = mx; }}
        s += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
    }}
    const float M = block_max(m, slots);
    const float Z = block_sum(s * expf(m - M), slots);
    const float need = {need};
    if (threadIdx.x == 0) {{
        br.lo = -256.f; br.hi = INFINITY; br.above = 0.f; br.inside = (float)V;
        pick = -1; n_c = 0u;
    }}
    __syncthreads();

    // search passes (L2): split [lo, hi) at PIVOTS values; keep the piece where the kept mass reaches need
    for (int pass = 0; pass < SEARCH_PASSES && br.inside > (float)CAP; ++pass) {{
        const float lo = br.lo, hi = br.hi, top = fminf(hi, M);   // no logit lies above M
        float pv[PIVOTS], sm[PIVOTS], ct[PIVOTS];
#pragma unroll
        for (int j = 0; j < PIVOTS; ++j) {{
            pv[j] = lo + (top - lo) * (float)(j + 1) / (float)(PIVOTS + 1);
            sm[j] = 0.f; ct[j] = 0.f;
        }}
        for (int c = threadIdx.x; c < V4; c += THREADS) {{
            const float4 v = row4[c];
            const float xs[4] = {{v.x, v.y, v.z, v.w}};
#pragma unroll
            for (int e = 0; e < 4; ++e) {{
                const float x = xs[e];
                if ({bracket}) {{                     // logits outside the bracket are settled
                    const float w = expf(x - M);
#pragma unroll
                    for (int j = 0; j < PIVOTS; ++j)
                        if (x >= pv[j]) {{ sm[j] += w; ct[j] += 1.f; }}
                }}
            }}
        }}
#pragma unroll
        for (int j = 0; j < PIVOTS; ++j) {{
            const float a = warp_sum(sm[j]), n = warp_sum(ct[j]);
            if (lane == 0) {{ part[warp][j] = a; part[warp][PIVOTS + j] = n; }}
        }}
        if (threadIdx.x < PIVOTS)                             // the same values (a register array's dynamic index
            piv[threadIdx.x] = lo + (top - lo) * (float)(threadIdx.x + 1) / (float)(PIVOTS + 1);  // would spill it)
        __syncthreads();
        if (threadIdx.x < 2 * PIVOTS) {{
            float r = 0.f;
            for (int w = 0; w < WARPS; ++w) r += part[w][threadIdx.x];
            tot[threadIdx.x] = r;                               // mass / count of [piv[j], hi)
        }}
        __syncthreads();
        if (threadIdx.x == 0) {{
            int j = PIVOTS - 1;                                 // the highest pivot whose mass at or above reaches need
            while (j >= 0 && br.above + tot[j] < need) --j;
            if (j == PIVOTS - 1) {{ br.lo = piv[j]; br.inside = tot[PIVOTS + j]; }}
            else if (j >= 0) {{
                br.lo = piv[j]; br.hi = piv[j + 1]; br.above += tot[j + 1];
                br.inside = tot[PIVOTS + j] - tot[PIVOTS + j + 1];
            }} else {{ br.hi = piv[0]; br.above += tot[0]; br.inside -= tot[PIVOTS]; }}
        }}
        __syncthreads();
    }}

    // the bracket's keys to shared memory while they fit (else the refine reads them from the row)
    const uint32_t klo = key_of(br.lo), khi = key_of(br.hi);
    const bool in_smem = br.inside <= (float)CAP;
    if (in_smem)
        for (int c = threadIdx.x; c < V4; c += THREADS) {{
            const float4 v = row4[c];
            const uint32_t ks[4] = {{key_of(v.x), key_of(v.y), key_of(v.z), key_of(v.w)}};
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (ks[e] >= klo && ks[e] < khi) ckey[atomicAdd(&n_c, 1u)] = ks[e];
        }}
    if (threadIdx.x == 0) {{
        sel.prefix = 0u; sel.mask = 0u; sel.need = need - br.above; sel.above = br.above; sel.last = 0.f;
    }}
    __syncthreads();
    const int n = in_smem ? (int)n_c : V;
    // exact threshold: radix select on mass over the bracket's keys, the mass above it already kept
    {DIGITS}
    for (int d = 0; d < 3; ++d) {{
        for (int i = threadIdx.x; i < 2048; i += THREADS) mass[i] = 0.f;
        __syncthreads();
        const uint32_t prefix = sel.prefix, mask = sel.mask;
        for (int i = threadIdx.x; i < n; i += THREADS) {{
            const uint32_t k = in_smem ? ckey[i] : key_of(row[i]);
            if (k >= klo && k < khi && (k & mask) == prefix)
                atomicAdd(&mass[(k >> SHIFT[d]) & (NBINS[d] - 1)], expf(float_of_key(k) - M));
        }}
        __syncthreads();
        select_bin_mass(mass, NBINS[d], SHIFT[d], &sel, fbuf);
    }}
    // the inverse-CDF pick over the kept tokens, early exit once the target is passed
    cdf_pick_row(row, V, sel.prefix, M, uniform[blockIdx.x] * (sel.above + sel.last), fbuf, &pick);
    if (threadIdx.x == 0) tokens[blockIdx.x] = pick;
}}"""


def bisect_rung(program, need0: str, no_scale: dict, no_scale_rows: tuple) -> Rung:
    """The rung (program is top_p_cuda's: warp scans, the float4 pick; its missing_scale bug and rows)."""
    def render(p, task, need=need0, carry0="0.f"):
        return program(task, True, True, bisect_kernel(p, task, need), carry0=carry0)
    return Rung("pivot_bisect", "threshold by a P-ary search on the logit value with block reductions (no row "
                "histogram), the bracket's keys refined in smem, float4 loads", (BISECT_THREADS, PIVOTS, CAP),
                compute_eff=0.5, memory_eff=0.9, smem="static", launch=bisect_launch, render=render,
                bugs={"missing_scale": no_scale, "wrong_init": {"carry0": "1.f"}}, bug_tasks=no_scale_rows)
