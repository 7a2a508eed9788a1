"""Fused QKV projection + RoPE in CUDA: y = x . w^T (w an nn.Linear weight, K-major) with the
rotary embedding applied to the q and k columns and the heads scattered into q, k, v, all in the
GEMM's epilogue. A rotated pair is two adjacent columns, so every rung keeps a pair in one thread.

Ladder: a GEMM kernel to an fp32 scratch plus a rope/split kernel -> shared-memory tiles, a thread
per column pair, rope in the epilogue -> register micro-tiles (gemm_fp16_cuda's mainloop) ->
tensor cores (ldmatrix + mma.sync; _gemm_mma's mainloop, whose c0/c1 fragment is a pair) ->
STAGES-deep cp.async ring -> on sm_90a, TMA + wgmma (gemm_fp16_cuda's warp-specialized kernel, _gemm_wgmma: its
accumulator pair d[2i], d[2i+1] is a rotary pair too). The launch models are the matmul family's, on the GEMM view.
"""
from dataclasses import replace

from ..base import Param, Rung
from ..dialect import prelude
from ..matmul._gemm_mma import mma_kernel
from ..matmul._gemm_tc import naive_launch, tc_launch
from ..matmul._gemm_wgmma import TMA_INCLUDES, tensor_maps, wgmma_kernel
from ..matmul.gemm_fp16_cuda import register_blocked_launch, register_blocked_src, smem_tiled_launch
from .fused_qkv_rope_spec import ENTRY, FusedQkvRopeSpec, cost_of, gemm_view, qkv_cols

ROPE = "y1 * c + y0 * s"
OUTS = ("const float* __restrict__ cos, const float* __restrict__ sin, scalar_t* __restrict__ q,\n"
        "        scalar_t* __restrict__ k, scalar_t* __restrict__ v")
ARGS = f"const scalar_t* __restrict__ A, const scalar_t* __restrict__ B, {OUTS}, int M, int K"
N_COLS = "\n    const int N = QKV_COLS;"


def rope_store(rot: str = ROPE) -> str:
    return f"""
// Columns (col, col + 1) of token row: rotated when they belong to a q or k head, then stored into
// q [T, H, D], k or v [T, KVH, D]. col is even: a pair never straddles a head.
__device__ __forceinline__ void rope_store(scalar_t* q, scalar_t* k, scalar_t* v, const float* cos, const float* sin,
                                           int row, int col, float y0, float y1) {{
    const int head = col / HEAD_DIM, d = col % HEAD_DIM;
    if (head < NUM_HEADS + NUM_KV_HEADS) {{           // q and k rotate; v passes through
        const float c = cos[(size_t)row * (HEAD_DIM / 2) + d / 2], s = sin[(size_t)row * (HEAD_DIM / 2) + d / 2];
        const float r0 = y0 * c - y1 * s, r1 = {rot};
        y0 = r0;
        y1 = r1;
    }}
    scalar_t* dst = head < NUM_HEADS ? q + ((size_t)row * NUM_HEADS + head) * HEAD_DIM
                  : head < NUM_HEADS + NUM_KV_HEADS ? k + ((size_t)row * NUM_KV_HEADS + head - NUM_HEADS) * HEAD_DIM
                  : v + ((size_t)row * NUM_KV_HEADS + head - NUM_HEADS - NUM_KV_HEADS) * HEAD_DIM;
    dst[d] = from_float(y0);
    dst[d + 1] = from_float(y1);
}}
"""


def on_gemm_view(launch):
    """A matmul-family launch model applied to the task's GEMM view."""
    return lambda p, task: launch(p, gemm_view(task))


def unfused_launch(p, task):
    # + the fp32 scratch: written by the GEMM, read by the rope kernel
    lm = naive_launch()(p, gemm_view(task))
    scratch = task["T"] * qkv_cols(task) * 4 * 2 / cost_of(task).bytes
    return replace(lm, traffic=lm.traffic + scratch, launches=2)


def smem_pairs_launch(p, task):
    lm = smem_tiled_launch(p, gemm_view(task))
    tile = p["tile"]      # As and Bs are [TILE][TILE + 1] floats (the +1 column breaks bank conflicts)
    return replace(lm, threads=lm.threads // 2, regs=36, smem_bytes=2 * tile * (tile + 1) * 4)


def host(task, grid, block, smem="0", pre=""):
    return ENTRY.host(task, "fused_qkv_rope_kernel", grid, block, smem, pre)


def unfused_src(p, task, acc_t="float", k_end="K"):
    return f"""
#define BLOCK_X {p['block_x']}
#define BLOCK_Y {p['block_y']}

// Kernel 1: one thread per y element, all K products straight from global memory, fp32 scratch.
extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y) qkv_gemm_kernel(const scalar_t* __restrict__ A,
        const scalar_t* __restrict__ B, float* __restrict__ y, int M, int K) {{
    const int N = QKV_COLS, n = blockIdx.x * BLOCK_X + threadIdx.x, m = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (m >= M || n >= N) return;
    {acc_t} acc = 0.f;
    for (int kk = 0; kk < {k_end}; ++kk) acc += to_float(A[(size_t)m * K + kk]) * to_float(B[(size_t)n * K + kk]);
    y[(size_t)m * N + n] = (float)acc;
}}

// Kernel 2: one thread per column pair of y: rotate and scatter into q, k, v.
extern "C" __global__ void fused_qkv_rope_kernel(const float* __restrict__ y, {OUTS}, int M) {{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * (QKV_COLS / 2)) return;
    const int row = i / (QKV_COLS / 2), col = i % (QKV_COLS / 2) * 2;
    rope_store(q, k, v, cos, sin, row, col, y[(size_t)row * QKV_COLS + col], y[(size_t)row * QKV_COLS + col + 1]);
}}

{ENTRY.host_head(task)} {{
    float* y;                                      // [T, QKV_COLS] fp32 projection
    cudaMallocAsync((void**)&y, (size_t)T * QKV_COLS * sizeof(float), stream);
    qkv_gemm_kernel<<<dim3((QKV_COLS + BLOCK_X - 1) / BLOCK_X, (T + BLOCK_Y - 1) / BLOCK_Y), dim3(BLOCK_X, BLOCK_Y), 0,
                      stream>>>(x, w, y, T, HID);
    const size_t pairs = (size_t)T * (QKV_COLS / 2);
    fused_qkv_rope_kernel<<<(pairs + 255) / 256, 256, 0, stream>>>(y, cos, sin, q, k, v, T);
    cudaFreeAsync(y, stream);
}}
"""


def smem_pairs_src(p, task, barrier="__syncthreads();", acc="float"):
    return f"""
#define TILE {p['tile']}

// A block per TILE x TILE output tile, TILE/2 x TILE threads: each thread owns a rotary pair (two
// adjacent columns) of one row, so the rotation happens in registers right after the K loop.
extern "C" __global__ void __launch_bounds__(TILE * TILE / 2) fused_qkv_rope_kernel({ARGS}) {{{N_COLS}
    __shared__ float As[TILE][TILE + 1];   // As[m][k]
    __shared__ float Bs[TILE][TILE + 1];   // Bs[n][k]
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * (TILE / 2) + tx;
    const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE, row = m0 + ty, col = n0 + 2 * tx;
    {acc} acc0 = 0.f, acc1 = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {{
        for (int i = tid; i < TILE * TILE; i += TILE * TILE / 2) {{   // consecutive threads, consecutive k
            const int r = i / TILE, c = i % TILE;
            As[r][c] = (m0 + r < M && k0 + c < K) ? to_float(A[(size_t)(m0 + r) * K + k0 + c]) : 0.f;
            Bs[r][c] = (n0 + r < N && k0 + c < K) ? to_float(B[(size_t)(n0 + r) * K + k0 + c]) : 0.f;
        }}
        {barrier}
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) {{
            const float a = As[ty][kk];
            acc0 += a * Bs[2 * tx][kk];
            acc1 += a * Bs[2 * tx + 1][kk];
        }}
        __syncthreads();
    }}
    if (row < M && col < N) rope_store(q, k, v, cos, sin, row, col, (float)acc0, (float)acc1);
}}
{host(task, "dim3((QKV_COLS + TILE - 1) / TILE, (T + TILE - 1) / TILE)", "dim3(TILE / 2, TILE)")}"""


GEMM_STORE = """        for (int j = 0; j < TN; ++j) {
            const int row = m0 + ty * TM + i, col = n0 + tx * TN + j;
            if (row < M && col < N) C[(size_t)row * N + col] = from_float(acc[i][j]);"""
PAIR_STORE = """        for (int j = 0; j < TN; j += 2) {   // TN is even: the thread holds whole rotary pairs
            const int row = m0 + ty * TM + i, col = n0 + tx * TN + j;
            if (row < M && col < N) rope_store(q, k, v, cos, sin, row, col, acc[i][j], acc[i][j + 1]);"""


def register_blocked_rope_src(p, task, barrier="__syncthreads();", k_end="BK"):
    """gemm_fp16_cuda's register-blocked kernel, its C store turned into the pair epilogue."""
    gemm = register_blocked_src(p, task, barrier, k_end)
    head = "gemm_fp16_kernel(const scalar_t* __restrict__ A, const scalar_t* __restrict__ B, scalar_t* __restrict__ C, int M, int N, int K) {"
    if head not in gemm or GEMM_STORE not in gemm:
        raise ValueError("gemm_fp16_cuda's register_blocked render changed: update fused_qkv_rope_cuda")
    kernel = gemm.replace(head, f"fused_qkv_rope_kernel({ARGS}) {{{N_COLS}").replace(GEMM_STORE, PAIR_STORE)
    return kernel[:kernel.index("\nvoid gemm_fp16(")] + "\n" + host(
        task, "dim3((QKV_COLS + BN - 1) / BN, (T + BM - 1) / BM)", "THREADS")


def kind(task) -> str:
    return "bf16" if task.dtype == "bf16" else "f16"


def mma_src(pipelined: bool):
    def render(p, task, barrier=True, kt_end="KT"):
        kernel = mma_kernel("fused_qkv_rope", kind(task), p, args=ARGS, prologue=N_COLS, pipelined=pipelined,
                            epilogue="rope_store(q, k, v, cos, sin, row, col, v0, v1);   // c0, c1: a rotary pair",
                            kt_end=kt_end, barrier=barrier)
        if not pipelined:
            return kernel + host(task, "dim3((T + BM - 1) / BM, (QKV_COLS + BN - 1) / BN)", "THREADS")
        return kernel + host(task, "dim3((T + BM - 1) / BM, (QKV_COLS + BN - 1) / BN)", "THREADS", "smem", """
    const int smem = STAGES * STAGE_BYTES;   // past 48 KB only with the opt-in below
    cudaFuncSetAttribute(fused_qkv_rope_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);""")
    return render


def wgmma_rope_src(p, task, wait_full=True, kt_end="KT"):
    """gemm_fp16_cuda's wgmma_tma kernel (a TMA producer warp, wgmma consumer warpgroups on an mbarrier ring), its C
    store the pair epilogue; x and w are the K-major A and B its tensor maps read."""
    kernel = wgmma_kernel("fused_qkv_rope", kind(task), p, args=f"{OUTS}, int M, int N, int K", kt_end=kt_end,
                          wait_full=wait_full, epilogue="rope_store(q, k, v, cos, sin, row, col, v0, v1);   // a pair")
    return kernel + f"""
{tensor_maps(kind(task))}{ENTRY.host_head(task)} {{
    const CUtensorMap ta = kmajor_map(x, T, HID, BM), tb = kmajor_map(w, QKV_COLS, HID, BN);
    const int smem = STAGES * STAGE_BYTES + 1024;   // + slack for the 1024-byte alignment
    cudaFuncSetAttribute(fused_qkv_rope_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const int tiles = ((T + BM - 1) / BM) * ((QKV_COLS + BN - 1) / BN);
    fused_qkv_rope_kernel<<<tiles, THREADS, smem, stream>>>(ta, tb, cos, sin, q, k, v, T, QKV_COLS, HID);
}}
"""


TC = frozenset({"mma", "ldmatrix", "inline_ptx"})
SHORT_K = {"kt_end": "KT - 1"}
# H100 (scripts/roomA_device.py plan a5, lead's call 2, 2026-12-06, docs/roomA_device_h100_a5/): every value correct,
# every missing_barrier / off_by_one render caught; 1.6-1.9x the cp.async rung's best as modelled: T=1000 HID=2048
# H=16 KVH=4 D=128 128 x 256 / 256 x 128 / 128 x 128 / 64 x 128 / 128 x 64 tiles 41.8 / 41.5 / 44.0 / 48.7 / 49.4 us
# (model 38.9 / 40.3 / 45.1 / 49.9 / 56.0) against cp.async's 70.6; T=4096 HID=2048 H=KVH=16 D=64 112.7 / 117.2 /
# 125.5 us (2 / 3 / 6 stages 189.2 / 143.1 / 131.0) against 201.9; T=1024 HID=3584 H=28 KVH=4 89.8 against 168.9
WGMMA_RUNG = (
    Rung("wgmma_tma", "sm_90a: TMA producer warp + wgmma consumer warpgroups on an mbarrier ring, rope in the "
         "epilogue", (Param("BM", (64, 128, 256), 128), Param("BN", (64, 128, 256), 128),
                      Param("stages", (2, 3, 4, 5, 6), 4)),
         needs=frozenset({"wgmma", "tma", "inline_ptx"}), path="fp16", compute_eff=0.77, memory_eff=0.88,
         smem="dynamic", launch=on_gemm_view(tc_launch("fp16", 2, 2, wgmma=True)), render=wgmma_rope_src,
         # its missing_barrier died with "unspecified launch failure" on every H100 run (11 of 11, labels j1/k1/k3)
         bugs={"missing_barrier": {"wait_full": False}, "off_by_one": SHORT_K}, faults=("missing_barrier",)),
)
BM, BN, WARPS = Param("BM", (64, 128), 128), Param("BN", (64, 128), 128), Param("warps", (4, 8), 8)


class FusedQkvRopeCuda(FusedQkvRopeSpec):
    impl = "cuda"
    variants = (
        Rung("unfused_two_kernels", "GEMM kernel (a thread per output) to an fp32 scratch, then a rope/split kernel",
             (Param("block_x", (8, 16, 32), 16), Param("block_y", (4, 8, 16, 32), 16)), compute_eff=0.12,
             memory_eff=0.6, launch=unfused_launch, render=unfused_src,
             bugs={"off_by_one": {"k_end": "K - 1"}, "half_accumulator": {"acc_t": "scalar_t"}}),
        Rung("smem_tiled_rope_epilogue", "TILE x TILE smem tiles, a thread per rotary pair, rope in the epilogue",
             (Param("tile", (16, 32), 32),), compute_eff=0.22, memory_eff=0.7, smem="static",
             launch=smem_pairs_launch, render=smem_pairs_src,
             bugs={"missing_barrier": {"barrier": ""}, "half_accumulator": {"acc": "scalar_t"}}),
        Rung("register_blocked", "TM x TM register micro-tiles from float4 smem reads, whole pairs a thread",
             (BM, Param("BN", (64, 128), 128), Param("BK", (8, 16), 8), Param("TM", (4, 8), 8)), compute_eff=0.65,
             memory_eff=0.75, smem="static", launch=on_gemm_view(register_blocked_launch),
             render=register_blocked_rope_src,
             bugs={"missing_barrier": {"barrier": ""}, "off_by_one": {"k_end": "BK - 1"}}),
        Rung("mma_sync", "tensor cores: ldmatrix.x4 into mma.sync.m16n8k16; the c0/c1 fragment is a rotary pair",
             (BM, BN, Param("BK", (32, 64), 32), WARPS), needs=TC, path="fp16", compute_eff=0.52, memory_eff=0.8,
             smem="static", launch=on_gemm_view(tc_launch("fp16", 2, 2)), render=mma_src(False),
             bugs={"missing_barrier": {"barrier": False}, "off_by_one": SHORT_K}),
        Rung("cp_async_pipeline", "STAGES-deep cp.async ring in dynamic smem feeding ldmatrix + mma.sync",
             (BM, BN, Param("BK", (32, 64), 32), Param("stages", (2, 3, 4), 3), WARPS), needs=TC | {"cp_async"},
             path="fp16", compute_eff=0.85, memory_eff=0.85, smem="dynamic",
             launch=on_gemm_view(tc_launch("fp16", 2, 2)), render=mma_src(True),
             bugs={"off_by_one": SHORT_K}),
        *WGMMA_RUNG,
    )

    def assemble(self, body, variant, params, task) -> str:
        defs = (f"#define NUM_HEADS {task['H']}\n#define NUM_KV_HEADS {task['KVH']}\n#define HEAD_DIM {task['D']}\n"
                f"#define QKV_COLS {qkv_cols(task)}          // (NUM_HEADS + 2 NUM_KV_HEADS) HEAD_DIM\n")
        return prelude(task, TMA_INCLUDES if "tma" in variant.needs else ()) + defs + rope_store() + body
