"""selective_scan_cuda's state_group_scan rung (not an op module itself): vectorized_regs's register scan (ITEMS
steps a thread from uint4 loads, a shuffle warp scan, warp totals through shared memory) with SG states scanned in
one pass instead of one.

Why: in Mamba's structure (selective_scan_fwd_kernel, and vectorized_regs here) each of the N states is a pass of
its own: its B/C loads, a chain of ITEMS dependent combines, a 5-step shuffle scan whose every step waits on the
last, and two CTA barriers around the warp totals. The N passes are independent until y sums them, so SG of them
in one pass issue their 2 x SG uint4 B/C loads together (SG times the bytes in flight from L2), interleave SG
combine and shuffle chains (SG-way ILP where one chain stalls on its own latency), and share one barrier pair
(2 N / SG barriers a chunk instead of 2 N). The price: SG x ITEMS scanned pairs in registers.
"""
from dataclasses import replace

from ._scan_cuda import packed_io, warp_scan

FIRST = "warp_tot[g][w]"                                  # state g's total of warp w
BAD_FIRST = "warp_tot[g][w + 1 < WPR ? w + 1 : w]"
BTERM = "dtv[i] * to_float(bv[g][i]) * uv[i]"
NO_DT = "to_float(bv[g][i]) * uv[i]"


ITEMS = 8     # one uint4 of each input a thread: at 16 steps a thread even SG 2 spills (ptxas: 255 registers, 50 B)
# ptxas -v (nvcc 13.0, sm_90a, bf16, 128 threads): 145 / 197 registers at SG 2 / 4, no spill (vectorized_regs: 77 and
# a 64-byte stack frame, its carried states indexed by a rolled state loop); SG 8 spills (255, 38 B)
REGS = {2: 145, 4: 197}


def group_launch(vectorized_launch):
    """The launch model over vectorized_regs's (`vectorized_launch`): the same loads and chunk, SG states a pass.
    Of the per-state overhead vectorized_regs's compute_scale charges (1 - compute_scale: the shuffle scan and the
    two barriers of every state, once a chunk), the barriers' half is paid once a group, and the shuffle chains'
    latency half overlaps across the group's SG chains; the instructions stay. Registers as ptxas counts them: the
    occupancy they cost is the model's (fewer resident warps to hide the rest)."""
    def launch(p, task):
        sg = p["SG"]
        base = vectorized_launch({"threads": p["threads"], "items": ITEMS}, task)
        loss = 1.0 - base.compute_scale
        return replace(base, regs=REGS[sg], smem_bytes=base.smem_bytes * sg, compute_scale=1.0 - loss * (0.5 + 0.5 / sg))
    return launch


def group_scan(p, task, args: str, first: str = FIRST, x0: str = "0.f", bterm: str = BTERM) -> str:
    """The kernel of state_group_scan; first, x0 and bterm are the slots its bugs replace."""
    load, _, store = packed_io()
    return f"""#define THREADS {p['threads']}           // threads per channel
#define ITEMS {ITEMS}             // consecutive steps per thread: one uint4 of each input
#define SG {p['SG']}                // states scanned in one pass
#define CHUNK (THREADS * ITEMS)
#define WPR (THREADS / WARP_SIZE)  // warps per channel
union Pack {{ uint4 u; scalar_t h[8]; }};
{warp_scan(task)}
// Each thread scans ITEMS steps in registers for SG states at once: the group's B/C loads, combine chains and
// shuffle scans interleave, and its warp totals meet behind one barrier pair; the carried states chain the chunks.
extern "C" __global__ void __launch_bounds__(THREADS)
selective_scan_kernel({args}) {{
    __shared__ float2 warp_tot[SG][WPR];
    const int tid = threadIdx.x, lane = tid % WARP_SIZE, warp = tid / WARP_SIZE;
    const int row = blockIdx.x, b = row / D, d = row % D;
    const size_t off = (size_t)row * L;
    const scalar_t* Bb = Bs + (size_t)b * NSTATE * L;
    const scalar_t* Cb = Cs + (size_t)b * NSTATE * L;
    float carry[NSTATE];
#pragma unroll
    for (int n = 0; n < NSTATE; ++n) carry[n] = {x0};
    const float dskip = Dskip[d], dbias = delta_bias[d];
    for (int c0 = 0; c0 < L; c0 += CHUNK) {{
        const int t0 = c0 + tid * ITEMS;
        const bool live = t0 < L;
        float uv[ITEMS], dtv[ITEMS], zv[ITEMS], yv[ITEMS];
        {load}
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) yv[i] = dskip * uv[i];
#pragma unroll
        for (int n0 = 0; n0 < NSTATE; n0 += SG) {{
            // the group's B and C rows: 2 x SG x ITEMS / 8 uint4 loads in flight together
            Pack pb[SG][ITEMS / 8], pc[SG][ITEMS / 8];
#pragma unroll
            for (int g = 0; g < SG; ++g)
#pragma unroll
                for (int q = 0; q < ITEMS / 8; ++q) {{
                    pb[g][q].u = live ? reinterpret_cast<const uint4*>(Bb + (n0 + g) * L + t0)[q] : make_uint4(0u, 0u, 0u, 0u);
                    pc[g][q].u = live ? reinterpret_cast<const uint4*>(Cb + (n0 + g) * L + t0)[q] : make_uint4(0u, 0u, 0u, 0u);
                }}
            const scalar_t (*bv)[ITEMS] = reinterpret_cast<const scalar_t (*)[ITEMS]>(pb);
            const scalar_t (*cv)[ITEMS] = reinterpret_cast<const scalar_t (*)[ITEMS]>(pc);
            float2 e[SG][ITEMS], acc[SG], wex[SG];
#pragma unroll
            for (int g = 0; g < SG; ++g) {{
                const float a2 = A[d * NSTATE + n0 + g] * LOG2E;
                acc[g] = make_float2(1.f, 0.f);
#pragma unroll
                for (int i = 0; i < ITEMS; ++i) {{ acc[g] = combine(acc[g], make_float2(exp2f(dtv[i] * a2), {bterm})); e[g][i] = acc[g]; }}
            }}
#pragma unroll
            for (int g = 0; g < SG; ++g) {{
                const float2 winc = warp_scan(acc[g], &wex[g]);
                if (lane == WARP_SIZE - 1) warp_tot[g][warp] = winc;
            }}
            __syncthreads();
#pragma unroll
            for (int g = 0; g < SG; ++g) {{
                float2 pre = make_float2(1.f, 0.f), tot = make_float2(1.f, 0.f);
                for (int w = 0; w < WPR; ++w) {{
                    const float2 s = {first};
                    if (w < warp) pre = combine(pre, s);
                    tot = combine(tot, s);
                }}
                const float2 ex = combine(pre, wex[g]);       // everything before this thread's first step
                const float s_in = ex.x * carry[n0 + g] + ex.y;
#pragma unroll
                for (int i = 0; i < ITEMS; ++i) yv[i] += to_float(cv[g][i]) * (e[g][i].x * s_in + e[g][i].y);
                carry[n0 + g] = tot.x * carry[n0 + g] + tot.y;
            }}
            __syncthreads();                                   // warp_tot is rewritten for the next group
        }}
        {store}
    }}
}}
"""
