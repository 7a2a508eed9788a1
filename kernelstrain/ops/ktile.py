"""The K-loop knobs of a tiled tensor-core kernel, shared by the op modules (issue 26 item 2): how
deep a K tile one trip of the main loop stages (BK), and what one trip costs beyond its MMAs.

Every trip of a staged K loop ends in a synchronisation the MMAs wait on: a block barrier (and, in a
cp.async ring, a wait_group) where the warps drain before the next tile's fragments can be read; a
wgmma loop that commits and waits on its group drains the warpgroup's tensor pipe each trip. That
cost is per trip, not per MMA, so a deeper tile (fewer trips over the same K) spends less of the
loop stalled, for more shared memory a stage (fewer resident blocks, or none past the block's
limit: the existing shared-memory gate fails it as the compiler or the launch would) and, in a
ring, more bytes in flight. A shallower tile halves a stage's footprint and pays the stall twice as
often.

The stall of one trip is counted in k16 MMA steps of the warp (or warpgroup): a trip of BK holds
BK / 16 of them, so the loop's useful fraction is (BK / 16) / (BK / 16 + stall).

>>> round(trip_scale(64, 32, BARRIER_STALL), 3), round(trip_scale(16, 32, BARRIER_STALL), 3)
(1.08, 0.87)
>>> round(trip_scale(128, 64, WGMMA_DRAIN), 3), trip_scale(64, 64, WGMMA_DRAIN)
(1.086, 1.0)
"""
from __future__ import annotations

# k16 steps one trip's synchronisation costs. mma.sync loops: a __syncthreads of the block, then the
# ldmatrix -> mma latency of the new tile's first fragments (~100 cycles) against a warp's k16 step
# of a 64 x 64 warp tile (32 m16n8k16 MMAs, ~250 cycles). wgmma loops: commit + wait_group 0 empties
# the warpgroup's async tensor pipe (the last m64nNk16's latency) before the next tile's MMAs issue.
# Other resident blocks hide part of either, so both are below the raw latencies.
BARRIER_STALL = 0.35
WGMMA_DRAIN = 0.75


def trip_scale(bk: int, default_bk: int, stall: float) -> float:
    """Compute scale of a K loop of `bk`-deep tiles against the module's default depth: the MMA
    share of a trip, (bk / 16) / (bk / 16 + stall), over the default's (1.0 at the default)."""
    def useful(depth: int) -> float:
        return depth / 16 / (depth / 16 + stall)
    return useful(bk) / useful(default_bk)
