"""gemm_int8_cuda's split-K rung: the cp.async + mma.sync.s8 mainloop (_gemm_mma.py) with K cut over
blockIdx.z, each split's exact int32 partial sums in its own [M, N] slice of a workspace, and a reduce
kernel that adds the SPLITS slices in a fixed order and dequantizes once (decode GEMMs: M = 16 leaves
N / BN output tiles, fewer than the SMs)."""
from dataclasses import replace

from ..base import Param, cdiv
from ._gemm_mma import mma_kernel
from ._gemm_tc import tc_launch
from .gemm_splitk_spec import split_launch

SPLITS = Param("SPLITS", (2, 4, 8), 4)
# warps stay 4: a 32-row A tile of 64 bytes is 128 16-byte chunks, one per thread of the copy loop. Stages 3-4: the
# H100 (ROOM_PLAN=split2, 10:30 UTC, 17 cases) ran 2-stage rings 1.25-1.8x slower than the borrowed cp_async_pipeline
# fit has them (M=128 64 x 128 tiles 2 splits: 67.8 us, modelled 36.9; M=16 64 x 64, 8 splits: 39.6 vs 29.6) and
# never fastest; over the 18 timed rows of 3-4 stages the model runs 0.98x the device (geometric mean; rms log 0.16)
SPLIT_PARAMS = (Param("BM", (32, 64), 32), Param("BN", (64, 128), 128), Param("BK", (64, 128), 128),
                Param("stages", (3, 4), 3), Param("warps", (4,), 4), SPLITS)
SPLIT_STORE = ("*reinterpret_cast<int2*>(ws + ((size_t)blockIdx.z * M + row) * N + col) = "
               "make_int2(v0, v1);   // this split's exact int32 partial")
SHORT_COMBINE = {"combine_end": "SPLITS - 1"}    # bad_combine_index: the reduce skips the last slice


def reduce_kernel(col_scale: str, combine_end: str) -> str:
    return f"""
// The SPLITS int32 partials of an output pair, added in a fixed order (exact), then dequantized once.
__global__ void gemm_int8_reduce(const int* __restrict__ ws, const float* __restrict__ scale_a,
                                 const float* __restrict__ scale_b, half* __restrict__ C, int M, int N) {{
    const size_t MN = (size_t)M * N, i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 2;   // N even
    if (i >= MN) return;
    int2 t = make_int2(0, 0);
    for (int s = 0; s < {combine_end}; ++s) {{
        const int2 v = *reinterpret_cast<const int2*>(ws + s * MN + i);
        t.x += v.x;
        t.y += v.y;
    }}
    const int row = (int)(i / N), col = (int)(i % N);
    const float sa = __ldg(scale_a + row);
    *reinterpret_cast<__half2*>(C + i) = __floats2half2_rn((float)t.x * sa{col_scale.format(col='col')}, (float)t.y * sa{col_scale.format(col='col + 1')});
}}
"""


def split_src(operands: str, entry, col_scale_default: str):
    def render(p, task, kt_end="KT", col_scale=col_scale_default, combine_end="SPLITS"):
        kernel = mma_kernel("gemm_int8", "s8", p, args=operands + "int* __restrict__ ws, int M, int N, int K",
                            epilogue=SPLIT_STORE, pipelined=True, kt_end=kt_end, split_k=True)
        return f"""#define SPLITS {p['SPLITS']}                  // K splits along blockIdx.z
{reduce_kernel(col_scale, combine_end)}{kernel}
{entry.prototype(task)} {{
    const size_t MN = (size_t)M * N;
    int* ws = nullptr;                         // SPLITS int32 [M, N] slices, stream-ordered scratch
    cudaMallocAsync((void**)&ws, SPLITS * MN * sizeof(int), stream);
    const int smem = STAGES * STAGE_BYTES;     // past 48 KB only with the opt-in below
    cudaFuncSetAttribute(gemm_int8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    gemm_int8_kernel<<<dim3((M + BM - 1) / BM, (N + BN - 1) / BN, SPLITS), THREADS, smem, stream>>>(A, B, ws, M, N, K);
    gemm_int8_reduce<<<(unsigned)((MN / 2 + 255) / 256), 256, 0, stream>>>(ws, scale_a, scale_b, C, M, N);
    cudaFreeAsync(ws, stream);
}}
"""
    return render


# B (N x K) is re-read once per M tile. _gemm_tc.tc_traffic lets the L2 serve 95% of a re-read for free; the
# H100 (scripts/room_device_check.py ROOM_PLAN=edges, 2026-12-06 10:11 UTC, 59 cases, every label held) ran
# M=128 N=4096 K=14336 on 32-row tiles (4 passes over a 58 MB B) at 66.9 / 77.3 / 74.6 us for 2 / 4 / 8 splits
# where that model said 41.6 / 62.0 / 49.7, and M=16 (one pass) at 34.1 / 33.7 / 35.9 (model 40.9 / 41.9 / 44.6):
# the re-reads stream from the L2, not free: each costs 0.35 of a DRAM read (fitted to those M=128 rows: 70.8 / 75.8 /
# 83.5 us now; one pass, M=16, unchanged)
L2_REREAD = 0.35
TC_MISS = 0.05        # what tc_traffic charges a re-read


def split_launch_int8(p, task):
    launch = split_launch(tc_launch("int8", 1, 2), "partials")(p, task)
    m, n, k = task["M"], task["N"], task["K"]
    rereads = (cdiv(m, p["BM"]) - 1) * n * k * (L2_REREAD - TC_MISS)
    return replace(launch, traffic=launch.traffic + rereads / (m * k + n * k + 2 * m * n))
