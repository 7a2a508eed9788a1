"""Triton's pointer-loaded GEMM tiles at a K it cannot prove divisible by 16 (gemm_fp16_triton's tile_launch, narrow=True):
every operand element loaded alone, the launch's floor (Launch.issue_s)."""
from ..base import Launch, Task, cdiv
from ..occupancy import blocks_per_sm

# Triton specializes an integer argument only where it is divisible by 16; the pointer rungs' A and B row stride is K,
# so at a K that is not (776, 777) nothing proves a row start 16-byte aligned and every operand element is loaded
# alone into a register and stored to shared memory: Triton 3.9 for sm_90a, pipelined_stages 128 x 128 x 32 on 4
# warps (scripts/sim_triton_ptx.py's compile), K=2048: 24 cp.async.cg a K loop, 174 registers, 49,152 B of shared;
# K=776: no cp.async, 64 ld.global.b16 + 64 st.shared, 255 registers and 1,252 B of spill (BK 64: 128 loads, 3,780 B),
# 16,384 B of shared (no ring). The H100 ran those shapes (measurements/h100_gpucheck_kigrid.json, M=1000 N=3000 K=776
# and K=777 alike, 36 rows of the three pointer rungs) 3-32x slower than the roofline says, at a rate set by the loads
# a thread issues: a resident warp completes NARROW_LOADS_WARP element loads a ns, an SM NARROW_LOADS_SM at most, and a
# thread holding more than NARROW_SPILL_REGS accumulator + K-step operand values runs NARROW_SPILL slower (the spill).
# Fitted on those rows: rms log error 0.19, each within 0.80-1.35x. The TMA rung (descriptors) is unaffected (23 us).
NARROW_LOADS_WARP = 0.48
NARROW_LOADS_SM = 11.0
NARROW_SPILL_REGS = 240
NARROW_SPILL = 2.7


def narrow_k_s(launch: Launch, task: Task, bm: int, bn: int, bk: int) -> float:
    """Seconds the busiest SM takes to load its tiles one element at a time (a K not divisible by 16)."""
    threads, gpu = launch.threads, task.gpu
    per_sm = cdiv(launch.grid, gpu.sms)
    warps = min(per_sm, max(1, blocks_per_sm(launch, gpu))) * threads // gpu.warp
    loads = per_sm * (bm + bn) * cdiv(task["K"], bk) * bk
    spill = NARROW_SPILL if (bm * bn + (bm + bn) * bk) / threads > NARROW_SPILL_REGS else 1.0
    return loads / min(NARROW_LOADS_WARP * warps, NARROW_LOADS_SM) * 1e-9 * spill
