"""AdamW optimizer step in CUDA over a list of N parameters split into T tensors.

fp32 master params and moments, fp32 or 16-bit grads. Ladder: one kernel per tensor op ->
one fused kernel per tensor -> float4 vectors -> multi-tensor apply (chunk table in the kernel
arguments, one launch per 36 tensors / 320 chunks) -> persistent grid-stride over the chunks
of 80 tensors a launch.
"""
from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, cdiv,
                    cuda_prelude, kernelbench_program)

THREADS = Param("threads", (128, 256, 512, 1024), 256)
MTA_TENSORS, MTA_BLOCKS, PERSIST_TENSORS = 36, 320, 80
HOST = """void adamw_step(float* const* params, const scalar_t* const* grads, float* const* exp_avgs,
                float* const* exp_avg_sqs, const int64_t* numels, int num_tensors, float lr, float beta1,
                float beta2, float eps, float weight_decay, int step, cudaStream_t stream) {
    const AdamHyper h = make_hyper(lr, beta1, beta2, eps, weight_decay, step);"""


class AdamwCuda(OpModule):
    op, impl, family = "adamw", "cuda", "training"
    title = "AdamW optimizer step"
    desc = ("In place over T tensors of N fp32 params in total: p *= 1 - lr*wd; m = b1*m + (1-b1)*g; "
            "v = b2*v + (1-b2)*g^2; p -= lr/(1-b1^k) * m / (sqrt(v)/sqrt(1-b2^k) + eps). "
            "Grads g are in the task dtype, moments m, v fp32.")
    dims = {"N": "parameters in all tensors", "T": "number of tensors"}
    shapes = ({"N": 16777216, "T": 1}, {"N": 4194304, "T": 256}, {"N": 124439808, "T": 148},
              {"N": 218112000, "T": 9}, {"N": 1003520000, "T": 33}, {"N": 1235814400, "T": 146})
    dtypes = ("bf16", "fp32")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("multi_kernel", "five kernels per tensor (decay, m, v, direction, update), scalar",
                (THREADS,), memory_eff=0.6, bugs=("missing_scale", "off_by_one")),
        Variant("fused_elementwise", "one kernel per tensor, whole update in registers, scalar loads",
                (THREADS,), memory_eff=0.78, bugs=("missing_scale", "off_by_one")),
        Variant("vectorized_float4", "one kernel per tensor, float4 params/moments, 4-wide grad loads",
                (Param("threads", (128, 256, 512), 256), Param("unroll", (1, 2, 4), 1)),
                memory_eff=0.88, bugs=("missing_scale", "off_by_one")),
        Variant("multi_tensor_apply", "chunk table in the kernel arguments: one launch per 36 tensors",
                (Param("threads", (128, 256, 512), 256), Param("chunk", (2048, 8192, 32768, 65536), 32768)),
                memory_eff=0.9, bugs=("bad_combine_index", "off_by_one")),
        Variant("persistent", "grid of #SMs x k blocks strides over every chunk of 80 tensors",
                (Param("threads", (256, 512), 512), Param("blocks_per_sm", (1, 2, 4), 2),
                 Param("chunk", (4096, 16384, 65536), 16384)),
                memory_eff=0.92, bugs=("off_by_one", "missing_scale")),
    )

    def cost(self, task: Task) -> Cost:
        n, g = task["N"], DTYPE_BYTES[task.dtype]
        return Cost(flops=16 * n, bytes=n * (24 + g))     # p, m, v read + written, g read

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        n, t, g = task["N"], task["T"], DTYPE_BYTES[task.dtype]
        per_tensor = cdiv(n, t)
        threads = params["threads"]
        if variant.tag == "multi_kernel":
            # m, v, decay, direction (writes a scratch u), update: 44 + 2g bytes/param vs 24 + g
            return Launch(grid=cdiv(per_tensor, threads), threads=threads, regs=10, bytes_per_access=4,
                          traffic=(44 + 2 * g) / (24 + g), launches=5 * t)
        if variant.tag == "fused_elementwise":
            return Launch(grid=cdiv(per_tensor, threads), threads=threads, regs=22, bytes_per_access=4,
                          launches=t)
        if variant.tag == "vectorized_float4":
            unroll = params["unroll"]
            return Launch(grid=cdiv(per_tensor, threads * 4 * unroll), threads=threads, regs=26 + 14 * unroll,
                          bytes_per_access=16 * unroll, launches=t)
        chunk = params["chunk"]
        chunks = sum(cdiv(per_tensor, chunk) for _ in range(t))
        # a chunk's float4 loop: the last pass of a block is partly idle
        lane = chunk / (cdiv(chunk, threads * 4) * threads * 4)
        if variant.tag == "multi_tensor_apply":
            launches = max(cdiv(chunks, MTA_BLOCKS), cdiv(t, MTA_TENSORS))
            return Launch(grid=min(chunks, MTA_BLOCKS), threads=threads, regs=40, bytes_per_access=16,
                          lane_util=lane, launches=launches)
        grid = min(chunks, task.gpu.sms * params["blocks_per_sm"])
        return Launch(grid=grid, threads=threads, regs=40, bytes_per_access=32, lane_util=lane,
                      launches=cdiv(t, PERSIST_TENSORS))

    def signature(self, task: Task) -> str:
        return " ".join(HOST.split("{")[0].split()) + "  // pointer arrays in host memory"

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="*tensors",
            body=("p, g, m, v = (tensors[i * T:(i + 1) * T] for i in range(4))\n"
                  "        bc1, bc2 = 1 - self.b1 ** self.step, 1 - self.b2 ** self.step\n"
                  "        for pi, gi, mi, vi in zip(p, g, m, v):\n"
                  "            pi.mul_(1 - self.lr * self.wd)\n"
                  "            mi.lerp_(gi.float(), 1 - self.b1)\n"
                  "            vi.mul_(self.b2).addcmul_(gi.float(), gi.float(), value=1 - self.b2)\n"
                  "            pi.addcdiv_(mi, vi.sqrt() / bc2 ** 0.5 + self.eps, value=-self.lr / bc1)\n"
                  "        return torch.cat([x.flatten() for x in p + m + v])"),
            init="self.lr, self.b1, self.b2, self.eps, self.wd, self.step = 1e-3, 0.9, 0.999, 1e-8, 0.01, 3",
            inputs=("[x.abs() if k == 3 else x  # groups of T: params, grads, exp_avgs, exp_avg_sqs >= 0\n"
                    "            for k, (dt, s) in enumerate(((torch.float32, 1.0), (DTYPE, 1.0), (torch.float32, 0.1),"
                    " (torch.float32, 0.01)))\n"
                    "            for x in [torch.randn(N // T + (i < N % T), device='cuda', dtype=dt) * s for i in range(T)]]"),
            init_inputs="[]")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}{self._common(task, bug)}\n{body}"

    def _common(self, task, bug):
        vec = "float4" if task.dtype == "fp32" else "uint2"
        bc1 = "1.f" if bug == "missing_scale" else "1.f - powf(beta1, (float)step)"
        return f"""#include <math.h>

// Step constants folded on the host once: decoupled decay factor and both bias corrections.
struct AdamHyper {{ float beta1, beta2, eps, decay, step_size, inv_bc2_sqrt; }};

static AdamHyper make_hyper(float lr, float beta1, float beta2, float eps, float wd, int step) {{
    const float bc1 = {bc1}, bc2 = 1.f - powf(beta2, (float)step);
    return {{beta1, beta2, eps, 1.f - lr * wd, lr / bc1, 1.f / sqrtf(bc2)}};
}}

// The whole AdamW update of one element, in fp32 registers.
__device__ __forceinline__ void adamw_update(float& p, float g, float& m, float& v, const AdamHyper& h) {{
    p *= h.decay;
    m = h.beta1 * m + (1.f - h.beta1) * g;
    v = h.beta2 * v + (1.f - h.beta2) * g * g;
    p -= h.step_size * m / (sqrtf(v) * h.inv_bc2_sqrt + h.eps);
}}

// Four grads in one load: a float4 for fp32, 8 bytes (uint2) for 16-bit grads.
union Grad4 {{ {vec} u; scalar_t h[4]; }};
"""

    def _per_tensor_host(self, launch: str) -> str:
        return f"""
{HOST}
    for (int t = 0; t < num_tensors; ++t) {{  // one launch per tensor: T small kernels
        const int64_t n = numels[t];
        {launch}
    }}
}}
"""

    def _multi_kernel(self, p, task, bug):
        last = "n - 1" if bug == "off_by_one" else "n"
        return f"""
#define THREADS {p['threads']}

// Each tensor op of the update is its own kernel, like an optimizer written from tensor
// expressions: five launches per tensor, and m, v, p and a scratch direction u all make
// extra round trips through DRAM.
#define ELEMENT const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x
__global__ void adamw_decay_kernel(float* __restrict__ p, int64_t n, float decay) {{
    ELEMENT; if (i < n) p[i] *= decay;
}}
__global__ void adamw_exp_avg_kernel(float* __restrict__ m, const scalar_t* __restrict__ g, int64_t n, float beta1) {{
    ELEMENT; if (i < n) m[i] = beta1 * m[i] + (1.f - beta1) * to_float(g[i]);
}}
__global__ void adamw_exp_avg_sq_kernel(float* __restrict__ v, const scalar_t* __restrict__ g, int64_t n, float beta2) {{
    ELEMENT; if (i < n) v[i] = beta2 * v[i] + (1.f - beta2) * to_float(g[i]) * to_float(g[i]);
}}
__global__ void adamw_direction_kernel(float* __restrict__ u, const float* __restrict__ m, const float* __restrict__ v,
                                       int64_t n, float inv_bc2_sqrt, float eps) {{
    ELEMENT; if (i < n) u[i] = m[i] / (sqrtf(v[i]) * inv_bc2_sqrt + eps);
}}
extern "C" __global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ u, int64_t n, float step_size) {{
    ELEMENT; if (i < {last}) p[i] -= step_size * u[i];
}}

{HOST}
    int64_t max_n = 0;
    for (int t = 0; t < num_tensors; ++t) max_n = numels[t] > max_n ? numels[t] : max_n;
    float* u = nullptr;  // scratch for the update direction, reused by every tensor
    cudaMallocAsync((void**)&u, max_n * sizeof(float), stream);
    for (int t = 0; t < num_tensors; ++t) {{
        const int64_t n = numels[t];
        const unsigned blocks = (unsigned)((n + THREADS - 1) / THREADS);   // five launches per tensor
        adamw_decay_kernel<<<blocks, THREADS, 0, stream>>>(params[t], n, h.decay);
        adamw_exp_avg_kernel<<<blocks, THREADS, 0, stream>>>(exp_avgs[t], grads[t], n, h.beta1);
        adamw_exp_avg_sq_kernel<<<blocks, THREADS, 0, stream>>>(exp_avg_sqs[t], grads[t], n, h.beta2);
        adamw_direction_kernel<<<blocks, THREADS, 0, stream>>>(u, exp_avgs[t], exp_avg_sqs[t], n, h.inv_bc2_sqrt, h.eps);
        adamw_kernel<<<blocks, THREADS, 0, stream>>>(params[t], u, n, h.step_size);
    }}
    cudaFreeAsync(u, stream);
}}
"""

    def _fused_elementwise(self, p, task, bug):
        last = "n - 1" if bug == "off_by_one" else "n"
        return f"""
#define THREADS {p['threads']}

// One kernel per tensor: p, g, m, v are each read once and p, m, v written once.
extern "C" __global__ void __launch_bounds__(THREADS)
adamw_kernel(float* __restrict__ p, const scalar_t* __restrict__ g, float* __restrict__ m,
             float* __restrict__ v, int64_t n, AdamHyper h) {{
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (i < {last}) {{
        float pi = p[i], mi = m[i], vi = v[i];
        adamw_update(pi, to_float(g[i]), mi, vi, h);
        p[i] = pi; m[i] = mi; v[i] = vi;
    }}
}}
{self._per_tensor_host("adamw_kernel<<<(unsigned)((n + THREADS - 1) / THREADS), THREADS, 0, stream>>>(params[t], grads[t], exp_avgs[t], exp_avg_sqs[t], n, h);")}"""

    _VEC4 = """
// Four consecutive elements: float4 params and moments (16 B) plus one 4-wide grad load.
__device__ __forceinline__ void adamw_update4(float* p, const scalar_t* g, float* m, float* v,
                                              int64_t i, const AdamHyper& h) {
    float4 pv = *reinterpret_cast<float4*>(p + i), mv = *reinterpret_cast<float4*>(m + i);
    float4 vv = *reinterpret_cast<float4*>(v + i);
    Grad4 gv; gv.u = *reinterpret_cast<const decltype(gv.u)*>(g + i);
    adamw_update(pv.x, to_float(gv.h[0]), mv.x, vv.x, h);
    adamw_update(pv.y, to_float(gv.h[1]), mv.y, vv.y, h);
    adamw_update(pv.z, to_float(gv.h[2]), mv.z, vv.z, h);
    adamw_update(pv.w, to_float(gv.h[3]), mv.w, vv.w, h);
    *reinterpret_cast<float4*>(p + i) = pv; *reinterpret_cast<float4*>(m + i) = mv;
    *reinterpret_cast<float4*>(v + i) = vv;
}
"""

    @staticmethod
    def _fits(bug, i="i", n="n"):
        """The float4 loop test; the off-by-one drops a tensor's last full group."""
        return f"{i} + 4 < {n}" if bug == "off_by_one" else f"{i} + 4 <= {n}"

    @staticmethod
    def _grid_const(task):
        # __grid_constant__ lets the kernel index the argument struct in place instead of
        # copying it to local memory; HIP has no such qualifier.
        return "const " if task.is_hip else "const __grid_constant__ "

    def _tail(self, bug, lo="(n & ~(int64_t)3)", hi="n"):
        hi = f"{hi} - 1" if bug == "off_by_one" else hi
        return f"for (int64_t i = {lo} + threadIdx.x; i < {hi}; i += blockDim.x)  // < 4 leftovers\n" \
               "            adamw_update(p[i], to_float(g[i]), m[i], v[i], h);"

    def _vectorized_float4(self, p, task, bug):
        return f"""
#define THREADS {p['threads']}
#define UNROLL {p['unroll']}        // float4 groups per thread: more loads in flight per thread
{self._VEC4}
// Tensors come from the caching allocator (256-byte aligned), so float4 access is safe;
// the last n % 4 elements take the scalar path in the final block.
extern "C" __global__ void __launch_bounds__(THREADS)
adamw_kernel(float* __restrict__ p, const scalar_t* __restrict__ g, float* __restrict__ m,
             float* __restrict__ v, int64_t n, AdamHyper h) {{
    const int64_t base = ((int64_t)blockIdx.x * THREADS * UNROLL + threadIdx.x) * 4;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {{
        const int64_t i = base + (int64_t)u * THREADS * 4;
        if ({self._fits(bug)}) adamw_update4(p, g, m, v, i, h);
    }}
    if (blockIdx.x == gridDim.x - 1) {{
        {self._tail(bug)}
    }}
}}
{self._per_tensor_host("adamw_kernel<<<(unsigned)((n / 4 + THREADS * UNROLL) / (THREADS * UNROLL)), THREADS, 0, stream>>>(params[t], grads[t], exp_avgs[t], exp_avg_sqs[t], n, h);")}"""

    def _multi_tensor_apply(self, p, task, bug):
        chunk_ix = "meta.block_chunk[blockIdx.x] + 1" if bug == "bad_combine_index" else "meta.block_chunk[blockIdx.x]"
        return f"""
#define THREADS {p['threads']}
#define CHUNK {p['chunk']}          // elements per block-task, a multiple of 4
#define MAX_TENSORS {MTA_TENSORS}
#define MAX_BLOCKS {MTA_BLOCKS}
{self._VEC4}
// Everything a launch needs rides in the kernel arguments (3 KB < the 4 KB limit): the
// pointers of up to 36 tensors and, per block, which tensor and which chunk it owns.
struct TensorListMeta {{
    float* p[MAX_TENSORS]; const scalar_t* g[MAX_TENSORS]; float* m[MAX_TENSORS]; float* v[MAX_TENSORS];
    int64_t numel[MAX_TENSORS];
    unsigned char block_tensor[MAX_BLOCKS];
    int block_chunk[MAX_BLOCKS];
}};

extern "C" __global__ void __launch_bounds__(THREADS)
adamw_kernel({self._grid_const(task)}TensorListMeta meta, AdamHyper h) {{
    const int t = meta.block_tensor[blockIdx.x];
    float* p = meta.p[t]; const scalar_t* g = meta.g[t]; float* m = meta.m[t]; float* v = meta.v[t];
    const int64_t start = (int64_t)({chunk_ix}) * CHUNK;
    const int64_t n = min(meta.numel[t], start + CHUNK);
    for (int64_t i = start + threadIdx.x * 4; {self._fits(bug)}; i += THREADS * 4) adamw_update4(p, g, m, v, i, h);
    if (n - start < CHUNK) {{  // the tensor's last chunk
        {self._tail(bug, lo="start + ((n - start) & ~(int64_t)3)")}
    }}
}}

{HOST}
    TensorListMeta meta;
    int slot = 0, blocks = 0;    // tensor slot being filled, blocks queued for the next launch
    for (int t = 0; t < num_tensors; ++t, ++slot) {{
        meta.p[slot] = params[t]; meta.g[slot] = grads[t]; meta.m[slot] = exp_avgs[t];
        meta.v[slot] = exp_avg_sqs[t]; meta.numel[slot] = numels[t];
        const int chunks = (int)((numels[t] + CHUNK - 1) / CHUNK);
        for (int c = 0; c < chunks; ++c) {{
            meta.block_tensor[blocks] = (unsigned char)slot; meta.block_chunk[blocks++] = c;
            const bool tensor_done = c == chunks - 1;
            if (blocks == MAX_BLOCKS || (tensor_done && (slot == MAX_TENSORS - 1 || t == num_tensors - 1))) {{
                adamw_kernel<<<blocks, THREADS, 0, stream>>>(meta, h);
                blocks = 0;
                if (tensor_done) {{ slot = -1; continue; }}   // the next tensor opens a fresh list
                meta.p[0] = meta.p[slot]; meta.g[0] = meta.g[slot]; meta.m[0] = meta.m[slot];  // carry the
                meta.v[0] = meta.v[slot]; meta.numel[0] = meta.numel[slot]; slot = 0;         // open tensor over
            }}
        }}
    }}
}}
"""

    def _persistent(self, p, task, bug):
        total = "meta.chunk_start[meta.count] - 1" if bug == "off_by_one" else "meta.chunk_start[meta.count]"
        return f"""
#define THREADS {p['threads']}
#define BLOCKS_PER_SM {p['blocks_per_sm']}
#define CHUNK {p['chunk']}          // elements per chunk, a multiple of 8
#define MAX_TENSORS {PERSIST_TENSORS}
{self._VEC4}
// Up to 80 tensors per launch, described by pointers, sizes and a chunk prefix sum (3.5 KB
// of kernel arguments). A grid of #SMs x BLOCKS_PER_SM blocks strides over all their
// chunks: no tail wave, and one launch covers what multi-tensor apply needs several for.
struct TensorList {{
    float* p[MAX_TENSORS]; const scalar_t* g[MAX_TENSORS]; float* m[MAX_TENSORS]; float* v[MAX_TENSORS];
    int64_t numel[MAX_TENSORS];
    int chunk_start[MAX_TENSORS + 1];   // first global chunk of each tensor; [count] = total
    int count;
}};

extern "C" __global__ void __launch_bounds__(THREADS)
adamw_kernel({self._grid_const(task)}TensorList meta, AdamHyper h) {{
    const int total = {total};
    int t = 0;
    for (int c = blockIdx.x; c < total; c += gridDim.x) {{
        while (c >= meta.chunk_start[t + 1]) ++t;   // a block's chunks only grow: walk forward
        float* p = meta.p[t]; const scalar_t* g = meta.g[t]; float* m = meta.m[t]; float* v = meta.v[t];
        const int64_t start = (int64_t)(c - meta.chunk_start[t]) * CHUNK;
        const int64_t n = min(meta.numel[t], start + CHUNK);
        // two float4 groups in flight per thread before the math
        int64_t i = start + threadIdx.x * 4;
        for (; i + THREADS * 4 + 4 <= n; i += THREADS * 8) {{
            adamw_update4(p, g, m, v, i, h);
            adamw_update4(p, g, m, v, i + THREADS * 4, h);
        }}
        if (i + 4 <= n) adamw_update4(p, g, m, v, i, h);
        if (n - start < CHUNK) {{
            {self._tail(None, lo="start + ((n - start) & ~(int64_t)3)")}
        }}
    }}
}}

{HOST}
    static int sms = 0;
    if (!sms) {{ int dev; cudaGetDevice(&dev); cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); }}
    for (int first = 0; first < num_tensors; first += MAX_TENSORS) {{
        TensorList meta;
        meta.count = num_tensors - first < MAX_TENSORS ? num_tensors - first : MAX_TENSORS;
        meta.chunk_start[0] = 0;
        for (int k = 0; k < meta.count; ++k) {{
            const int t = first + k;
            meta.p[k] = params[t]; meta.g[k] = grads[t]; meta.m[k] = exp_avgs[t]; meta.v[k] = exp_avg_sqs[t];
            meta.numel[k] = numels[t];
            meta.chunk_start[k + 1] = meta.chunk_start[k] + (int)((numels[t] + CHUNK - 1) / CHUNK);
        }}
        const int total = meta.chunk_start[meta.count];
        const int grid = total < sms * BLOCKS_PER_SM ? total : sms * BLOCKS_PER_SM;
        adamw_kernel<<<grid, THREADS, 0, stream>>>(meta, h);
    }}
}}
"""
