"""Embedding forward in CUDA for training: out[t, :] = weight[ids[t], :], padding rows zero.

A pure gather: bandwidth is everything. Ladder: one thread copies a whole row -> one block per
token with coalesced scalar loads -> 16-byte uint4 loads -> one warp per token with several
16-byte loads in flight -> persistent warps over all tokens with streaming (evict-first) stores
so the table keeps its place in L2.
"""
from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, cdiv,
                    cuda_prelude, kernelbench_program)

THREADS = Param("threads", (64, 128, 256, 512), 256)
WARPS = Param("warps_per_block", (2, 4, 8, 16), 8)
UNROLL = Param("unroll", (1, 2, 4), 2)
PADDING_IDX = 0


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
    variants = (
        Variant("thread_per_token", "one thread copies a whole row, lanes a row apart",
                (Param("threads", (32, 64, 128, 256), 128),), memory_eff=0.45, bugs=("off_by_one",)),
        Variant("block_per_token", "a block per token, threads stride the row with scalar loads",
                (THREADS,), memory_eff=0.8, bugs=("off_by_one",)),
        Variant("vectorized_uint4", "a block per token, 16-byte uint4 loads and stores",
                (THREADS,), memory_eff=0.88, bugs=("off_by_one",)),
        Variant("warp_per_token_unrolled", "a warp per token, several tokens per block, UNROLL uint4 loads in flight",
                (WARPS, UNROLL), memory_eff=0.91, bugs=("off_by_one",)),
        Variant("persistent_streaming", "#SMs x k blocks of warps stride over tokens; evict-first streaming stores",
                (WARPS, UNROLL, Param("blocks_per_sm", (2, 4, 8), 4)), memory_eff=0.93, bugs=("off_by_one",)),
    )

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=0, bytes=2 * t * d * e + 8 * t)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, d, e, gpu = task["T"], task["D"], DTYPE_BYTES[task.dtype], task.gpu
        chunks = d * e // 16                           # 16-byte pieces of a row
        if variant.tag == "thread_per_token":
            threads = params["threads"]
            # a warp's 32 loads hit 32 different rows: 32 sectors per request, lines refetched
            return Launch(grid=cdiv(t, threads), threads=threads, regs=32, bytes_per_access=32,
                          traffic=2.0, lane_util=min(1.0, t / threads))
        if variant.tag in ("block_per_token", "vectorized_uint4"):
            threads = params["threads"]
            vec = 16 if variant.tag == "vectorized_uint4" else e
            return Launch(grid=t, threads=threads, regs=24 if vec == e else 32, bytes_per_access=vec,
                          lane_util=min(1.0, d * e / vec / threads))
        warps, unroll = params["warps_per_block"], params["unroll"]
        threads = warps * gpu.warp
        lane = min(1.0, chunks / (gpu.warp * unroll))
        grid = cdiv(t, warps)
        if variant.tag == "persistent_streaming":
            grid = min(grid, gpu.sms * params["blocks_per_sm"])
        return Launch(grid=grid, threads=threads, regs=24 + 4 * unroll, bytes_per_access=16 * unroll,
                      lane_util=lane)

    def signature(self, task: Task) -> str:
        return ("void embedding_fwd(const int64_t* ids, const scalar_t* weight, scalar_t* out, int T, int D, "
                "int padding_idx, cudaStream_t stream)")

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="ids",
            body="return nn.functional.embedding(ids, self.weight, padding_idx=self.padding_idx)",
            init=(f"self.padding_idx = {PADDING_IDX}\n"
                  "        self.weight = nn.Parameter(torch.randn(V, D, dtype=DTYPE))\n"
                  "        with torch.no_grad():\n"
                  "            self.weight[self.padding_idx].zero_()"),
            inputs=(f"[torch.where(torch.arange(T, device='cuda') % 8 == 0, {PADDING_IDX}, "
                    "torch.randint(0, V, (T,), device='cuda'))]  # every 8th token is padding"))

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n{body}"

    @staticmethod
    def _host(grid: str, block: str) -> str:
        return f"""
void embedding_fwd(const int64_t* ids, const scalar_t* weight, scalar_t* out, int T, int D,
                   int padding_idx, cudaStream_t stream) {{
    embedding_fwd_kernel<<<{grid}, {block}, 0, stream>>>(ids, weight, out, T, D, padding_idx);
}}
"""

    _SIG = ("extern \"C\" __global__ void {bounds}embedding_fwd_kernel(const int64_t* __restrict__ ids, "
            "const scalar_t* __restrict__ weight,\n        scalar_t* __restrict__ out, int T, int D, int padding_idx)")

    def _thread_per_token(self, p, task, bug):
        last = "D - 1" if bug == "off_by_one" else "D"
        return f"""
#define THREADS {p['threads']}

// One thread per token copies its D elements alone: neighbouring lanes touch rows D apart.
{self._SIG.format(bounds="")} {{
    const int t = blockIdx.x * THREADS + threadIdx.x;
    if (t >= T) return;
    const int64_t id = ids[t];
    scalar_t* dst = out + (size_t)t * D;
    const scalar_t* src = weight + (size_t)id * D;
    for (int d = 0; d < {last}; ++d) dst[d] = id == padding_idx ? from_float(0.f) : src[d];
}}
{self._host("(T + THREADS - 1) / THREADS", "THREADS")}"""

    def _block_per_token(self, p, task, bug):
        last = "D - 1" if bug == "off_by_one" else "D"
        return f"""
#define THREADS {p['threads']}

// One block per token: consecutive threads copy consecutive elements, so loads coalesce.
{self._SIG.format(bounds="__launch_bounds__(THREADS) ")} {{
    const int64_t id = ids[blockIdx.x];
    scalar_t* dst = out + (size_t)blockIdx.x * D;
    if (id == padding_idx) {{                    // zero row, the table is not read
        for (int d = threadIdx.x; d < {last}; d += THREADS) dst[d] = from_float(0.f);
        return;
    }}
    const scalar_t* src = weight + (size_t)id * D;
    for (int d = threadIdx.x; d < {last}; d += THREADS) dst[d] = src[d];
}}
{self._host("T", "THREADS")}"""

    def _vec(self, task):
        return f"constexpr int VEC = {16 // DTYPE_BYTES[task.dtype]};     // elements per uint4; D is a multiple of VEC\n"

    def _vectorized_uint4(self, p, task, bug):
        last = "chunks - 1" if bug == "off_by_one" else "chunks"
        return f"""
#define THREADS {p['threads']}
{self._vec(task)}
// One block per token, 16 bytes per thread per step: a quarter of the load instructions.
{self._SIG.format(bounds="__launch_bounds__(THREADS) ")} {{
    const int64_t id = ids[blockIdx.x];
    const int chunks = D / VEC;
    uint4* dst = reinterpret_cast<uint4*>(out + (size_t)blockIdx.x * D);
    const uint4* src = reinterpret_cast<const uint4*>(weight + (size_t)id * D);
    const bool pad = id == padding_idx;
    for (int c = threadIdx.x; c < {last}; c += THREADS) dst[c] = pad ? make_uint4(0u, 0u, 0u, 0u) : src[c];
}}
{self._host("T", "THREADS")}"""

    def _warp_copy(self, bug, store):
        last = "chunks - 1" if bug == "off_by_one" else "chunks"
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

    def _warp_per_token_unrolled(self, p, task, bug):
        return f"""
#define WARPS {p['warps_per_block']}       // tokens per block, one warp each
#define UNROLL {p['unroll']}
{self._vec(task)}{self._warp_copy(bug, "dst[c] = v[u]")}
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
{self._host("(T + WARPS - 1) / WARPS", "WARPS * WARP_SIZE")}"""

    def _persistent_streaming(self, p, task, bug):
        # evict-first stores: the output is never re-read here, the table rows are (repeated tokens)
        store = ("{ unsigned* d = reinterpret_cast<unsigned*>(&dst[c]); __builtin_nontemporal_store(v[u].x, d); "
                 "__builtin_nontemporal_store(v[u].y, d + 1); __builtin_nontemporal_store(v[u].z, d + 2); "
                 "__builtin_nontemporal_store(v[u].w, d + 3); }" if task.is_hip else "__stcs(&dst[c], v[u])")
        return f"""
#define WARPS {p['warps_per_block']}
#define UNROLL {p['unroll']}
#define BLOCKS_PER_SM {p['blocks_per_sm']}
{self._vec(task)}{self._warp_copy(bug, store)}
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
