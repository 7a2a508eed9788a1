"""MoE combine in CUDA: weighted sum of each token's top-k expert outputs, back in token order.

expert_out [T * topk, K] is in expert-sorted order (row p holds assignment sorted_ids[p], a = t * topk + j);
y[t, :] = sum_j topk_weights[t, j] * expert_out[p(t * topk + j), :] with fp32 accumulation.
Ladder: scatter-add with fp32 atomics into a zeroed buffer plus a convert kernel -> invert the
permutation once, then one thread per output element gathers its top-k values (no atomics, deterministic)
-> one block per token with 16-byte uint4 loads -> several tokens per block with all top-k row loads
issued before the accumulation (TOPK compile-time, loads in flight per lane = topk) -> the same
with each token group's columns split over several blocks, so a decode batch's few tokens fill the GPU.
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..unroll import PRAGMA_UNROLL, launch_of, render_of
from ..dialect import prelude
from ..words import VEC, WORD, word_union
from .moe_combine_spec import ENTRY, MoeCombineSpec

THREADS = Param("threads", (64, 128, 256, 512), 256)


def sizes(task):
    """(tokens, topk, K, element bytes, minimum bytes, assignments)."""
    t, topk = task["T"], task["topk"]
    return t, topk, task["K"], DTYPE_BYTES[task.dtype], MoeCombineSpec().cost(task).bytes, t * topk


# -- atomic_scatter_add --------------------------------------------------------------------
def atomic_scatter_add_launch(p, task):
    t, topk, k, e, base, n = sizes(task)
    # fp32 buffer: zeroed, atomically updated topk times per element at L2, read back by the convert
    extra = t * k * 4 * 3 + n * k * 4 * 0.5
    return Launch(grid=cdiv(n * k, p["threads"]), threads=p["threads"], regs=20, bytes_per_access=e,
                  traffic=1 + extra / base, launches=3)


def atomic_scatter_add_src(p, task, w="topk_weights[a] * ", last="count"):
    upd = f"atomicAdd(&acc[(size_t)(a / topk) * K + k], {w}to_float(expert_out[i]));"
    return f"""
// Walk expert_out in its own (expert-sorted) order and add each weighted value into its token's row.
extern "C" __global__ void __launch_bounds__(THREADS)
moe_combine_kernel(const scalar_t* __restrict__ expert_out, const int* __restrict__ sorted_ids,
                   const float* __restrict__ topk_weights, float* acc, int n, int K, int topk) {{
    const size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;
    if (i >= (size_t)n * K) return;
    const int a = sorted_ids[i / K], k = (int)(i % K);
    {upd}
}}

__global__ void moe_convert(const float* __restrict__ acc, scalar_t* __restrict__ y, size_t count) {{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < {last}) y[i] = from_float(acc[i]);
}}

{ENTRY.prototype(task)} {{
    const size_t n = (size_t)T * topk, outputs = (size_t)T * K;
    float* acc = nullptr;                      // fp32 token-order accumulator
    cudaMallocAsync((void**)&acc, outputs * sizeof(float), stream);
    cudaMemsetAsync(acc, 0, outputs * sizeof(float), stream);
    moe_combine_kernel<<<(unsigned)((n * K + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
        expert_out, sorted_ids, topk_weights, acc, (int)n, K, topk);
    moe_convert<<<(unsigned)((outputs + 255) / 256), 256, 0, stream>>>(acc, y, outputs);
    cudaFreeAsync(acc, stream);
}}
"""


# -- the gather rungs: invert the permutation once, then read each token's rows ------------
def invert(task) -> str:
    n = task["T"] * task["topk"]
    return f"""
__device__ int slot_of[{n}];                    // slot_of[a]: row of assignment a in expert_out

__global__ void invert_perm(const int* __restrict__ sorted_ids, int n) {{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n) slot_of[sorted_ids[p]] = p;
}}
"""


def host(task, grid: str) -> str:
    return f"""
{ENTRY.prototype(task)} {{
    const int n = T * topk;
    invert_perm<<<(n + 255) / 256, 256, 0, stream>>>(sorted_ids, n);
    moe_combine_kernel<<<{grid}, THREADS, 0, stream>>>(expert_out, topk_weights, y, T, K, topk);
}}
"""


def gather_per_element_launch(p, task):
    t, topk, k, e, base, n = sizes(task)
    vec = p.get("vec", 1)       # words.VEC adjacent elements a thread: one load of each of its topk rows moves VEC
    # (ptxas sm_90a: 32 registers at VEC 1, 2 and 4)
    return Launch(grid=cdiv(t * k // vec, p["threads"]), threads=p["threads"], regs=32, bytes_per_access=e * vec,
                  traffic=1 + n * 8 / base, launches=2)


def gather_per_element_src(p, task, init="0.f", last="topk"):
    if p.get("vec", 1) > 1:
        return gather_words_src(p, task, init, last)
    return invert(task) + f"""
// One thread per y element: its topk sources are the same column of topk rows (coalesced per warp).
extern "C" __global__ void __launch_bounds__(THREADS)
moe_combine_kernel(const scalar_t* __restrict__ expert_out, const float* __restrict__ topk_weights,
                   scalar_t* __restrict__ y, int T, int K, int topk) {{
    const size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;
    if (i >= (size_t)T * K) return;
    const int t = (int)(i / K), k = (int)(i % K);
    float acc = {init};
    for (int j = 0; j < {last}; ++j) {{
        const int a = t * topk + j;
        acc += topk_weights[a] * to_float(expert_out[(size_t)slot_of[a] * K + k]);
    }}
    y[i] = from_float(acc);
}}
""" + host(task, "(unsigned)(((size_t)T * K + THREADS - 1) / THREADS)")


def gather_words_src(p, task, init: str, last: str) -> str:
    """gather_per_element over words.VEC-element words: a thread owns VEC adjacent y elements."""
    vec, word = p["vec"], WORD[p["vec"]]
    return invert(task) + f"""
#define VEC {vec}  // adjacent y elements a thread owns, loaded from each row as one {vec * 2}-byte {word}; K % VEC == 0
{word_union(vec)}
// One thread per VEC adjacent y elements: its topk sources are the same VEC columns of topk rows, a word each.
extern "C" __global__ void __launch_bounds__(THREADS)
moe_combine_kernel(const scalar_t* __restrict__ expert_out, const float* __restrict__ topk_weights,
                   scalar_t* __restrict__ y, int T, int K, int topk) {{
    const size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;       // y's word index
    if (i >= (size_t)T * (K / VEC)) return;
    const int t = (int)(i / (K / VEC)), c = (int)(i % (K / VEC));
    float acc[VEC];
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] = {init};
    for (int j = 0; j < {last}; ++j) {{
        const int a = t * topk + j;
        const float w = topk_weights[a];
        Word x; x.u = reinterpret_cast<const {word}*>(expert_out + (size_t)slot_of[a] * K)[c];
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[v] += w * to_float(x.h[v]);
    }}
    Word o;
#pragma unroll
    for (int v = 0; v < VEC; ++v) o.h[v] = from_float(acc[v]);
    reinterpret_cast<{word}*>(y)[i] = o.u;
}}
""" + host(task, "(unsigned)(((size_t)T * (K / VEC) + THREADS - 1) / THREADS)")


PACK = """
constexpr int VEC = 8;                          // 8 x 16-bit elements per 16-byte uint4 (K % 8 == 0)
union Pack { uint4 u; scalar_t h[VEC]; };
"""


def vectorized_uint4_launch(p, task):
    t, topk, k, e, base, n = sizes(task)
    return Launch(grid=t, threads=p["threads"], regs=32, bytes_per_access=16, traffic=1 + n * 8 / base,
                  lane_util=min(1.0, k / 8 / p["threads"]), launches=2)


def vectorized_uint4_src(p, task, last="topk", w="w * "):
    return invert(task) + PACK + f"""
// One block per token; each lane owns 8 columns and walks the token's topk expert rows.
extern "C" __global__ void __launch_bounds__(THREADS)
moe_combine_kernel(const scalar_t* __restrict__ expert_out, const float* __restrict__ topk_weights,
                   scalar_t* __restrict__ y, int T, int K, int topk) {{
    const int t = blockIdx.x;
    for (int c = threadIdx.x; c < K / VEC; c += THREADS) {{
        float acc[VEC];
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[v] = 0.f;
        for (int j = 0; j < {last}; ++j) {{
            const int a = t * topk + j;
            const float w = topk_weights[a];
            Pack in; in.u = reinterpret_cast<const uint4*>(expert_out + (size_t)slot_of[a] * K)[c];
#pragma unroll
            for (int v = 0; v < VEC; ++v) acc[v] += {w}to_float(in.h[v]);
        }}
        Pack out;
#pragma unroll
        for (int v = 0; v < VEC; ++v) out.h[v] = from_float(acc[v]);
        reinterpret_cast<uint4*>(y + (size_t)t * K)[c] = out.u;
    }}
}}
""" + host(task, "T")


def ilp_regs(topk: int, tpb: int, threads: int) -> int:
    """multi_token_ilp / column_split_ilp's registers as ptxas gives them (nvcc 13.0 sm_90a, bf16, threads 64-512):
    one token a block, 32 at topk 2 and 6, 36 at topk 8; from two tokens on, the next token's pointers and weights
    stay live beside the loads: 40, 48 (256 threads) or 56-58, 62-63. The estimate 24 + 5 x topk put one-token
    blocks of 256 threads at 4 an SM where 8 fit (topk 6): held out, column_split_ilp at T=2048 topk 6 K=2048 ran
    27.2-27.5 us on 256 threads, 25.9-26.7 on 32 / 64, modelled 36.5 against 23.2-25.7 (docs/simB_issue30.md s8)."""
    if tpb == 1:
        return 36 if topk >= 8 else 32
    return {2: 40, 6: 48 if threads == 256 else 56, 8: 62}.get(topk, 24 + 5 * topk)


def multi_token_ilp_launch(p, task):
    """multi_token_ilp, and column_split_ilp whose grid also splits each row's K / 8 vectors over
    col_splits blocks (each re-stages the block's slots and weights: TPB * topk * 8 bytes from L2).

    column_split_ilp's CTAs, one short slice each, wait on two dependent round trips (the slots,
    then the expert rows they name): an H100 (80GB HBM3, scripts/gpu_check_rounds.sh, default params)
    took 0.0067 ms at T=64 topk=6 K=2048 where one round trip said 0.0051 ms (0.0051 ms at T=16
    topk=2 K=4096, timed L2-resident). multi_token_ilp's calibrated ceiling already holds its chain."""
    t, topk, k, e, base, n = sizes(task)
    tpb, splits = p["tokens_per_block"], p.get("col_splits", 1)
    return Launch(grid=cdiv(t, tpb) * splits, threads=p["threads"], smem_bytes=tpb * topk * 8,
                  regs=ilp_regs(topk, tpb, p["threads"]),
                  bytes_per_access=8 * topk, traffic=1 + n * 8 * splits / base,
                  lane_util=min(1.0, k / 8 / splits / p["threads"]), launches=2, rounds=2 if "col_splits" in p else 1)


COLUMNS = "for (int c = threadIdx.x; c < K / VEC; c += THREADS)"
# column_split_ilp: blockIdx.y takes one of COL_SPLITS equal slices of the row's K / VEC vectors
SLICE = ("const int per = (K / VEC + COL_SPLITS - 1) / COL_SPLITS, c1 = min(K / VEC, (int)(blockIdx.y + 1) * per);\n"
         "        for (int c = blockIdx.y * per + threadIdx.x; c < c1; c += THREADS)")


def multi_token_ilp_src(p, task, w="w[j] * ", last="tokens"):
    split = "col_splits" in p
    head = f"#define COL_SPLITS {p['col_splits']}        // blocks sharing one token group's K columns\n" if split else ""
    grid = "dim3((T + TPB - 1) / TPB, COL_SPLITS)" if split else "(T + TPB - 1) / TPB"
    cols = SLICE if split else COLUMNS
    return invert(task) + PACK + head + f"""
#define TOPK {task['topk']}              // compile-time: the row loads unroll and issue together
#define TPB {p['tokens_per_block']}

extern "C" __global__ void __launch_bounds__(THREADS)
moe_combine_kernel(const scalar_t* __restrict__ expert_out, const float* __restrict__ topk_weights,
                   scalar_t* __restrict__ y, int T, int K, int topk) {{
    __shared__ int rows[TPB * TOPK];
    __shared__ float weights[TPB * TOPK];
    const int t0 = blockIdx.x * TPB;
    const int tokens = min(TPB, T - t0);
    for (int i = threadIdx.x; i < tokens * TOPK; i += THREADS) {{  // this block's slots and weights, once
        rows[i] = slot_of[t0 * TOPK + i];
        weights[i] = topk_weights[t0 * TOPK + i];
    }}
    __syncthreads();
    for (int tt = 0; tt < {last}; ++tt) {{
        const uint4* src[TOPK];
        float w[TOPK];
#pragma unroll
        for (int j = 0; j < TOPK; ++j) {{
            src[j] = reinterpret_cast<const uint4*>(expert_out + (size_t)rows[tt * TOPK + j] * K);
            w[j] = weights[tt * TOPK + j];
        }}
        {cols} {{
            Pack in[TOPK];
#pragma unroll
            for (int j = 0; j < TOPK; ++j) in[j].u = src[j][c];     // TOPK independent 16-byte loads in flight
            float acc[VEC];
#pragma unroll
            for (int v = 0; v < VEC; ++v) acc[v] = 0.f;
#pragma unroll
            for (int j = 0; j < TOPK; ++j)
#pragma unroll
                for (int v = 0; v < VEC; ++v) acc[v] += {w}to_float(in[j].h[v]);
            Pack out;
#pragma unroll
            for (int v = 0; v < VEC; ++v) out.h[v] = from_float(acc[v]);
            reinterpret_cast<uint4*>(y + (size_t)(t0 + tt) * K)[c] = out.u;
        }}
    }}
}}
""" + host(task, grid)


class MoeCombineCuda(MoeCombineSpec):
    impl = "cuda"
    shapes = ({"T": 16, "topk": 2, "K": 4096}, {"T": 4096, "topk": 2, "K": 4096}, {"T": 64, "topk": 6, "K": 2048},
              {"T": 2048, "topk": 6, "K": 2048}, {"T": 8192, "topk": 8, "K": 2048}, {"T": 512, "topk": 8, "K": 7168})
    variants = (
        Rung("atomic_scatter_add", "thread per expert_out element atomicAdds w * v into a zeroed fp32 buffer; convert kernel",
             (THREADS,), memory_eff=0.6, launch=atomic_scatter_add_launch, render=atomic_scatter_add_src,
             bugs={"missing_scale": {"w": ""}, "off_by_one": {"last": "count - 1"}}),
        Rung("gather_per_element", "inverse permutation kernel, then one thread per y element gathers its top-k values",
             (THREADS, VEC), memory_eff=0.75, launch=gather_per_element_launch, render=gather_per_element_src,
             bugs={"wrong_init": {"init": "1.f"}, "off_by_one": {"last": "topk - 1"}}),
        Rung("vectorized_uint4", "one block per token: 16-byte uint4 loads of each expert row, fp32 accumulators",
             (THREADS, PRAGMA_UNROLL), memory_eff=0.86, render=render_of(vectorized_uint4_src),
             launch=launch_of(vectorized_uint4_launch, lambda p, t: t["K"] / 8 / p["threads"], lambda p, t: 4 * t["topk"]),
             bugs={"missing_scale": {"w": ""}, "off_by_one": {"last": "topk - 1"}}),
        Rung("multi_token_ilp", "tokens per block, slots/weights staged in smem, all top-k uint4 loads in flight at once",
             (Param("threads", (64, 128, 256, 512), 128), Param("tokens_per_block", (1, 2, 4, 8), 2)), memory_eff=0.91,
             smem="static", launch=multi_token_ilp_launch, render=multi_token_ilp_src,
             bugs={"missing_scale": {"w": ""}, "off_by_one": {"last": "tokens - 1"}}),
        Rung("column_split_ilp", "as multi_token_ilp, each token group's K columns split over COL_SPLITS blocks "
             "(a grid that fills the SMs at decode batch sizes)",
             (Param("threads", (32, 64, 128, 256), 64), Param("tokens_per_block", (1, 2, 4), 1),
              Param("col_splits", (2, 4, 8, 16), 4)), memory_eff=0.91,
             smem="static", launch=multi_token_ilp_launch, render=multi_token_ilp_src,
             bugs={"missing_scale": {"w": ""}, "off_by_one": {"last": "tokens - 1"}}),
    )

    def assemble(self, body, variant, params, task):
        return f"{prelude(task)}\n#define THREADS {params['threads']}\n{body}"
