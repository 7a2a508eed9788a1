"""Split-K GEMM, the op gemm_splitk_cuda and gemm_splitk_triton implement: C = A . B^T for the
decode / LoRA shapes where M is tiny and K long, so output tiles alone cannot fill the GPU and K
is cut into splits whose fp32 partial sums a reduction combines. Entry point, cost, reference,
the launch-model pieces both modules share and the combine bug."""
from dataclasses import replace

from ..base import DTYPE_BYTES, cdiv
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


def split_launch(base, mode: str, bk: int = 64):
    """Wrap a one-split launch model: `mode` "partials" (fp32 slice per split, read back by a
    reduce kernel), "atomic" (fp32 atomics into one zeroed workspace, then a cast kernel) or
    "none". The grid grows by SPLITS, each CTA's K loop shrinks, and the workspace costs bytes."""
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
        return replace(one, grid=one.grid * splits, traffic=(one.traffic + extra / floor) * empty, launches=launches,
                       compute_scale=one.compute_scale * loop / empty, serial_atomics=atomics,
                       serial_trips=one.serial_trips / splits)
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
