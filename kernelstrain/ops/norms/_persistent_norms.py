"""The persistent_prefetch rung of the register-cached norms (rmsnorm_cuda, add_rmsnorm_cuda, layernorm_cuda;
ops/persistent_rows.py): their register_cached kernel on a persistent grid, the next row group's rows loaded
while this one is reduced, the row-invariant weight (and bias) held in registers for every row."""
from .. import persistent_rows
from ._norms import VEC_PACK

# a reduction of one row's THREADS partials, in two halves around the block barrier the row loop writes itself
# (so the loop reads as one that waits every trip: knobs.main_loop_kind): each warp's shuffled partial into shared
# memory, then the row's warp totals summed from `first` (off_by_one: 1). Two sets of totals are used in turn: a
# row's are read before the next row's barrier, so the row after that may write them again, one barrier a reduction.
ROW_SUM = """
__device__ __forceinline__ void post_warp_total(float v, float (*totals)[THREADS / WARP_SIZE], int sub, int tid) {{
    v = warp_sum(v);
    if (tid % WARP_SIZE == 0) totals[sub][tid / WARP_SIZE] = v;
}}

__device__ __forceinline__ float row_total(float (*totals)[THREADS / WARP_SIZE], int sub) {{
    float total = 0.f;
#pragma unroll
    for (int w = {first}; w < THREADS / WARP_SIZE; ++w) total += totals[sub][w];
    return total;
}}
"""


def row_sum(value: str, totals: str) -> str:
    """The row's total of `value` over its threads, into `total`, through shared-memory set `totals`."""
    return f"""        post_warp_total({value}, {totals}, sub, tid);
        __syncthreads();
        const float total_{value} = row_total({totals}, sub);"""


def kernel(p, task, entry, sig: str, held: dict, streamed: dict, body: str, first: str = "0", reductions: int = 1) -> str:
    """A persistent row kernel: `held` name -> pointer loaded once a CTA (row 0 of a one-row tensor), `streamed`
    name -> pointer of a row tensor whose rows are prefetched into `next_<name>`, and `body`, the row's work on
    cache_<name> at `row` (`row < T` guards its stores; its reductions, row_sum, use sets `parity`)."""
    names = list(held) + [f"cache_{n}" for n in streamed] + [f"next_{n}" for n in streamed]
    loads = "".join(f"\n    load_row({n}, {ptr}, 0, 1, D, tid);" for n, ptr in held.items())
    firsts = "".join(f"\n    load_row(cache_{n}, {ptr}, blockIdx.x * ROWS_PER_BLOCK + sub, T, D, tid);" for n, ptr in streamed.items())
    ahead = "".join(f"\n        load_row(next_{n}, {ptr}, row + stride, T, D, tid);" for n, ptr in streamed.items())
    moves = " ".join(task.dialect.pack_copy.format(dst=f"cache_{n}[j]", src=f"next_{n}[j]") + ";" for n in streamed)
    return f"""
{persistent_rows.head(p, task)}
{VEC_PACK}{persistent_rows.LOAD_ROW}{ROW_SUM.format(first=first)}
// BLOCKS_PER_SM CTAs an SM stride over the row groups. Each thread loads its chunks of the next
// group's row before it reduces this one: those loads are in flight during the reduction and the
// stores, so only a CTA's first row waits on DRAM. The weight stays in registers for every row.
extern "C" __global__ void __launch_bounds__(THREADS * ROWS_PER_BLOCK)
{sig} {{
    __shared__ float totals[{2 * reductions}][ROWS_PER_BLOCK][THREADS / WARP_SIZE];
    const int sub = threadIdx.x / THREADS, tid = threadIdx.x % THREADS;
    const int chunks = D / VEC, stride = gridDim.x * ROWS_PER_BLOCK;
    Pack {", ".join(f"{n}[CHUNKS_PER_THREAD]" for n in names)};{loads}{firsts}
    int parity = 0;
    for (int group = blockIdx.x * ROWS_PER_BLOCK; group < T; group += stride, parity ^= 1) {{
        const int row = group + sub;{ahead}
{body}
#pragma unroll
        for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{ {moves} }}
    }}
}}
{persistent_rows.host(entry, task, sig.split("(")[0])}"""


TITLE = "persistent grid over the rows, next row's loads in flight during this row's reduction"


def climb(module: str, variants: tuple, render, carried: int, reductions: int = 1) -> tuple:
    """The ladder with persistent_prefetch over register_cached, where offered (persistent_rows.climb). `carried`:
    the uint4 chunk sets a thread holds past register_cached's model, fitted to ptxas -v (nvcc 13, sm_90a, rows of
    1-16 chunks a thread: scripts/roomC_build.py): rmsnorm 3 (the next row, the weight and the fp32 products;
    ptxas 94 / 186 / 220 registers at 4 / 8 / 10 chunks), add_rmsnorm 6 (x's and the residual's rows, both
    prefetched, the weight; 80 / 150 / 204 at 2 / 4 / 5), layernorm 5 (the weight and the bias too; 76 / 128 / 161
    at 2 / 4 / 5). `reductions`: the row statistics `kernel` reduces (its shared totals, two sets each)."""
    return persistent_rows.climb(module, variants, "register_cached", render, carried, TITLE, 2 * reductions)


# -- the three norms' row bodies ------------------------------------------------------------
def store_rows(expr: str, out: str = "y") -> str:
    """The row's output chunks, element k of chunk j as `expr`."""
    return f"""        if (row < T) {{
            uint4* yr = reinterpret_cast<uint4*>({out} + (size_t)row * D);
#pragma unroll
            for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
                const int c = tid + j * THREADS;
                if (c >= chunks) continue;
                Pack o;
#pragma unroll
                for (int k = 0; k < VEC; ++k) o.h[k] = from_float({expr});
                yr[c] = o.u;
            }}
        }}"""


SUM_SQ = """#pragma unroll
        for (int j = 0; j < CHUNKS_PER_THREAD; ++j)
#pragma unroll
            for (int k = 0; k < VEC; ++k) {{ const float f = to_float({row}[j].h[k]); sum_sq += f * f; }}"""


def rmsnorm_body(init: str, scale: str) -> str:
    return f"""        float sum_sq = {init};
        {SUM_SQ.format(row="cache_x")}
{row_sum("sum_sq", "totals[parity]")}
        const float inv_rms = rsqrtf(total_sum_sq / D + eps);
{store_rows("to_float(cache_x[j].h[k]) * inv_rms" + scale)}"""


def add_rmsnorm_body(scale: str) -> str:
    # the sum x + residual, rounded to the storage type as the residual stream is, is both the stored
    # residual and the normalised row
    return f"""        float sum_sq = 0.f;
#pragma unroll
        for (int j = 0; j < CHUNKS_PER_THREAD; ++j)
#pragma unroll
            for (int k = 0; k < VEC; ++k) {{
                cache_x[j].h[k] = from_float(to_float(cache_x[j].h[k]) + to_float(cache_r[j].h[k]));
                const float f = to_float(cache_x[j].h[k]);
                sum_sq += f * f;
            }}
{store_rows("to_float(cache_x[j].h[k])", "residual")}
{row_sum("sum_sq", "totals[parity]")}
        const float inv_rms = rsqrtf(total_sum_sq / D + eps);
{store_rows("to_float(cache_x[j].h[k]) * inv_rms" + scale)}"""


def layernorm_body(scale: str) -> str:
    # exact two-pass statistics on the cached row, as register_cached: the centred sum of squares, no cancellation
    return f"""        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < CHUNKS_PER_THREAD; ++j)
#pragma unroll
            for (int k = 0; k < VEC; ++k) sum += to_float(cache_x[j].h[k]);
{row_sum("sum", "totals[2 * parity]")}
        const float mean = total_sum / D;
        float sq = 0.f;
#pragma unroll
        for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
            if (tid + j * THREADS >= chunks) continue;  // zero-filled tail chunks are not samples
#pragma unroll
            for (int k = 0; k < VEC; ++k) {{ const float dv = to_float(cache_x[j].h[k]) - mean; sq += dv * dv; }}
        }}
{row_sum("sq", "totals[2 * parity + 1]")}
        const float rstd = rsqrtf(total_sq / D + eps);
{store_rows("(to_float(cache_x[j].h[k]) - mean) * rstd" + scale + " + to_float(b[j].h[k])")}"""


W_SCALE = " * to_float(w[j].h[k])"     # the weight multiply that missing_scale drops


RMS_SIG = """rmsnorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
               scalar_t* __restrict__ y, int T, int D, float eps)"""


def rmsnorm_src(entry, sig: str = RMS_SIG):
    def render(p, task, init="0.f", scale=W_SCALE):
        return kernel(p, task, entry, sig, {"w": "weight"}, {"x": "x"}, rmsnorm_body(init, scale))
    return render


def add_rmsnorm_src(entry, sig: str):
    def render(p, task, first="0", scale=W_SCALE):
        return kernel(p, task, entry, sig, {"w": "weight"}, {"x": "x", "r": "residual"}, add_rmsnorm_body(scale), first)
    return render


def layernorm_src(entry, sig: str):
    def render(p, task, first="0", scale=W_SCALE):
        return kernel(p, task, entry, sig, {"w": "weight", "b": "bias"}, {"x": "x"}, layernorm_body(scale), first, reductions=2)
    return render
