"""MoE combine in CUDA: weighted sum of each token's top-k expert outputs, back in token order.

expert_out [T * topk, K] is in expert-sorted order (row p holds assignment sorted_ids[p], a = t * topk + j);
y[t, :] = sum_j topk_weights[t, j] * expert_out[p(t * topk + j), :] with fp32 accumulation.
Ladder: scatter-add with fp32 atomics into a zeroed buffer plus a convert kernel -> invert the
permutation once, then one thread per output element gathers its top-k values (no atomics, deterministic)
-> one block per token with 16-byte uint4 loads -> several tokens per block with all top-k row loads
issued before the accumulation (TOPK compile-time, loads in flight per lane = topk).
"""
from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude,
                    kernelbench_program)

SIG = ("void moe_combine(const scalar_t* expert_out, const int* sorted_ids, const float* topk_weights, scalar_t* y, "
       "int T, int K, int topk, cudaStream_t stream)")
THREADS = Param("threads", (64, 128, 256, 512), 256)


class MoeCombineCuda(OpModule):
    op, impl, family = "moe_combine", "cuda", "moe"
    title = "MoE combine (weighted top-k sum, back to token order)"
    desc = ("y[t, :] = sum_j topk_weights[t, j] * expert_out[p, :] where row p of the expert-sorted expert_out holds "
            "assignment t * topk + j (sorted_ids[p] = t * topk + j); fp32 weights and accumulation.")
    dims = {"T": "tokens", "topk": "experts per token", "K": "hidden size"}
    shapes = ({"T": 16, "topk": 2, "K": 4096}, {"T": 4096, "topk": 2, "K": 4096}, {"T": 64, "topk": 6, "K": 2048},
              {"T": 2048, "topk": 6, "K": 2048}, {"T": 8192, "topk": 8, "K": 2048}, {"T": 512, "topk": 8, "K": 7168})
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("atomic_scatter_add", "thread per expert_out element atomicAdds w * v into a zeroed fp32 buffer; convert kernel",
                (THREADS,), memory_eff=0.6, bugs=("missing_scale", "off_by_one")),
        Variant("gather_per_element", "inverse permutation kernel, then one thread per y element gathers its top-k values",
                (THREADS,), memory_eff=0.75, bugs=("wrong_init", "off_by_one")),
        Variant("vectorized_uint4", "one block per token: 16-byte uint4 loads of each expert row, fp32 accumulators",
                (THREADS,), memory_eff=0.86, bugs=("missing_scale", "off_by_one")),
        Variant("multi_token_ilp", "tokens per block, slots/weights staged in smem, all top-k uint4 loads in flight at once",
                (Param("threads", (64, 128, 256), 128), Param("tokens_per_block", (1, 2, 4), 2)), memory_eff=0.91,
                smem="static", bugs=("missing_scale", "off_by_one")),
    )

    def cost(self, task: Task) -> Cost:
        t, topk, k, e = task["T"], task["topk"], task["K"], DTYPE_BYTES[task.dtype]
        return Cost(flops=2 * t * topk * k, bytes=t * topk * k * e + t * k * e + t * topk * 8)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, topk, k, e = task["T"], task["topk"], task["K"], DTYPE_BYTES[task.dtype]
        tag, base, threads = variant.tag, self.cost(task).bytes, params["threads"]
        n = t * topk
        if tag == "atomic_scatter_add":
            # fp32 buffer: zeroed, atomically updated topk times per element at L2, read back by the convert
            extra = t * k * 4 * 3 + n * k * 4 * 0.5
            return Launch(grid=cdiv(n * k, threads), threads=threads, regs=20, bytes_per_access=e,
                          traffic=1 + extra / base, launches=3)
        if tag == "gather_per_element":
            return Launch(grid=cdiv(t * k, threads), threads=threads, regs=32, bytes_per_access=e,
                          traffic=1 + n * 8 / base, launches=2)
        if tag == "vectorized_uint4":
            return Launch(grid=t, threads=threads, regs=32, bytes_per_access=16, traffic=1 + n * 8 / base,
                          lane_util=min(1.0, k / 8 / threads), launches=2)
        tpb = params["tokens_per_block"]
        return Launch(grid=cdiv(t, tpb), threads=threads, smem_bytes=tpb * topk * 8, regs=24 + 5 * topk,
                      bytes_per_access=8 * topk, traffic=1 + n * 8 / base,
                      lane_util=min(1.0, k / 8 / threads), launches=2)

    def signature(self, task: Task) -> str:
        return SIG

    def reference(self, task: Task) -> str:
        body = ("rows = torch.empty_like(expert_out)\n"
                "        rows[sorted_ids.long()] = expert_out                    # back to assignment order\n"
                "        y = (rows.view(T, topk, K).float() * topk_weights.unsqueeze(-1)).sum(dim=1)\n"
                "        return y.to(expert_out.dtype)")
        inputs = ("[torch.randn(T * topk, K, dtype=DTYPE, device='cuda'),\n"
                  "            torch.randperm(T * topk, device='cuda').int(),   # any expert-sorted order\n"
                  "            torch.softmax(torch.randn(T, topk, device='cuda'), dim=-1)]")
        return kernelbench_program(task, self.title, args="expert_out, sorted_ids, topk_weights", body=body,
                                   inputs=inputs)

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n#define THREADS {params['threads']}\n{body}"

    def _atomic_scatter_add(self, p, task, bug):
        w = "" if bug == "missing_scale" else "topk_weights[a] * "
        upd = f"atomicAdd(&acc[(size_t)(a / topk) * K + k], {w}to_float(expert_out[i]));"
        last = "count - 1" if bug == "off_by_one" else "count"
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

{SIG} {{
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

    def _invert(self, task) -> str:
        n = task["T"] * task["topk"]
        return f"""
__device__ int slot_of[{n}];                    // slot_of[a]: row of assignment a in expert_out

__global__ void invert_perm(const int* __restrict__ sorted_ids, int n) {{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n) slot_of[sorted_ids[p]] = p;
}}
"""

    def _host(self, grid: str) -> str:
        return f"""
{SIG} {{
    const int n = T * topk;
    invert_perm<<<(n + 255) / 256, 256, 0, stream>>>(sorted_ids, n);
    moe_combine_kernel<<<{grid}, THREADS, 0, stream>>>(expert_out, topk_weights, y, T, K, topk);
}}
"""

    def _gather_per_element(self, p, task, bug):
        init = "1.f" if bug == "wrong_init" else "0.f"
        last = "topk - 1" if bug == "off_by_one" else "topk"
        return self._invert(task) + f"""
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
""" + self._host("(unsigned)(((size_t)T * K + THREADS - 1) / THREADS)")

    _PACK = """
constexpr int VEC = 8;                          // 8 x 16-bit elements per 16-byte uint4 (K % 8 == 0)
union Pack { uint4 u; scalar_t h[VEC]; };
"""

    def _vectorized_uint4(self, p, task, bug):
        last = "topk - 1" if bug == "off_by_one" else "topk"
        w = "" if bug == "missing_scale" else "w * "
        return self._invert(task) + self._PACK + f"""
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
""" + self._host("T")

    def _multi_token_ilp(self, p, task, bug):
        w = "" if bug == "missing_scale" else "w[j] * "
        last = "tokens - 1" if bug == "off_by_one" else "tokens"
        return self._invert(task) + self._PACK + f"""
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
        for (int c = threadIdx.x; c < K / VEC; c += THREADS) {{
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
""" + self._host("(T + TPB - 1) / TPB")
