"""Decode-time GEMV in CUDA: y[M, N] = x[M, K] @ W[N, K]^T for a handful of tokens (M <= 8).

Memory-bound on W. Ladder: one thread per output row (uncoalesced) -> one warp per row with
shuffle reduction -> 16-byte uint4 loads -> several rows per warp sharing each x chunk ->
split-K over blocks with an fp32 partial buffer and a combine kernel (fills the GPU when N is small).
"""
from ..base import Cost, Launch, OpModule, Param, Rung, Task, TorchRef, DTYPE_BYTES, cdiv
from ..contract import Arg, Entry, Scalar
from ..dialect import prelude
from ..over_read import ends_its_mapping
from ..unroll import PRAGMA_UNROLL, launch_of, render_of
from ._gemv_launch import gemv_bytes, warp_launch

ENTRY = Entry("gemv", (Arg("W", "in", ("N", "K"), source="self.weight"), Arg("x", "in", ("M", "K")),
                       Arg("y", "out", ("M", "N")), Scalar("M"), Scalar("N"), Scalar("K")))
WARPS = Param("warps", (2, 4, 8, 16), 4)
ROWS = Param("rows_per_warp", (1, 2, 4), 2)
ONE_LONGER = {"cmp": "<="}                 # off_by_one of the lane-strided loops
# ONE_LONGER's extra trip reads x one row (token) on: another token's real values only where there is one (M >= 2).
# At M = 1 it reads past x, whatever lies there (0 adds nothing): offered only with a second token, or with a split
# whose extra chunk is the next split's first (counted twice).
X_IN_BOUNDS = (("off_by_one", lambda t, p: t["M"] >= 2 or p.get("splits", 1) >= 2),)
# ... and the last row's extra trip reads past W: a fault where W ends its mapping (ops/over_read: labels j3)
OVER_READ = ("off_by_one",)
FAULTS_WHERE = (("off_by_one", lambda t, p: ends_its_mapping(t["N"] * t["K"] * DTYPE_BYTES[t.dtype])),)


def lane_trips(vec: int):
    """Trips of a warp's lane-strided loop over K, `vec` elements a lane a trip (the unroll knob)."""
    return lambda p, task: task["K"] / (vec * task.gpu.warp)


def chunk_regs(p, task) -> int:
    """Registers of one trip's 16-byte loads: a W chunk per row of the warp and an x chunk per token."""
    return 4 * p.get("rows_per_warp", 1) + 4 * task["M"]


def host(task, grid: str, block: str, extra: str = "") -> str:
    return f"""
{ENTRY.prototype(task)} {{
    gemv_kernel<<<{grid}, {block}, 0, stream>>>({ENTRY.call_args()});{extra}
}}
"""


def check_args(d, model, x, ref, out_like):
    """gpu_check adapter: W is the reference Model's nn.Linear-style weight."""
    y = out_like(ref)
    return [model.weight.data, x[0], y, d["M"], d["N"], d["K"]], [("y", y, ref)]


# -- thread_per_row ------------------------------------------------------------------------
def thread_per_row_launch(p, task):
    # every lane hits its own 32-byte sector per load; L1 cannot hold a line per resident
    # thread until its next 15 loads, so lines are fetched about twice
    n, t = task["N"], p["threads"]
    return Launch(grid=cdiv(n, t), threads=t, regs=24 + 2 * task["M"], bytes_per_access=32, traffic=2.0,
                  lane_util=min(1.0, n / t))


def thread_per_row_src(p, task, last="K", acc="float"):
    return f"""
#define THREADS {p['threads']}

// One thread per output row: lane i reads row i, so a warp load touches 32 rows K elements apart.
extern "C" __global__ void __launch_bounds__(THREADS)
gemv_kernel(const scalar_t* __restrict__ W, const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
            int M, int N, int K) {{
    const int n = blockIdx.x * THREADS + threadIdx.x;
    if (n >= N) return;
    const scalar_t* w = W + (size_t)n * K;
    {acc} acc[MB];
#pragma unroll
    for (int m = 0; m < MB; ++m) acc[m] = 0;
    for (int k = 0; k < {last}; ++k) {{
        const float wk = to_float(w[k]);
#pragma unroll
        for (int m = 0; m < MB; ++m) acc[m] += ({acc})(wk * to_float(x[m * K + k]));
    }}
#pragma unroll
    for (int m = 0; m < MB; ++m) y[(size_t)m * N + n] = from_float((float)acc[m]);
}}
{host(task, "(N + THREADS - 1) / THREADS", "THREADS")}"""


# -- the warp-per-row rungs (their launch model: _gemv_launch.py) --------------------------
def warp_per_row_src(p, task, init="0", cmp="<"):
    return f"""
#define WARPS {p['warps']}

// One warp per row: lanes stride over K, so each warp load is one contiguous segment of W.
extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE)
gemv_kernel(const scalar_t* __restrict__ W, const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
            int M, int N, int K) {{
    const int lane = threadIdx.x % WARP_SIZE;
    const int n = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE;
    if (n >= N) return;                       // whole warps exit together: shuffles stay convergent
    const scalar_t* w = W + (size_t)n * K;
    float acc[MB];
#pragma unroll
    for (int m = 0; m < MB; ++m) acc[m] = {init};
    for (int k = lane; k {cmp} K; k += WARP_SIZE) {{
        const float wk = to_float(w[k]);
#pragma unroll
        for (int m = 0; m < MB; ++m) acc[m] += wk * to_float(x[m * K + k]);
    }}
#pragma unroll
    for (int m = 0; m < MB; ++m) {{
        const float total = warp_sum(acc[m]);
        if (lane == 0) y[(size_t)m * N + n] = from_float(total);
    }}
}}
{host(task, "(N + WARPS - 1) / WARPS", "WARPS * WARP_SIZE")}"""

PACK = """
// 8 x 16-bit elements travel as one 16-byte uint4 (K % 8 == 0 keeps every row 16-byte aligned).
constexpr int VEC = 8;
union Pack { uint4 u; scalar_t h[VEC]; };
"""

def vectorized_uint4_src(p, task, cmp="<", acc="float"):
    return f"""
#define WARPS {p['warps']}
{PACK}
extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE)
gemv_kernel(const scalar_t* __restrict__ W, const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
            int M, int N, int K) {{
    const int lane = threadIdx.x % WARP_SIZE;
    const int n = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE;
    if (n >= N) return;
    const uint4* w = reinterpret_cast<const uint4*>(W + (size_t)n * K);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    const int chunks = K / VEC;
    {acc} acc[MB];
#pragma unroll
    for (int m = 0; m < MB; ++m) acc[m] = 0;
    for (int c = lane; c {cmp} chunks; c += WARP_SIZE) {{
        Pack wv; wv.u = w[c];
#pragma unroll
        for (int m = 0; m < MB; ++m) {{
            Pack xm; xm.u = xv[m * chunks + c];
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc[m] += ({acc})(to_float(wv.h[j]) * to_float(xm.h[j]));
        }}
    }}
#pragma unroll
    for (int m = 0; m < MB; ++m) {{
        const float total = warp_sum((float)acc[m]);
        if (lane == 0) y[(size_t)m * N + n] = from_float(total);
    }}
}}
{host(task, "(N + WARPS - 1) / WARPS", "WARPS * WARP_SIZE")}"""

def rows_body(k_begin: str, k_end: str, cmp: str = "<", init: str = "0.f") -> str:
    """Inner loop shared by the multi-row kernels: R rows of W per warp, each x chunk loaded once."""
    return f"""    float acc[ROWS][MB];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int m = 0; m < MB; ++m) acc[r][m] = {init};
    for (int c = {k_begin} + lane; c {cmp} {k_end}; c += WARP_SIZE) {{
        Pack wv[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r)        // R independent 16-byte loads in flight per lane
            wv[r].u = row0 + r < N ? w[(size_t)r * chunks + c] : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int m = 0; m < MB; ++m) {{
            Pack xm; xm.u = xv[m * chunks + c];
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
#pragma unroll
                for (int j = 0; j < VEC; ++j) acc[r][m] += to_float(wv[r].h[j]) * to_float(xm.h[j]);
        }}
    }}
"""

def multi_row_warp_src(p, task, cmp="<", init="0.f"):
    return f"""
#define WARPS {p['warps']}
#define ROWS {p['rows_per_warp']}    // rows of W per warp
{PACK}
extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE)
gemv_kernel(const scalar_t* __restrict__ W, const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
            int M, int N, int K) {{
    const int lane = threadIdx.x % WARP_SIZE;
    const int row0 = (blockIdx.x * WARPS + threadIdx.x / WARP_SIZE) * ROWS;
    if (row0 >= N) return;
    const int chunks = K / VEC;
    const uint4* w = reinterpret_cast<const uint4*>(W + (size_t)row0 * K);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
{rows_body("0", "chunks", cmp, init)}
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int m = 0; m < MB; ++m) {{
            const float total = warp_sum(acc[r][m]);
            if (lane == 0 && row0 + r < N) y[(size_t)m * N + row0 + r] = from_float(total);
        }}
}}
{host(task, "(N + WARPS * ROWS - 1) / (WARPS * ROWS)", "WARPS * WARP_SIZE")}"""

# bad_combine_index reads partials [MB * N][SPLITS] written [SPLITS][MB][N] (same order at one split: bug_params)
def split_k_combine_src(p, task, idx="((size_t)s * MB + m) * N + n", cmp="<"):
    splits, n = p["splits"], task["N"]
    return f"""
#define WARPS {p['warps']}
#define ROWS {p['rows_per_warp']}
#define SPLITS {splits}   // blocks along K per row group
{PACK}
// fp32 partial sums [SPLITS][MB][N]: no atomics, deterministic, summed by the combine kernel
__device__ float partials[SPLITS * MB * {n}];

extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE)
gemv_kernel(const scalar_t* __restrict__ W, const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
            int M, int N, int K) {{
    const int lane = threadIdx.x % WARP_SIZE;
    const int row0 = (blockIdx.x * WARPS + threadIdx.x / WARP_SIZE) * ROWS;
    const int split = blockIdx.y;
    if (row0 >= N) return;
    const int chunks = K / VEC;
    const int per_split = (chunks + SPLITS - 1) / SPLITS;
    const int c_end = min(chunks, (split + 1) * per_split);
    const uint4* w = reinterpret_cast<const uint4*>(W + (size_t)row0 * K);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
{rows_body("split * per_split", "c_end", cmp)}
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int m = 0; m < MB; ++m) {{
            const float total = warp_sum(acc[r][m]);
            if (lane == 0 && row0 + r < N) partials[((size_t)split * MB + m) * N + row0 + r] = total;
        }}
}}

// Combine: one thread per output, sums the SPLITS partials in a fixed order.
__global__ void gemv_combine(scalar_t* __restrict__ y, int N) {{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= MB * N) return;
    const int m = i / N, n = i % N;
    float total = 0.f;
#pragma unroll
    for (int s = 0; s < SPLITS; ++s) total += partials[{idx}];
    y[i] = from_float(total);
}}
{host(task, "dim3((N + WARPS * ROWS - 1) / (WARPS * ROWS), SPLITS)", "WARPS * WARP_SIZE",
            chr(10) + "    gemv_combine<<<(MB * N + 255) / 256, 256, 0, stream>>>(y, N);")}"""


class GemvCuda(OpModule):
    op, impl, family = "gemv", "cuda", "matmul"
    title = "GEMV for decode (y = x W^T)"
    desc = ("y[m, n] = sum_k x[m, k] * W[n, k] for M <= 8 decode tokens; W [N, K] row-major (nn.Linear weight), "
            "fp32 accumulation, y in the input dtype.")
    dims = {"M": "tokens (decode batch, <= 8)", "N": "output features (rows of W)", "K": "input features"}
    shapes = ({"M": 1, "N": 4096, "K": 4096}, {"M": 1, "N": 1024, "K": 4096}, {"M": 1, "N": 14336, "K": 4096},
              {"M": 1, "N": 4096, "K": 14336}, {"M": 4, "N": 6144, "K": 4096}, {"M": 8, "N": 8192, "K": 8192},
              {"M": 1, "N": 128256, "K": 4096})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x",)
    check_shape = {"M": 4, "N": 6144, "K": 4096}
    check_adapter = staticmethod(check_args)
    variants = (
        Rung("thread_per_row", "one thread walks a whole row of W: lanes read addresses K apart",
             (Param("threads", (64, 128, 256), 128),), memory_eff=0.3, launch=thread_per_row_launch,
             render=thread_per_row_src, bugs={"off_by_one": {"last": "K - 1"}, "half_accumulator": {"acc": "scalar_t"}}),
        Rung("warp_per_row", "one warp per row, coalesced scalar loads, warp_sum shuffle reduction",
             (WARPS, PRAGMA_UNROLL), memory_eff=0.75, render=render_of(warp_per_row_src),
             launch=launch_of(warp_launch("scalar"), lane_trips(1), lambda p, t: 1 + t["M"]),
             bugs={"wrong_init": {"init": "1"}, "off_by_one": ONE_LONGER}, bug_tasks=X_IN_BOUNDS,
             faults=OVER_READ, fault_tasks=FAULTS_WHERE),
        Rung("vectorized_uint4", "warp per row with 16-byte uint4 loads of W and x (8 elements a lane)",
             (WARPS, PRAGMA_UNROLL), memory_eff=0.84, render=render_of(vectorized_uint4_src),
             launch=launch_of(warp_launch("vec"), lane_trips(8), chunk_regs),
             bugs={"off_by_one": ONE_LONGER, "half_accumulator": {"acc": "scalar_t"}}, bug_tasks=X_IN_BOUNDS,
             faults=OVER_READ, fault_tasks=FAULTS_WHERE),
        Rung("multi_row_warp", "each warp owns several rows: one x chunk feeds R independent W loads",
             (WARPS, ROWS, PRAGMA_UNROLL), memory_eff=0.88, render=render_of(multi_row_warp_src),
             launch=launch_of(warp_launch("rows"), lane_trips(8), chunk_regs),
             bugs={"off_by_one": ONE_LONGER, "wrong_init": {"init": "1.f"}}, bug_tasks=X_IN_BOUNDS,
             faults=OVER_READ, fault_tasks=FAULTS_WHERE),
        Rung("split_k_combine", "split K over blocks into fp32 partials, then a combine kernel sums them",
             (WARPS, ROWS, Param("splits", (1, 2, 4, 8), 2), PRAGMA_UNROLL), memory_eff=0.9,
             launch=launch_of(warp_launch("split"), lambda p, t: lane_trips(8)(p, t) / p["splits"], chunk_regs),
             render=render_of(split_k_combine_src), bug_params=(("bad_combine_index", "splits", 2),),
             bugs={"bad_combine_index": {"idx": "(size_t)(m * N + n) * SPLITS + s"}, "off_by_one": ONE_LONGER},
             bug_tasks=X_IN_BOUNDS, faults=OVER_READ, fault_tasks=FAULTS_WHERE),
    )

    def cost(self, task: Task) -> Cost:
        return Cost(flops=2 * task["M"] * task["N"] * task["K"], bytes=gemv_bytes(task))

    torch_ref = TorchRef(body="return torch.nn.functional.linear(x, self.weight)",
        init="self.weight = nn.Parameter(torch.randn(N, K, dtype=DTYPE))",
        inputs="[torch.randn(M, K, dtype=DTYPE, device='cuda')]")

    def assemble(self, body, variant, params, task):
        return f"{prelude(task)}\n#define MB {task['M']}   // tokens: accumulators stay in registers\n{body}"
