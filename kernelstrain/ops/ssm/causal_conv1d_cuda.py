"""Depthwise causal conv1d (width 4) + SiLU in CUDA, Mamba's short convolution:
  y[b, d, t] = silu(bias[d] + sum_{k<4} w[d, k] * x[b, d, t - 3 + k]),  x[.., t < 0] = 0.

Ladder: thread per output (4 global loads each) -> block tile of x with a 3-element halo in
shared memory -> 8 outputs per thread from a uint4-loaded smem tile -> no shared memory: uint4
loads, halo from the neighbouring lane with __shfl_up_sync -> one warp per long strip, halo
carried in registers across iterations (weights loaded once per strip).
"""
from dataclasses import replace

from ..base import Cost, Launch, OpModule, Param, Rung, Task, TorchRef, DTYPE_BYTES, cdiv
from ..contract import Arg, Entry, Scalar
from ._strip_chain import strip_chain_s

THREADS = Param("threads", (64, 128, 256, 512), 256)
ITEMS = Param("items", (1, 2, 4, 8), 1)               # smem_halo_tile: outputs a thread
WIDTH = 4
ENTRY = Entry("causal_conv1d_fwd", (
    Arg("x", "in", ("B", "D", "L")), Arg("weight", "in", ("D", WIDTH)), Arg("bias", "in", ("D",)),
    Arg("y", "out", ("B", "D", "L")), Scalar("B"), Scalar("D"), Scalar("L")))
ARGS = ("const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight, const scalar_t* __restrict__ bias,\n"
             "                     scalar_t* __restrict__ y, int Bsz, int D, int L")
# rows (B * D, up to 98304 here) on grid x, whose limit is 2^31 - 1; tiles on y (limit 65535)
TILE_GRID = "dim3(B * D, (L + TILE - 1) / TILE)"
PACK = "union Pack { uint4 u; scalar_t h[8]; };\n"
WEIGHTS = """const float w0 = to_float(weight[d * 4]), w1 = to_float(weight[d * 4 + 1]);
    const float w2 = to_float(weight[d * 4 + 2]), w3 = to_float(weight[d * 4 + 3]), bd = to_float(bias[d]);"""
LOAD8 = """Pack in;
        in.u = t < L ? *reinterpret_cast<const uint4*>(xr + t) : make_uint4(0u, 0u, 0u, 0u);
        float c[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) c[i] = to_float(in.h[i]);"""
SYNC = "\n    __syncthreads();"                # between the smem tile's stores and its reads


def program(p, task, body: str, grid: str) -> str:
    """The candidate after the prelude: THREADS, silu, the rung's kernel and the host function."""
    return f"""#define THREADS {p['threads']}
__device__ __forceinline__ float silu(float v) {{ return v / (1.f + __expf(-v)); }}
{body}{ENTRY.host(task, "causal_conv1d_kernel", grid, "THREADS")}"""


def rows_of(task) -> int:
    return task["B"] * task["D"]


# -- thread_per_output, smem_halo_tile -----------------------------------------------------
def thread_per_output_launch(p, task):
    return Launch(grid=cdiv(rows_of(task) * task["L"], p["threads"]), threads=p["threads"], regs=20,
                  bytes_per_access=DTYPE_BYTES[task.dtype], traffic=1.1)


def thread_per_output_src(p, task, cond="s >= 0", bounded=True):
    tap = f"if ({cond}) acc += to_float(weight[d * 4 + k]) * to_float(xr[s]);" if bounded else \
        "acc += to_float(weight[d * 4 + k]) * to_float(xr[s]);"
    return program(p, task, f"""
// One thread per output; neighbouring threads re-load the same taps (L1 absorbs most of it).
extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_kernel({ARGS}) {{
    const size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;
    if (i >= (size_t)Bsz * D * L) return;
    const int t = (int)(i % L), d = (int)((i / L) % D);
    const scalar_t* xr = x + (i - t);                          // start of this (b, d) row
    float acc = to_float(bias[d]);
#pragma unroll
    for (int k = 0; k < 4; ++k) {{
        const int s = t - 3 + k;
        {tap}
    }}
    y[i] = from_float(silu(acc));
}}
""", "(unsigned)(((size_t)B * D * L + THREADS - 1) / THREADS)")


def smem_halo_tile_launch(p, task):
    l, threads, items, elt = task["L"], p["threads"], p["items"], DTYPE_BYTES[task.dtype]
    tile = threads * items
    # ITEMS independent scalar loads a thread in flight, a tile ITEMS times longer (1/ITEMS the
    # CTAs to start), and a register for each staged value's index and output. A tile past the row's
    # end (L < THREADS * ITEMS) issues only the loads inside the row: its loads in flight and its
    # lanes' work are those of the tile that just covers the row. It still zero-fills the rest of its
    # shared tile, which the model does not time: the H200 measured such values slower (THREADS 256:
    # B=64 L=256 items 1/2/4/8 104/115/118/137 us; B=16 L=1024 items 4/8 66.6/72.5 us), where the
    # model has them level with the covering tile (before, it had them faster); where 8 covers the row
    # (B=1 L=2048) it was the fastest there too (22.4/15.7/12.0/10.6 us). An H100 re-run on this model
    # (scripts/room_device_check.py): 107.5/117.4/120.6/137.2, 69.2/75.2 and 22.8/16.2/12.8/11.6 us
    live = min(items, cdiv(l, threads))
    return Launch(grid=rows_of(task) * cdiv(l, tile), threads=threads, smem_bytes=4 * (tile + WIDTH - 1),
                  regs=20 + 2 * (items - 1), bytes_per_access=elt * live,
                  lane_util=l / (cdiv(l, threads * live) * threads * live))


def smem_halo_tile_src(p, task, sync=SYNC, acc0="to_float(bias[d])"):
    return program(p, task, f"""#define ITEMS {p['items']}                  // outputs per thread, THREADS apart
#define TILE (THREADS * ITEMS)

// Block = TILE outputs of one row; the tile and the 3 steps before it are staged once in smem.
// A thread's ITEMS loads are THREADS apart (each warp's stay coalesced) and all issue before
// the first is used.
extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_kernel({ARGS}) {{
    __shared__ float s[TILE + 3];
    const int row = blockIdx.x, d = row % D, t0 = blockIdx.y * TILE;
    const scalar_t* xr = x + (size_t)row * L;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {{
        const int t = t0 + j * THREADS + (int)threadIdx.x;
        s[j * THREADS + threadIdx.x + 3] = t < L ? to_float(xr[t]) : 0.f;
    }}
    const int h = t0 - 3 + (int)threadIdx.x;                    // halo: the 3 steps before the tile
    if (threadIdx.x < 3) s[threadIdx.x] = h >= 0 ? to_float(xr[h]) : 0.f;
    const float w0 = to_float(weight[d * 4]), w1 = to_float(weight[d * 4 + 1]);
    const float w2 = to_float(weight[d * 4 + 2]), w3 = to_float(weight[d * 4 + 3]);{sync}
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {{
        const int t = t0 + j * THREADS + (int)threadIdx.x;
        if (t >= L) return;
        const float* v = s + j * THREADS + threadIdx.x;         // v[0..3] = x[t-3 .. t]
        y[(size_t)row * L + t] = from_float(silu({acc0} + w0 * v[0] + w1 * v[1] + w2 * v[2] + w3 * v[3]));
    }}
}}
""", TILE_GRID)


# -- vectorized_uint4, warp_shuffle_halo: 8 outputs per thread -----------------------------
def tile8_launch(smem: bool):
    def launch(p, task):
        l, threads, elt = task["L"], p["threads"], DTYPE_BYTES[task.dtype]
        tile = threads * 8
        return Launch(grid=rows_of(task) * cdiv(l, tile), threads=threads, smem_bytes=(tile + 8) * elt if smem else 0,
                      regs=36 if smem else 40, bytes_per_access=16, lane_util=l / (cdiv(l, tile) * tile))
    return launch


def conv8(acc0: str, win: str = "v") -> str:
    return f"""#pragma unroll
    for (int i = 0; i < 8; ++i)
        o.h[i] = from_float(silu({acc0} + w0 * {win}[i] + w1 * {win}[i + 1] + w2 * {win}[i + 2] + w3 * {win}[i + 3]));"""


def second_warp_reads_halo(task, params) -> bool:
    """Without the barrier, a thread's 3 halo values come from the previous thread's uint4 store;
    only the first thread of a block's second or later warp reads another warp's store (within a
    warp the store is done before the loads). With one warp a block, or L <= 8 * warp (no thread
    past the first warp has an output), the race cannot show: the H100 matched the reference at
    L = 256, 128 threads (rel. L2 2e-6)."""
    return params["threads"] > task.gpu.warp and task["L"] > 8 * task.gpu.warp


def vectorized_uint4_src(p, task, sync=SYNC, base="5 + 8 * threadIdx.x"):     # s[5 + 8 tid] = x[t - 3]
    return program(p, task, f"""#define TILE (THREADS * 8)
{PACK}
// Block = TILE outputs of one row; x arrives in 16-byte uint4 loads; slots [5, 8) of the smem
// tile hold the halo so the body stays 16-byte aligned at offset 8.
extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_kernel({ARGS}) {{
    __shared__ __align__(16) scalar_t s[TILE + 8];
    const int row = blockIdx.x, d = row % D, t0 = blockIdx.y * TILE;
    const scalar_t* xr = x + (size_t)row * L;
    const int t = t0 + 8 * threadIdx.x;
    *reinterpret_cast<uint4*>(&s[8 + 8 * threadIdx.x]) =
        t < L ? *reinterpret_cast<const uint4*>(xr + t) : make_uint4(0u, 0u, 0u, 0u);
    if (threadIdx.x < 3) s[5 + threadIdx.x] = t0 > 0 ? xr[t0 - 3 + threadIdx.x] : from_float(0.f);
    {WEIGHTS}{sync}
    if (t >= L) return;
    float v[11];                                                // x[t-3 .. t+7]
#pragma unroll
    for (int i = 0; i < 11; ++i) v[i] = to_float(s[{base} + i]);
    Pack o;
    {conv8("bd")}
    *reinterpret_cast<uint4*>(y + (size_t)row * L + t) = o.u;
}}
""", TILE_GRID)


def window(task, src=(5, 6, 7)) -> str:
    """8 loaded values -> 11-wide window; v[0..2] from lane - 1 (lane 0 keeps h0..h2)."""
    lines = "\n".join(f"        const float n{j} = {task.dialect.shfl_up.format(v=f'c[{s}]', o='1')};"
                      for j, s in enumerate(src))
    return f"""{lines}
        float v[11];
        v[0] = lane == 0 ? h0 : n0; v[1] = lane == 0 ? h1 : n1; v[2] = lane == 0 ? h2 : n2;
#pragma unroll
        for (int i = 0; i < 8; ++i) v[3 + i] = c[i];"""


def warp_shuffle_halo_src(p, task, src=(5, 6, 7), acc0="bd"):
    return program(p, task, f"""#define TILE (THREADS * 8)
{PACK}
// Each lane loads 8 steps with one uint4; the 3 steps before them are the previous lane's last
// three, fetched with a shuffle. Only lane 0 of each warp touches global memory for its halo.
extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_kernel({ARGS}) {{
    const int row = blockIdx.x, d = row % D, lane = threadIdx.x % WARP_SIZE;
    const scalar_t* xr = x + (size_t)row * L;
    const int t = blockIdx.y * TILE + 8 * threadIdx.x;
    {WEIGHTS}
    {{
        {LOAD8}
        const bool has_prev = lane == 0 && t >= 8 && t - 3 < L;
        const float h0 = has_prev ? to_float(xr[t - 3]) : 0.f, h1 = has_prev ? to_float(xr[t - 2]) : 0.f;
        const float h2 = has_prev ? to_float(xr[t - 1]) : 0.f;
{window(task, src)}
        if (t >= L) return;
        Pack o;
    {conv8(acc0)}
        *reinterpret_cast<uint4*>(y + (size_t)row * L + t) = o.u;
    }}
}}
""", TILE_GRID)


# -- register_strip ------------------------------------------------------------------------
def register_strip_launch(p, task):
    l, threads, warp = task["L"], p["threads"], task.gpu.warp
    step = warp * 8
    strip = max(p["strip"], step)
    launch = Launch(grid=cdiv(rows_of(task) * cdiv(l, strip), threads // warp), threads=threads, regs=44,
                    bytes_per_access=16, lane_util=l / (cdiv(l, step) * step))
    return replace(launch, issue_s=strip_chain_s(launch, task, cdiv(min(strip, l), step)))


def register_strip_src(p, task, src=(5, 6, 7), acc0="bd"):
    last = task.dialect.shfl.format(v="c[{}]", o="WARP_SIZE - 1")
    return program(p, task, f"""#define STRIP {p['strip']}                  // steps of one row per warp
{PACK}
// One warp per (row, strip): it walks the strip WARP_SIZE * 8 steps at a time; the halo of lane 0
// is the previous iteration's last three values, broadcast from the last lane in registers.
extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_kernel({ARGS}) {{
    const int lane = threadIdx.x % WARP_SIZE;
    const int strips = (L + STRIP - 1) / STRIP;
    const int job = blockIdx.x * (THREADS / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (job >= Bsz * D * strips) return;                        // whole warps leave together
    const int row = job / strips, d = row % D, s0 = (job % strips) * STRIP;
    const scalar_t* xr = x + (size_t)row * L;
    {WEIGHTS}
    float h0 = 0.f, h1 = 0.f, h2 = 0.f;                         // x[s0-3 .. s0-1], zero at the row start
    if (s0 > 0) {{ h0 = to_float(xr[s0 - 3]); h1 = to_float(xr[s0 - 2]); h2 = to_float(xr[s0 - 1]); }}
    for (int t0 = s0; t0 < min(s0 + STRIP, L); t0 += WARP_SIZE * 8) {{
        const int t = t0 + 8 * lane;
        {LOAD8}
{window(task, src)}
        h0 = {last.format(5)}; h1 = {last.format(6)}; h2 = {last.format(7)};
        if (t < L) {{
            Pack o;
        {conv8(acc0)}
            *reinterpret_cast<uint4*>(y + (size_t)row * L + t) = o.u;
        }}
    }}
}}
""",
                   "(B * D * ((L + STRIP - 1) / STRIP) + THREADS / WARP_SIZE - 1) / (THREADS / WARP_SIZE)")


SHIFTED = {"src": (4, 5, 6)}                 # off_by_one: the halo taken one step too early


class CausalConv1dCuda(OpModule):
    op, impl, family = "causal_conv1d", "cuda", "ssm"
    title = "causal depthwise conv1d + SiLU"
    desc = ("Depthwise causal conv1d of width 4 with bias and SiLU over x [B, D, L] (contiguous in L), weight [D, 4], "
            "bias [D], all in the storage dtype, fp32 accumulation: y[b, d, t] = silu(bias[d] + sum_k w[d, k] * "
            "x[b, d, t - 3 + k]) with zero left padding. L a multiple of 8.")
    dims = {"B": "batch", "D": "channels", "L": "sequence length"}
    shapes = ({"B": 1, "D": 2048, "L": 2048}, {"B": 8, "D": 5120, "L": 2048}, {"B": 4, "D": 4096, "L": 8192},
              {"B": 16, "D": 2048, "L": 1024}, {"B": 64, "D": 1536, "L": 256}, {"B": 2, "D": 8192, "L": 4096})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x", "weight", "bias")
    check_shape = {"B": 16, "D": 2048, "L": 1024}               # L < one vector tile
    variants = (
        Rung("thread_per_output", "one thread per output, 4 taps + weights straight from global memory",
             (THREADS,), memory_eff=0.42, launch=thread_per_output_launch, render=thread_per_output_src,
             bugs={"off_by_one": {"cond": "s > 0"}, "no_bounds_check": {"bounded": False}}),
        Rung("smem_halo_tile", "block tile of x plus a 3-element halo in shared memory, weights in registers",
             (THREADS, ITEMS), memory_eff=0.65, smem="static", launch=smem_halo_tile_launch, render=smem_halo_tile_src,
             bugs={"missing_barrier": {"sync": ""}, "wrong_init": {"acc0": "0.f"}}),
        Rung("vectorized_uint4", "uint4 loads into the smem tile, 8 outputs per thread, uint4 stores",
             (THREADS,), memory_eff=0.85, smem="static", launch=tile8_launch(smem=True), render=vectorized_uint4_src,
             bugs={"missing_barrier": {"sync": ""}, "off_by_one": {"base": "6 + 8 * threadIdx.x"}},
             bug_tasks=(("missing_barrier", second_warp_reads_halo),)),
        Rung("warp_shuffle_halo", "no smem: uint4 loads, the 3-element halo comes from lane - 1 by __shfl_up_sync",
             (THREADS,), memory_eff=0.89, launch=tile8_launch(smem=False), render=warp_shuffle_halo_src,
             bugs={"off_by_one": SHIFTED, "wrong_init": {"acc0": "0.f"}}),
        Rung("register_strip", "one warp per long strip of a row, halo carried in registers between iterations",
             (Param("threads", (64, 128, 256, 512), 128), Param("strip", (256, 512, 1024, 2048, 4096, 8192), 2048)),
             memory_eff=0.92, launch=register_strip_launch, render=register_strip_src,
             bugs={"off_by_one": SHIFTED, "wrong_init": {"acc0": "0.f"}}),
    )

    def cost(self, task: Task) -> Cost:
        b, d, l, e = task["B"], task["D"], task["L"], DTYPE_BYTES[task.dtype]
        return Cost(flops=b * d * l * (2 * WIDTH + 5), bytes=2 * b * d * l * e + d * (WIDTH + 1) * e)

    torch_ref = TorchRef(
        body=("y = torch.nn.functional.conv1d(x.float(), weight.float().unsqueeze(1), bias.float(), padding=3, groups=D)\n"
              "        return torch.nn.functional.silu(y[..., :L]).to(x.dtype)"),
        inputs=("[torch.randn(B, D, L, dtype=DTYPE, device='cuda'), (torch.randn(D, 4, device='cuda') * 0.5).to(DTYPE),\n"
                "            torch.randn(D, dtype=DTYPE, device='cuda')]"))
