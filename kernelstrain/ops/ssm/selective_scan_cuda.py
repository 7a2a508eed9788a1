"""Mamba selective scan forward in CUDA:
  dt = softplus(delta + delta_bias[d]);  x_t[n] = exp(dt * A[d, n]) * x_{t-1}[n] + dt * B[b, n, t] * u_t
  y_t = (sum_n C[b, n, t] * x_t[n] + Dskip[d] * u_t) * silu(z_t)
The recurrence is a scan with the associative operator (a1, b1) o (a2, b2) = (a1 a2, a2 b1 + b2).

Ladder: one thread walks a whole channel sequentially -> block per channel, Hillis-Steele scan of
(a, b) pairs in shared memory per state -> items per thread scanned in registers + warp-shuffle
scan + cross-warp prefix (Mamba's structure) -> 16-byte vector loads/stores and exp2f ->
B/C chunk staged once in (dynamic) shared memory for ROWS channels of the block; beside those two,
SG states scanned in one pass (their loads, combine and shuffle chains interleaved, one barrier
pair a group: _scan_groups.py).
"""
from dataclasses import replace

from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv, unchecked
from . import _scan_groups as groups
from ._scan_cuda import BAD_FIRST, NO_DT, register_scan
from .selective_scan_spec import SelectiveScanSpec

THREADS = Param("threads", (64, 128, 256), 128)
# 32 threads, one warp a channel: Mamba's own launch for rows up to 256 steps (kNThreads 32 x kNItems 8), where a
# wider block's chunk is longer than the row and its extra lanes scan padding; on the staged rung it also wins on
# long rows (B/C come from shared memory, ROWS warps a block). H200 (scripts/room_device_check.py): warp_shuffle_scan
# B=16 L=256 D=2048 32/64/128 threads 249/422/834 us; smem_bc_multi_channel 161/396/918 there, 87/104/98 us at
# B=1 L=2048 D=1536, 272/324/370 at B=4. Not on vectorized_regs: its one-warp blocks walk a long row in twice the
# chunks, each a chain of N dependent B/C loads from L2 (B=1 L=2048: 147 vs 69 us at 64 threads; B=4: 308 vs 239).
# On AMD a 32-thread block is half a wavefront (lane_util).
ONE_WARP_THREADS = Param("threads", (32, 64, 128, 256), 128)
ITEMS = Param("items", (4, 8, 16), 8)
ARGS = ("const scalar_t* __restrict__ u, const scalar_t* __restrict__ delta, const float* __restrict__ A,\n"
             "                      const scalar_t* __restrict__ Bs, const scalar_t* __restrict__ Cs, "
             "const float* __restrict__ Dskip,\n                      const scalar_t* __restrict__ z, "
             "const float* __restrict__ delta_bias, scalar_t* __restrict__ y, int Bsz, int D, int L")


def program(p, task, body: str, grid: str, block: str, smem: int = 0) -> str:
    """The candidate after the prelude: the scan helpers, the rung's kernel and the host function
    (which opts in to `smem` bytes of dynamic shared memory when the rung uses it)."""
    attr = (f"\n    cudaFuncSetAttribute(selective_scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});"
            if smem else "")
    return f"""#define NSTATE {task['N']}
#define LOG2E 1.4426950408889634f

__device__ __forceinline__ float softplus(float v) {{ return v <= 20.f ? log1pf(expf(v)) : v; }}
__device__ __forceinline__ float silu(float v) {{ return v / (1.f + expf(-v)); }}
// scan operator: apply p (earlier steps) then q (later): (a_p a_q, a_q b_p + b_q)
__device__ __forceinline__ float2 combine(float2 p, float2 q) {{ return make_float2(p.x * q.x, q.x * p.y + q.y); }}
{body}
void selective_scan_fwd(const scalar_t* u, const scalar_t* delta, const float* A, const scalar_t* Bs,
                        const scalar_t* Cs, const float* Dskip, const scalar_t* z, const float* delta_bias,
                        scalar_t* y, int B, int D, int L, cudaStream_t stream) {{{attr}
    selective_scan_kernel<<<{grid}, {block}, {smem}, stream>>>(u, delta, A, Bs, Cs, Dskip, z, delta_bias, y, B, D, L);
}}
"""


# -- sequential_per_channel ----------------------------------------------------------------
def sequential_per_channel_launch(p, task):
    # lanes walk rows L apart: every load touches 32 lines, L1 thrashes between steps
    rows, threads = task["B"] * task["D"], p["threads"]
    return Launch(grid=cdiv(rows, threads), threads=threads, regs=40 + 2 * task["N"],
                  bytes_per_access=DTYPE_BYTES[task.dtype], traffic=1.8, lane_util=min(1.0, rows / threads))


def sequential_per_channel_src(p, task, x0="0.f", bterm="dt * to_float(Bb[n * L + t]) * ut"):
    return program(p, task, f"""#define THREADS {p['threads']}

// One thread owns one (batch, channel) row and walks it in time order; x[] is the SSM state.
extern "C" __global__ void __launch_bounds__(THREADS)
selective_scan_kernel({ARGS}) {{
    const int row = blockIdx.x * THREADS + threadIdx.x;       // b * D + d
    if (row >= Bsz * D) return;
    const int b = row / D, d = row % D;
    const size_t off = (size_t)row * L;
    const scalar_t* Bb = Bs + (size_t)b * NSTATE * L;
    const scalar_t* Cb = Cs + (size_t)b * NSTATE * L;
    float a[NSTATE], x[NSTATE];
#pragma unroll
    for (int n = 0; n < NSTATE; ++n) {{ a[n] = A[d * NSTATE + n]; x[n] = {x0}; }}
    const float dskip = Dskip[d], dbias = delta_bias[d];
    for (int t = 0; t < L; ++t) {{
        const float dt = softplus(to_float(delta[off + t]) + dbias);
        const float ut = to_float(u[off + t]);
        float yt = dskip * ut;
#pragma unroll
        for (int n = 0; n < NSTATE; ++n) {{
            x[n] = expf(dt * a[n]) * x[n] + {bterm};
            yt += to_float(Cb[n * L + t]) * x[n];
        }}
        y[off + t] = from_float(yt * silu(to_float(z[off + t])));
    }}
}}
""", f"(B * D + {p['threads']} - 1) / {p['threads']}", str(p["threads"]))


# -- chunked_smem_scan ---------------------------------------------------------------------
def chunked_smem_scan_launch(p, task):
    threads, n = p["threads"], task["N"]
    steps = (threads - 1).bit_length()
    return Launch(grid=task["B"] * task["D"], threads=threads, smem_bytes=8 * threads * (1 + n), regs=32 + n,
                  bytes_per_access=DTYPE_BYTES[task.dtype], compute_scale=2.0 / (2 + steps),
                  lane_util=min(1.0, task["L"] / threads))


def chunked_smem_scan_src(p, task, x0="0.f", prev="sc[threadIdx.x - o]"):
    return program(p, task, f"""#define THREADS {p['threads']}

// Block per (batch, channel); each chunk puts one time step on each thread and, for every state
// n, runs a Hillis-Steele scan of (a, b) pairs through shared memory: 2 barriers per step.
extern "C" __global__ void __launch_bounds__(THREADS)
selective_scan_kernel({ARGS}) {{
    __shared__ float2 sc[THREADS];
    __shared__ float sB[NSTATE][THREADS], sC[NSTATE][THREADS];
    const int row = blockIdx.x, b = row / D, d = row % D;
    const size_t off = (size_t)row * L;
    const scalar_t* Bb = Bs + (size_t)b * NSTATE * L;
    const scalar_t* Cb = Cs + (size_t)b * NSTATE * L;
    float carry[NSTATE];                                       // state at the end of the previous chunk
#pragma unroll
    for (int n = 0; n < NSTATE; ++n) carry[n] = {x0};
    const float dskip = Dskip[d], dbias = delta_bias[d];
    for (int c0 = 0; c0 < L; c0 += THREADS) {{
        const int t = c0 + threadIdx.x;
        const bool live = t < L;
        const float dt = live ? softplus(to_float(delta[off + t]) + dbias) : 0.f;
        const float ut = live ? to_float(u[off + t]) : 0.f;
        for (int n = 0; n < NSTATE; ++n) {{                    // coalesced along t
            sB[n][threadIdx.x] = live ? to_float(Bb[n * L + t]) : 0.f;
            sC[n][threadIdx.x] = live ? to_float(Cb[n * L + t]) : 0.f;
        }}
        float yt = dskip * ut;
        for (int n = 0; n < NSTATE; ++n) {{
            float2 e = make_float2(live ? expf(dt * A[d * NSTATE + n]) : 1.f, dt * sB[n][threadIdx.x] * ut);
            sc[threadIdx.x] = e;
            __syncthreads();
            for (int o = 1; o < THREADS; o <<= 1) {{
                const float2 before = threadIdx.x >= o ? {prev} : make_float2(1.f, 0.f);
                __syncthreads();
                e = combine(before, e);
                sc[threadIdx.x] = e;
                __syncthreads();
            }}
            yt += sC[n][threadIdx.x] * (e.x * carry[n] + e.y);
            const float2 last = sc[THREADS - 1];
            carry[n] = last.x * carry[n] + last.y;
            __syncthreads();                                   // everyone read sc before the next state
        }}
        if (live) y[off + t] = from_float(yt * silu(to_float(z[off + t])));
    }}
}}
""", "B * D", str(p["threads"]))


# -- warp_shuffle_scan, vectorized_regs, smem_bc_multi_channel: register scans -------------
def register_launch(p, task):
    b, l, d, n, elt = task["B"], task["L"], task["D"], task["N"], DTYPE_BYTES[task.dtype]
    threads, warps = p["threads"], cdiv(p["threads"], task.gpu.warp)
    items = p.get("items", 8)
    chunk = threads * items
    util = l / (cdiv(l, chunk) * chunk) * min(1.0, threads / task.gpu.warp)     # AMD: 32 threads, half a wavefront
    if "items" in p:
        # B/C are re-read by every channel (from L2); per-item scalar loads
        return Launch(grid=b * d, threads=threads, smem_bytes=8 * warps, regs=min(255, 40 + n + 5 * items),
                      bytes_per_access=elt * min(items, 2), compute_scale=0.75, lane_util=util)
    if "rows" not in p:
        return Launch(grid=b * d, threads=threads, smem_bytes=8 * warps, regs=40 + n + 40,
                      bytes_per_access=16, compute_scale=0.85, lane_util=util)
    rows = p["rows"]
    return Launch(grid=cdiv(b * d, rows), threads=threads * rows,
                  smem_bytes=2 * n * threads * 8 * elt + 8 * warps * rows, regs=40 + n + 40,
                  bytes_per_access=16, compute_scale=1.0 - 0.25 / rows, lane_util=util)


def vectorized_launch(p, task):
    """vectorized_regs: ITEMS steps a thread in ITEMS / 8 uint4 loads of each input. Past 8, each 8
    steps more hold another 48 fp32 registers (u, dt, z, y and the 8 scanned pairs) and another
    uint4 of each input in flight; the warp scan and the two barriers of every state are paid once
    a chunk, so a chunk twice as long halves their share of the steps."""
    base = register_launch({"threads": p["threads"]}, task)
    packs, chunk, l = p["items"] // 8, p["threads"] * p["items"], task["L"]
    return replace(base, regs=base.regs + 48 * (packs - 1), bytes_per_access=16 * packs,
                   compute_scale=1.0 - (1.0 - base.compute_scale) / packs, lane_util=l / (cdiv(l, chunk) * chunk))


def warp_shuffle_scan_src(p, task, **slots):
    return program(p, task, register_scan(p, task, ARGS, vec=False, **slots), "B * D", str(p["threads"]))


def vectorized_regs_src(p, task, **slots):
    return program(p, task, register_scan(p, task, ARGS, vec=True, **slots), "B * D", str(p["threads"]))


def smem_bc_multi_channel_src(p, task, **slots):
    smem = 2 * task["N"] * p["threads"] * 8 * DTYPE_BYTES[task.dtype]
    return program(p, task, register_scan(p, task, ARGS, vec=True, rows=p["rows"], **slots),
                   f"B * D / {p['rows']}", f"{p['threads'] * p['rows']}", smem)


def state_group_scan_src(p, task, **slots):
    return program(p, task, groups.group_scan(p, task, ARGS, **slots), "B * D", str(p["threads"]))


WRONG_INIT = {"x0": "1.f"}


def several_warps(task, params) -> bool:
    """bad_combine_index reads the next warp's total: with one warp a channel (32 threads, or 64 on AMD's
    64-lane wavefront) the next is the warp itself and the code is today's, right at every shape."""
    return params["threads"] > task.gpu.warp


SEVERAL_WARPS = (("bad_combine_index", several_warps),)


# A NEW rung (ops/ssm/_scan_groups.py), OFF the menus (KERNELSTRAIN_DEVICE_UNCHECKED=1 offers it): the H100 ran it
# correct and it never won. roomC j2 (plan s1 of scripts/roomC_device.py, measurements/h100_roomC_s1.json): every value
# correct, every bug failing, and slower than vectorized_regs / smem_bc_multi_channel at the model's best at each shape:
# B=1 L=2048 D=1536 SG 2 / 4 at 128 threads 84.8 / 104.3 us (64 / 256 threads 104.3 / 116.2) vs 71.3 and 86.6; B=2
# L=4096 D=2048 446.8 / 538.8 (64 / 256: 456.0 / 611.1) vs 376.5 and 360.1; B=16 L=256 761.3 / 958.3 vs 297.3 and
# 181.3. The group's 145-200 registers (ptxas) cost more resident warps than its interleaved chains and shared
# barriers win back: a rung that never wins is not room.
STATE_GROUP_SCAN = Rung(
    "state_group_scan", "vectorized_regs's uint4 register scan with SG states a pass: their B/C loads, combine and "
    "shuffle chains interleaved, one barrier pair a group",
    (THREADS, Param("SG", (2, 4), 2)), compute_eff=0.4, memory_eff=0.85,
    smem="static", launch=groups.group_launch(vectorized_launch), render=state_group_scan_src,
    bugs={"bad_combine_index": {"first": groups.BAD_FIRST}, "missing_scale": {"bterm": groups.NO_DT},
          "wrong_init": WRONG_INIT}, bug_tasks=SEVERAL_WARPS)


class SelectiveScanCuda(SelectiveScanSpec):
    impl = "cuda"
    desc = ("Selective scan (Mamba S6) forward with delta softplus, D skip and z gating. u, delta, z, y: [B, D, L]; "
            "Bs, Cs: [B, N, L] (same dtype); A: [D, N] fp32; Dskip, delta_bias: [D] fp32. fp32 state and math. "
            "L a multiple of 16.")
    variants = (
        Rung("sequential_per_channel", "one thread per (batch, channel) walks all L steps, state in registers",
             (Param("threads", (32, 64, 128, 256), 128),), compute_eff=0.3, memory_eff=0.3,
             launch=sequential_per_channel_launch, render=sequential_per_channel_src,
             bugs={"wrong_init": WRONG_INIT, "missing_scale": {"bterm": "to_float(Bb[n * L + t]) * ut"}}),
        Rung("chunked_smem_scan", "block per channel, one step per thread, Hillis-Steele (a, b) scan in smem",
             (Param("threads", (64, 128, 256, 512), 256),), compute_eff=0.35, memory_eff=0.6, smem="static",
             launch=chunked_smem_scan_launch, render=chunked_smem_scan_src,
             bugs={"off_by_one": {"prev": "sc[threadIdx.x - o + 1]"}, "wrong_init": WRONG_INIT}),
        Rung("warp_shuffle_scan", "ITEMS steps per thread in registers, __shfl_up_sync warp scan, warp prefixes",
             (ONE_WARP_THREADS, ITEMS), compute_eff=0.35, memory_eff=0.72, smem="static", launch=register_launch,
             render=warp_shuffle_scan_src, bugs={"bad_combine_index": {"first": BAD_FIRST}, "wrong_init": WRONG_INIT},
             bug_tasks=SEVERAL_WARPS),
        Rung("vectorized_regs", "uint4 loads of u/delta/z/B/C (8 steps), exp2f with log2e folded into A",
             (THREADS, Param("items", (8, 16), 8)), compute_eff=0.4, memory_eff=0.85, smem="static",
             launch=vectorized_launch,
             render=vectorized_regs_src, bugs={"missing_scale": {"bterm": NO_DT}, "wrong_init": WRONG_INIT}),
        # rows 16 stays off: correct on an H100 (roomC j1, measurements/h100_roomC_v1.json) but level-to-slower at 32
        # threads, B=1 L=2048 D=1536: 92.8 / 92.8 us (two runs) vs rows 8's 91.7 / 91.9 (rows 4: 86.6), where the
        # model has 16 ahead (55.5 vs 58.8)
        Rung("smem_bc_multi_channel", "B/C chunk staged once in dynamic smem and shared by ROWS channels",
             (Param("threads", (32, 64, 128, 256), 64), Param("rows", (1, 2, 4, 8, *unchecked(16)), 4)), compute_eff=0.45,
             memory_eff=0.9, smem="dynamic", launch=register_launch, render=smem_bc_multi_channel_src,
             bugs={"bad_combine_index": {"first": BAD_FIRST}, "missing_scale": {"bterm": NO_DT}}, bug_tasks=SEVERAL_WARPS),
        *unchecked(STATE_GROUP_SCAN),
    )
