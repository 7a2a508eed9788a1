"""grad_clip_cuda's two_stage_deterministic rung: where its scalar loops' issue, not DRAM, binds (not an op
module itself)."""
from ..base import DTYPE_BYTES
from ..occupancy import in_flight_ratio

# Elements a second the SMs issue through the two-stage rung's scalar loops (a load, an FMA, a load and a store an
# element, one element a thread a load): where g's element is 2 bytes, that issue, not DRAM, binds. Measured: bf16
# ran at the fp32 rate per element, half its bandwidth -- H200 N=124,439,808 bf16 400-434 us at 256-1024 threads x
# 512-2048 blocks, fp32 393-407 (measurements/h200_gpucheck_*.json); H100 bf16 N=33,554,432 118.3 us against fp32
# N=16,777,216 (the same bytes) 80.8 (h100_room_reverse.json), where the byte model had both at 85.9.
SCALAR_ELEMENTS_PER_S = 400e9


def scalar_issue_traffic(launch, task) -> float:
    """Launch.traffic (DRAM bytes over the rung's 2 N e minimum) equal to issuing N elements of both passes at
    SCALAR_ELEMENTS_PER_S, bw / (2 e rate), against a memory side the grid's loads in flight already slow (the
    simulator's e_m: a small grid waits on latency, not on issue); under the DRAM passes' 1.5 for fp32 on every
    card of the catalog. The H200's bf16 grids of 256 x 128-256 threads (405-536 us) stay latency-bound."""
    issue = task.gpu.bw_tbs * 1e12 / (2 * DTYPE_BYTES[task.dtype] * SCALAR_ELEMENTS_PER_S)
    return issue * in_flight_ratio(launch, task.gpu) ** 0.7
