"""mla_decode_triton split_kv's share of the stream that its heads' work and its residency add (launch-model terms
fitted on the H100 / H200 rows of measurements/; only mla_decode_triton uses this file)."""
from dataclasses import replace

from ..base import DTYPE_BYTES, Launch, cdiv
from ..occupancy import blocks_per_sm
from .mla_decode_spec import DIM, KV_LORA

# The head rows' MMAs over each latent tile issue between its loads, and what of them does not hide under the stream
# adds to its time: the stream's time x (1 + HEADS_ISSUE / mma x (MMA time of a row over the stream's time, both at the
# card's peaks) x (rows - 16)), rows = H padded to BLOCK_H (>= 16, the fewest a tl.dot takes: >= 1, time, not bytes).
# H100 plan decode6 (measurements/h100_sim2_decode6.json), split_kv BLOCK_H 16, BLOCK_N 64, 2 stages, at equal latent
# bytes: B=8 S=32700 (32 splits) H 16 / 32 / 64 / 128 122.3 / 167.2 / 299.6 / 575.6 us, B=32 S=4000 (16 splits)
# 87.8 / 120.4 / 214.1 / 398.9: past the partials' bytes, ~14 ps a head row and cached token at both shapes (mma.sync
# tiles of 16 rows at ~1/6 of the tensor peak, half of it hidden). The term before (x (0.7 + 0.3 rows / 128) on the
# traffic: 0.74 at 16 rows, a launch moving under the op's bytes, which qa's roofline check caught on the A10 once a
# refit raised sm_86's memory efficiency) gave these sweeps 1 / 1.19 / 1.60 / 2.66 and 1 / 1.32 / 1.98 / 3.44 (measured
# 1 / 1.37 / 2.45 / 4.71 and 1 / 1.37 / 2.44 / 4.54); now 1 / 1.31 / 1.99 / 3.64 and 1 / 1.42 / 2.32 / 4.44.
# HEADS_ISSUE and the stream's level STREAM_EFF (the rung's memory_eff, the prior the fit's ceiling 2.01 divides) fit on
# every split_kv row of measurements/ (scripts/sim2_rows.py, all 299 mla rows: Spearman 0.828 -> 0.830, pair order
# 0.861 -> 0.869, rms log 0.226 -> 0.215, geomean 1.027 -> 1.026).
HEADS_ISSUE = 1.25
FEWEST_ROWS = 16
STREAM_EFF = 1.0
# One program an SM on a grid of several waves: nothing runs beside its chain of loads and MMAs. H200 (room26b),
# B=32 H=128 S=4000, 16 splits, BLOCK_H 16: 3 stages / BLOCK_N 128 (1 program an SM) 521.9 / 473.5 us against
# 370.8 at 2 stages / BLOCK_N 64 (2 an SM); at B=8 H=16 (128 programs, under a wave) both ran faster: 105.0 / 112.0
# against 133.7. x LONE_PROGRAM on the stream where the grid passes the SMs and one 4-warp program fits an SM (the
# 8-warp programs of 64-head blocks, alone by their registers, ran 0.79-1.16x the model without it: 7 rows).
LONE_PROGRAM = 1.45


def heads_work(task, block_h: int, mma: float) -> float:
    """The stream's time stretch from the head rows' MMAs that do not hide under it (>= 1: time, not bytes): their
    time over the stream's, both at the card's peaks (per cached token: 2 x (576 + 512) FLOPs a row against 576
    elements), x HEADS_ISSUE / mma (the tiles' MMA rate, mla_decode_triton.tiled_launch), past the first 16 rows."""
    rows = cdiv(task["H"], block_h) * block_h
    gpu = task.gpu
    per_row = 2 * (DIM + KV_LORA) / gpu.peak("fp16") / (DIM * DTYPE_BYTES[task.dtype] / (gpu.bw_tbs * 1e12))
    return 1 + HEADS_ISSUE / mma * per_row * (rows - FEWEST_ROWS)


def lone(launch: Launch, task) -> Launch:
    if launch.grid <= task.gpu.sms or launch.threads > 4 * task.gpu.warp or blocks_per_sm(launch, task.gpu) != 1:
        return launch
    return replace(launch, traffic=launch.traffic * LONE_PROGRAM)
