"""paged_decode_triton's launch models of its loop rungs (key_per_iteration, page_tile, multi_page_tile) and the tile
shape its tl.dot rungs share; only paged_decode_triton uses this file."""
from ..base import Launch, DTYPE_BYTES
from . import _kv_pipeline as kv_pipeline
from .flash_decode_triton import trip_chain


def reread(task) -> float:
    # per-query-head programs stream their KV head once per sibling: L2 spares DRAM some of it,
    # but the L2 -> SM traffic still grows with the group (measured ~G x on an H200)
    return (task["H"] // task["KVH"]) ** 0.9


def key_launch(p, task):
    d, threads = task["D"], p["num_warps"] * task.gpu.warp
    return Launch(grid=task["B"] * task["H"], threads=threads, regs=32,
                  bytes_per_access=max(2, d * DTYPE_BYTES[task.dtype] // threads), traffic=reread(task),
                  lane_util=min(1.0, d / threads))


def tile_shape(p, task) -> tuple:
    """(threads, BLOCK_N, bytes per access, regs) of the tiled rungs (page_tile: BLOCK_N = P)."""
    d, threads, block_n = task["D"], p["num_warps"] * task.gpu.warp, p.get("BLOCK_N", task["P"])
    tile = min(64, max(4, block_n * d * DTYPE_BYTES[task.dtype] // threads)) // 2   # next tile waits on this one's reduce
    return threads, block_n, tile, min(255, 32 + 2 * block_n * d // threads)


# DRAM round trips a tile trip of page_tile / multi_page_tile waits by its loop's num_stages: unpipelined, the
# block-table entries and then the K and V tiles they address (flash_decode's 1.8 of a contiguous tile); pipelined
# 2 deep, about half of them (the next trip's table entries are staged beside its tiles, but its K/V addresses wait
# on them). The loop is a chain of such trips (flash_decode_triton.trip_chain), which binds where a program has a
# SM to itself. H100, B=1 H=32 KVH=8 S=4096 D=128 (32 programs; gpu-check seeds 93131-98282, 11 rows): page_tile
# 4 warps 1 / 2 stages 580.9 / 425.3 us, 2 warps 2 stages 387.4; multi_page_tile BLOCK_N 64 on 2 / 4 / 8 warps at
# 2 stages 208.9 / 177.7 / 184.0, 128 on 8 warps at 1 stage 151.9; the roofline model said 526 / 265 / 130 and
# 158 / 113 / 87, 112 (0.34-0.91x); with the chain 612 / 462 / 398 and 192 / 162 / 194, 131 (0.86-1.09x).
PAGED_WAITS = {1: 1.8, 2: 0.9}
# Registers of page_tile / multi_page_tile: about LOOP_REGS + half a tile value a thread (BLOCK_N x D / threads), as
# Triton 3.9's ptxas gives them for sm_90a at D=128 fp16 (cuobjdump -res-usage, scripts/simB_triton_res.py; docs
# simB_issue30.md 8.4): page_tile 2 / 4 / 8 warps 64 / 56 / 63, multi_page_tile 64 keys on 2 / 8 warps 107 / 64, 128
# keys on 2 / 4 / 8 warps 168 / 108-120 / 106. The estimate tile_shape shares with the tl.dot rungs (32 + 2 a value)
# gave 128 keys on 8 warps 160: one program an SM where ptxas's 106 hold two. H100 (device d2, B=8 H=28 KVH=4
# S=8192, 224 programs, timed after these figures were read): multi_page_tile 128 keys on 8 warps 338.9 / 360.1 us
# at 2 / 1 stages, modelled 450 / 525 with 160 registers, 317 / 317 with these; the 14 loop-rung rows' pair order
# 0.845 -> 0.920, Spearman 0.818 -> 0.945.
LOOP_REGS = 48


def tile_launch(p, task):
    """page_tile / multi_page_tile; pipelined (_kv_pipeline), the trips ahead stage their table
    entries beside their K/V tiles (page_tile: one int32 a trip, multi_page_tile: one a key), and
    the int64 row indices of a trip's keys change layout through shared memory (Triton 3.9:
    multi_page_tile BLOCK_N 128 on 2 warps 1 KB of scratch where the reduction takes 512 B).
    The trips' chain binds while a program shares its SM with at most one other (B x H <= 2 SMs: too few warps to
    cover a trip's round trips with another program's work). Held out (H100 B=8 H=28 KVH=4 S=8192, 224 programs;
    s88339, s91331, s92442): page_tile 2 warps 2 stages 785-786 us, 4 warps 997, 8 warps 1,547, the roofline alone
    313 / 631 / 876 (0.40-0.63x), with the chain 798 / 926 / 1,366; multi_page_tile 2 warps 383-430, 256-282 -> 316-385."""
    threads, block_n, tile, _ = tile_shape(p, task)
    regs = LOOP_REGS + block_n * task["D"] // threads // 2
    table = 4 * (block_n if "BLOCK_N" in p else 1)
    return Launch(grid=task["B"] * task["H"], threads=threads,
                  smem_bytes=kv_pipeline.smem(p, task, block_n, table, index=8 * block_n),
                  regs=min(255, regs + kv_pipeline.regs(p, task, block_n, threads)),
                  bytes_per_access=kv_pipeline.in_flight(p, 2 * tile), traffic=reread(task),
                  serial_trips=trip_chain(p, task, False, 1, block_n, PAGED_WAITS[p.get("num_stages", 1)])
                  if task["B"] * task["H"] <= 2 * task.gpu.sms else 0)
