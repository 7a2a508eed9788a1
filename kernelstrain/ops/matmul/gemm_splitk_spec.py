"""Split-K GEMM, the op gemm_splitk_cuda and gemm_splitk_triton implement: C = A . B^T for the
decode / LoRA shapes where M is tiny and K long, so output tiles alone cannot fill the GPU and K
is cut into splits whose fp32 partial sums a reduction combines. Entry point, cost, reference,
the launch-model pieces both modules share and the combine bug."""
from dataclasses import replace

from ..base import DTYPE_BYTES, cdiv
from ..l2_reuse import dram_share, l2_cost
from ..occupancy import blocks_per_sm
from ..contract import Arg, Entry, Scalar
from .gemm_fp16_spec import GemmFp16Spec

ENTRY = Entry("gemm_splitk", (
    Arg("A", "in", ("M", "K")), Arg("B", "in", ("N", "K")), Arg("C", "out", ("M", "N")),
    Scalar("M"), Scalar("N"), Scalar("K")), py_name="gemm_splitk")
SPLIT_VALUES = (2, 4, 8, 16)


# A 128-row wgmma tile (two consumer warpgroups of 64 rows) over M <= 64 rows: the second warpgroup runs its wgmmas on
# TMA's zero fill and holds each ring slot as long as the first. H100 (us, measured / model without the term):
# gemm_fp8_cuda M=16 N=K=8192 BN 128 4 stages 4 splits BM 128 36.8 / 29.5 against BM 64's 33.2 / 32.0
# (measurements/h100_roomK_k5.json); gemm_fp16_cuda M=16 56.2 / 51.2 against 53.1 / 52.6 (h100_roomK_k12.json). At
# M=128 (full tiles) BM 128 ran 0.84-0.91x BM 64 on both fp8 modules, as modelled. On both roofline sides.
HALF_EMPTY = 1.2
# The reduce kernel of the "partials" mode runs after the GEMM kernel, not beside it: its reads of the SPLITS fp32
# slices and its 16-bit store cannot overlap the GEMM's tensor-core time (sequential launches on one stream), so
# they are a later kernel's seconds (Launch.later_s) at a streaming copy's share of DRAM bandwidth, and the GEMM
# kernel's own traffic holds only its slices' writes. It matters where M x N is large against the operands: H100
# gemm_fp16_cuda wgmma_split_k at M=N=K=2048 (measurements/h100_gpucheck_s98282.json fp16, s98181.json bf16) BM 64 BN 256
# 5 stages 4 splits 84.4 us and BM 128 BN 128 6 stages 8 splits 133.7, where the overlapped model put them at 64.5 /
# 108.6 (0.76x / 0.81x): 4 splits write and re-read 67 MB of fp32 slices, 22 us of DRAM time alone at 3.35 TB/s.
# At the decode shapes (M <= 128) the slices are 0.3-8 MB and the term is under a microsecond or two.
REDUCE_EFF = 0.85


def reduce_kernel_s(task, splits: int) -> float:
    """Seconds of the partials' reduce kernel: SPLITS fp32 [M, N] slices read, one 16-bit [M, N] written."""
    m, n, gpu = task["M"], task["N"], task.gpu
    slices = splits * m * n * 4
    miss = dram_share(slices, gpu)          # slices the L2 still holds are read back at its cost
    read = slices * (miss + (1 - miss) * l2_cost(gpu))
    return (read + m * n * DTYPE_BYTES[task.dtype]) / (gpu.bw_tbs * 1e12 * REDUCE_EFF)


def split_launch(base, mode: str, bk: int = 64, reduce_later: bool = False):
    """Wrap a one-split launch model: `mode` "partials" (fp32 slice per split, read back by a
    reduce kernel), "atomic" (fp32 atomics into one zeroed workspace, then a cast kernel) or
    "none". The grid grows by SPLITS, each CTA's K loop shrinks, and the workspace costs bytes.
    reduce_later: the partials' reduce kernel timed after the GEMM (reduce_kernel_s), not folded into its traffic
    (the modules of helper sim; gemm_fp8_cuda, gemm_fp8_blockwise_cuda and gemm_int8_cuda keep the folded form)."""
    def launch(p, task):
        one = base(p, task)
        splits = p.get("SPLITS", p.get("SPLIT_K", 1)) if mode != "none" else 1
        m, n, k, e = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype]
        tiles_per_split = cdiv(cdiv(k, p.get("BK", p.get("BLOCK_K", bk))), splits)
        floor = (m * k + n * k + m * n) * e
        if mode == "partials":     # each split writes an fp32 [M, N] slice, the reduce reads them all
            extra, launches, atomics = 2 * splits * m * n * 4, one.launches + 1, 0
        elif mode == "atomic":     # memset + atomics (L2-resident) + one fp32 read by the cast
            extra, launches, atomics = 3 * m * n * 4, one.launches + 2, splits
        else:
            extra, launches, atomics = 0, one.launches, 0
        # a short K loop pays its prologue and epilogue over fewer tiles
        loop = tiles_per_split / (tiles_per_split + 1.5)
        empty = HALF_EMPTY if p.get("BM", 0) >= 128 and m <= p["BM"] // 2 else 1.0
        later = 0.0
        if mode == "partials" and reduce_later:
            # the slices' stores: a CTA's epilogue after its (short) K loop, hidden behind another resident CTA's
            # K loop only where the SM holds several
            exposed = 1.0 / max(1, blocks_per_sm(one, task.gpu))
            slices = splits * m * n * 4
            extra = slices * (1 - exposed)
            later = reduce_kernel_s(task, splits) + slices * exposed / (task.gpu.bw_tbs * 1e12 * REDUCE_EFF)
        return replace(one, grid=one.grid * splits, traffic=(one.traffic + extra / floor) * empty, launches=launches,
                       compute_scale=one.compute_scale * loop / empty, serial_atomics=atomics,
                       serial_trips=one.serial_trips / splits, later_s=one.later_s + later)
    return launch


class GemmSplitkSpec(GemmFp16Spec):
    op, family = "gemm_splitk", "matmul"
    title = "Split-K GEMM (small M, long K)"
    desc = ("C[M, N] = A[M, K] . B[N, K]^T with fp32 accumulation and a 16-bit result, for decode and LoRA "
            "shapes (M <= 128, K up to 28672): K may be split across CTAs whose fp32 partial sums are "
            "reduced; K a multiple of 128, N a multiple of 128.")
    dims = {"M": "rows of A and C (tokens in the decode batch)", "N": "rows of B, columns of C (output features)",
            "K": "reduction dim (input features), split across CTAs"}
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia",)
    entry, inputs = ENTRY, ("A", "B")
    check_shape = {"M": 16, "N": 4096, "K": 14336}
    shapes = ({"M": 1, "N": 4096, "K": 14336}, {"M": 16, "N": 4096, "K": 14336}, {"M": 32, "N": 4096, "K": 11008},
              {"M": 8, "N": 8192, "K": 8192}, {"M": 64, "N": 2048, "K": 16384}, {"M": 16, "N": 1024, "K": 28672},
              {"M": 128, "N": 4096, "K": 4096})
    # cost and reference: gemm_fp16's (the same product, a different strategy)
