"""Paged KV-cache append in CUDA: scatter this step's K and V rows into cache pages by slot.

Cache pages are HND (FlashInfer's layout): cache[page][head][offset][dim], page = slot / P,
offset = slot % P, so each head's D-vector lands P * D elements away from the next head's.
Ladder: thread per element -> block per token (slot read once) -> 16-byte uint4 copies ->
warp per token with UNROLL loads of K and V in flight before any store.
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from .. import words
from ..unroll import PRAGMA_UNROLL, launch_of, render_of
from ..words import WORD
from .kv_append_spec import KvAppendSpec

ARGS = ("const scalar_t* __restrict__ key, const scalar_t* __restrict__ value, scalar_t* __restrict__ key_cache, "
        "scalar_t* __restrict__ value_cache, const int64_t* __restrict__ slot_mapping, int T, int H, int D, int P")


def host(grid: str, block: str) -> str:
    return f"""
void kv_append(const scalar_t* key, const scalar_t* value, scalar_t* key_cache, scalar_t* value_cache,
               const int64_t* slot_mapping, int T, int H, int D, int P, cudaStream_t stream) {{
    kv_append_kernel<<<{grid}, {block}, 0, stream>>>(key, value, key_cache, value_cache, slot_mapping, T, H, D, P);
}}
"""

SLOT = """    const int64_t slot = slot_mapping[t];
    if (slot < 0) return;                       // padding token
    const int64_t page = slot / P, off = slot % P;"""


# -- element_per_thread --------------------------------------------------------------------
def element_per_thread_launch(p, task):
    th = p["threads"]
    return Launch(grid=cdiv(task["T"] * task["H"] * task["D"], th), threads=th, regs=24,
                  bytes_per_access=DTYPE_BYTES[task.dtype])


def element_per_thread_src(p, task, total="(int64_t)T * H * D"):
    return f"""
#define THREADS {p['threads']}

// One thread per element of K and of V: each redoes the token/head/dim split and the slot lookup.
extern "C" __global__ void __launch_bounds__(THREADS) kv_append_kernel({ARGS}) {{
    const int64_t idx = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= {total}) return;
    const int t = (int)(idx / ((int64_t)H * D)), h = (int)(idx / D % H), d = (int)(idx % D);
{SLOT}
    const int64_t dst = ((page * H + h) * P + off) * D + d;   // [page][head][offset][dim]
    key_cache[dst] = key[idx];
    value_cache[dst] = value[idx];
}}
{host("(int)(((int64_t)T * H * D + THREADS - 1) / THREADS)", "THREADS")}"""


# -- block_per_token -----------------------------------------------------------------------
def block_per_token_launch(p, task):
    th, vec = p["threads"], p.get("vec", 1)
    words = task["H"] * task["D"] // vec
    # nvcc unrolls the stride loop: ~4 independent loads of VEC values (words.VEC) of K (and of V) in flight
    return Launch(grid=task["T"], threads=th, regs=36, bytes_per_access=4 * vec * DTYPE_BYTES[task.dtype],
                  lane_util=min(1.0, words / th))


def block_per_token_src(p, task, stop="H * D"):
    vec = p.get("vec", 1)
    if vec > 1:
        return block_per_token_words_src(p, task, vec, stop)
    return f"""
#define THREADS {p['threads']}

// One block per token: the slot is looked up once; threads stride over the token's H * D elements.
extern "C" __global__ void __launch_bounds__(THREADS) kv_append_kernel({ARGS}) {{
    const int t = blockIdx.x;
{SLOT}
    const scalar_t* k = key + (size_t)t * H * D;
    const scalar_t* v = value + (size_t)t * H * D;
    for (int i = threadIdx.x; i < {stop}; i += THREADS) {{
        const int h = i / D, d = i % D;
        const int64_t dst = ((page * H + h) * P + off) * D + d;
        key_cache[dst] = k[i];
        value_cache[dst] = v[i];
    }}
}}
{host("T", "THREADS")}"""

def block_per_token_words_src(p, task, vec: int, stop: str) -> str:
    word = WORD[vec]
    return f"""
#define THREADS {p['threads']}
#define VEC {vec}  // adjacent values a thread copies as one {vec * 2}-byte {word}; D % VEC == 0 (a word never spans two heads)

// One block per token: the slot is looked up once; threads stride over the token's H * D / VEC words.
extern "C" __global__ void __launch_bounds__(THREADS) kv_append_kernel({ARGS}) {{
    const int t = blockIdx.x;
{SLOT}
    const {word}* k = reinterpret_cast<const {word}*>(key + (size_t)t * H * D);
    const {word}* v = reinterpret_cast<const {word}*>(value + (size_t)t * H * D);
    {word}* kc = reinterpret_cast<{word}*>(key_cache);
    {word}* vc = reinterpret_cast<{word}*>(value_cache);
    const int per_head = D / VEC;
    for (int c = threadIdx.x; c < ({stop}) / VEC; c += THREADS) {{
        const int64_t dst = ((page * H + c / per_head) * P + off) * per_head + c % per_head;
        kc[dst] = k[c];
        vc[dst] = v[c];
    }}
}}
{host("T", "THREADS")}"""


VEC = """
// 8 x 16-bit elements travel as one 16-byte uint4; a head's D-vector is D / VEC chunks
constexpr int VEC = 16 / sizeof(scalar_t);
"""


# -- vectorized_uint4 ----------------------------------------------------------------------
def chunks_of(task) -> int:
    """16-byte chunks of one token's K (or V) row."""
    return task["H"] * task["D"] * DTYPE_BYTES[task.dtype] // 16


def vectorized_uint4_launch(p, task):
    th = p["threads"]
    return Launch(grid=task["T"], threads=th, regs=36, bytes_per_access=16, lane_util=min(1.0, chunks_of(task) / th))


def vectorized_uint4_src(p, task, stop="chunks"):
    return f"""
#define THREADS {p['threads']}
{VEC}
// One block per token; every thread copies whole uint4 chunks (a chunk never straddles two heads).
extern "C" __global__ void __launch_bounds__(THREADS) kv_append_kernel({ARGS}) {{
    const int t = blockIdx.x;
{SLOT}
    const int per_head = D / VEC, chunks = H * per_head;
    const uint4* k = reinterpret_cast<const uint4*>(key + (size_t)t * H * D);
    const uint4* v = reinterpret_cast<const uint4*>(value + (size_t)t * H * D);
    uint4* kc = reinterpret_cast<uint4*>(key_cache);
    uint4* vc = reinterpret_cast<uint4*>(value_cache);
    for (int c = threadIdx.x; c < {stop}; c += THREADS) {{
        const int h = c / per_head, j = c % per_head;
        const int64_t dst = ((page * H + h) * P + off) * per_head + j;
        kc[dst] = k[c];
        vc[dst] = v[c];
    }}
}}
{host("T", "THREADS")}"""


# -- warp_per_token_ilp --------------------------------------------------------------------
def warp_per_token_ilp_launch(p, task):
    warps, unroll, w, chunks = p["warps"], p["unroll"], task.gpu.warp, chunks_of(task)
    return Launch(grid=cdiv(task["T"], warps), threads=warps * w, regs=24 + 8 * unroll, bytes_per_access=16 * unroll,
                  lane_util=chunks / (w * unroll * cdiv(chunks, w * unroll)))


def warp_per_token_ilp_src(p, task, guard="c < chunks"):
    return f"""
#define WARPS {p['warps']}                 // tokens per block, one warp each
#define UNROLL {p['unroll']}                // uint4 chunks of K (and of V) a lane keeps in flight
{VEC}
// Warp per token: each lane first issues UNROLL loads of K and of V, then the UNROLL pairs of
// stores, so 2 * UNROLL independent 16-byte loads are in flight per lane.
extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE) kv_append_kernel({ARGS}) {{
    const int lane = threadIdx.x % WARP_SIZE, t = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE;
    if (t >= T) return;
{SLOT}
    const int per_head = D / VEC, chunks = H * per_head;
    const uint4* k = reinterpret_cast<const uint4*>(key + (size_t)t * H * D);
    const uint4* v = reinterpret_cast<const uint4*>(value + (size_t)t * H * D);
    uint4* kc = reinterpret_cast<uint4*>(key_cache);
    uint4* vc = reinterpret_cast<uint4*>(value_cache);
    for (int base = lane; base < chunks; base += WARP_SIZE * UNROLL) {{
        uint4 kr[UNROLL], vr[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {{
            const int c = base + u * WARP_SIZE;
            if ({guard}) {{ kr[u] = k[c]; vr[u] = v[c]; }}
        }}
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {{
            const int c = base + u * WARP_SIZE;
            if ({guard}) {{
                const int64_t dst = ((page * H + c / per_head) * P + off) * per_head + c % per_head;
                kc[dst] = kr[u];
                vc[dst] = vr[u];
            }}
        }}
    }}
}}
{host("(T + WARPS - 1) / WARPS", "WARPS * WARP_SIZE")}"""


class KvAppendCuda(KvAppendSpec):
    impl = "cuda"
    variants = (
        # issue-bound rather than memory-bound: 64-bit divides/mods for every 2-byte element
        Rung("element_per_thread", "one thread per element of K and V: div/mod and slot lookup per element",
             (Param("threads", (128, 256, 512), 256),), memory_eff=0.5, launch=element_per_thread_launch,
             render=element_per_thread_src, bugs={"off_by_one": {"total": "(int64_t)T * H * D - 1"}}),
        Rung("block_per_token", "one block per token (vLLM's classic kernel): slot read once, scalar copies",
             (Param("threads", (128, 256, 512, 1024), 256), PRAGMA_UNROLL, words.VEC), memory_eff=0.65,
             launch=words.narrow_of(launch_of(block_per_token_launch, words.word_trips("H", "D"),
                                              lambda p, t: 2 * words.word_regs(p, t))),
             render=render_of(block_per_token_src), bugs={"off_by_one": {"stop": "H * D - 1"}}),
        Rung("vectorized_uint4", "block per token, each thread moves 16-byte uint4 chunks of one head",
             (Param("threads", (64, 128, 256), 128), PRAGMA_UNROLL), memory_eff=0.9,
             launch=launch_of(vectorized_uint4_launch, lambda p, t: chunks_of(t) / p["threads"], 8),
             render=render_of(vectorized_uint4_src), bugs={"off_by_one": {"stop": "chunks - 1"}}),
        Rung("warp_per_token_ilp", "warp per token, WARPS tokens a block; UNROLL uint4 loads of K and V issued "
             "before the stores", (Param("warps", (2, 4, 8, 16), 4), Param("unroll", (1, 2, 4), 4)),
             memory_eff=0.92, launch=warp_per_token_ilp_launch, render=warp_per_token_ilp_src,
             bugs={"off_by_one": {"guard": "c < chunks - 1"}}),
    )
