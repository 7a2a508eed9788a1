"""AdamW optimizer step in CUDA over a list of N parameters split into T tensors.

fp32 master params and moments, fp32 or 16-bit grads. Ladder: one kernel per tensor op ->
one fused kernel per tensor -> float4 vectors -> multi-tensor apply (chunk table in the kernel
arguments, one launch per 36 tensors / 320 chunks) -> persistent grid-stride over the chunks
of 80 tensors a launch.
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude
from ._adamw import BC1, FITS, HOST, OFF_BY_ONE, VEC4, common, per_tensor_host, tail
from .adamw_spec import AdamwSpec

THREADS = Param("threads", (128, 256, 512, 1024), 256)
MTA_TENSORS, MTA_BLOCKS, PERSIST_TENSORS = 36, 320, 80
NO_SCALE = {"bc1": "1.f"}                  # missing_scale: no first bias correction
# multi_kernel's off_by_one skips the last step of each tensor (its m, v and decay still update): one stale param a
# tensor, within fp32's tolerance in ~22% of draws (emulated: tests/test_label_truth.py), so a run passes w.p.
# 0.22^T; offered from the T at which that is below 1e-6 (an H100 passed it at T = 1 in 1 of 3 runs, labels k1)
STALE_STEP_TENSORS = (("off_by_one", lambda t, p: t["T"] >= 10),)


def launch_of(kind: str):
    """multi (five kernels a tensor), fused, float4 (per tensor), mta (multi-tensor apply) or
    persistent (a grid striding over the chunks of 80 tensors)."""
    def launch(p, task):
        n, t, g = task["N"], task["T"], DTYPE_BYTES[task.dtype]
        per_tensor, threads = cdiv(n, t), p["threads"]
        if kind == "multi":
            # m, v, decay, direction (writes a scratch u), update: 44 + 2g bytes/param vs 24 + g
            return Launch(grid=cdiv(per_tensor, threads), threads=threads, regs=10, bytes_per_access=4,
                          traffic=(44 + 2 * g) / (24 + g), launches=5 * t)
        if kind == "fused":
            return Launch(grid=cdiv(per_tensor, threads), threads=threads, regs=22, bytes_per_access=4,
                          launches=t)
        if kind == "float4":
            unroll = p["unroll"]
            return Launch(grid=cdiv(per_tensor, threads * 4 * unroll), threads=threads, regs=26 + 14 * unroll,
                          bytes_per_access=16 * unroll, launches=t)
        chunk = p["chunk"]
        chunks = sum(cdiv(per_tensor, chunk) for _ in range(t))
        # a chunk's float4 loop: the last pass of a block is partly idle
        lane = chunk / (cdiv(chunk, threads * 4) * threads * 4)
        if kind == "mta":
            launches = max(cdiv(chunks, MTA_BLOCKS), cdiv(t, MTA_TENSORS))
            return Launch(grid=min(chunks, MTA_BLOCKS), threads=threads, regs=40, bytes_per_access=16,
                          lane_util=lane, launches=launches)
        grid = min(chunks, task.gpu.sms * p["blocks_per_sm"])
        return Launch(grid=grid, threads=threads, regs=40, bytes_per_access=32, lane_util=lane,
                      launches=cdiv(t, PERSIST_TENSORS))
    return launch


def with_common(src):
    """A rung's render: the shared step constants and update first (bc1 is a slot), then src."""
    def render(p, task, bc1=BC1, **slots):
        return f"{common(task, bc1)}\n{src(p, task, **slots)}"
    return render


def multi_kernel_src(p, task, last="n"):
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


def fused_elementwise_src(p, task, last="n"):
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
{per_tensor_host("adamw_kernel<<<(unsigned)((n + THREADS - 1) / THREADS), THREADS, 0, stream>>>(params[t], grads[t], exp_avgs[t], exp_avg_sqs[t], n, h);")}"""


def vectorized_float4_src(p, task, fits=FITS, hi="n"):
    return f"""
#define THREADS {p['threads']}
#define UNROLL {p['unroll']}        // float4 groups per thread: more loads in flight per thread
{VEC4}
// Tensors come from the caching allocator (256-byte aligned), so float4 access is safe;
// the last n % 4 elements take the scalar path in the final block.
extern "C" __global__ void __launch_bounds__(THREADS)
adamw_kernel(float* __restrict__ p, const scalar_t* __restrict__ g, float* __restrict__ m,
             float* __restrict__ v, int64_t n, AdamHyper h) {{
    const int64_t base = ((int64_t)blockIdx.x * THREADS * UNROLL + threadIdx.x) * 4;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {{
        const int64_t i = base + (int64_t)u * THREADS * 4;
        if ({fits}) adamw_update4(p, g, m, v, i, h);
    }}
    if (blockIdx.x == gridDim.x - 1) {{
        {tail(hi=hi)}
    }}
}}
{per_tensor_host("adamw_kernel<<<(unsigned)((n / 4 + THREADS * UNROLL) / (THREADS * UNROLL)), THREADS, 0, stream>>>(params[t], grads[t], exp_avgs[t], exp_avg_sqs[t], n, h);")}"""


def multi_tensor_apply_src(p, task, chunk_ix="meta.block_chunk[blockIdx.x]", fits=FITS, hi="n"):
    return f"""
#define THREADS {p['threads']}
#define CHUNK {p['chunk']}          // elements per block-task, a multiple of 4
#define MAX_TENSORS {MTA_TENSORS}
#define MAX_BLOCKS {MTA_BLOCKS}
{VEC4}
// Everything a launch needs rides in the kernel arguments (3 KB < the 4 KB limit): the
// pointers of up to 36 tensors and, per block, which tensor and which chunk it owns.
struct TensorListMeta {{
    float* p[MAX_TENSORS]; const scalar_t* g[MAX_TENSORS]; float* m[MAX_TENSORS]; float* v[MAX_TENSORS];
    int64_t numel[MAX_TENSORS];
    unsigned char block_tensor[MAX_BLOCKS];
    int block_chunk[MAX_BLOCKS];
}};

extern "C" __global__ void __launch_bounds__(THREADS)
adamw_kernel({task.dialect.grid_constant}TensorListMeta meta, AdamHyper h) {{
    const int t = meta.block_tensor[blockIdx.x];
    float* p = meta.p[t]; const scalar_t* g = meta.g[t]; float* m = meta.m[t]; float* v = meta.v[t];
    const int64_t start = (int64_t)({chunk_ix}) * CHUNK;
    const int64_t n = min(meta.numel[t], start + CHUNK);
    for (int64_t i = start + threadIdx.x * 4; {fits}; i += THREADS * 4) adamw_update4(p, g, m, v, i, h);
    if (n - start < CHUNK) {{  // the tensor's last chunk
        {tail("start + ((n - start) & ~(int64_t)3)", hi)}
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


def persistent_src(p, task, total="meta.chunk_start[meta.count]"):
    return f"""
#define THREADS {p['threads']}
#define BLOCKS_PER_SM {p['blocks_per_sm']}
#define CHUNK {p['chunk']}          // elements per chunk, a multiple of 8
#define MAX_TENSORS {PERSIST_TENSORS}
{VEC4}
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
adamw_kernel({task.dialect.grid_constant}TensorList meta, AdamHyper h) {{
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
            {tail("start + ((n - start) & ~(int64_t)3)")}
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


class AdamwCuda(AdamwSpec):
    impl = "cuda"
    variants = (
        Rung("multi_kernel", "five kernels per tensor (decay, m, v, direction, update), scalar",
             (THREADS,), memory_eff=0.6, launch=launch_of("multi"), render=with_common(multi_kernel_src),
             bugs={"missing_scale": NO_SCALE, "off_by_one": {"last": "n - 1"}}, bug_tasks=STALE_STEP_TENSORS),
        Rung("fused_elementwise", "one kernel per tensor, whole update in registers, scalar loads",
             (THREADS,), memory_eff=0.78, launch=launch_of("fused"), render=with_common(fused_elementwise_src),
             bugs={"missing_scale": NO_SCALE, "off_by_one": {"last": "n - 1"}}),
        Rung("vectorized_float4", "one kernel per tensor, float4 params/moments, 4-wide grad loads",
             (Param("threads", (128, 256, 512), 256), Param("unroll", (1, 2, 4), 1)),
             memory_eff=0.88, launch=launch_of("float4"), render=with_common(vectorized_float4_src),
             bugs={"missing_scale": NO_SCALE, "off_by_one": OFF_BY_ONE}),
        Rung("multi_tensor_apply", "chunk table in the kernel arguments: one launch per 36 tensors",
             (Param("threads", (128, 256, 512), 256), Param("chunk", (2048, 8192, 32768, 65536), 32768)),
             memory_eff=0.9, launch=launch_of("mta"), render=with_common(multi_tensor_apply_src),
             bugs={"bad_combine_index": {"chunk_ix": "meta.block_chunk[blockIdx.x] + 1"}, "off_by_one": OFF_BY_ONE}),
        Rung("persistent", "grid of #SMs x k blocks strides over every chunk of 80 tensors",
             (Param("threads", (256, 512), 512), Param("blocks_per_sm", (1, 2, 4), 2),
              Param("chunk", (4096, 16384, 65536), 16384)),
             memory_eff=0.92, launch=launch_of("persistent"), render=with_common(persistent_src),
             bugs={"off_by_one": {"total": "meta.chunk_start[meta.count] - 1"}, "missing_scale": NO_SCALE}),
    )

    def assemble(self, body, variant, params, task) -> str:
        return f"{prelude(task)}{body}"
