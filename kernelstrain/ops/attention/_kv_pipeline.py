"""Software pipelining of a decode kernel's [BLOCK_N, D] K/V tile loop whose loads feed no tl.dot
(a CUDA-core score and weighted sum per tile): `tl.range(..., num_stages=N)` has Triton 3.x copy the
K and V tiles of the next N - 1 trips into shared memory with cp.async (NVIDIA) while this trip's
tile is reduced. The launch's own num_stages leaves such loads alone (it pipelines tl.dot operands):
only the loop's attribute pipelines them (Triton 3.9, flash_decode online_softmax, 64 x 128 fp16
tiles on sm_90: 0 cp.async in the PTX at 1 stage, 32 at 2, 48 at 3; metadata.shared 1, 33, 66 KB).

On gfx942 Triton's AMD pipeliner stages no such load through LDS: it issues the next N - 1 trips'
global loads ahead into registers (Triton 3.9 AMDGCN, same tile, 4 warps: 9, 17, 25 global loads, 80,
118, 158 VGPRs, LDS 1 KB at 1-3 stages), so there the copies ahead cost registers, not LDS.

What it buys is bytes in flight without registers (NVIDIA): the unpipelined loop has about half a tile in
flight (the next trip's loads wait on this trip's reduction), the pipelined one the num_stages - 1
tiles copied ahead. That matters where the resident grid is short of DRAM's bandwidth-latency
product (a few heads of a long cache: B=1, H=32 is 32 programs on 132 SMs); elsewhere the shared
memory only lowers the programs a SM holds.
"""
from ..base import DTYPE_BYTES, Param

# 1: the plain range loop. 3 is not offered: on an H100 (gpu-check, Triton 3.6, 96 candidates) 2 stages
# ran 0.5-0.9x the unpipelined loop's time wherever that loop was short of bandwidth and never more
# than 1.09x, but 3 stages of 128-key tiles (128+ KB) left one 2- or 4-warp program a SM and ran
# 1.45-3.2x slower than 2 (paged multi_page_tile B=32/64, swa_decode B=8): too few warps to consume
# the tiles, which the launch model does not hold.
LOOP_STAGES = Param("num_stages", (1, 2), 1)


def tile_loop(p, args: str) -> str:
    """The tile loop's iterator over range(args), pipelined num_stages deep past 1."""
    stages = p.get("num_stages", 1)
    return f"tl.range({args}, num_stages={stages})" if stages > 1 else f"range({args})"


def _ahead_bytes(p, task, block_n: int) -> int:
    """Bytes of K and V of the num_stages - 1 trips copied ahead."""
    return (p.get("num_stages", 1) - 1) * 2 * block_n * task["D"] * DTYPE_BYTES[task.dtype]


def smem(p, task, block_n: int, table: int = 0, index: int = 0) -> int:
    """Triton's metadata.shared: the tiles copied ahead (NVIDIA) with the `table` bytes a trip loads
    to address them (a paged cache's block-table entries, staged beside the tiles), and the larger
    of two scratch buffers the loop reuses: the cross-warp reduction over keys (2 bytes a head-dim
    element a warp) and the layout change of an `index`-byte gathered row-index vector (Triton 3.9:
    exact at 1-3 stages, BLOCK_N 16-128, 2-8 warps, D 64 and 128 on sm_80/90/120 and gfx942;
    paged_decode page_tile 9,220 and multi_page_tile 34,048 B at 2 stages, 4 warps)."""
    ahead = 0 if task.is_hip else _ahead_bytes(p, task, block_n) + (p.get("num_stages", 1) - 1) * table
    return ahead + max(2 * p["num_warps"] * task["D"], index)


def regs(p, task, block_n: int, threads: int) -> int:
    """Registers a thread adds for the copies ahead: none on NVIDIA (they land in shared memory), on
    gfx942 its share of the tiles issued ahead plus their addresses (4-byte VGPRs; 64 x 128 fp16 on
    4 warps: 38 a stage against 38-40 measured)."""
    ahead = p.get("num_stages", 1) - 1
    return (_ahead_bytes(p, task, block_n) // (4 * threads) + 6 * ahead) if task.is_hip and ahead else 0


def in_flight(p, whole: int) -> float:
    """Bytes a thread has in flight: half of `whole` (a tile's loads a thread, capped by its
    registers) unpipelined, num_stages - 1 whole tiles pipelined."""
    return max(whole / 2, whole * (p.get("num_stages", 1) - 1))
