"""mla_decode_triton split_kv's share of the stream that its heads' work and its residency add (launch-model terms
fitted on the H100 / H200 rows of measurements/; only mla_decode_triton uses this file)."""
from dataclasses import replace

from ..base import Launch, cdiv
from ..occupancy import blocks_per_sm

# The heads' MMAs over each latent tile issue between its loads, so the stream's time grows with the heads computed
# (H padded to BLOCK_H): x (A + B x heads), 1 at 128. A stream-only model put 16 heads 1.46x slow on the H100 (12
# rows; B=8 S=32700 splits 16 / 32 137.1 / 122.2 us, modelled 225.4 / 212.1) and 1.13x on the H200 (23; B=64 S=8000
# splits 4 209.1, modelled 432.7) where 128 heads sat at 0.98x / 0.87x: now 1.11x / 0.90x.
SPLIT_WORK = (0.7, 0.3 / 128)
# One program an SM on a grid of several waves: nothing runs beside its chain of loads and MMAs. H200 (room26b),
# B=32 H=128 S=4000, 16 splits, BLOCK_H 16: 3 stages / BLOCK_N 128 (1 program an SM) 521.9 / 473.5 us against
# 370.8 at 2 stages / BLOCK_N 64 (2 an SM); at B=8 H=16 (128 programs, under a wave) both ran faster: 105.0 / 112.0
# against 133.7. x LONE_PROGRAM on the stream where the grid passes the SMs and one 4-warp program fits an SM (the
# 8-warp programs of 64-head blocks, alone by their registers, ran 0.79-1.16x the model without it: 7 rows).
LONE_PROGRAM = 1.45


def heads_work(task, block_h: int) -> float:
    return SPLIT_WORK[0] + SPLIT_WORK[1] * cdiv(task["H"], block_h) * block_h


def lone(launch: Launch, task) -> Launch:
    if launch.grid <= task.gpu.sms or launch.threads > 4 * task.gpu.warp or blocks_per_sm(launch, task.gpu) != 1:
        return launch
    return replace(launch, traffic=launch.traffic * LONE_PROGRAM)
