"""Rotary position embedding (GPT-NeoX style) in CUDA, applied in place to q and k.

For token t at position p = positions[t], head h, and i < D/2 (x1 = x[i], x2 = x[i + D/2]):
x[i] = x1 cos - x2 sin, x[i + D/2] = x2 cos + x1 sin, with cos|sin read from cache[p] = [cos | sin].

Ladder: one thread per rotation pair, q and k in two launches -> one block per token with
cos/sin staged in shared memory -> 16-byte uint4 chunks of 8 pairs -> cos/sin held in fp32
registers while a thread rotates several heads (loads hoisted) -> persistent token loop.
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude
from .rope_spec import HEAD_MAJOR, SEVERAL_POSITIONS, RopeSpec

THREADS = Param("threads", (64, 128, 256, 512), 256)
HEAD_THREADS = Param("head_threads", (4, 8, 16, 32), 16)
TOKENS = Param("tokens_per_block", (1, 2, 4), 1)
ITEMS = Param("items", (1, 2, 4), 1)          # vectorized_uint4: (head, chunk) items a thread loads per pass
OFF_BY_ONE_HEADS = {"off_by_one": {"heads": "HEADS_PER_THREAD - 1"}}

ARGS = ("const int64_t* __restrict__ positions, scalar_t* __restrict__ q, scalar_t* __restrict__ k,\n"
        "            const scalar_t* __restrict__ cos_sin_cache, int T, int H")
PACK = """
// 8 x 16-bit values in one 16-byte uint4: 8 rotation pairs per x1 / x2 / cos / sin chunk.
constexpr int VEC = 8, CHUNKS = HALF / VEC;
union Pack { uint4 u; scalar_t h[VEC]; };
"""


def host(grid: str, block: str, launches: str = "q, k", prologue: str = "") -> str:
    calls = "".join(f"    rope_kernel<<<{grid}, {block}, 0, stream>>>(positions, {a}, cos_sin_cache, T, H);\n"
                    for a in launches.split(";"))
    return f"""
void rope(const int64_t* positions, scalar_t* q, scalar_t* k, const scalar_t* cos_sin_cache,
          int T, int H, int D, cudaStream_t stream) {{
{prologue}{calls}}}
"""


# -- thread_per_pair -----------------------------------------------------------------------
def thread_per_pair_launch(p, task):
    t, h, d, threads = task["T"], task["H"], task["D"], p["threads"]
    # every head re-reads its token's cos/sin: mostly L1/L2 hits, some DRAM refetch
    return Launch(grid=cdiv(t * h * d // 2, threads), threads=threads, regs=20,
                  bytes_per_access=DTYPE_BYTES[task.dtype], traffic=1.1, launches=2)


def thread_per_pair_src(p, task, n="(long long)T * H * HALF", t="idx / ((long long)H * HALF)"):
    return f"""#define THREADS {p['threads']}

// One thread per rotation pair of one tensor (launched once for q, once for k); every
// thread re-derives (t, h, i) with div/mod and re-reads its token's cos/sin.
extern "C" __global__ void rope_kernel(const int64_t* __restrict__ positions, scalar_t* __restrict__ x,
                                       const scalar_t* __restrict__ cos_sin_cache, int T, int H) {{
    const long long idx = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= {n}) return;
    const long long t = {t};
    const int i = idx % HALF;
    const scalar_t* cs = cos_sin_cache + positions[t] * 2 * HALF;
    const float c = to_float(cs[i]), s = to_float(cs[HALF + i]);
    scalar_t* xh = x + (idx / HALF) * 2 * HALF;       // start of this (token, head) row
    const float x1 = to_float(xh[i]), x2 = to_float(xh[HALF + i]);
    xh[i] = from_float(x1 * c - x2 * s);
    xh[HALF + i] = from_float(x2 * c + x1 * s);
}}
{host("(unsigned)(((long long)T * H * HALF + THREADS - 1) / THREADS)", "THREADS", "q;k")}"""


# -- token_block_smem ----------------------------------------------------------------------
def token_block_smem_launch(p, task):
    h, d, threads = task["H"], task["D"], p["threads"]
    return Launch(grid=task["T"], threads=threads, smem_bytes=4 * d, regs=28, bytes_per_access=DTYPE_BYTES[task.dtype],
                  lane_util=min(1.0, h * d / threads))


def token_block_smem_src(p, task, staged="HALF"):
    return f"""#define THREADS {p['threads']}

// One block per token: its cos/sin row goes to shared memory once, then the threads sweep
// the 2*H*HALF pairs of q and k (consecutive threads take consecutive i: coalesced).
extern "C" __global__ void __launch_bounds__(THREADS)
rope_kernel({ARGS}) {{
    __shared__ float cos_s[HALF], sin_s[HALF];
    const scalar_t* cs = cos_sin_cache + positions[blockIdx.x] * 2 * HALF;
    for (int i = threadIdx.x; i < {staged}; i += THREADS) {{
        cos_s[i] = to_float(cs[i]);
        sin_s[i] = to_float(cs[HALF + i]);
    }}
    __syncthreads();
    for (int w = threadIdx.x; w < 2 * H * HALF; w += THREADS) {{
        const int head = w / HALF, i = w % HALF;             // heads 0..H-1 of q, then of k
        scalar_t* xh = (head < H ? q : k) + ((size_t)blockIdx.x * H + head % H) * 2 * HALF;
        const float x1 = to_float(xh[i]), x2 = to_float(xh[HALF + i]);
        xh[i] = from_float(x1 * cos_s[i] - x2 * sin_s[i]);
        xh[HALF + i] = from_float(x2 * cos_s[i] + x1 * sin_s[i]);
    }}
}}
{host("T", "THREADS")}"""


# -- vectorized_uint4 ----------------------------------------------------------------------
ROTATE = """
// Rotate 8 pairs: a holds x1[i..i+7], b holds x2[i..i+7]; cos/sin already in fp32.
__device__ __forceinline__ void rotate8(uint4& a, uint4& b, const float* c, const float* s) {
    Pack x1, x2;
    x1.u = a; x2.u = b;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
        const float u = to_float(x1.h[j]), v = to_float(x2.h[j]);
        x1.h[j] = from_float(u * c[j] - v * s[j]);
        x2.h[j] = from_float(v * c[j] + u * s[j]);
    }
    a = x1.u; b = x2.u;
}

__device__ __forceinline__ void load_cos_sin(const scalar_t* cs, int chunk, float* c, float* s) {
    Pack cp, sp;
    cp.u = reinterpret_cast<const uint4*>(cs)[chunk];
    sp.u = reinterpret_cast<const uint4*>(cs + HALF)[chunk];
#pragma unroll
    for (int j = 0; j < VEC; ++j) { c[j] = to_float(cp.h[j]); s[j] = to_float(sp.h[j]); }
}
"""


def vectorized_uint4_launch(p, task):
    chunks, items = task["D"] // 16, p["items"]          # uint4 chunks of 8 pairs per head
    # ITEMS (head, chunk) items a thread a pass: their 2 * ITEMS uint4 loads in flight together,
    # 8 registers of packed x1 / x2 and a row pointer held for each until its stores
    return Launch(grid=task["T"], threads=p["threads"], regs=32 + 10 * (items - 1), bytes_per_access=16 * items,
                  lane_util=min(1.0, 2 * task["H"] * chunks / (p["threads"] * items)))


def vectorized_uint4_src(p, task, bound="2 * H * CHUNKS"):
    return f"""#define THREADS {p['threads']}
#define ITEMS {p['items']}                  // (head, chunk) items a thread per pass, THREADS apart
{PACK}{ROTATE}
// One block per token; work item w = (head, chunk) moves 8 pairs with two uint4 loads, a
// thread's ITEMS items of a pass all loaded before the first rotation; the cos/sin chunk is
// re-read per head from L1 (the row is only D * 2 bytes).
extern "C" __global__ void __launch_bounds__(THREADS)
rope_kernel({ARGS}) {{
    const scalar_t* cs = cos_sin_cache + positions[blockIdx.x] * 2 * HALF;
    for (int w0 = threadIdx.x; w0 < {bound}; w0 += THREADS * ITEMS) {{
        uint4* xh[ITEMS];
        uint4 a[ITEMS], b[ITEMS];
#pragma unroll
        for (int j = 0; j < ITEMS; ++j) {{
            const int w = w0 + j * THREADS, head = w / CHUNKS, chunk = w % CHUNKS;
            if (w >= {bound}) break;
            xh[j] = reinterpret_cast<uint4*>((head < H ? q : k) + ((size_t)blockIdx.x * H + head % H) * 2 * HALF);
            a[j] = xh[j][chunk];
            b[j] = xh[j][CHUNKS + chunk];
        }}
#pragma unroll
        for (int j = 0; j < ITEMS; ++j) {{
            const int w = w0 + j * THREADS, chunk = w % CHUNKS;
            if (w >= {bound}) break;
            float c[VEC], s[VEC];
            load_cos_sin(cs, chunk, c, s);
            rotate8(a[j], b[j], c, s);
            xh[j][chunk] = a[j];
            xh[j][CHUNKS + chunk] = b[j];
        }}
    }}
}}
{host("T", "THREADS")}"""


# -- cos_sin_registers, persistent ---------------------------------------------------------
def register_launch(persistent: bool):
    """Launch model of the register-cached rotation; a persistent grid is sized by occupancy."""
    def launch(p, task):
        t, h, d = task["T"], task["H"], task["D"]
        ht, tok = p["head_threads"], p["tokens_per_block"]
        threads, per_thread = d // 16 * ht * tok, cdiv(2 * h, ht)
        regs = min(255, 36 + 8 * per_thread)     # 8 regs of packed x1/x2 per head + 16 of cos/sin
        grid = cdiv(t, tok)
        if persistent:
            gpu = task.gpu                                 # host sizes the grid with the occupancy API
            per_sm = min(gpu.max_blocks_per_sm, gpu.max_threads_per_sm // threads, gpu.regs_per_sm // (threads * regs))
            grid = min(grid, gpu.sms * max(1, per_sm))
        return Launch(grid=grid, threads=threads, regs=regs, bytes_per_access=16 * min(per_thread, 4),
                      lane_util=min(1.0, t / (cdiv(t, tok) * tok)) * 2 * h / (per_thread * ht))
    return launch


def register_kernel(p, task, heads: str, persistent: bool) -> str:
    h = task["H"]
    loop = ("for (int t = blockIdx.x * TOKENS + tok; t < T; t += gridDim.x * TOKENS) {" if persistent
            else "const int t = blockIdx.x * TOKENS + tok;\n    if (t < T) {")
    return f"""#define HEAD_THREADS {p['head_threads']}
#define TOKENS {p['tokens_per_block']}
#define HEADS_PER_THREAD {cdiv(2 * h, p['head_threads'])}  // ceil(2H / HEAD_THREADS), H = {h}
{PACK}{ROTATE}
// Thread (chunk, head group, token): its cos/sin chunk is converted to fp32 once and reused
// for HEADS_PER_THREAD heads of q and k, whose 2 * HEADS_PER_THREAD uint4 loads all issue
// before the first rotation.
extern "C" __global__ void __launch_bounds__(CHUNKS * HEAD_THREADS * TOKENS)
rope_kernel({ARGS}) {{
    const int chunk = threadIdx.x % CHUNKS, group = threadIdx.x / CHUNKS % HEAD_THREADS;
    const int tok = threadIdx.x / (CHUNKS * HEAD_THREADS);
    {loop}
        float c[VEC], s[VEC];
        load_cos_sin(cos_sin_cache + positions[t] * 2 * HALF, chunk, c, s);
        uint4 a[HEADS_PER_THREAD], b[HEADS_PER_THREAD];
#pragma unroll
        for (int j = 0; j < HEADS_PER_THREAD; ++j) {{
            const int head = group + j * HEAD_THREADS;
            if (head >= 2 * H) break;
            const uint4* xh = reinterpret_cast<const uint4*>((head < H ? q : k) + ((size_t)t * H + head % H) * 2 * HALF);
            a[j] = xh[chunk];
            b[j] = xh[CHUNKS + chunk];
        }}
#pragma unroll
        for (int j = 0; j < {heads}; ++j) {{
            const int head = group + j * HEAD_THREADS;
            if (head >= 2 * H) break;
            uint4* xh = reinterpret_cast<uint4*>((head < H ? q : k) + ((size_t)t * H + head % H) * 2 * HALF);
            rotate8(a[j], b[j], c, s);
            xh[chunk] = a[j];
            xh[CHUNKS + chunk] = b[j];
        }}
    }}
}}
"""


def cos_sin_registers_src(p, task, heads="HEADS_PER_THREAD"):
    return register_kernel(p, task, heads, False) + host("(T + TOKENS - 1) / TOKENS", "CHUNKS * HEAD_THREADS * TOKENS")


OCCUPANCY = """    static int resident = 0;  // #SMs x blocks per SM, asked once
    if (resident == 0) {
        int dev = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rope_kernel, CHUNKS * HEAD_THREADS * TOKENS, 0);
        resident = sms * per_sm;
    }
    const int groups = (T + TOKENS - 1) / TOKENS, grid = groups < resident ? groups : resident;
"""


def persistent_src(p, task, heads="HEADS_PER_THREAD"):
    return register_kernel(p, task, heads, True) + host("grid", "CHUNKS * HEAD_THREADS * TOKENS", prologue=OCCUPANCY)


class RopeCuda(RopeSpec):
    impl = "cuda"
    variants = (
        Rung("thread_per_pair", "one thread per (token, head, i) pair, div/mod indexing, q and k launched apart",
             (Param("threads", (64, 128, 256), 64),), memory_eff=0.41, launch=thread_per_pair_launch,
             render=thread_per_pair_src, bugs={"broadcast_index": {"t": "(idx / HALF) % T"}}, bug_tasks=HEAD_MAJOR),
        # (its off_by_one, the last pair of q and k unrotated, passed: rope_spec; broadcast_index: the token of the
        # row idx / HALF taken as if heads were outer)
        Rung("token_block_smem", "block per token; cos/sin staged once in shared memory for all heads",
             (THREADS,), memory_eff=0.85, smem="static", launch=token_block_smem_launch,
             render=token_block_smem_src, bugs={"off_by_one": {"staged": "HALF - 1"}}),
        # (missing_barrier was benign: at threads <= HALF each thread reads only the cos/sin it staged)
        Rung("vectorized_uint4", "block per token; 16-byte uint4 loads of 8 pairs of x and of cos/sin",
             (THREADS, ITEMS), memory_eff=0.8, launch=vectorized_uint4_launch,
             render=vectorized_uint4_src, bugs={"off_by_one": {"bound": "2 * H * CHUNKS - 1"}},
             bug_tasks=SEVERAL_POSITIONS),
        Rung("cos_sin_registers", "cos/sin chunk in fp32 registers, each thread rotates 2H/head_threads heads",
             (HEAD_THREADS, TOKENS), memory_eff=0.81, launch=register_launch(False),
             render=cos_sin_registers_src, bugs=OFF_BY_ONE_HEADS, bug_tasks=SEVERAL_POSITIONS),
        Rung("persistent", "register-cached rotation, #SMs x occupancy blocks loop over token groups",
             (HEAD_THREADS, TOKENS), memory_eff=0.79, launch=register_launch(True),
             render=persistent_src, bugs=OFF_BY_ONE_HEADS, bug_tasks=SEVERAL_POSITIONS),
    )

    def assemble(self, body, variant, params, task):
        return f"{prelude(task)}\n#define HALF {task['D'] // 2}  // D / 2 rotation pairs per head\n{body}"
