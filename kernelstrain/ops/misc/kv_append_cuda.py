"""Paged KV-cache append in CUDA: scatter this step's K and V rows into cache pages by slot.

Cache pages are HND (FlashInfer's layout): cache[page][head][offset][dim], page = slot / P,
offset = slot % P, so each head's D-vector lands P * D elements away from the next head's.
Ladder: thread per element -> block per token (slot read once) -> 16-byte uint4 copies ->
warp per token with UNROLL loads of K and V in flight before any store.
"""
from ..base import Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude, kernelbench_program


class KvAppendCuda(OpModule):
    op, impl, family = "kv_append", "cuda", "misc"
    title = "Paged KV-cache append"
    desc = ("key_cache[s / P, h, s % P, :] = key[t, h, :] and likewise for value, s = slot_mapping[t] "
            "(int64, negative = padding token, skipped); caches are [pages, H, P, D], D a multiple of 8.")
    dims = {"T": "new tokens this step", "H": "KV heads", "D": "head dim", "P": "page size (tokens per page)"}
    shapes = ({"T": 32, "H": 8, "D": 128, "P": 16}, {"T": 256, "H": 8, "D": 128, "P": 16},
              {"T": 4096, "H": 8, "D": 128, "P": 16}, {"T": 16384, "H": 8, "D": 128, "P": 16},
              {"T": 8192, "H": 32, "D": 128, "P": 16}, {"T": 4096, "H": 16, "D": 256, "P": 32})
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia", "amd")
    variants = (
        # issue-bound rather than memory-bound: 64-bit divides/mods for every 2-byte element
        Variant("element_per_thread", "one thread per element of K and V: div/mod and slot lookup per element",
                (Param("threads", (128, 256, 512), 256),), memory_eff=0.5, bugs=("off_by_one",)),
        Variant("block_per_token", "one block per token (vLLM's classic kernel): slot read once, scalar copies",
                (Param("threads", (128, 256, 512, 1024), 256),), memory_eff=0.65, bugs=("off_by_one",)),
        Variant("vectorized_uint4", "block per token, each thread moves 16-byte uint4 chunks of one head",
                (Param("threads", (64, 128, 256), 128),), memory_eff=0.9, bugs=("off_by_one",)),
        Variant("warp_per_token_ilp", "warp per token, WARPS tokens a block; UNROLL uint4 loads of K and V issued "
                "before the stores", (Param("warps", (2, 4, 8), 4), Param("unroll", (1, 2, 4), 4)),
                memory_eff=0.92, bugs=("off_by_one",)),
    )

    def cost(self, task: Task) -> Cost:
        t, h, d, e = task["T"], task["H"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=0, bytes=4 * t * h * d * e + 8 * t)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, hd, elt = task["T"], task["H"] * task["D"], DTYPE_BYTES[task.dtype]
        chunks = hd * elt // 16
        if variant.tag == "element_per_thread":
            th = params["threads"]
            return Launch(grid=cdiv(t * hd, th), threads=th, regs=24, bytes_per_access=elt)
        if variant.tag == "block_per_token":
            th = params["threads"]
            # nvcc unrolls the stride loop: ~4 independent 2-byte loads of K (and of V) in flight
            return Launch(grid=t, threads=th, regs=36, bytes_per_access=4 * elt, lane_util=min(1.0, hd / th))
        if variant.tag == "vectorized_uint4":
            th = params["threads"]
            return Launch(grid=t, threads=th, regs=36, bytes_per_access=16, lane_util=min(1.0, chunks / th))
        warps, unroll = params["warps"], params["unroll"]
        w = task.gpu.warp
        return Launch(grid=cdiv(t, warps), threads=warps * w, regs=24 + 8 * unroll, bytes_per_access=16 * unroll,
                      lane_util=chunks / (w * unroll * cdiv(chunks, w * unroll)))

    def signature(self, task: Task) -> str:
        return ("void kv_append(const scalar_t* key, const scalar_t* value, scalar_t* key_cache, scalar_t* value_cache, "
                "const int64_t* slot_mapping, int T, int H, int D, int P, cudaStream_t stream)")

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="key, value, key_cache, value_cache, slot_mapping",
            body="keep = slot_mapping >= 0   # negative slots are padding\n"
                 "        page, off = slot_mapping[keep] // P, slot_mapping[keep] % P\n"
                 "        key_cache[page, :, off, :] = key[keep]   # HND pages: [page, head, offset, dim]\n"
                 "        value_cache[page, :, off, :] = value[keep]\n"
                 "        return key_cache, value_cache",
            inputs="[torch.randn(T, H, D, dtype=DTYPE, device='cuda'), torch.randn(T, H, D, dtype=DTYPE, device='cuda'),\n"
                   "            torch.zeros(2 * T // P + 2, H, P, D, dtype=DTYPE, device='cuda'),\n"
                   "            torch.zeros(2 * T // P + 2, H, P, D, dtype=DTYPE, device='cuda'),\n"
                   "            torch.randperm((2 * T // P + 2) * P, device='cuda')[:T]]")

    # -- renders -----------------------------------------------------------------
    ARGS = ("const scalar_t* __restrict__ key, const scalar_t* __restrict__ value, scalar_t* __restrict__ key_cache, "
            "scalar_t* __restrict__ value_cache, const int64_t* __restrict__ slot_mapping, int T, int H, int D, int P")

    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n{body}"

    def _host(self, grid: str, block: str) -> str:
        return f"""
void kv_append(const scalar_t* key, const scalar_t* value, scalar_t* key_cache, scalar_t* value_cache,
               const int64_t* slot_mapping, int T, int H, int D, int P, cudaStream_t stream) {{
    kv_append_kernel<<<{grid}, {block}, 0, stream>>>(key, value, key_cache, value_cache, slot_mapping, T, H, D, P);
}}
"""

    _SLOT = """    const int64_t slot = slot_mapping[t];
    if (slot < 0) return;                       // padding token
    const int64_t page = slot / P, off = slot % P;"""

    def _element_per_thread(self, p, task, bug):
        total = "(int64_t)T * H * D - 1" if bug == "off_by_one" else "(int64_t)T * H * D"
        return f"""
#define THREADS {p['threads']}

// One thread per element of K and of V: each redoes the token/head/dim split and the slot lookup.
extern "C" __global__ void __launch_bounds__(THREADS) kv_append_kernel({self.ARGS}) {{
    const int64_t idx = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= {total}) return;
    const int t = (int)(idx / ((int64_t)H * D)), h = (int)(idx / D % H), d = (int)(idx % D);
{self._SLOT}
    const int64_t dst = ((page * H + h) * P + off) * D + d;   // [page][head][offset][dim]
    key_cache[dst] = key[idx];
    value_cache[dst] = value[idx];
}}
{self._host("(int)(((int64_t)T * H * D + THREADS - 1) / THREADS)", "THREADS")}"""

    def _block_per_token(self, p, task, bug):
        return f"""
#define THREADS {p['threads']}

// One block per token: the slot is looked up once; threads stride over the token's H * D elements.
extern "C" __global__ void __launch_bounds__(THREADS) kv_append_kernel({self.ARGS}) {{
    const int t = blockIdx.x;
{self._SLOT}
    const scalar_t* k = key + (size_t)t * H * D;
    const scalar_t* v = value + (size_t)t * H * D;
    for (int i = threadIdx.x; i < {'H * D - 1' if bug == 'off_by_one' else 'H * D'}; i += THREADS) {{
        const int h = i / D, d = i % D;
        const int64_t dst = ((page * H + h) * P + off) * D + d;
        key_cache[dst] = k[i];
        value_cache[dst] = v[i];
    }}
}}
{self._host("T", "THREADS")}"""

    _VEC = """
// 8 x 16-bit elements travel as one 16-byte uint4; a head's D-vector is D / VEC chunks
constexpr int VEC = 16 / sizeof(scalar_t);
"""

    def _vectorized_uint4(self, p, task, bug):
        return f"""
#define THREADS {p['threads']}
{self._VEC}
// One block per token; every thread copies whole uint4 chunks (a chunk never straddles two heads).
extern "C" __global__ void __launch_bounds__(THREADS) kv_append_kernel({self.ARGS}) {{
    const int t = blockIdx.x;
{self._SLOT}
    const int per_head = D / VEC, chunks = H * per_head;
    const uint4* k = reinterpret_cast<const uint4*>(key + (size_t)t * H * D);
    const uint4* v = reinterpret_cast<const uint4*>(value + (size_t)t * H * D);
    uint4* kc = reinterpret_cast<uint4*>(key_cache);
    uint4* vc = reinterpret_cast<uint4*>(value_cache);
    for (int c = threadIdx.x; c < {'chunks - 1' if bug == 'off_by_one' else 'chunks'}; c += THREADS) {{
        const int h = c / per_head, j = c % per_head;
        const int64_t dst = ((page * H + h) * P + off) * per_head + j;
        kc[dst] = k[c];
        vc[dst] = v[c];
    }}
}}
{self._host("T", "THREADS")}"""

    def _warp_per_token_ilp(self, p, task, bug):
        guard = "c < chunks - 1" if bug == "off_by_one" else "c < chunks"
        return f"""
#define WARPS {p['warps']}                 // tokens per block, one warp each
#define UNROLL {p['unroll']}                // uint4 chunks of K (and of V) a lane keeps in flight
{self._VEC}
// Warp per token: each lane first issues UNROLL loads of K and of V, then the UNROLL pairs of
// stores, so 2 * UNROLL independent 16-byte loads are in flight per lane.
extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE) kv_append_kernel({self.ARGS}) {{
    const int lane = threadIdx.x % WARP_SIZE, t = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE;
    if (t >= T) return;
{self._SLOT}
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
{self._host("(T + WARPS - 1) / WARPS", "WARPS * WARP_SIZE")}"""
