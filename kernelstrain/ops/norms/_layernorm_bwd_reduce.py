"""layernorm_bwd_triton's second kernel, dwdb_reduce_kernel, in the main kernel's launch model (issue 30, roomT).

The reduce runs after the main kernel: cdiv(D, 128) programs of 4 warps (16 at D=2048: 16 of 132 SMs), each summing
the P partial rows of its 128 columns BLOCK_P = 32 rows a step, every step's 32 KB of loads waited for before the next
(num_stages=1). It is a chain of cdiv(P, 32) dependent steps on a few SMs, not a share of DRAM bandwidth: the old model
counted the partials' read at the device's bandwidth and never its steps, so more partial rows (more programs an SM)
looked cheap. Measured (gpu-check's harness, both kernels in one timed call):
  H100, T = D = 2048 bf16, persistent_prefetch 8 warps, 1 / 2 / 4 / 8 programs an SM (P = 132-1056, 5 / 9 / 17 / 33
  steps): 28.8 / 31.7 / 42.5 / 72.1 us (measurements/h100_room26_roomT.json); the old model 23.5 / 20.9 / 30.3 / 52.1;
  H200, T = 32768 D = 1024 fp16, partial_buffers 16 warps, 8 / 64 rows a program (128 / 16 steps on 8 SMs): 454.8 /
  130.0 us (h200_kernels.json), ~2.9 us a step where the main kernels' chains are alike; the old model 227.1 / 149.3.
The steps join the main kernel's latency chain (sim.latency_ratio: its waves x Launch.rounds DRAM round trips), REDUCE_TRIP
round trips a step (a step's round trip plus its 32 KB landing in one SM; 1, 2 and 3 were tried against the 169
layernorm_bwd_triton rows of measurements/: 2 gave the best within-task Spearman and share within 0.8-1.25x), spread
over the main kernel's waves since the simulator multiplies the two. The partials' bytes count once, as the main
kernel's writes.
"""
from ..base import Launch, cdiv
from ..occupancy import blocks_per_sm

REDUCE_ROWS = 32        # BLOCK_P of dwdb_reduce_kernel: partial rows a step
REDUCE_TRIP = 2         # DRAM round trips (sim.DRAM_LATENCY_S) a step waits


def with_reduce_chain(launch: Launch, parts: int, task) -> Launch:
    """`launch` (the main kernel's) with the reduce's cdiv(parts, REDUCE_ROWS) steps added to its rounds."""
    from dataclasses import replace
    waves = cdiv(launch.grid, task.gpu.sms * max(1, blocks_per_sm(launch, task.gpu)))
    return replace(launch, rounds=launch.rounds + cdiv(cdiv(parts, REDUCE_ROWS) * REDUCE_TRIP, waves))
