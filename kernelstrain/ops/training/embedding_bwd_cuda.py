"""Embedding backward in CUDA: scatter-add grad rows into the table, grad_weight[ids[t]] += grad_out[t].

Tokens equal to padding_idx add nothing. Ladder: an atomicAdd per element -> a warp per token
with packed 2-wide atomics (half2 / bfloat162) -> sort tokens by id (stable radix sort of
(id, position)) and let one block reduce each segment in order: no atomics, deterministic ->
the sorted reduce with a warp per (segment, 256-column slice), 16-byte loads and fp32
registers, so hot tokens spread across warps. bf16 starts at the sort: its atomics round at every
add, several ulps off the one-rounding sum (outside KernelBench's 1e-2 on an H200); fp16 is within.
"""
import math

from ..base import Cost, Launch, OpModule, Param, Rung, Task, TorchRef, DTYPE_BYTES, cdiv
from ..contract import Arg, Entry, Scalar
from ..dialect import prelude
from ..words import VEC
from ._embedding_bwd_sort import segment, sort_host, sorted_words_kernel

# L2 cost of one element's atomic update, in DRAM-byte equivalents: the row read-modify-write
# plus the atomic unit's per-operation limit. A packed 2-wide atomic halves the operations.
ATOMIC_BYTES = {"scalar": 12, "packed": 6}
SORT_LAUNCHES = 6        # iota, radix-sort histogram + 3 onesweep passes, segment reduce
PADDING_IDX = 0
ATOMIC_DTYPES = ("fp16",)  # the atomic rungs: not for bf16 (see above)
SEGMENT_BUGS = {"off_by_one": {"end": "k1 - 1"}, "bad_combine_index": {"prev": "sorted_ids[{k0} + 1]"}}


def shared_id_pairs(task) -> float:
    """Expected pairs of non-padding tokens that share an id, for the benchmark's ids (torch_ref: every 8th token the
    padding id, the rest uniform over V): bad_combine_index (a segment reduced from its last position, not its first)
    drops rows only where an id repeats, so a run passes with probability about exp(-pairs)."""
    n = task["T"] - -(-task["T"] // 8)
    return n * (n - 1) / (2 * task["V"])


# offered where a run passes with probability under 1e-6 (exp(-14)): not at T = 512, V = 32000 (3.1 pairs, 4.5%)
REPEATED_IDS = (("bad_combine_index", lambda t, p: shared_id_pairs(t) >= 14),)

ENTRY = Entry("embedding_bwd", (
    Arg("ids", "in", ("T",), "int64"), Arg("grad_out", "in", ("T", "D")), Arg("grad_weight", "inout", ("V", "D")),
    Scalar("T"), Scalar("D"), Scalar("V"), Scalar("padding_idx")))


def min_bytes(task) -> int:
    t, d, v, e = task["T"], task["D"], task["V"], DTYPE_BYTES[task.dtype]
    # grad_out read once; every touched table row read and written once
    return t * d * e + 2 * min(t, v) * d * e + 8 * t


def segment_rows(task) -> float:
    """Rows of grad_out a touched table row sums, on average, for the benchmark's ids (torch_ref: every 8th token
    the padding id, skipped; the rest uniform over V): the non-padding tokens over the distinct ids they hit."""
    t, v = task["T"], task["V"]
    n = t - cdiv(t, 8)
    return n / (v * -math.expm1(-n / v)) if n else 1.0


def launch_of(kind: str):
    """atomic (a 16-bit atomic per element), atomic2 (a warp per token, packed atomics), sort
    (a block per sorted segment) or sorted_vec (a warp per segment slice)."""
    def launch(p, task):
        t, d, e, gpu = task["T"], task["D"], DTYPE_BYTES[task.dtype], task.gpu
        if kind == "atomic":
            threads = p["threads"]
            return Launch(grid=cdiv(t * d, threads), threads=threads, regs=18, bytes_per_access=e,
                          traffic=t * d * (e + ATOMIC_BYTES["scalar"]) / min_bytes(task))
        if kind == "atomic2":
            warps = p["warps_per_block"]
            return Launch(grid=cdiv(t, warps), threads=warps * gpu.warp, regs=22, bytes_per_access=16,
                          traffic=t * d * (e + ATOMIC_BYTES["packed"]) / min_bytes(task),
                          lane_util=min(1.0, d * e / 16 / gpu.warp))
        sort_traffic = 1 + 3 * 2 * 12 * t / min_bytes(task)    # 3 passes over (int64 id, int pos)
        if kind == "sort":
            threads = p["threads"]
            vec = p.get("vec", 1)       # words.VEC columns a load (ptxas sm_90a: 32 registers at VEC 1, 2 and 4)
            return Launch(grid=t, threads=threads, regs=32, bytes_per_access=e * vec, traffic=sort_traffic,
                          lane_util=min(1.0, d / (threads * vec)), launches=SORT_LAUNCHES)
        warps, unroll = p["warps_per_block"], p["unroll"]
        slices = cdiv(d * e // 16, gpu.warp)
        # UNROLL rows go out together only within a segment of at least UNROLL rows (the unrolled loop; the rest
        # one at a time), and a segment holds segment_rows(task) rows: at the menu's shapes 1.0-1.5, so unroll
        # 2 and 4 keep what 1 keeps in flight. ptxas (nvcc 13, sm_90a) gives the kernel 32 registers at
        # UNROLL 1, 2 and 4 alike. H100 (measurements/h100_sim2_fit.json, T=8192 D=8192 V=128256): unroll 1 and 4
        # 170.3 / 169.7 us at 8 warps, 170.6 / 170.7 at 4, 174.7 / 175.6 at 2 (T=512: 13.3-14.2 either way),
        # where 16 x UNROLL bytes a load and 28 + 2 x UNROLL registers put unroll 4 5% behind unroll 1
        return Launch(grid=cdiv(t * slices, warps), threads=warps * gpu.warp, regs=32,
                      bytes_per_access=16 * max(1.0, min(unroll, segment_rows(task))), traffic=sort_traffic,
                      launches=SORT_LAUNCHES)
    return launch


def atomics(task) -> str:
    if not task.dialect.atomic_16bit:   # no 16-bit atomics: a CAS on the enclosing 32-bit word
        return """
__device__ __forceinline__ void atomic_add2(scalar_t* addr, float a, float b) {
    unsigned int* word = reinterpret_cast<unsigned int*>(addr);
    unsigned int old = *word, assumed;
    do {
        assumed = old;
        scalar_t h[2]; __builtin_memcpy(h, &assumed, 4);
        h[0] = from_float(to_float(h[0]) + a); h[1] = from_float(to_float(h[1]) + b);
        unsigned int next; __builtin_memcpy(&next, h, 4);
        old = atomicCAS(word, assumed, next);
    } while (old != assumed);
}
__device__ __forceinline__ void atomic_add(scalar_t* addr, float v) {
    const bool high = reinterpret_cast<uintptr_t>(addr) & 2;
    scalar_t* pair = addr - (high ? 1 : 0);
    atomic_add2(pair, high ? 0.f : v, high ? v : 0.f);
}
"""
    pair = "__half2" if task.dtype == "fp16" else "__nv_bfloat162"
    make = "__floats2half2_rn" if task.dtype == "fp16" else "__floats2bfloat162_rn"
    return f"""
// Native 16-bit atomics: scalar, and a packed pair (one 32-bit atomic covers two elements).
__device__ __forceinline__ void atomic_add(scalar_t* addr, float v) {{ atomicAdd(addr, from_float(v)); }}
__device__ __forceinline__ void atomic_add2(scalar_t* addr, float a, float b) {{
    atomicAdd(reinterpret_cast<{pair}*>(addr), {make}(a, b));
}}
"""


def atomic_per_element_src(p, task, last="n"):
    return f"""
#define THREADS {p['threads']}
{atomics(task)}
// One thread per grad_out element; repeated ids collide on the same addresses in L2.
extern "C" __global__ void embedding_bwd_kernel(const int64_t* __restrict__ ids, const scalar_t* __restrict__ grad_out,
                                                scalar_t* grad_weight, int T, int D, int padding_idx) {{
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x, n = (int64_t)T * D;
    if (i >= {last}) return;
    const int64_t id = ids[i / D];
    if (id != padding_idx) atomic_add(&grad_weight[id * D + i % D], to_float(grad_out[i]));
}}

void embedding_bwd(const int64_t* ids, const scalar_t* grad_out, scalar_t* grad_weight, int T, int D, int V,
                   int padding_idx, cudaStream_t stream) {{
    const int64_t n = (int64_t)T * D;
    embedding_bwd_kernel<<<(unsigned)((n + THREADS - 1) / THREADS), THREADS, 0, stream>>>(ids, grad_out, grad_weight, T, D, padding_idx);
}}
"""


def vectorized_atomic2_src(p, task, last="chunks"):
    return f"""
#define WARPS {p['warps_per_block']}        // tokens per block, a warp each
constexpr int VEC = 8;            // 16-bit elements per uint4
union Pack {{ uint4 u; scalar_t h[VEC]; }};
{atomics(task)}
// A warp per token: 16-byte loads of grad_out, then 4 packed 2-wide atomics per load,
// half the atomic operations of the scalar version. The padding check is warp-uniform.
extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE)
embedding_bwd_kernel(const int64_t* __restrict__ ids, const scalar_t* __restrict__ grad_out,
                     scalar_t* grad_weight, int T, int D, int padding_idx) {{
    const int lane = threadIdx.x % WARP_SIZE, t = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE;
    if (t >= T) return;
    const int64_t id = ids[t];
    if (id == padding_idx) return;
    const uint4* src = reinterpret_cast<const uint4*>(grad_out + (size_t)t * D);
    scalar_t* dst = grad_weight + (size_t)id * D;
    const int chunks = D / VEC;
    for (int c = lane; c < {last}; c += WARP_SIZE) {{
        Pack g; g.u = src[c];
#pragma unroll
        for (int k = 0; k < VEC; k += 2) atomic_add2(dst + c * VEC + k, to_float(g.h[k]), to_float(g.h[k + 1]));
    }}
}}

void embedding_bwd(const int64_t* ids, const scalar_t* grad_out, scalar_t* grad_weight, int T, int D, int V,
                   int padding_idx, cudaStream_t stream) {{
    embedding_bwd_kernel<<<(T + WARPS - 1) / WARPS, WARPS * WARP_SIZE, 0, stream>>>(ids, grad_out, grad_weight, T, D, padding_idx);
}}
"""


def sort_segmented_reduce_src(p, task, **slots):
    head = segment("k0", **slots)
    if p.get("vec", 1) > 1:
        return f"""{sorted_words_kernel(p, head)}
{sort_host("embedding_bwd_kernel<<<T, THREADS, 0, stream>>>(sorted_ids, sorted_pos, grad_out, grad_weight, T, D, padding_idx);", task)}"""
    return f"""
#define THREADS {p['threads']}

// One block per sorted position; the block at the start of a segment sums its rows in order
// in fp32 and is the only writer of that table row: no atomics, same bits every run.
extern "C" __global__ void __launch_bounds__(THREADS)
embedding_bwd_kernel(const int64_t* __restrict__ sorted_ids, const int* __restrict__ sorted_pos,
                     const scalar_t* __restrict__ grad_out, scalar_t* grad_weight, int T, int D, int padding_idx) {{
    const int k0 = blockIdx.x;
    {head}
    scalar_t* dst = grad_weight + (size_t)id * D;
    for (int d = threadIdx.x; d < D; d += THREADS) {{
        float acc = to_float(dst[d]);
        for (int k = k0; k < k_end; ++k) acc += to_float(grad_out[(size_t)sorted_pos[k] * D + d]);
        dst[d] = from_float(acc);
    }}
}}
{sort_host("embedding_bwd_kernel<<<T, THREADS, 0, stream>>>(sorted_ids, sorted_pos, grad_out, grad_weight, T, D, padding_idx);", task)}"""


def sorted_segment_vectorized_src(p, task, **slots):
    head = segment("k0", **slots)
    return f"""
#define WARPS {p['warps_per_block']}
#define UNROLL {p['unroll']}          // grad rows in flight per lane
constexpr int VEC = 8;            // 16-bit elements per uint4
union Pack {{ uint4 u; scalar_t h[VEC]; }};

// A warp per (sorted position, slice of WARP_SIZE * VEC columns): a hot token's segment is
// reduced by D / 256 warps side by side. Each lane keeps VEC fp32 sums in registers and
// loads UNROLL rows ahead; still one writer per element, still deterministic.
extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE)
embedding_bwd_kernel(const int64_t* __restrict__ sorted_ids, const int* __restrict__ sorted_pos,
                     const scalar_t* __restrict__ grad_out, scalar_t* grad_weight, int T, int D, int padding_idx) {{
    const int slices = (D / VEC + WARP_SIZE - 1) / WARP_SIZE;
    const int w = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    if (w >= T * slices) return;
    const int k0 = w / slices, c = (w % slices) * WARP_SIZE + lane;   // uint4 column index
    {head}
    if (c >= D / VEC) return;
    float acc[VEC] = {{}};
    int k = k0;
    for (; k + UNROLL <= k_end; k += UNROLL) {{
        Pack g[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) g[u].u = reinterpret_cast<const uint4*>(grad_out + (size_t)sorted_pos[k + u] * D)[c];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc[j] += to_float(g[u].h[j]);
    }}
    for (; k < k_end; ++k) {{
        Pack g; g.u = reinterpret_cast<const uint4*>(grad_out + (size_t)sorted_pos[k] * D)[c];
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] += to_float(g.h[j]);
    }}
    uint4* dst = reinterpret_cast<uint4*>(grad_weight + (size_t)id * D) + c;
    Pack o; o.u = *dst;
#pragma unroll
    for (int j = 0; j < VEC; ++j) o.h[j] = from_float(to_float(o.h[j]) + acc[j]);
    *dst = o.u;
}}
{sort_host("const int slices = (D / VEC + WARP_SIZE - 1) / WARP_SIZE;" + chr(10) + "    embedding_bwd_kernel<<<(unsigned)(((int64_t)T * slices + WARPS - 1) / WARPS), WARPS * WARP_SIZE, 0, stream>>>(sorted_ids, sorted_pos, grad_out, grad_weight, T, D, padding_idx);", task)}"""


class EmbeddingBwdCuda(OpModule):
    op, impl, family = "embedding_bwd", "cuda", "training"
    title = "Embedding backward (scatter-add)"
    desc = (f"grad_weight[ids[t], :] += grad_out[t, :] for T int64 ids into a [V, D] gradient (in place, "
            f"same dtype), skipping padding_idx = {PADDING_IDX}; repeated ids accumulate.")
    dims = {"T": "tokens (batch x sequence)", "D": "embedding dim", "V": "vocabulary rows"}
    shapes = ({"T": 512, "D": 4096, "V": 32000}, {"T": 4096, "D": 4096, "V": 32000},
              {"T": 16384, "D": 4096, "V": 128256}, {"T": 8192, "D": 8192, "V": 128256},
              {"T": 32768, "D": 2048, "V": 32000}, {"T": 65536, "D": 4096, "V": 128256})
    dtypes = ("bf16", "fp16")
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("ids", "grad_out", "grad_weight")
    check_shape = {"T": 4096, "D": 4096, "V": 32000}
    tolerance = "accum"
    variants = (
        Rung("atomic_per_element", "a thread per element, one 16-bit atomicAdd each",
             (Param("threads", (128, 256, 512), 256),), memory_eff=0.6, launch=launch_of("atomic"), dtypes=ATOMIC_DTYPES,
             # off_by_one drops the last token's row (a dropped last element alone: its grad 0.1 * randn + g within
             # the accum class when |g| < 0.02, 1.7% of runs; tests/test_label_truth.py)
             render=atomic_per_element_src, bugs={"off_by_one": {"last": "(int64_t)(T - 1) * D"}}),
        Rung("vectorized_atomic2", "a warp per token, uint4 loads, packed half2/bfloat162 atomics",
             (Param("warps_per_block", (2, 4, 8), 4),), memory_eff=0.72, launch=launch_of("atomic2"), dtypes=ATOMIC_DTYPES,
             render=vectorized_atomic2_src, bugs={"off_by_one": {"last": "chunks - 1"}}),
        Rung("sort_segmented_reduce", "radix sort (id, position), a block reduces each id's segment "
             "in order: deterministic, no atomics",
             (Param("threads", (128, 256, 512), 256), VEC), memory_eff=0.72, launch=launch_of("sort"),
             render=sort_segmented_reduce_src, bugs=SEGMENT_BUGS, bug_tasks=REPEATED_IDS),
        Rung("sorted_segment_vectorized", "sorted segments, a warp per (segment, column slice), "
             "uint4 loads, fp32 registers",
             (Param("warps_per_block", (2, 4, 8), 4), Param("unroll", (1, 2, 4), 2)),
             memory_eff=0.88, launch=launch_of("sorted_vec"), render=sorted_segment_vectorized_src,
             bugs=SEGMENT_BUGS, bug_tasks=REPEATED_IDS),
    )

    def cost(self, task: Task) -> Cost:
        return Cost(flops=0, bytes=min_bytes(task))

    def assemble(self, body, variant, params, task) -> str:
        sort = (task.dialect.cub_header,) if task.dialect.radix_sort_pairs in body else ()
        return f"{prelude(task, sort)}\n{body}"

    torch_ref = TorchRef(
        # fp32 accumulation, one rounding at the end: what the op means (index_add in bf16/fp16 rounds
        # after every add in a nondeterministic order, so it cannot even reproduce itself)
        body=("keep = ids != self.padding_idx\n"
              "        acc = grad_weight.float().index_add(0, ids[keep], grad_out[keep].float())\n"
              "        return acc.to(grad_weight.dtype)"),
        init=f"self.padding_idx = {PADDING_IDX}",
        inputs=(f"[torch.where(torch.arange(T, device='cuda') % 8 == 0, {PADDING_IDX}, "
                "torch.randint(0, V, (T,), device='cuda')),\n"
                "            torch.randn(T, D, dtype=DTYPE, device='cuda'), "
                "torch.randn(V, D, dtype=DTYPE, device='cuda') * 0.1]"))
