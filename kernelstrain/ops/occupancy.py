"""How many blocks of a launch an SM holds and how many bytes the resident grid keeps in flight: the occupancy
facts the simulator (sim.py, which re-exports them) and the op modules' own launch models both read. They depend
only on the launch and the card, so they live in the op layer, below the simulator."""
from __future__ import annotations

from .base import Launch

DRAM_LATENCY_S = {"nvidia": 650e-9, "amd": 800e-9}
LOADS_IN_FLIGHT = 2               # independent loads per thread the compiler keeps in flight


def blocks_per_sm(launch: Launch, gpu) -> int:
    by_threads = gpu.max_threads_per_sm // max(1, launch.threads)
    by_regs = gpu.regs_per_sm // max(1, launch.threads * launch.regs)
    by_smem = gpu.smem_per_sm // launch.smem_bytes if launch.smem_bytes else gpu.max_blocks_per_sm
    return min(gpu.max_blocks_per_sm, by_threads, by_regs, by_smem)


def in_flight_ratio(launch: Launch, gpu) -> float:
    """Bytes the resident grid keeps in flight over the bandwidth-latency product (Little's law), at most 1."""
    resident_blocks = min(launch.grid, gpu.sms * blocks_per_sm(launch, gpu))
    in_flight = resident_blocks * launch.threads * launch.bytes_per_access * LOADS_IN_FLIGHT * launch.lane_util
    return min(1.0, in_flight / (gpu.bw_tbs * 1e12 * DRAM_LATENCY_S[gpu.vendor]))
