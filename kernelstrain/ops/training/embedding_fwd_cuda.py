"""Embedding forward in CUDA for training: out[t, :] = weight[ids[t], :], padding rows zero.

A pure gather: bandwidth is everything. Ladder: one thread copies a whole row -> one block per
token with coalesced scalar loads -> 16-byte uint4 loads -> one warp per token with several
16-byte loads in flight -> persistent warps over all tokens with streaming (evict-first) stores
so the table keeps its place in L2.
"""
from ..base import Cost, Launch, OpModule, Param, Rung, Task, TorchRef, DTYPE_BYTES, cdiv
from ..unroll import PRAGMA_UNROLL, launch_of, render_of, row_trips
from ..contract import Arg, Entry, Scalar

THREADS = Param("threads", (64, 128, 256, 512), 256)
WARPS = Param("warps_per_block", (2, 4, 8, 16), 8)
UNROLL = Param("unroll", (1, 2, 4), 2)
PADDING_IDX = 0

ENTRY = Entry("embedding_fwd", (
    Arg("ids", "in", ("T",), "int64"), Arg("weight", "in", ("V", "D")), Arg("out", "out", ("T", "D")),
    Scalar("T"), Scalar("D"), Scalar("padding_idx")))

SIG = ("extern \"C\" __global__ void {bounds}embedding_fwd_kernel(const int64_t* __restrict__ ids, "
       "const scalar_t* __restrict__ weight,\n        scalar_t* __restrict__ out, int T, int D, int padding_idx)")


def host(grid: str, block: str) -> str:
    return f"""
void embedding_fwd(const int64_t* ids, const scalar_t* weight, scalar_t* out, int T, int D,
                   int padding_idx, cudaStream_t stream) {{
    embedding_fwd_kernel<<<{grid}, {block}, 0, stream>>>(ids, weight, out, T, D, padding_idx);
}}
"""


def vec_line(task) -> str:
    return f"constexpr int VEC = {16 // DTYPE_BYTES[task.dtype]};     // elements per uint4; D is a multiple of VEC\n"


# -- thread_per_token ----------------------------------------------------------------------
def thread_per_token_launch(p, task):
    threads, t = p["threads"], task["T"]
    # a warp's 32 loads hit 32 different rows: 32 sectors per request, lines refetched
    return Launch(grid=cdiv(t, threads), threads=threads, regs=32, bytes_per_access=32,
                  traffic=2.0, lane_util=min(1.0, t / threads))


def thread_per_token_src(p, task, last="D"):
    return f"""
#define THREADS {p['threads']}

// One thread per token copies its D elements alone: neighbouring lanes touch rows D apart.
{SIG.format(bounds="")} {{
    const int t = blockIdx.x * THREADS + threadIdx.x;
    if (t >= T) return;
    const int64_t id = ids[t];
    scalar_t* dst = out + (size_t)t * D;
    const scalar_t* src = weight + (size_t)id * D;
    for (int d = 0; d < {last}; ++d) dst[d] = id == padding_idx ? from_float(0.f) : src[d];
}}
{host("(T + THREADS - 1) / THREADS", "THREADS")}"""


# -- block_per_token, vectorized_uint4 -----------------------------------------------------
def block_launch(vec16: bool):
    """A block per token: scalar loads, or 16-byte uint4 loads."""
    def launch(p, task):
        d, e, threads = task["D"], DTYPE_BYTES[task.dtype], p["threads"]
        vec = 16 if vec16 else e
        return Launch(grid=task["T"], threads=threads, regs=24 if vec == e else 32, bytes_per_access=vec,
                      lane_util=min(1.0, d * e / vec / threads))
    return launch


def block_per_token_src(p, task, last="D"):
    return f"""
#define THREADS {p['threads']}

// One block per token: consecutive threads copy consecutive elements, so loads coalesce.
{SIG.format(bounds="__launch_bounds__(THREADS) ")} {{
    const int64_t id = ids[blockIdx.x];
    scalar_t* dst = out + (size_t)blockIdx.x * D;
    if (id == padding_idx) {{                    // zero row, the table is not read
        for (int d = threadIdx.x; d < {last}; d += THREADS) dst[d] = from_float(0.f);
        return;
    }}
    const scalar_t* src = weight + (size_t)id * D;
    for (int d = threadIdx.x; d < {last}; d += THREADS) dst[d] = src[d];
}}
{host("T", "THREADS")}"""


def vectorized_uint4_src(p, task, last="chunks"):
    return f"""
#define THREADS {p['threads']}
{vec_line(task)}
// One block per token, 16 bytes per thread per step: a quarter of the load instructions.
{SIG.format(bounds="__launch_bounds__(THREADS) ")} {{
    const int64_t id = ids[blockIdx.x];
    const int chunks = D / VEC;
    uint4* dst = reinterpret_cast<uint4*>(out + (size_t)blockIdx.x * D);
    const uint4* src = reinterpret_cast<const uint4*>(weight + (size_t)id * D);
    const bool pad = id == padding_idx;
    for (int c = threadIdx.x; c < {last}; c += THREADS) dst[c] = pad ? make_uint4(0u, 0u, 0u, 0u) : src[c];
}}
{host("T", "THREADS")}"""


# -- warp_per_token_unrolled, persistent_streaming -----------------------------------------
def warp_launch(persistent: bool):
    """A warp per token with UNROLL uint4 loads in flight; persistent: #SMs x k blocks."""
    def launch(p, task):
        t, d, e, gpu = task["T"], task["D"], DTYPE_BYTES[task.dtype], task.gpu
        warps, unroll = p["warps_per_block"], p["unroll"]
        chunks = d * e // 16                           # 16-byte pieces of a row
        grid = cdiv(t, warps)
        if persistent:
            grid = min(grid, gpu.sms * p["blocks_per_sm"])
        return Launch(grid=grid, threads=warps * gpu.warp, regs=24 + 4 * unroll, bytes_per_access=16 * unroll,
                      lane_util=min(1.0, chunks / (gpu.warp * unroll)), rounds=cdiv(cdiv(t, warps), grid))
    return launch


def warp_copy(last: str, store: str) -> str:
    return f"""// Copy one row with a warp: UNROLL 16-byte loads issued before their stores.
__device__ __forceinline__ void copy_row(uint4* __restrict__ dst, const uint4* __restrict__ src, bool pad,
                                         int chunks, int lane) {{
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    for (int c0 = 0; c0 < {last}; c0 += WARP_SIZE * UNROLL) {{
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {{
            const int c = c0 + u * WARP_SIZE + lane;
            v[u] = (c < {last} && !pad) ? src[c] : zero;
        }}
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {{
            const int c = c0 + u * WARP_SIZE + lane;
            if (c < {last}) {store};
        }}
    }}
}}
"""


def warp_per_token_unrolled_src(p, task, last="chunks"):
    return f"""
#define WARPS {p['warps_per_block']}       // tokens per block, one warp each
#define UNROLL {p['unroll']}
{vec_line(task)}{warp_copy(last, "dst[c] = v[u]")}
extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE)
embedding_fwd_kernel(const int64_t* __restrict__ ids, const scalar_t* __restrict__ weight,
                     scalar_t* __restrict__ out, int T, int D, int padding_idx) {{
    const int lane = threadIdx.x % WARP_SIZE;
    const int t = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE;
    if (t >= T) return;
    const int64_t id = ids[t];                 // one load, the same address across the warp
    copy_row(reinterpret_cast<uint4*>(out + (size_t)t * D),
             reinterpret_cast<const uint4*>(weight + (size_t)id * D), id == padding_idx, D / VEC, lane);
}}
{host("(T + WARPS - 1) / WARPS", "WARPS * WARP_SIZE")}"""


def persistent_streaming_src(p, task, last="chunks"):
    # evict-first stores: the output is never re-read here, the table rows are (repeated tokens)
    store = task.dialect.stream_store_uint4.format(dst="dst[c]", v="v[u]")
    return f"""
#define WARPS {p['warps_per_block']}
#define UNROLL {p['unroll']}
#define BLOCKS_PER_SM {p['blocks_per_sm']}
{vec_line(task)}{warp_copy(last, store)}
// A fixed grid of #SMs x BLOCKS_PER_SM blocks; each warp strides over the tokens. Output rows
// are written with streaming stores so they do not push the hot table rows out of L2.
extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE)
embedding_fwd_kernel(const int64_t* __restrict__ ids, const scalar_t* __restrict__ weight,
                     scalar_t* __restrict__ out, int T, int D, int padding_idx) {{
    const int lane = threadIdx.x % WARP_SIZE;
    for (int t = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE; t < T; t += gridDim.x * WARPS) {{
        const int64_t id = ids[t];
        copy_row(reinterpret_cast<uint4*>(out + (size_t)t * D),
                 reinterpret_cast<const uint4*>(weight + (size_t)id * D), id == padding_idx, D / VEC, lane);
    }}
}}

void embedding_fwd(const int64_t* ids, const scalar_t* weight, scalar_t* out, int T, int D,
                   int padding_idx, cudaStream_t stream) {{
    static int sms = 0;
    if (!sms) {{ int dev; cudaGetDevice(&dev); cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); }}
    const int need = (T + WARPS - 1) / WARPS, grid = need < sms * BLOCKS_PER_SM ? need : sms * BLOCKS_PER_SM;
    embedding_fwd_kernel<<<grid, WARPS * WARP_SIZE, 0, stream>>>(ids, weight, out, T, D, padding_idx);
}}
"""


class EmbeddingFwdCuda(OpModule):
    op, impl, family = "embedding_fwd", "cuda", "training"
    title = "Embedding forward (training)"
    desc = (f"out[t, :] = weight[ids[t], :] for T int64 token ids into a [V, D] table; tokens equal to "
            f"padding_idx = {PADDING_IDX} produce a zero row without reading the table (that row is "
            "zero and never trained).")
    dims = {"T": "tokens (batch x sequence)", "D": "embedding dim", "V": "vocabulary rows"}
    shapes = ({"T": 512, "D": 4096, "V": 32000}, {"T": 4096, "D": 4096, "V": 32000},
              {"T": 16384, "D": 4096, "V": 128256}, {"T": 8192, "D": 8192, "V": 128256},
              {"T": 32768, "D": 2048, "V": 32000}, {"T": 65536, "D": 4096, "V": 128256})
    dtypes = ("bf16", "fp32")
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("ids",)
    check_shape = {"T": 4096, "D": 4096, "V": 32000}
    tolerance = "exact"
    variants = (
        Rung("thread_per_token", "one thread copies a whole row, lanes a row apart",
             (Param("threads", (32, 64, 128, 256), 128),), memory_eff=0.45,
             launch=thread_per_token_launch, render=thread_per_token_src, bugs={"off_by_one": {"last": "D - 1"}}),
        Rung("block_per_token", "a block per token, threads stride the row with scalar loads",
             (THREADS, PRAGMA_UNROLL), memory_eff=0.8,
             launch=launch_of(block_launch(False), row_trips(), 1), render=render_of(block_per_token_src), bugs={"off_by_one": {"last": "D - 1"}}),
        Rung("vectorized_uint4", "a block per token, 16-byte uint4 loads and stores",
             (THREADS, PRAGMA_UNROLL), memory_eff=0.88,
             launch=launch_of(block_launch(True), row_trips(vec=True), 4), render=render_of(vectorized_uint4_src), bugs={"off_by_one": {"last": "chunks - 1"}}),
        Rung("warp_per_token_unrolled", "a warp per token, several tokens per block, UNROLL uint4 loads in flight",
             (WARPS, UNROLL), memory_eff=0.91, launch=warp_launch(False), render=warp_per_token_unrolled_src,
             bugs={"off_by_one": {"last": "chunks - 1"}}),
        Rung("persistent_streaming", "#SMs x k blocks of warps stride over tokens; evict-first streaming stores",
             (WARPS, UNROLL, Param("blocks_per_sm", (2, 4, 8), 4)), memory_eff=0.93,
             launch=warp_launch(True), render=persistent_streaming_src, bugs={"off_by_one": {"last": "chunks - 1"}}),
    )

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=0, bytes=2 * t * d * e + 8 * t)

    torch_ref = TorchRef(
        body="return nn.functional.embedding(ids, self.weight, padding_idx=self.padding_idx)",
        init=(f"self.padding_idx = {PADDING_IDX}\n"
              "        self.weight = nn.Parameter(torch.randn(V, D, dtype=DTYPE))\n"
              "        with torch.no_grad():\n"
              "            self.weight[self.padding_idx].zero_()"),
        inputs=(f"[torch.where(torch.arange(T, device='cuda') % 8 == 0, {PADDING_IDX}, "
                "torch.randint(0, V, (T,), device='cuda'))]  # every 8th token is padding"))
