"""Re-reads a launch serves from L2: the share of a re-read that still goes to DRAM, and what the L2 -> SM
side costs, for launch models whose programs read the same bytes more than once (a row re-read by a
multi-pass norm, a KV head re-streamed by its sibling query heads).

The catalog names each card's DRAM bandwidth, not its L2's. L2_READ_TBS is the L2 -> SM read bandwidth both
Hopper cards showed: paged_decode_cuda's per-query-head rungs at B=64 H=64 KVH=8 S=4096 D=128 (eight query heads
re-stream each 1.07 GB KV head set, 8.6 GB through L2) ran 651-780 us on the H100 and 678-805 on the H200
(vectorized_uint4 and split_kv, measurements/h100_gpucheck_s99199.json, h200_gpucheck_s3131/s50505/s1717.json,
the lead's H100 run of 2026-12-06 08:41): 11-13 TB/s on both, where their DRAM differs 1.43x. Assumed alike on
the other cards of the catalog (no measurement).
"""
from __future__ import annotations


from ..records import replaced
from .base import DTYPE_BYTES, Launch

L2_READ_TBS = 11.0
# A resident working set fills L2 before it reaches its capacity (two partitions, other streams' lines): the
# share of re-reads that miss grows as (working set / (L2_FILL x L2))^2, all of them at L2_FILL x L2 and past.
# layernorm_triton chunked_three_pass, bf16/fp16 (H100 and H200 rows, docs/calibration_h100_fresh_s96969.md):
# T=16384 D=8192 (~39 MB resident) re-reads from DRAM (355-362 us, 1.95x whole_row_registers' 182), T=4096
# D=4096 (~13 MB) and T=8192 D=1024 (~5 MB) within 1.05-1.25x of it, T=8192 D=5120 (16-33 MB) 0.98-1.39x.
L2_FILL = 0.8


def resident_slots(launch: Launch, gpu) -> int:
    """Blocks of this launch the whole GPU holds at once (as sim.blocks_per_sm counts them), whatever the grid."""
    by_smem = gpu.smem_per_sm // launch.smem_bytes if launch.smem_bytes else gpu.max_blocks_per_sm
    per_sm = min(gpu.max_blocks_per_sm, gpu.max_threads_per_sm // max(1, launch.threads),
                 gpu.regs_per_sm // max(1, launch.threads * launch.regs), by_smem)
    return gpu.sms * max(1, per_sm)


def dram_share(working_set_bytes: float, gpu) -> float:
    """Share of the re-reads of a resident working set that miss L2 and go to DRAM."""
    return min(1.0, (working_set_bytes / (L2_FILL * gpu.l2_mb * 1e6)) ** 2)


def l2_cost(gpu) -> float:
    """What one byte read from L2 costs in units of a DRAM byte (the bandwidths' ratio)."""
    return min(1.0, gpu.bw_tbs / L2_READ_TBS)


def reread_traffic(rereads: float, working_set_bytes: float, gpu) -> float:
    """Launch.traffic (DRAM-byte units over the minimum) of a kernel reading its bytes once from DRAM and
    `rereads` more times: the misses from DRAM, the hits at L2's cost."""
    miss = dram_share(working_set_bytes, gpu)
    return 1.0 + rereads * (miss + (1.0 - miss) * l2_cost(gpu))


def row_rereads(launch_of_p, rows: str, cols: str):
    """A program-per-row launch (launch_of_p: p, task -> Launch, its traffic counting every pass over the row
    from DRAM) with the later passes' re-reads of the row served by L2 as far as the resident rows fit it: a
    grid of at least one wave of resident programs streams at the bandwidth the misses and L2 allow; fewer
    rows stay latency-bound, each pass a chain of round trips (the launch's traffic kept in proportion).
    Measured, layernorm_triton chunked_three_pass (H100 and H200 rows of 6 seeds, docs/calibration_h100_fresh_s96969.md):
    at T=4096 D=4096 the rung ran 28.6-32.7 us on the H100 beside whole_row_registers' 26.6-27.4 (the model had
    45.6, three full DRAM reads), at T=8192 D=1024 15.6-18.4 beside 14.9-15.1 (23.6-30.0 modelled), while
    T=16384 D=8192, whose ~39 MB of resident rows overflow the L2, ran 355-362 beside 182: re-read from DRAM."""
    def launch(p, task):
        base = launch_of_p(p, task)
        gpu, t = task.gpu, task[rows]
        slots = resident_slots(base, gpu)
        served = reread_traffic(base.traffic - 1.0, min(t, slots) * task[cols] * DTYPE_BYTES[task.dtype], gpu)
        wave = min(1.0, t / slots)
        return replaced(base, traffic=base.traffic - (base.traffic - served) * wave)
    return launch
