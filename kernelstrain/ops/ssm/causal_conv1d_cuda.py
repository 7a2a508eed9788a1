"""Depthwise causal conv1d (width 4) + SiLU in CUDA, Mamba's short convolution:
  y[b, d, t] = silu(bias[d] + sum_{k<4} w[d, k] * x[b, d, t - 3 + k]),  x[.., t < 0] = 0.

Ladder: thread per output (4 global loads each) -> block tile of x with a 3-element halo in
shared memory -> 8 outputs per thread from a uint4-loaded smem tile -> no shared memory: uint4
loads, halo from the neighbouring lane with __shfl_up_sync -> one warp per long strip, halo
carried in registers across iterations (weights loaded once per strip).
"""
from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude,
                    kernelbench_program)

THREADS = Param("threads", (64, 128, 256, 512), 256)
WIDTH = 4


class CausalConv1dCuda(OpModule):
    op, impl, family = "causal_conv1d", "cuda", "ssm"
    title = "causal depthwise conv1d + SiLU"
    desc = ("Depthwise causal conv1d of width 4 with bias and SiLU over x [B, D, L] (contiguous in L), weight [D, 4], "
            "bias [D], all in the storage dtype, fp32 accumulation: y[b, d, t] = silu(bias[d] + sum_k w[d, k] * "
            "x[b, d, t - 3 + k]) with zero left padding. L a multiple of 8.")
    dims = {"B": "batch", "D": "channels", "L": "sequence length"}
    shapes = ({"B": 1, "D": 2048, "L": 2048}, {"B": 8, "D": 5120, "L": 2048}, {"B": 4, "D": 4096, "L": 8192},
              {"B": 16, "D": 2048, "L": 1024}, {"B": 64, "D": 1536, "L": 256}, {"B": 2, "D": 8192, "L": 4096})
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("thread_per_output", "one thread per output, 4 taps + weights straight from global memory",
                (THREADS,), memory_eff=0.42, bugs=("off_by_one", "no_bounds_check")),
        Variant("smem_halo_tile", "block tile of x plus a 3-element halo in shared memory, weights in registers",
                (THREADS,), memory_eff=0.65, smem="static", bugs=("missing_barrier", "wrong_init")),
        Variant("vectorized_uint4", "uint4 loads into the smem tile, 8 outputs per thread, uint4 stores",
                (THREADS,), memory_eff=0.85, smem="static", bugs=("missing_barrier", "off_by_one")),
        Variant("warp_shuffle_halo", "no smem: uint4 loads, the 3-element halo comes from lane - 1 by __shfl_up_sync",
                (THREADS,), memory_eff=0.89, bugs=("off_by_one", "wrong_init")),
        Variant("register_strip", "one warp per long strip of a row, halo carried in registers between iterations",
                (Param("threads", (64, 128, 256), 128), Param("strip", (512, 1024, 2048, 4096), 2048)),
                memory_eff=0.92, bugs=("off_by_one", "wrong_init")),
    )

    def cost(self, task: Task) -> Cost:
        b, d, l, e = task["B"], task["D"], task["L"], DTYPE_BYTES[task.dtype]
        return Cost(flops=b * d * l * (2 * WIDTH + 5), bytes=2 * b * d * l * e + d * (WIDTH + 1) * e)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        b, d, l, elt = task["B"], task["D"], task["L"], DTYPE_BYTES[task.dtype]
        threads, rows = params["threads"], b * d
        if variant.tag == "thread_per_output":
            return Launch(grid=cdiv(rows * l, threads), threads=threads, regs=20, bytes_per_access=elt, traffic=1.1)
        if variant.tag == "smem_halo_tile":
            return Launch(grid=rows * cdiv(l, threads), threads=threads, smem_bytes=4 * (threads + WIDTH - 1),
                          regs=20, bytes_per_access=elt, lane_util=l / (cdiv(l, threads) * threads))
        tile = threads * 8
        util = l / (cdiv(l, tile) * tile)
        if variant.tag == "vectorized_uint4":
            return Launch(grid=rows * cdiv(l, tile), threads=threads, smem_bytes=(tile + 8) * elt, regs=36,
                          bytes_per_access=16, lane_util=util)
        if variant.tag == "warp_shuffle_halo":
            return Launch(grid=rows * cdiv(l, tile), threads=threads, regs=40, bytes_per_access=16, lane_util=util)
        step = task.gpu.warp * 8
        strip = max(params["strip"], step)
        warps = threads // task.gpu.warp
        return Launch(grid=cdiv(rows * cdiv(l, strip), warps), threads=threads, regs=44, bytes_per_access=16,
                      lane_util=l / (cdiv(l, step) * step))

    def signature(self, task: Task) -> str:
        return ("void causal_conv1d_fwd(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y, "
                "int B, int D, int L, cudaStream_t stream)")

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="x, weight, bias",
            body=("y = torch.nn.functional.conv1d(x.float(), weight.float().unsqueeze(1), bias.float(), padding=3, groups=D)\n"
                  "        return torch.nn.functional.silu(y[..., :L]).to(x.dtype)"),
            inputs=("[torch.randn(B, D, L, dtype=DTYPE, device='cuda'), (torch.randn(D, 4, device='cuda') * 0.5).to(DTYPE),\n"
                    "            torch.randn(D, dtype=DTYPE, device='cuda')]"))

    # -- renders -----------------------------------------------------------------
    _ARGS = ("const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight, const scalar_t* __restrict__ bias,\n"
             "                     scalar_t* __restrict__ y, int Bsz, int D, int L")

    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body, grid, block = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"""{cuda_prelude(task)}
#define THREADS {params['threads']}
__device__ __forceinline__ float silu(float v) {{ return v / (1.f + __expf(-v)); }}
{body}
void causal_conv1d_fwd(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                       int B, int D, int L, cudaStream_t stream) {{
    causal_conv1d_kernel<<<{grid}, {block}, 0, stream>>>(x, weight, bias, y, B, D, L);
}}
"""

    _TILE_GRID = "dim3((L + TILE - 1) / TILE, B * D)"

    def _thread_per_output(self, p, task, bug):
        cond = "s > 0" if bug == "off_by_one" else "s >= 0"
        tap = ("acc += to_float(weight[d * 4 + k]) * to_float(xr[s]);" if bug == "no_bounds_check" else
               f"if ({cond}) acc += to_float(weight[d * 4 + k]) * to_float(xr[s]);")
        return f"""
// One thread per output; neighbouring threads re-load the same taps (L1 absorbs most of it).
extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_kernel({self._ARGS}) {{
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
""", f"(unsigned)(((size_t)B * D * L + THREADS - 1) / THREADS)", "THREADS"

    def _smem_halo_tile(self, p, task, bug):
        sync = "" if bug == "missing_barrier" else "\n    __syncthreads();"
        acc0 = "0.f" if bug == "wrong_init" else "to_float(bias[d])"
        return f"""#define TILE THREADS

// Block = TILE outputs of one row; the tile and the 3 steps before it are staged once in smem.
extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_kernel({self._ARGS}) {{
    __shared__ float s[TILE + 3];
    const int row = blockIdx.y, d = row % D, t0 = blockIdx.x * TILE;
    const scalar_t* xr = x + (size_t)row * L;
    const int t = t0 + threadIdx.x;
    s[threadIdx.x + 3] = t < L ? to_float(xr[t]) : 0.f;
    const int h = t0 - 3 + (int)threadIdx.x;                    // halo: the 3 steps before the tile
    if (threadIdx.x < 3) s[threadIdx.x] = h >= 0 ? to_float(xr[h]) : 0.f;
    const float w0 = to_float(weight[d * 4]), w1 = to_float(weight[d * 4 + 1]);
    const float w2 = to_float(weight[d * 4 + 2]), w3 = to_float(weight[d * 4 + 3]);{sync}
    if (t >= L) return;
    const float* v = s + threadIdx.x;                           // v[0..3] = x[t-3 .. t]
    y[(size_t)row * L + t] = from_float(silu({acc0} + w0 * v[0] + w1 * v[1] + w2 * v[2] + w3 * v[3]));
}}
""", self._TILE_GRID, "THREADS"

    _PACK = "union Pack { uint4 u; scalar_t h[8]; };\n"

    def _conv8(self, acc0: str, win: str = "v") -> str:
        return f"""#pragma unroll
    for (int i = 0; i < 8; ++i)
        o.h[i] = from_float(silu({acc0} + w0 * {win}[i] + w1 * {win}[i + 1] + w2 * {win}[i + 2] + w3 * {win}[i + 3]));"""

    _WEIGHTS = """const float w0 = to_float(weight[d * 4]), w1 = to_float(weight[d * 4 + 1]);
    const float w2 = to_float(weight[d * 4 + 2]), w3 = to_float(weight[d * 4 + 3]), bd = to_float(bias[d]);"""

    def _vectorized_uint4(self, p, task, bug):
        sync = "" if bug == "missing_barrier" else "\n    __syncthreads();"
        base = "6 + 8 * threadIdx.x" if bug == "off_by_one" else "5 + 8 * threadIdx.x"   # s[5 + 8 tid] = x[t - 3]
        return f"""#define TILE (THREADS * 8)
{self._PACK}
// Block = TILE outputs of one row; x arrives in 16-byte uint4 loads; slots [5, 8) of the smem
// tile hold the halo so the body stays 16-byte aligned at offset 8.
extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_kernel({self._ARGS}) {{
    __shared__ __align__(16) scalar_t s[TILE + 8];
    const int row = blockIdx.y, d = row % D, t0 = blockIdx.x * TILE;
    const scalar_t* xr = x + (size_t)row * L;
    const int t = t0 + 8 * threadIdx.x;
    *reinterpret_cast<uint4*>(&s[8 + 8 * threadIdx.x]) =
        t < L ? *reinterpret_cast<const uint4*>(xr + t) : make_uint4(0u, 0u, 0u, 0u);
    if (threadIdx.x < 3) s[5 + threadIdx.x] = t0 > 0 ? xr[t0 - 3 + threadIdx.x] : from_float(0.f);
    {self._WEIGHTS}{sync}
    if (t >= L) return;
    float v[11];                                                // x[t-3 .. t+7]
#pragma unroll
    for (int i = 0; i < 11; ++i) v[i] = to_float(s[{base} + i]);
    Pack o;
    {self._conv8("bd")}
    *reinterpret_cast<uint4*>(y + (size_t)row * L + t) = o.u;
}}
""", self._TILE_GRID, "THREADS"

    def _shfl(self, task, expr: str, delta: str, up: bool = True) -> str:
        if task.is_hip:
            return f"__shfl_up({expr}, {delta})" if up else f"__shfl({expr}, {delta})"
        return (f"__shfl_up_sync(0xffffffffu, {expr}, {delta})" if up else
                f"__shfl_sync(0xffffffffu, {expr}, {delta})")

    def _window(self, task, bug) -> str:
        """8 loaded values -> 11-wide window; v[0..2] from lane - 1 (lane 0 keeps h0..h2)."""
        src = (5, 6, 7) if bug != "off_by_one" else (4, 5, 6)
        lines = "\n".join(f"        const float n{j} = {self._shfl(task, f'c[{s}]', '1')};" for j, s in enumerate(src))
        return f"""{lines}
        float v[11];
        v[0] = lane == 0 ? h0 : n0; v[1] = lane == 0 ? h1 : n1; v[2] = lane == 0 ? h2 : n2;
#pragma unroll
        for (int i = 0; i < 8; ++i) v[3 + i] = c[i];"""

    _LOAD8 = """Pack in;
        in.u = t < L ? *reinterpret_cast<const uint4*>(xr + t) : make_uint4(0u, 0u, 0u, 0u);
        float c[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) c[i] = to_float(in.h[i]);"""

    def _warp_shuffle_halo(self, p, task, bug):
        acc0 = "0.f" if bug == "wrong_init" else "bd"
        return f"""#define TILE (THREADS * 8)
{self._PACK}
// Each lane loads 8 steps with one uint4; the 3 steps before them are the previous lane's last
// three, fetched with a shuffle. Only lane 0 of each warp touches global memory for its halo.
extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_kernel({self._ARGS}) {{
    const int row = blockIdx.y, d = row % D, lane = threadIdx.x % WARP_SIZE;
    const scalar_t* xr = x + (size_t)row * L;
    const int t = blockIdx.x * TILE + 8 * threadIdx.x;
    {self._WEIGHTS}
    {{
        {self._LOAD8}
        const bool has_prev = lane == 0 && t >= 8 && t - 3 < L;
        const float h0 = has_prev ? to_float(xr[t - 3]) : 0.f, h1 = has_prev ? to_float(xr[t - 2]) : 0.f;
        const float h2 = has_prev ? to_float(xr[t - 1]) : 0.f;
{self._window(task, bug)}
        if (t >= L) return;
        Pack o;
    {self._conv8(acc0)}
        *reinterpret_cast<uint4*>(y + (size_t)row * L + t) = o.u;
    }}
}}
""", self._TILE_GRID, "THREADS"

    def _register_strip(self, p, task, bug):
        acc0 = "0.f" if bug == "wrong_init" else "bd"
        last = self._shfl(task, "c[{}]", "WARP_SIZE - 1", up=False)
        return f"""#define STRIP {p['strip']}                  // steps of one row per warp
{self._PACK}
// One warp per (row, strip): it walks the strip WARP_SIZE * 8 steps at a time; the halo of lane 0
// is the previous iteration's last three values, broadcast from the last lane in registers.
extern "C" __global__ void __launch_bounds__(THREADS)
causal_conv1d_kernel({self._ARGS}) {{
    const int lane = threadIdx.x % WARP_SIZE;
    const int strips = (L + STRIP - 1) / STRIP;
    const int job = blockIdx.x * (THREADS / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (job >= Bsz * D * strips) return;                        // whole warps leave together
    const int row = job / strips, d = row % D, s0 = (job % strips) * STRIP;
    const scalar_t* xr = x + (size_t)row * L;
    {self._WEIGHTS}
    float h0 = 0.f, h1 = 0.f, h2 = 0.f;                         // x[s0-3 .. s0-1], zero at the row start
    if (s0 > 0) {{ h0 = to_float(xr[s0 - 3]); h1 = to_float(xr[s0 - 2]); h2 = to_float(xr[s0 - 1]); }}
    for (int t0 = s0; t0 < min(s0 + STRIP, L); t0 += WARP_SIZE * 8) {{
        const int t = t0 + 8 * lane;
        {self._LOAD8}
{self._window(task, bug)}
        h0 = {last.format(5)}; h1 = {last.format(6)}; h2 = {last.format(7)};
        if (t < L) {{
            Pack o;
        {self._conv8(acc0)}
            *reinterpret_cast<uint4*>(y + (size_t)row * L + t) = o.u;
        }}
    }}
}}
""", f"(B * D * ((L + STRIP - 1) / STRIP) + THREADS / WARP_SIZE - 1) / (THREADS / WARP_SIZE)", "THREADS"
