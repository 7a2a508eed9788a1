"""Mamba single decode step in CUDA: update the fp32 state h[b, d, :] in place and emit the
gated y[b, d] (see mamba_step_spec for the math).

Ladder: thread per (b, d, n) with atomicAdd of C * h into an fp32 y buffer and a gating
kernel -> thread per (b, d) looping over n (lanes N * 4 bytes apart) -> warp per (b, d), lanes
over n, warp-shuffle sum -> lane groups of N / 4 per channel with float4 state and A loads ->
multi-channel blocks of one batch row with B_t / C_t staged once in shared memory.
"""
from ..base import Launch, Param, Rung, cdiv
from .mamba_step_spec import ENTRY, SOFTPLUS, MambaStepSpec

THREADS = Param("threads", (64, 128, 256, 512), 256)
BTERM = "dtv * xv * to_float(Bs[b * N + n])"
NO_DT = {"bterm": "xv * to_float(Bs[b * N + n])"}          # missing_scale: the input term loses dt
ARGS = """float* __restrict__ state, const scalar_t* __restrict__ x, const scalar_t* __restrict__ dt,
                  const float* __restrict__ dt_bias, const float* __restrict__ A, const scalar_t* __restrict__ Bs,
                  const scalar_t* __restrict__ Cs, const float* __restrict__ Dskip, const scalar_t* __restrict__ z,
                  scalar_t* __restrict__ y, int B, int D, int N"""
CHANNEL = f"""    const float xv = to_float(x[bd]);
    const float v = to_float(dt[bd]) + dt_bias[d];
    const float dtv = {SOFTPLUS};"""
GATE = "    const float zv = to_float(z[bd]);\n    y[bd] = from_float((acc + Dskip[d] * xv) * zv / (1.f + expf(-zv)));"


def host(task, grid: str, block: str) -> str:
    return ENTRY.host(task, "mamba_step_kernel", grid, block)


def state_launch(per_channel_lanes, bytes_per_access, regs, traffic=1.0, smem=0):
    """Launch model of a rung giving each (b, d) channel per_channel_lanes(p, task) lanes."""
    def launch(p, task):
        b, d, n, th = task["B"], task["D"], task["N"], p["threads"]
        lanes = per_channel_lanes(p, task)
        busy = min(1.0, n / (lanes * (4 if bytes_per_access == 16 else 1)))
        return Launch(grid=cdiv(b * d * lanes, th), threads=th, smem_bytes=smem, regs=regs,
                      bytes_per_access=bytes_per_access, traffic=traffic, lane_util=busy)
    return launch


# -- thread_per_state_atomic -----------------------------------------------------------------
def atomic_launch(p, task):
    b, d, n, th = task["B"], task["D"], task["N"], p["threads"]
    # N lanes of one warp add into the same y word: the L2 serializes each channel's N updates
    return Launch(grid=cdiv(b * d * n, th), threads=th, regs=30, bytes_per_access=4, traffic=1.15,
                  launches=2, serial_atomics=n * max(1, b * d // (task.gpu.sms * 64)))


def thread_per_state_atomic_src(p, task, add="atomicAdd(&acc[bd], to_float(Cs[b * N + n]) * h);", bterm=BTERM):
    return f"""
#define THREADS {p['threads']}

// Thread per state element (b, d, n): the update is embarrassingly parallel, but y[b, d] sums
// over n, so every thread atomically adds its C * h into an fp32 buffer; a second kernel gates.
extern "C" __global__ void __launch_bounds__(THREADS)
mamba_step_kernel(float* __restrict__ state, const scalar_t* __restrict__ x, const scalar_t* __restrict__ dt,
                  const float* __restrict__ dt_bias, const float* __restrict__ A, const scalar_t* __restrict__ Bs,
                  const scalar_t* __restrict__ Cs, float* __restrict__ acc, int B, int D, int N) {{
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (i >= (int64_t)B * D * N) return;
    const int n = (int)(i % N), bd = (int)(i / N), b = bd / D, d = bd % D;
{CHANNEL}
    const float h = expf(dtv * A[d * N + n]) * state[i] + {bterm};
    state[i] = h;
    {add}
}}

extern "C" __global__ void __launch_bounds__(THREADS)
mamba_gate_kernel(const float* __restrict__ acc_in, const scalar_t* __restrict__ x, const float* __restrict__ Dskip,
                  const scalar_t* __restrict__ z, scalar_t* __restrict__ y, int B, int D) {{
    const int bd = blockIdx.x * THREADS + threadIdx.x;
    if (bd >= B * D) return;
    const int d = bd % D;
    const float xv = to_float(x[bd]), acc = acc_in[bd];
{GATE}
}}

{ENTRY.host_head(task)} {{
    float* acc = nullptr;                                        // fp32 sums of C * h per (b, d)
    cudaMallocAsync((void**)&acc, (size_t)B * D * sizeof(float), stream);
    cudaMemsetAsync(acc, 0, (size_t)B * D * sizeof(float), stream);
    mamba_step_kernel<<<(int)(((int64_t)B * D * N + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
        state, x, dt, dt_bias, A, Bs, Cs, acc, B, D, N);
    mamba_gate_kernel<<<(B * D + THREADS - 1) / THREADS, THREADS, 0, stream>>>(acc, x, Dskip, z, y, B, D);
    cudaFreeAsync(acc, stream);
}}
"""


# -- thread_per_channel ------------------------------------------------------------------------
def thread_per_channel_src(p, task, stop="N", bterm=BTERM):
    return f"""
#define THREADS {p['threads']}

// Thread per channel (b, d): the n loop runs in registers and y needs no atomics, but the
// lanes of a warp read state rows N * 4 bytes apart, so every load touches 32 sectors.
extern "C" __global__ void __launch_bounds__(THREADS) mamba_step_kernel({ARGS}) {{
    const int bd = blockIdx.x * THREADS + threadIdx.x;
    if (bd >= B * D) return;
    const int b = bd / D, d = bd % D;
{CHANNEL}
    float* h = state + (size_t)bd * N;
    float acc = 0.f;
    for (int n = 0; n < {stop}; ++n) {{
        const float hn = expf(dtv * A[d * N + n]) * h[n] + {bterm};
        h[n] = hn;
        acc += to_float(Cs[b * N + n]) * hn;
    }}
{GATE}
}}
{host(task, "(B * D + THREADS - 1) / THREADS", "THREADS")}"""


# -- warp_per_channel ---------------------------------------------------------------------------
def warp_per_channel_src(p, task, init="0.f", bterm=BTERM):
    return f"""
#define THREADS {p['threads']}

// Warp per channel: lanes take n = lane, lane + 32, ... (coalesced rows of the state), and
// a warp-shuffle sum gives y; for N = 16 half of the warp idles.
extern "C" __global__ void __launch_bounds__(THREADS) mamba_step_kernel({ARGS}) {{
    const int lane = threadIdx.x % WARP_SIZE;
    const int bd = blockIdx.x * (THREADS / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (bd >= B * D) return;
    const int b = bd / D, d = bd % D;
{CHANNEL}
    float* h = state + (size_t)bd * N;
    float acc = {init};
    for (int n = lane; n < N; n += WARP_SIZE) {{
        const float hn = expf(dtv * A[d * N + n]) * h[n] + {bterm};
        h[n] = hn;
        acc += to_float(Cs[b * N + n]) * hn;
    }}
    acc = warp_sum(acc);
    if (lane != 0) return;
{GATE}
}}
{host(task, "(B * D + THREADS / WARP_SIZE - 1) / (THREADS / WARP_SIZE)", "THREADS")}"""


# -- vectorized_float4 ---------------------------------------------------------------------------
VEC_BTERM = "dtv * xv * to_float(Bs[b * N + n + k])"
VEC_NO_DT = {"bterm": "xv * to_float(Bs[b * N + n + k])"}


def group_body(task, bterm: str, init: str, cval: str = "to_float(Cs[b * N + n + k])") -> str:
    """A lane group of G = N / 4 lanes per channel, one float4 of state and A per lane."""
    shfl = task.dialect.shfl_xor.format(v="acc", o="o")
    return f"""    float4* h = reinterpret_cast<float4*>(state + (size_t)bd * N) + g;
    const float4 a4 = reinterpret_cast<const float4*>(A + (size_t)d * N)[g];
    float4 hv = *h;
    float* hs = reinterpret_cast<float*>(&hv);
    const float* as = reinterpret_cast<const float*>(&a4);
    const int n = 4 * g;
    float acc = {init};
#pragma unroll
    for (int k = 0; k < 4; ++k) {{
        hs[k] = expf(dtv * as[k]) * hs[k] + {bterm};
        acc += {cval} * hs[k];
    }}
    *h = hv;
    for (int o = G / 2; o > 0; o >>= 1) acc += {shfl};   // sum over the channel's G lanes
    if (g != 0) return;"""


def vectorized_float4_src(p, task, init="0.f", bterm=VEC_BTERM):
    return f"""
#define THREADS {p['threads']}

// Lane groups of G = N / 4 lanes per channel: every lane moves one float4 of the state and of A,
// 32 / G channels share a warp, and the G partial sums meet through xor shuffles inside the group.
extern "C" __global__ void __launch_bounds__(THREADS) mamba_step_kernel({ARGS}) {{
    const int G = N / 4;
    const int t = blockIdx.x * THREADS + threadIdx.x;
    const int bd = t / G, g = t % G;
    if (bd >= B * D) return;                       // B * D * G is a multiple of 32: whole warps exit
    const int b = bd / D, d = bd % D;
{CHANNEL}
{group_body(task, bterm, init)}
{GATE}
}}
{host(task, "(B * D * (N / 4) + THREADS - 1) / THREADS", "THREADS")}"""


# -- smem_staged_channels -----------------------------------------------------------------------
def smem_launch(p, task):
    b, d, n, ch = task["B"], task["D"], task["N"], p["channels"]
    th = ch * n // 4
    return Launch(grid=b * cdiv(d, ch), threads=th, smem_bytes=1024, regs=40, bytes_per_access=16,
                  lane_util=1.0)


def smem_staged_channels_src(p, task, init="0.f", bterm="dtv * xv * sB[n + k]"):
    return f"""
#define CHANNELS {p['channels']}            // channels of one batch row per block

// Block = CHANNELS channels of one batch row b (grid: D / CHANNELS x B): B_t[b] and C_t[b] are
// read once per block into shared memory (fp32), then lane groups of N / 4 update float4s of
// the state as before; x, dt and z come in through the group leaders only.
extern "C" __global__ void mamba_step_kernel({ARGS}) {{
    __shared__ float sB[128], sC[128];
    const int G = N / 4, b = blockIdx.y;
    for (int i = threadIdx.x; i < N; i += blockDim.x) {{ sB[i] = to_float(Bs[b * N + i]); sC[i] = to_float(Cs[b * N + i]); }}
    __syncthreads();
    const int d = blockIdx.x * CHANNELS + threadIdx.x / G, g = threadIdx.x % G;
    if (d >= D) return;
    const int bd = b * D + d;
{CHANNEL}
{group_body(task, bterm, init, "sC[n + k]")}
{GATE}
}}
{host(task, "dim3((D + CHANNELS - 1) / CHANNELS, B)", "CHANNELS * (N / 4)")}"""


class MambaStepCuda(MambaStepSpec):
    impl = "cuda"
    variants = (
        Rung("thread_per_state_atomic", "thread per (b, d, n); atomicAdd of C * h into an fp32 y buffer, gating kernel",
             (THREADS,), memory_eff=0.22, launch=atomic_launch, render=thread_per_state_atomic_src,
             bugs={"racy_update": {"add": "acc[bd] += to_float(Cs[b * N + n]) * h;   // plain read-modify-write"},
                   "missing_scale": NO_DT}),
        Rung("thread_per_channel", "thread per (b, d) looping over n: no atomics, loads N * 4 bytes apart",
             (THREADS,), memory_eff=0.6, launch=state_launch(lambda p, t: 1, 4, 40, traffic=1.6),
             render=thread_per_channel_src, bugs={"off_by_one": {"stop": "N - 1"}, "missing_scale": NO_DT}),
        Rung("warp_per_channel", "warp per (b, d), lanes over n, warp-shuffle sum of C * h",
             (THREADS,), memory_eff=0.75, launch=state_launch(lambda p, t: t.gpu.warp, 4, 32),
             render=warp_per_channel_src, bugs={"wrong_init": {"init": "1.f"}, "missing_scale": NO_DT}),
        Rung("vectorized_float4", "N / 4 lanes per channel, float4 state and A loads, group xor-shuffle sum",
             (THREADS,), memory_eff=0.88, launch=state_launch(lambda p, t: t["N"] // 4, 16, 40),
             render=vectorized_float4_src, bugs={"wrong_init": {"init": "1.f"}, "missing_scale": VEC_NO_DT}),
        Rung("smem_staged_channels", "CHANNELS channels of one batch row per block, B_t / C_t staged in shared memory",
             (Param("channels", (8, 16, 32, 64, 128), 32),), memory_eff=0.92, smem="static", launch=smem_launch,
             render=smem_staged_channels_src, bugs={"wrong_init": {"init": "1.f"}, "missing_scale": {"bterm": "xv * sB[n + k]"}}),
    )
