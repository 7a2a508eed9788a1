"""Dynamic per-token FP8 (e4m3) quantization in CUDA: scale[t] = max|x[t, :]| / FP8_MAX,
q[t, :] = fp8(x[t, :] / scale[t]).

Ladder: two kernels (atomicMax absmax, then quantize) -> fused block per token with a shared-
memory tree -> uint4 loads + warp shuffles -> row cached in registers (one DRAM read) ->
hardware cvt.rn.satfinite.e4m3x2 through inline PTX (sm_89+). The lower rungs convert in
software (bit arithmetic, round to nearest even), which is what a part without FP8 has to do.
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude
from ..row_reread import reread
from .. import unroll, words
from ._fp8_words import CVT_E4M3X2, MANY_BLOCKS, block_scale, fp8_words_kernel, over_read_moves_a_scale
from .fp8_quant_spec import ENTRY, Fp8QuantSpec
from . import _fp8_persistent
from .. import persistent_rows
from ..over_read import CHUNK_LOOP, UNBOUNDED_LOOP

# stored H100 bf16 rows (fitted on), warp_shuffle_vectorized with half its re-read missing L1: T=4096 D=4096 64 threads
# 1.21x its 512-thread time (s40404), T=16384 D=8192 128 threads 1.13x (s96969); the old model 0.99-1.02x
REREAD_MISS = 0.35
THREADS = Param("threads", (64, 128, 256, 512, 1024), 256)
ROWS = Param("rows_per_block", (1, 2, 4), 1)
ATOMIC_MAX = "atomicMax(reinterpret_cast<unsigned int*>(scales) + i / D, __float_as_uint(s));"


def launch_of(kind: str):
    """atomic (two kernels, x read twice), smem (block per token), shuffle (uint4 + shuffles),
    cached / ptx (the row held in registers; ptx converts in hardware, fewer registers). smem and shuffle re-read
    the row in their convert pass: REREAD_MISS more where the SM's resident rows pass its L1 (row_reread)."""
    def launch(p, task):
        t, d, elt = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        threads = p["threads"]
        warps = cdiv(threads, task.gpu.warp)
        if kind == "atomic":
            # x is read twice (absmax pass + quantize pass); T*D contended atomics into T words
            return Launch(grid=cdiv(t * d, threads), threads=threads, regs=16, bytes_per_access=elt,
                          traffic=(2 * elt + 1) / (elt + 1), launches=2)
        if kind == "smem":      # words.VEC values a load (scalar: 1); ptxas sm_90a: 28, 31, 25 registers at VEC 1/2/4
            # the H100 (04:33 UTC device run) times VEC 4 0.88-0.95x of VEC 1 where full bytes-in-flight credit said
            # 0.68-0.76x (and 2.4x at T=1, its roofline turned compute-bound): the rung issues the software e4m3
            # rounding, not loads; a word credits VEC ** 0.2 of its bytes in flight
            vec = p.get("vec", 1)
            return reread(Launch(grid=t, threads=threads, smem_bytes=threads * 4, regs=20, bytes_per_access=elt * vec ** 0.2,
                                 traffic=1.2, lane_util=min(1.0, d / (threads * vec)),
                                 compute_scale=1 + 0.1 * (vec.bit_length() - 1)), task, d * elt, 0, REREAD_MISS)
        if kind == "shuffle":
            return reread(Launch(grid=t, threads=threads, smem_bytes=warps * 4, regs=30, bytes_per_access=16,
                                 traffic=1.2, lane_util=min(1.0, d / (threads * 8))), task, d * elt, 0, REREAD_MISS)
        rows = p["rows_per_block"]
        per_thread = cdiv(d, threads * 8)
        regs = 26 + 4 * per_thread + (0 if kind == "ptx" else 6)
        return Launch(grid=cdiv(t, rows), threads=threads * rows, smem_bytes=warps * rows * 4,
                      regs=min(regs, 255), bytes_per_access=16, traffic=1.0 + max(0, regs - 255) / 64,
                      lane_util=min(1.0, d / (threads * 8)))
    return launch


def check_adapter(d, model, x, ref, out_like):
    """gpu_check: q is compared as fp8 values (poisoned 0xFF = NaN in e4m3), scales as fp32."""
    import torch
    q, s = out_like(ref[0]), out_like(ref[1])
    return ([x[0], q, s, d["T"], d["D"]],
            [("q", lambda: q.view(torch.float8_e4m3fn), ref[0].view(torch.float8_e4m3fn), "fp8q"),
             ("scales", s, ref[1], "fp32")])


def fp8_helpers(task) -> str:
    fmax, bias = task.dialect.fp8_max, task.dialect.fp8_bias
    # e4m3fnuz has no negative zero: 0x80 is its NaN
    ret = "(uint8_t)(sign | mag)" if task.dialect.fp8_neg_zero else "(uint8_t)(mag ? (sign | mag) : 0u)"
    return f"""#define FP8_MAX {fmax}
#define FP8_EXP_BIAS {bias}
#define FP8_MIN_NORMAL {2.0 ** (1 - bias)!r}f          // 2^(1 - bias)
#define FP8_SUBNORMAL_INV {2.0 ** (bias + 2)!r}f       // 1 / (subnormal step 2^(-bias-2))
#define MIN_SCALE (1.f / (FP8_MAX * 512.f))

// float -> e4m3 code in software: saturate to +-FP8_MAX, keep 3 mantissa bits with round to
// nearest even. ~15 integer ops per element: the cost of having no fp8 cvt instruction.
__device__ __forceinline__ uint8_t fp8_from_float(float f) {{
    const uint32_t sign = (__float_as_uint(f) >> 24) & 0x80u;
    const float a = fminf(fabsf(f), FP8_MAX);
    uint32_t mag;
    if (a < FP8_MIN_NORMAL) {{
        // subnormal: 0..8 steps; 8 steps is exactly the smallest normal's code (0x08)
        mag = (uint32_t)__float2int_rn(a * FP8_SUBNORMAL_INV);
    }} else {{
        uint32_t u = __float_as_uint(a);
        u += 0x7FFFFu + ((u >> 20) & 1u);            // round away the low 20 mantissa bits, ties to even
        mag = (((u >> 23) - (127 - FP8_EXP_BIAS)) << 3) | ((u >> 20) & 7u);
    }}
    return {ret};
}}
"""


def host(kernel_launch: str, pre: str = "") -> str:
    return f"""
void fp8_quant(const scalar_t* x, uint8_t* q, float* scales, int T, int D, cudaStream_t stream) {{{pre}
    {kernel_launch}
}}
"""


def two_kernel_atomic_src(p, task, update=ATOMIC_MAX, val="to_float(x[i]) / scale"):
    launch = host("""const size_t n = (size_t)T * D;
    const unsigned blocks = (unsigned)((n + THREADS - 1) / THREADS);
    fp8_absmax_kernel<<<blocks, THREADS, 0, stream>>>(x, scales, T, D);
    fp8_quant_kernel<<<blocks, THREADS, 0, stream>>>(x, q, scales, T, D);""",
                      pre="\n    cudaMemsetAsync(scales, 0, T * sizeof(float), stream);  // 0 is the identity of max(|x|)")
    return f"""#define THREADS {p['threads']}

// Pass 1: every element folds its candidate scale into the row's slot. Non-negative floats
// order like their uint32 bit patterns, so an integer atomicMax is a float max. All D
// elements of a row hit the same word: heavily serialised in L2.
extern "C" __global__ void fp8_absmax_kernel(const scalar_t* __restrict__ x, float* __restrict__ scales,
                                             int T, int D) {{
    const size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;
    if (i >= (size_t)T * D) return;
    const float s = fmaxf(fabsf(to_float(x[i])) / FP8_MAX, MIN_SCALE);
    {update}
}}

// Pass 2: x is read again, divided by its row's scale and converted element by element.
extern "C" __global__ void fp8_quant_kernel(const scalar_t* __restrict__ x, uint8_t* __restrict__ q,
                                            const float* __restrict__ scales, int T, int D) {{
    const size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;
    if (i >= (size_t)T * D) return;
    const float scale = scales[i / D];
    q[i] = fp8_from_float({val});
}}
{launch}"""


def fused_smem_block_src(p, task, barrier="\n        __syncthreads();", last="D"):
    if p.get("vec", 1) > 1:
        return f"""{fp8_words_kernel(p, p['vec'], barrier, last)}
{host("fp8_quant_kernel<<<T, THREADS, 0, stream>>>(x, q, scales, T, D);")}"""
    return f"""#define THREADS {p['threads']}

// One block per token: strided absmax, tree reduction in shared memory, then a second pass
// over the (now L1/L2-resident) row converts.
extern "C" __global__ void __launch_bounds__(THREADS)
fp8_quant_kernel(const scalar_t* __restrict__ x, uint8_t* __restrict__ q, float* __restrict__ scales, int T, int D) {{
    __shared__ float red[THREADS];
    const scalar_t* xr = x + (size_t)blockIdx.x * D;
    uint8_t* qr = q + (size_t)blockIdx.x * D;
    float amax = 0.f;
    for (int i = threadIdx.x; i < D; i += THREADS) amax = fmaxf(amax, fabsf(to_float(xr[i])));
{block_scale(barrier)}
    for (int i = threadIdx.x; i < {last}; i += THREADS) qr[i] = fp8_from_float(to_float(xr[i]) / scale);
}}
{host("fp8_quant_kernel<<<T, THREADS, 0, stream>>>(x, q, scales, T, D);")}"""

VEC = """// 8 x 16-bit inputs per uint4 load; their 8 fp8 codes leave as one 8-byte uint2 store.
constexpr int VEC = 8;
union Pack { uint4 u; scalar_t h[VEC]; };
union Codes { uint2 u; uint8_t b[VEC]; unsigned short p[VEC / 2]; };
"""


def warp_shuffle_vectorized_src(p, task, loop=CHUNK_LOOP, val="to_float(v.h[k]) / scale"):
    return f"""#define THREADS {p['threads']}
{VEC}
// absmax over the block: shuffle within each warp, one shared slot per warp, first warp finishes
__device__ __forceinline__ float block_max(float v, float* warp_slots) {{
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    v = warp_max(v);
    if (lane == 0) warp_slots[warp] = v;
    __syncthreads();
    v = (threadIdx.x < THREADS / WARP_SIZE) ? warp_slots[lane] : 0.f;
    if (warp == 0) v = warp_max(v);
    if (threadIdx.x == 0) warp_slots[0] = v;
    __syncthreads();
    return warp_slots[0];
}}

extern "C" __global__ void __launch_bounds__(THREADS)
fp8_quant_kernel(const scalar_t* __restrict__ x, uint8_t* __restrict__ q, float* __restrict__ scales, int T, int D) {{
    __shared__ float warp_slots[THREADS / WARP_SIZE];
    const uint4* xr = reinterpret_cast<const uint4*>(x + (size_t)blockIdx.x * D);
    uint2* qr = reinterpret_cast<uint2*>(q + (size_t)blockIdx.x * D);
    const int chunks = D / VEC;
    float amax = 0.f;
    {loop}
        Pack v; v.u = xr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) amax = fmaxf(amax, fabsf(to_float(v.h[k])));
    }}
    const float scale = fmaxf(block_max(amax, warp_slots) / FP8_MAX, MIN_SCALE);
    if (threadIdx.x == 0) scales[blockIdx.x] = scale;
    for (int c = threadIdx.x; c < chunks; c += THREADS) {{    // second read hits L2
        Pack v; v.u = xr[c];
        Codes o;
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.b[k] = fp8_from_float({val});
        qr[c] = o.u;
    }}
}}
{host("fp8_quant_kernel<<<T, THREADS, 0, stream>>>(x, q, scales, T, D);")}"""


def register_cached_src(p, task, barrier="\n    __syncthreads();", guard="c < chunks", div="scale", hw=False):
    d, threads, rows = task["D"], p["threads"], p["rows_per_block"]
    if hw:
        cvt = CVT_E4M3X2
        convert = ("for (int k = 0; k < VEC; k += 2)\n"
                       "            o.p[k / 2] = fp8x2_from_float2(to_float(cache[j].h[k]) / div, to_float(cache[j].h[k + 1]) / div);")
    else:
        cvt = ""
        convert = "for (int k = 0; k < VEC; ++k) o.b[k] = fp8_from_float(to_float(cache[j].h[k]) / div);"
    return f"""#define THREADS {threads}          // threads per token
#define ROWS_PER_BLOCK {rows}
#define CHUNKS_PER_THREAD {max(1, cdiv(d, threads * 8))}  // ceil(D / (THREADS * 8)) for D = {d}
{VEC}{cvt}
// THREADS threads own one token; its row stays in registers between the absmax and the
// convert, so x crosses DRAM exactly once.
extern "C" __global__ void __launch_bounds__(THREADS * ROWS_PER_BLOCK)
fp8_quant_kernel(const scalar_t* __restrict__ x, uint8_t* __restrict__ q, float* __restrict__ scales, int T, int D) {{
    __shared__ float warp_slots[ROWS_PER_BLOCK][THREADS / WARP_SIZE];
    const int sub = threadIdx.x / THREADS, tid = threadIdx.x % THREADS;
    const int row = blockIdx.x * ROWS_PER_BLOCK + sub;
    const int chunks = D / VEC;
    const uint4* xr = reinterpret_cast<const uint4*>(x + (size_t)min(row, T - 1) * D);
    Pack cache[CHUNKS_PER_THREAD];
    float amax = 0.f;
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
        const int c = tid + j * THREADS;
        cache[j].u = c < chunks ? xr[c] : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int k = 0; k < VEC; ++k) amax = fmaxf(amax, fabsf(to_float(cache[j].h[k])));
    }}
    amax = warp_max(amax);
    if (tid % WARP_SIZE == 0) warp_slots[sub][tid / WARP_SIZE] = amax;{barrier}
#pragma unroll
    for (int w = 0; w < THREADS / WARP_SIZE; ++w) amax = fmaxf(amax, warp_slots[sub][w]);
    if (row >= T) return;
    const float scale = fmaxf(amax / FP8_MAX, MIN_SCALE);
    if (tid == 0) scales[row] = scale;
    const float div = {div};
    uint2* qr = reinterpret_cast<uint2*>(q + (size_t)row * D);
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
        const int c = tid + j * THREADS;
        if (!({guard})) continue;
        Codes o;
#pragma unroll
        {convert}
        qr[c] = o.u;
    }}
}}
{host("fp8_quant_kernel<<<(T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, THREADS * ROWS_PER_BLOCK, 0, stream>>>(x, q, scales, T, D);")}"""


def ptx_cvt_e4m3x2_src(p, task, **slots):
    return register_cached_src(p, task, hw=True, **slots)


class Fp8QuantCuda(Fp8QuantSpec):
    impl = "cuda"
    desc = ("Per-token (per-row) dynamic FP8 e4m3 quantization of activations: scale[t] = "
            "max(max|x[t, :]| / FP8_MAX, 1 / (FP8_MAX * 512)), q = satfinite_e4m3(x / scale), round to "
            "nearest even. FP8_MAX = 448 (e4m3fn) on NVIDIA, 240 (e4m3fnuz) on MI300X. q is returned as "
            "raw fp8 bytes, scales as fp32 [T].")
    reference_q = "q.view(torch.uint8)"      # the reference returns raw fp8 bytes too
    entry = ENTRY
    check_adapter = staticmethod(check_adapter)
    variants = (
        Rung("two_kernel_atomic", "absmax kernel with one atomicMax per element, then a quantize kernel",
             (Param("threads", (128, 256, 512), 256),), compute_eff=0.08, memory_eff=0.3,
             launch=launch_of("atomic"), render=two_kernel_atomic_src,
             bugs={"racy_update": {"update": "scales[i / D] = s;  // one plain store per element"},
                   "missing_scale": {"val": "to_float(x[i])"}}),
        Rung("fused_smem_block", "one block per token: shared-memory tree absmax, then a second pass converts",
             (THREADS, unroll.PRAGMA_UNROLL, words.VEC), compute_eff=0.08, memory_eff=0.62, smem="static",
             launch=unroll.launch_of(launch_of("smem"), words.word_trips(), words.word_regs),
             render=unroll.render_of(fused_smem_block_src), bug_tasks=MANY_BLOCKS, bugs={"missing_barrier": {"barrier": ""}, "off_by_one": {"last": "D - 1"}}),
        Rung("warp_shuffle_vectorized", "uint4 loads of 8 elements, warp-shuffle absmax, 8-byte fp8 stores",
             (THREADS, unroll.PRAGMA_UNROLL), compute_eff=0.08, memory_eff=0.82, smem="static",
             launch=unroll.launch_of(launch_of("shuffle"), unroll.row_trips(vec=True), 4),
             render=unroll.render_of(warp_shuffle_vectorized_src),
             bugs={"no_bounds_check": {"loop": UNBOUNDED_LOOP}, "missing_scale": {"val": "to_float(v.h[k])"}},
             bug_tasks=(("no_bounds_check", over_read_moves_a_scale),)),
        Rung("register_cached", "row cached in registers between absmax and convert: x read from DRAM once",
             (THREADS, ROWS), compute_eff=0.08, memory_eff=0.9, smem="static", launch=launch_of("cached"),
             render=register_cached_src,
             bugs={"missing_barrier": {"barrier": ""}, "off_by_one": {"guard": "c < chunks - 1"}}, bug_tasks=MANY_BLOCKS),
        Rung("ptx_cvt_e4m3x2", "register-cached row, hardware cvt.rn.satfinite.e4m3x2.f32 packs 2 values per op",
             (THREADS, ROWS), needs=frozenset({"fp8", "inline_ptx"}), compute_eff=0.45, memory_eff=0.92,
             smem="static", launch=launch_of("ptx"), render=ptx_cvt_e4m3x2_src,
             bugs={"missing_scale": {"div": "1.f"}, "off_by_one": {"guard": "c < chunks - 1"}}),
    )
    # the prefetched token: one chunk set a thread more than ptx_cvt_e4m3x2's row (persistent_rows)
    variants = persistent_rows.climb("fp8_quant_cuda", variants, "ptx_cvt_e4m3x2", _fp8_persistent.render, 1,
                                     _fp8_persistent.TITLE)

    def assemble(self, body, variant, params, task) -> str:
        return f"{prelude(task)}\n{fp8_helpers(task)}\n{body}"
