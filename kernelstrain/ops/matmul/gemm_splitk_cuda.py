"""Split-K GEMM in CUDA for small M and long K: C[M, N] = A[M, K] . B[N, K]^T, fp32 accumulate.

Ladder: register-blocked CUDA-core tiles, one CTA per output tile (a 16 x 4096 output is 32 CTAs:
a quarter of an H200) -> K split over blockIdx.z into fp32 partial slices plus a reduce kernel ->
the splits fold into one fp32 workspace with atomics (no partial slices) -> tensor cores
(ldmatrix + mma.sync) per split -> a cp.async ring per split.
"""
from ..base import Launch, Param, Rung, cdiv
from ._gemm_mma import mma_kernel
from ._gemm_tc import tc_launch, tc_traffic
from .gemm_splitk_spec import ENTRY, SPLIT_VALUES, GemmSplitkSpec, split_launch

ARGS = "const scalar_t* __restrict__ A, const scalar_t* __restrict__ B, {out}, int M, int N, int K"
SPLITS = Param("SPLITS", SPLIT_VALUES, 8)
COMBINE = "(size_t)s * MN + i"          # partial slice s of output i; bad_combine_index reads one slice short
SHORT_COMBINE = {"combine_end": "SPLITS - 1"}
# where a CTA's accumulators go: (kernel out argument, per-element store of value v at index o)
EPILOGUES = {"direct": ("scalar_t* __restrict__ C", "C[o] = from_float(v);"),
             "partials": ("float* __restrict__ ws", "ws[(size_t)blockIdx.z * M * N + o] = v;"),
             "atomic": ("float* __restrict__ ws", "atomicAdd(ws + o, v);")}
RACY = {"store": "ws[o] += v;   /* read-modify-write: splits race on the same address */"}


def reduce_kernels(combine_end="SPLITS") -> str:
    """The reduce of the partials rungs and the cast of the atomic rung: fixed order, fp32 sums."""
    return f"""
// Sum the SPLITS fp32 partial slices of each output in a fixed order (deterministic), then round once.
__global__ void gemm_splitk_reduce(const float* __restrict__ ws, scalar_t* __restrict__ C, size_t MN) {{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= MN) return;
    float total = 0.f;
#pragma unroll
    for (int s = 0; s < {combine_end}; ++s) total += ws[{COMBINE}];
    C[i] = from_float(total);
}}

__global__ void gemm_splitk_cast(const float* __restrict__ ws, scalar_t* __restrict__ C, size_t MN) {{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < MN) C[i] = from_float(ws[i]);
}}
"""


def host(task, mode: str, grid: str, block: str, smem: str = "0") -> str:
    """Launch the main kernel with SPLITS CTAs along z; partials/atomic modes own an fp32 workspace."""
    call = "A, B, {}, M, N, K".format("C" if mode == "direct" else "ws")
    setup = (f"    cudaFuncSetAttribute(gemm_splitk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});\n"
             if smem != "0" else "")
    main = f"    gemm_splitk_kernel<<<{grid}, {block}, {smem}, stream>>>({call});\n"
    if mode == "direct":
        return f"\n{ENTRY.prototype(task)} {{\n{setup}{main}}}\n"
    slices = "SPLITS * " if mode == "partials" else ""
    zero = "    cudaMemsetAsync(ws, 0, MN * sizeof(float), stream);   // atomics accumulate from zero\n" \
        if mode == "atomic" else ""
    finish = "gemm_splitk_reduce" if mode == "partials" else "gemm_splitk_cast"
    return f"""
{ENTRY.prototype(task)} {{
    const size_t MN = (size_t)M * N;
    float* ws = nullptr;                       // fp32 workspace, stream-ordered scratch
    cudaMallocAsync((void**)&ws, {slices}MN * sizeof(float), stream);
{zero}{setup}{main}    {finish}<<<(unsigned)((MN + 255) / 256), 256, 0, stream>>>(ws, C, MN);
    cudaFreeAsync(ws, stream);
}}
"""


# -- tiled, split_k_reduce, split_k_atomic: register-blocked CUDA-core tiles --------------------
def core_launch(p, task):
    m, n = task["M"], task["N"]
    bm, bn, bk, tm = p["BM"], p["BN"], p["BK"], p["TM"]
    threads = (bm // tm) * (bn // 4)
    scale = min(1.0, (tm * 4 / (tm + 4)) / 2.67) * (1.0 if bk == 32 else 0.9)   # FMAs per smem load
    return Launch(grid=cdiv(m, bm) * cdiv(n, bn), threads=threads, smem_bytes=(bk * bm + bk * (bn + 4)) * 4,
                  regs=min(255, 42 + 9 * tm), bytes_per_access=4, traffic=tc_traffic(task, bm, bn, 0.05),
                  compute_scale=scale, tile_quant=m * n / (cdiv(m, bm) * bm * cdiv(n, bn) * bn))


def core_src(mode: str):
    out_arg, put = EPILOGUES[mode]

    def render(p, task, barrier="__syncthreads();", store=put, combine_end="SPLITS"):
        splits = p.get("SPLITS", 1)
        return f"""
#define BM {p['BM']}
#define BN {p['BN']}
#define BK {p['BK']}
#define TM {p['TM']}                     // rows per thread; 4 columns per thread (one float4 of Bs)
#define THREADS ((BM / TM) * (BN / 4))
#define SPLITS {splits}                  // K splits along blockIdx.z
{reduce_kernels(combine_end) if mode != "direct" else ""}
extern "C" __global__ void __launch_bounds__(THREADS)
gemm_splitk_kernel({ARGS.format(out=out_arg)}) {{
    __shared__ __align__(16) float As[BK][BM];       // k-major: a thread's TM rows are broadcasts
    __shared__ __align__(16) float Bs[BK][BN + 4];   // k-major: a thread's 4 columns are one float4
    const int tid = threadIdx.x, tx = tid % (BN / 4), ty = tid / (BN / 4);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int per = (K / BK + SPLITS - 1) / SPLITS * BK;   // K elements of one split
    const int k_begin = blockIdx.z * per, k_end = min(K, k_begin + per);
    float acc[TM][4] = {{}};
    for (int k0 = k_begin; k0 < k_end; k0 += BK) {{
        for (int i = tid; i < BM * BK; i += THREADS) {{      // k fastest: coalesced rows of A
            const int r = i / BK, c = i % BK;
            As[c][r] = m0 + r < M ? to_float(A[(size_t)(m0 + r) * K + k0 + c]) : 0.f;
        }}
        for (int i = tid; i < BN * BK; i += THREADS) {{
            const int r = i / BK, c = i % BK;
            Bs[c][r] = to_float(B[(size_t)(n0 + r) * K + k0 + c]);
        }}
        {barrier}
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {{
            const float4 b = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
#pragma unroll
            for (int i = 0; i < TM; ++i) {{
                const float a = As[kk][ty * TM + i];
                acc[i][0] += a * b.x; acc[i][1] += a * b.y; acc[i][2] += a * b.z; acc[i][3] += a * b.w;
            }}
        }}
        __syncthreads();
    }}
#pragma unroll
    for (int i = 0; i < TM; ++i) {{
        const int row = m0 + ty * TM + i;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {{
            const size_t o = (size_t)row * N + n0 + tx * 4 + j;
            const float v = acc[i][j];
            {store}
        }}
    }}
}}
{host(task, mode, "dim3(N / BN, (M + BM - 1) / BM, SPLITS)", "THREADS")}"""
    return render


# -- mma_split_k, cp_async_split_k: tensor cores per split (_gemm_mma.py) -----------------------
def mma_split_src(pipelined: bool):
    def render(p, task, barrier=True, kt_end="KT", combine_end="SPLITS"):
        kind = "bf16" if task.dtype == "bf16" else "f16"
        epilogue = ("*reinterpret_cast<float2*>(ws + ((size_t)blockIdx.z * M + row) * N + col) = "
                    "make_float2(v0, v1);   // this split's fp32 partial")
        smem = "STAGES * STAGE_BYTES" if pipelined else "0"
        return (f"#define SPLITS {p['SPLITS']}\n{reduce_kernels(combine_end)}"
                + mma_kernel("gemm_splitk", kind, p, args=ARGS.format(out="float* __restrict__ ws"), epilogue=epilogue,
                             pipelined=pipelined, kt_end=kt_end, barrier=barrier, split_k=True)
                + host(task, "partials", "dim3((M + BM - 1) / BM, N / BN, SPLITS)", "THREADS", smem))
    return render


MMA_BM, MMA_BN = Param("BM", (32, 64), 32), Param("BN", (64, 128), 64)
MMA_BK, WARPS = Param("BK", (32, 64), 64), Param("warps", (4,), 4)
# the cp.async ring's K slice: 128 wide streams twice the bytes a stage at small M. H100 (measurements/h100_roomK_k12.json,
# BM 32 BN 64, 2 stages, 16 splits): BK 32 / 64 / 128 ran 69.6 / 53.4 / 53.3 us at M=16 N=4096 K=14336 and
# 66.0 / 50.2 / 48.6 at M=1 (model 60.3 / 51.4 / 46.9 and 52.5 / 44.2 / 43.6). The register-staged mma_split_k keeps
# 32-64: its BK 128 ran 64.4 us against 52.7 at 64 (model 57.7 / 61.9, the wrong sign)
RING_BK = Param("BK", (32, 64, 128), 64)
TC = frozenset({"mma", "ldmatrix", "inline_ptx"})
CORE = (Param("BM", (16, 32), 16), Param("BN", (64, 128), 64), Param("BK", (16, 32), 32), Param("TM", (2, 4), 4))
NO_BARRIER = {"barrier": ""}


class GemmSplitkCuda(GemmSplitkSpec):
    impl = "cuda"
    variants = (
        Rung("tiled", "register-blocked CUDA-core tiles in static smem, one CTA per output tile, no split",
             CORE, compute_eff=0.3, memory_eff=0.72, smem="static",
             launch=split_launch(core_launch, "none"), render=core_src("direct"),
             bugs={"missing_barrier": NO_BARRIER, "off_by_one": {"store": "if (j < 3) C[o] = from_float(v);"}}),
        Rung("split_k_reduce", "K split over blockIdx.z into fp32 partial slices, a second kernel reduces them",
             CORE + (SPLITS,), compute_eff=0.3, memory_eff=0.78, smem="static",
             launch=split_launch(core_launch, "partials"), render=core_src("partials"),
             bugs={"bad_combine_index": SHORT_COMBINE, "missing_barrier": NO_BARRIER}),
        Rung("split_k_atomic", "splits fold into one zeroed fp32 workspace with atomicAdd, then a cast kernel",
             CORE + (SPLITS,), compute_eff=0.3, memory_eff=0.8, smem="static",
             launch=split_launch(core_launch, "atomic"), render=core_src("atomic"),
             bugs={"racy_update": RACY, "missing_barrier": NO_BARRIER}),
        Rung("mma_split_k", "tensor cores per split: ldmatrix.x4 fragments into mma.sync.m16n8k16, fp32 partials + reduce",
             (MMA_BM, MMA_BN, MMA_BK, WARPS, SPLITS), needs=TC, path="fp16", compute_eff=0.35, memory_eff=0.82,
             smem="static", launch=split_launch(tc_launch("fp16", 2, 2), "partials"), render=mma_split_src(False),
             bugs={"bad_combine_index": SHORT_COMBINE, "missing_barrier": {"barrier": False}}),
        Rung("cp_async_split_k", "STAGES-deep cp.async ring per split feeding ldmatrix + mma.sync, fp32 partials + reduce",
             (MMA_BM, MMA_BN, RING_BK, Param("stages", (2, 3, 4), 3), WARPS, SPLITS), needs=TC | {"cp_async"},
             path="fp16", compute_eff=0.8, memory_eff=0.9, smem="dynamic",
             launch=split_launch(tc_launch("fp16", 2, 2), "partials"), render=mma_split_src(True),
             bugs={"off_by_one": {"kt_end": "KT - 1"}, "bad_combine_index": SHORT_COMBINE}),
    )
