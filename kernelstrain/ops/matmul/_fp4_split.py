"""gemm_fp4_triton split_k_dot_scaled's pieces outside the module file (kept under its 300 lines): its tile and warp
lists, the K range and fp32 slice store of a split program, the bug gate of its reduce and its launch model."""
from dataclasses import replace

from ..base import DTYPE_BYTES, Param, cdiv
from .gemm_fp4_spec import GemmFp4Spec
from .gemm_splitk_spec import split_launch

# split_k_dot_scaled (roomT 2026-12-07, issue 26 room): decode-sized M (16, 128) leaves 128 x 128 tiles a grid of
# N / 128 programs on 132 SMs, each walking all of K; the H100 ran the packed rungs at M=16 N=7168 K=2048 in 40-400 us
# against a DRAM floor of ~2.5 us (measurements/h100_gpucheck_kigrid.json, h100_room26_roomT.json). Split-K and
# 16- / 32-row, 32-wide tiles (what a decode GEMM tuner tries: gemm_splitk_triton's lists) fill the machine.
SPLIT_TILE = (Param("BLOCK_M", (16, 32, 64), 16), Param("BLOCK_N", (32, 64, 128), 64), Param("BLOCK_K", (64, 128), 128))
# 4 warps only: the H100 ran 8 slower in all four pairs it timed (16 x 64 x 128 at M=16 25.4 / 19.5 us, at M=128
# 568.0 / 390.6; 16 x 128 x 64 at M=16 29.2 / 16.8, 128 x 128 at M=128 177.3 / 164.7) where the model, on
# pipelined_dot_scaled's fitted warp exponents, put 8 ahead (15.0 / 16.1 us at M=16); 2 warps ran slower too (20.1 /
# 16.6, roomT/j2). measurements/h100_roomT_fp4split.json
SPLIT_WARPS = Param("num_warps", (4,), 4)
# split_k_dot_scaled: program_id(1) takes one of SPLIT_K equal runs of the K tiles (K // BLOCK_K of them; the last
# run may be short) and stores its fp32 partial tile in its own [M, N] slice; a reduce kernel sums the slices
SPLIT_RANGE = """    k_tiles = K // BLOCK_K
    per = tl.cdiv(k_tiles, SPLIT_K)          # K tiles of one split
    kt_begin = tl.program_id(1) * per
    kt_end = tl.minimum(k_tiles, kt_begin + per)
"""
SPLIT_STORE = ("tl.store(ws_ptr + tl.program_id(1) * M * N + rm[:, None] * N + rn[None, :], acc, mask=rm[:, None] < M)"
               "   # this split's fp32 slice")


def last_split_busy(task, p) -> bool:
    """The reduce that skips the last slice is wrong only where that split has K tiles: at 16 splits of K=2048 in
    128-wide tiles (16 tiles) each has one; of 3 tiles over 4 splits the last is empty (scripts/roomT_interpret.py)."""
    k_tiles = task["K"] // p["BLOCK_K"]
    return (p["SPLIT_K"] - 1) * cdiv(k_tiles, p["SPLIT_K"]) < k_tiles


def split_k_launch(base):
    """gemm_splitk_spec.split_launch's partials (SPLIT_K times the grid, a shorter K loop a program, fp32 slices
    written and read back by a second launch) on the packed operands' bytes: split_launch prices the slices against
    a 16-bit GEMM's operand bytes, about 3.5x the packed ones here. The reduce is timed after the GEMM
    (reduce_later), not folded into the GEMM's traffic where the calibration's factor (pipelined_dot_scaled's: ~5x the
    roofline at these shapes, dot_scaled's register upcast) would multiply it: the H100 ran M=16 N=7168 K=2048 at
    2 / 4 / 8 / 16 splits in 19.5 / 19.7 / 19.7 / 21.6 us, folded the model said 19.1 / 21.4 / 26.5 / 39.5, timed
    after 18.5 / 20.5 / 22.2 / 40.7 (roomT/j1: over its 31 rows sim / device geomean 1.04 -> 1.03, rms log 1.32x ->
    1.25x, 132 -> 138 of 157 pairs ordered; a 16-split loop of one K tile is still overpriced, split_launch's loop term)."""
    partials = split_launch(base, "partials", reduce_later=True)

    def launch(p, task):
        one, split = base(p, task), partials(p, task)
        m, n, k = task["M"], task["N"], task["K"]
        ratio = (m * k + n * k + m * n) * DTYPE_BYTES[task.dtype] / GemmFp4Spec().cost(task).bytes
        return replace(split, traffic=one.traffic + (split.traffic - one.traffic) * ratio)
    return launch
