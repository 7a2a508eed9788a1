"""mla_decode_triton split_kv's share of the stream that its heads' work and its residency add (launch-model terms
fitted on the H100 / H200 rows of measurements/; only mla_decode_triton uses this file)."""
from dataclasses import replace

from ..base import Launch, cdiv
from ..occupancy import blocks_per_sm

# The heads' MMAs over each latent tile issue between its loads, so each tile's time grows with the head rows computed
# (H padded to BLOCK_H): the stream's time x (A + B x rows) / (A + B x 16), 1 at one 16-row block (the fewest a
# tl.dot takes), 1.56 at 128 rows (>= 1: time, not bytes). The stream itself runs at STREAM_EFF, the rung's
# memory_eff: 0.65 / 0.7375, the level the fit (calibration/h200_fit.json) was made with, when the bare A + B x rows
# (0.7 + 0.3 rows / 128: 0.74 at 16 rows) sat on the traffic: a launch moving under the op's own bytes, which qa's
# roofline check caught on the A10 once a refit raised sm_86's memory efficiency. A stream-only model put 16 heads
# 1.46x slow on the H100 (12 rows; B=8 S=32700 splits 16 / 32 137.1 / 122.2 us, modelled 225.4 / 212.1) and 1.13x on
# the H200 (23; B=64 S=8000 splits 4 209.1, modelled 432.7) where 128 heads sat at 0.98x / 0.87x. B (0.3 -> 0.49) refit
# with the stream at STREAM_EFF (its partials at the stream's rate now) on the split_kv rows of measurements/
# (scripts/sim2_rows.py, every mla row: Spearman 0.828 -> 0.830, pair order 0.861 -> 0.864, rms log 0.227 -> 0.226);
# geomean sim / measured 16 heads H100 1.21 (23 rows) / H200 0.91 (23), 128 heads 0.96 (39) / 0.87 (22).
SPLIT_WORK = (0.7, 0.49 / 128)
FEWEST_ROWS = 16
STREAM_EFF = 0.8814
# One program an SM on a grid of several waves: nothing runs beside its chain of loads and MMAs. H200 (room26b),
# B=32 H=128 S=4000, 16 splits, BLOCK_H 16: 3 stages / BLOCK_N 128 (1 program an SM) 521.9 / 473.5 us against
# 370.8 at 2 stages / BLOCK_N 64 (2 an SM); at B=8 H=16 (128 programs, under a wave) both ran faster: 105.0 / 112.0
# against 133.7. x LONE_PROGRAM on the stream where the grid passes the SMs and one 4-warp program fits an SM (the
# 8-warp programs of 64-head blocks, alone by their registers, ran 0.79-1.16x the model without it: 7 rows).
LONE_PROGRAM = 1.45


def heads_work(task, block_h: int) -> float:
    """The stream's time stretch from the head rows' MMA issue between the loads (>= 1: time, not bytes)."""
    return (SPLIT_WORK[0] + SPLIT_WORK[1] * cdiv(task["H"], block_h) * block_h) / stream_level()


def stream_level() -> float:
    return SPLIT_WORK[0] + SPLIT_WORK[1] * FEWEST_ROWS


def lone(launch: Launch, task) -> Launch:
    if launch.grid <= task.gpu.sms or launch.threads > 4 * task.gpu.warp or blocks_per_sm(launch, task.gpu) != 1:
        return launch
    return replace(launch, traffic=launch.traffic * LONE_PROGRAM)
