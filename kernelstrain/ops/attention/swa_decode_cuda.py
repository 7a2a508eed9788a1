"""Sliding-window decode attention in CUDA: one query token per (b, h) over the last W keys of
its KV head's contiguous cache (grouped-query heads share a KV head).

Ladder: one thread per (b, h) walking the window -> one warp per (b, h), lanes split D, dots
reduced with shuffles -> a block per (b, h) with 16-byte uint4 K/V loads, online softmax per key
slot and a shared-memory merge -> split-KV over the window plus a combine kernel -> a block per
(b, KV head, partition) whose cp.async double-buffered K/V tiles serve the whole query-head group.
The uint4 key-slot machinery (Pack, key_scores, online_update, merge_rows) is _paged_vec's.
"""
import os

from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv, unchecked
from ..dialect import prelude, shfl_xor_macro
from ._swa_vec import combine_src, store_partial, window_slots
from .paged_decode_cuda import STAGE_SYNC, reread, thread_per_head_launch, vectorized_launch, warp_shuffle_launch
from ._paged_vec import KEYS, STAGES, gqa_head, gqa_tiles, in_flight, load_q, vec
from .swa_decode_spec import ENTRY, SwaDecodeSpec, cost_of, head_defines

THREADS = Param("threads", (64, 128, 256), 128)
# 128-key partitions (room_table: the best at 256, the list's end, in 4 of 4 kernelinfer episodes of seed 7171): at
# B=1 a 4096-key window in 256-key partitions is 128 CTAs of gqa_cp_async on a 132-SM H100, in 128-key ones two waves'
# worth; the partials' traffic doubles (fp32 acc + m, l per partition). Until a device times them (scripts/roomA_device.py
# plan a7's / a8's rows), on the lists only with KERNELSTRAIN_DEVICE_UNCHECKED=1
UNCHECKED = (128,) if os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1" else ()
PARTITION = Param("partition", (*UNCHECKED, 256, 512, 1024), 512)
ARGS = ("const scalar_t* __restrict__ q, const scalar_t* __restrict__ k_cache,\n"
        "        const scalar_t* __restrict__ v_cache")
OUT = ", scalar_t* __restrict__ o, int B, int S, int W"
PART = ", float* __restrict__ part_acc, float* __restrict__ part_ml, int S, int W"
COMBINE = "((size_t)pair * parts + p)"
BAD_COMBINE = {"idx": "((size_t)pair + p)"}
# BAD_COMBINE reads partial p of a (b, h) pair at pair + p, not pair * parts + p: the same slot where the window is
# one partition (parts = W / partition = 1: W 1024 at partition 1024), so it is offered where there are two
SPLIT_WINDOW = (("bad_combine_index", lambda t, p: cdiv(t["W"], p["partition"]) > 1),)
KV_OFF = """
// First element of KV head kvh of sequence b in a [B, NUM_KV_HEADS, S, HEAD_DIM] cache.
__device__ __forceinline__ size_t kv_off(int b, int kvh, int S) {
    return ((size_t)b * NUM_KV_HEADS + kvh) * S * HEAD_DIM;
}
"""


def partials(p, task) -> tuple:
    """(window partitions, fp32 partial traffic over the minimum bytes) of the split rungs."""
    parts = cdiv(task["W"], p["partition"])
    return parts, task["B"] * task["H"] * parts * (task["D"] + 2) * 4 * 2 / cost_of(task).bytes


def split_kv_launch(p, task):
    t, d = p["threads"], task["D"]
    parts, extra = partials(p, task)
    return in_flight(Launch(grid=task["B"] * task["H"] * parts, threads=t, smem_bytes=(2 + d) * (t // (d // 8)) * 4,
                            regs=72, bytes_per_access=64, traffic=reread(task) + extra, launches=2), p)


def gqa_launch(p, task):
    t, d, elt, tile_n = p["threads"], task["D"], DTYPE_BYTES[task.dtype], p["tile_n"]
    parts, extra = partials(p, task)
    smem = 2 * 2 * tile_n * d * elt + t // (d // 8) * (d + 2) * 4
    return in_flight(Launch(grid=task["B"] * task["KVH"] * parts, threads=t, smem_bytes=smem, regs=64,
                            bytes_per_access=min(128, 2 * tile_n * d * elt // t), traffic=1 + extra, launches=2),
                     p, tile_bytes=2 * tile_n * d * elt)


def host(task, grid, block):
    return ENTRY.host(task, "swa_decode_kernel", grid, block)


def thread_per_head_src(p, task, acc_t="float", scale=" * SM_SCALE"):
    return f"""
#define THREADS {p['threads']}
typedef {acc_t} acc_t;   // running-sum type
// One thread per (b, h) walks the window key by key: neighbouring lanes read unrelated rows.
extern "C" __global__ void __launch_bounds__(THREADS) swa_decode_kernel({ARGS}{OUT}) {{
    const int pair = blockIdx.x * THREADS + threadIdx.x;          // b * NUM_HEADS + h
    if (pair >= B * NUM_HEADS) return;
    const int b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP;
    const scalar_t* kb = k_cache + kv_off(b, kvh, S);
    const scalar_t* vb = v_cache + kv_off(b, kvh, S);
    const scalar_t* qh = q + (size_t)pair * HEAD_DIM;
    acc_t acc[HEAD_DIM], l = acc_t(0.f);
    float m = -INFINITY;
    for (int d = 0; d < HEAD_DIM; ++d) acc[d] = acc_t(0.f);
    for (size_t t = S - W; t < (size_t)S; ++t) {{
        float s = 0.f;
        for (int d = 0; d < HEAD_DIM; ++d) s += to_float(qh[d]) * to_float(kb[t * HEAD_DIM + d]);
        s = s{scale};
        const float m_new = fmaxf(m, s), alpha = __expf(m - m_new), pr = __expf(s - m_new);
        for (int d = 0; d < HEAD_DIM; ++d) acc[d] = acc_t(float(acc[d]) * alpha + pr * to_float(vb[t * HEAD_DIM + d]));
        l = acc_t(float(l) * alpha + pr);
        m = m_new;
    }}
    for (int d = 0; d < HEAD_DIM; ++d) o[(size_t)pair * HEAD_DIM + d] = from_float(float(acc[d]) / float(l));
}}
""" + host(task, "(B * NUM_HEADS + THREADS - 1) / THREADS", "THREADS")


def warp_shuffle_src(p, task, acc_t="float", scale=" * SM_SCALE"):
    return f"""
#define WARPS {p['warps']}
typedef {acc_t} acc_t;   // running-sum type
constexpr int PER_LANE = HEAD_DIM / WARP_SIZE;   // lane owns d = lane + i * WARP_SIZE: coalesced rows

// One warp per (b, h): a key row is read by the whole warp, its dot product reduced with shuffles.
extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE) swa_decode_kernel({ARGS}{OUT}) {{
    const int lane = threadIdx.x % WARP_SIZE, pair = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE;
    if (pair >= B * NUM_HEADS) return;                            // whole warps leave together
    const int b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP;
    const scalar_t* kb = k_cache + kv_off(b, kvh, S) + lane;
    const scalar_t* vb = v_cache + kv_off(b, kvh, S) + lane;
    float qv[PER_LANE], m = -INFINITY;
    acc_t acc[PER_LANE], l = acc_t(0.f);
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {{   // the softmax scale folded into q once
        qv[i] = to_float(q[(size_t)pair * HEAD_DIM + lane + i * WARP_SIZE]){scale};
        acc[i] = acc_t(0.f);
    }}
    for (size_t t = S - W; t < (size_t)S; ++t) {{
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < PER_LANE; ++i) s += qv[i] * to_float(kb[t * HEAD_DIM + i * WARP_SIZE]);
        s = warp_sum(s);                                  // butterfly: every lane holds the score
        const float m_new = fmaxf(m, s), alpha = __expf(m - m_new), pr = __expf(s - m_new);
#pragma unroll
        for (int i = 0; i < PER_LANE; ++i)
            acc[i] = acc_t(float(acc[i]) * alpha + pr * to_float(vb[t * HEAD_DIM + i * WARP_SIZE]));
        l = acc_t(float(l) * alpha + pr);
        m = m_new;
    }}
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i)
        o[(size_t)pair * HEAD_DIM + lane + i * WARP_SIZE] = from_float(float(acc[i]) / float(l));
}}
""" + host(task, "(B * NUM_HEADS + WARPS - 1) / WARPS", "WARPS * WARP_SIZE")


def vectorized_uint4_src(p, task, acc="row[d]", scale=" * SM_SCALE"):
    return f"""
#define THREADS {p['threads']}
{vec(acc, p.get(KEYS.name, KEYS.default))}
// One block per (b, h): ROWS keys side by side, each read by LANES_PER_KEY lanes as uint4 chunks.
extern "C" __global__ void __launch_bounds__(THREADS) swa_decode_kernel({ARGS}{OUT}) {{
    const int pair = blockIdx.x, b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP;
{window_slots("S - W", "S", scale)}    for (int d = threadIdx.x; d < HEAD_DIM; d += THREADS) {{
        const float3 r = merge_rows(merge, 0, ROWS, 1, d);
        o[(size_t)pair * HEAD_DIM + d] = from_float(r.y / r.z);
    }}
}}
""" + host(task, "B * NUM_HEADS", "THREADS")


def split_kv_src(p, task, idx=COMBINE, scale=" * SM_SCALE"):
    return f"""
#define THREADS {p['threads']}
#define PARTITION {p['partition']}
{vec(u=p.get(KEYS.name, KEYS.default))}
// grid (B * H, window partitions): each block reduces PARTITION keys of one head to (m, l, acc).
extern "C" __global__ void __launch_bounds__(THREADS) swa_decode_kernel({ARGS}{PART}) {{
    const int pair = blockIdx.x, b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP;
    const int lo = S - W + blockIdx.y * PARTITION, hi = min(lo + PARTITION, S);
{window_slots("lo", "hi", scale)}    for (int d = threadIdx.x; d < HEAD_DIM; d += THREADS) {{
        const float3 r = merge_rows(merge, 0, ROWS, 1, d);
{store_partial("pair")}""" + combine_src(task, idx, "dim3(B * NUM_HEADS, parts)", "0")


def gqa_cp_async_src(p, task, sync=STAGE_SYNC, idx=COMBINE):
    return f"""
{gqa_head(p, 'keys')}
// grid (B * KVH, window partitions): a KV head's tiles are staged once in smem and read by its GROUP
// query heads, so DRAM sees each window byte once; cp.async keeps the next tile in flight meanwhile.
extern "C" __global__ void __launch_bounds__(THREADS) swa_decode_kernel({ARGS}{PART}) {{
    extern __shared__ uint4 smem[];              // [STAGES][K | V][TILE_CHUNKS], then ROWS merge rows
    float* merge = reinterpret_cast<float*>(smem + STAGES * 2 * TILE_CHUNKS);
    const int b = blockIdx.x / NUM_KV_HEADS, kvh = blockIdx.x % NUM_KV_HEADS;
    const int lo = S - W + blockIdx.y * PARTITION, hi = min(lo + PARTITION, S);
    const int ntiles = (hi - lo + TILE_N - 1) / TILE_N;
    const int chunk = threadIdx.x % LANES_PER_KEY, row = threadIdx.x / LANES_PER_KEY;
    const int g = row % GROUP, slice = row / GROUP;
    const uint4* kb = reinterpret_cast<const uint4*>(k_cache + kv_off(b, kvh, S));
    const uint4* vb = reinterpret_cast<const uint4*>(v_cache + kv_off(b, kvh, S));
{load_q("(b * NUM_HEADS + kvh * GROUP + g)", " * SM_SCALE")}    float m = -INFINITY, l = 0.f;
    auto load_tile = [&](int tile, int stage) {{   // chunks past hi repeat the last key; masked below
        uint4* ks = smem + stage * 2 * TILE_CHUNKS;
        for (int i = threadIdx.x; i < TILE_CHUNKS; i += THREADS) {{
            const size_t c = (size_t)min(lo + tile * TILE_N + i / LANES_PER_KEY, hi - 1) * LANES_PER_KEY;
            cp_async16(ks + i, kb + c + i % LANES_PER_KEY);
            cp_async16(ks + TILE_CHUNKS + i, vb + c + i % LANES_PER_KEY);
        }}
    }};
{gqa_tiles(sync, p.get(STAGES.name, STAGES.default))}        const float3 r = merge_rows(merge, gg, SLICES, GROUP, d);
{store_partial("b * NUM_HEADS + kvh * GROUP + gg")}""" + combine_src(
        task, idx, "dim3(B * NUM_KV_HEADS, parts)", "SMEM_BYTES",
        "    cudaFuncSetAttribute(swa_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);\n")


class SwaDecodeCuda(SwaDecodeSpec):
    impl = "cuda"
    variants = (
        Rung("thread_per_head", "one thread per (b, h) walks the window: scalar, uncoalesced, few threads",
             (Param("threads", (32, 64, 128), 64),), memory_eff=0.3, launch=thread_per_head_launch,
             render=thread_per_head_src, bugs={"half_accumulator": {"acc_t": "scalar_t"}, "missing_scale": {"scale": ""}}),
        Rung("warp_shuffle", "one warp per (b, h): lanes split D, the dot product reduced with shuffles",
             (Param("warps", (1, 2, 4, 8), 4),), memory_eff=0.6, launch=warp_shuffle_launch, render=warp_shuffle_src,
             bugs={"half_accumulator": {"acc_t": "scalar_t"}, "missing_scale": {"scale": ""}}),
        Rung("vectorized_uint4", "block per (b, h): D/8 lanes per key, uint4 K/V loads of U keys in flight, "
             "online softmax per key slot, smem merge", (THREADS, KEYS), memory_eff=0.85, smem="static",
             launch=vectorized_launch, render=vectorized_uint4_src,
             bugs={"bad_combine_index": {"acc": "rows[first * STRIDE + d]"}, "missing_scale": {"scale": ""}}),
        Rung("split_kv", "grid also over partitions of the window; a combine kernel merges the partials",
             (THREADS, PARTITION, KEYS), memory_eff=0.9, smem="static", launch=split_kv_launch, render=split_kv_src,
             bugs={"bad_combine_index": BAD_COMBINE, "missing_scale": {"scale": ""}}, bug_tasks=SPLIT_WINDOW),
        # threads 512 stays off: correct on an H100 (roomC j1, measurements/h100_roomC_v1.json) but slower than 256
        # at tile_n 16, partition 256, 8 keys a step, 3 stages: 22.3 vs 20.6 us at B=1 S=8192, 72.9 vs 62.1 at B=8
        # S=16384 (W=4096), where the model has 512 ahead (17.6 vs 18.5, 47.6 vs 48.6)
        Rung("gqa_cp_async", "block per (b, KV head, partition): a cp.async ring of K/V tiles in smem "
             "shared by the whole query-head group", (Param("threads", (128, 256, *unchecked(512)), 128),
             Param("tile_n", (16, 32, 64), 32), PARTITION, KEYS, STAGES), needs=frozenset({"cp_async", "inline_ptx"}),
             memory_eff=0.92, smem="dynamic", launch=gqa_launch, render=gqa_cp_async_src,
             bugs={"missing_barrier": {"sync": ""}, "bad_combine_index": BAD_COMBINE}, bug_tasks=SPLIT_WINDOW),
    )

    def assemble(self, body, variant, params, task) -> str:
        defs = "".join(f"#define {k} {v}\n" for k, v in head_defines(task).items())
        return prelude(task) + shfl_xor_macro(task) + defs + KV_OFF + body
