"""Room to tune on the memory-bound families' top rungs (issue 26 item 2): the ranges a real kernel of
the op tunes, each written into the candidate's code and modelled in its launch in the direction the
hardware moves, with the rung's default candidate unchanged (its render and launch are golden)."""
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def _task(name, shape, gpu="H100", dtype="bf16"):
    m = REGISTRY[name]
    return m, make_task(m, gpu, dtype, shape)


def test_embedding_bwd_takes_one_to_16_warps_and_8_rows_in_flight():
    m, task = _task("embedding_bwd_cuda", {"T": 65536, "D": 4096, "V": 128256})
    v = m.variant("sorted_segment_vectorized")
    assert v.defaults() == {"warps_per_block": 4, "unroll": 2}                            # today's candidate
    code = m.render(v, {"warps_per_block": 16, "unroll": 8}, task)
    assert "#define WARPS 16" in code and "#define UNROLL 8" in code
    four, eight = (m.launch(v, {"warps_per_block": 4, "unroll": u}, task) for u in (4, 8))
    # twice the rows in flight a lane: twice the bytes in flight, for the 4 registers each uint4 holds
    assert eight.bytes_per_access == 2 * four.bytes_per_access and eight.regs - four.regs == 4 * 4 + 2 * 4
    one, sixteen = (m.launch(v, {"warps_per_block": w, "unroll": 2}, task) for w in (1, 16))
    assert sixteen.threads == 16 * one.threads and sixteen.grid * 16 == one.grid


def test_moe_scatter_takes_64_to_512_threads():
    m, task = _task("moe_scatter_cuda", {"T": 512, "E": 256, "topk": 8, "K": 7168})
    v = m.variant("warp_aggregated_fused")
    assert v.defaults() == {"threads": 256, "tokens_per_block": 16}                       # today's candidate
    assert "#define THREADS 512" in m.render(v, {"threads": 512, "tokens_per_block": 16}, task)
    # 32 blocks on the whole GPU: a wider block keeps more of each 7168-wide row's uint4s in flight
    small, wide = (m.launch(v, {"threads": t, "tokens_per_block": 16}, task) for t in (64, 512))
    assert wide.grid == small.grid == 32 and wide.threads == 8 * small.threads
    assert wide.smem_bytes > small.smem_bytes                                              # a count row a warp
    # 64 threads cover a 2048-wide row's 256 uint4s in 4 passes; 512 threads leave half the lanes idle
    m2, short = _task("moe_scatter_cuda", {"T": 8192, "E": 128, "topk": 8, "K": 2048})
    assert m2.launch(v, {"threads": 512, "tokens_per_block": 16}, short).lane_util == 0.5


def test_transpose_tiles_take_128_and_2_rows_a_pass():
    m, task = _task("transpose_cuda", {"R": 8192, "C": 8192})
    v = m.variant("vectorized_multi_row")
    assert v.defaults() == {"tile": 64, "block_rows": 8}                                   # today's candidate
    code = m.render(v, {"tile": 128, "block_rows": 2}, task)
    assert "#define TILE 128" in code and "#define BLOCK_ROWS 2" in code
    t64, t128 = (m.launch(v, {"tile": t, "block_rows": 8}, task) for t in (64, 128))
    # a 128-wide tile: a quarter of the blocks, each with twice the threads and 4x the padded tile
    assert t128.grid * 4 == t64.grid and t128.threads == 2 * t64.threads
    assert t128.smem_bytes == 128 * 129 * 2 > 3 * t64.smem_bytes
    assert max(v.param("tile").values) // 2 * max(v.param("block_rows").values) <= 1024   # every block launches


def test_selective_scan_registers_take_one_warp_to_16_warps_a_channel():
    m, task = _task("selective_scan_cuda", {"B": 64, "L": 256, "D": 2048, "N": 16})
    v = m.variant("vectorized_regs")
    assert v.defaults() == {"threads": 128}                                                # today's candidate
    assert "#define THREADS 32" in m.render(v, {"threads": 32}, task)
    # L = 256 is one chunk of 32 threads x 8 steps: 512 threads leave 15 of 16 lanes idle
    assert m.launch(v, {"threads": 32}, task).lane_util == 1.0
    assert m.launch(v, {"threads": 512}, task).lane_util == 256 / 4096


def test_prefix_scan_lookback_takes_8_vectors_a_thread():
    m, task = _task("prefix_scan_cuda", {"R": 8, "C": 1048576})
    v = m.variant("decoupled_lookback")
    assert v.defaults() == {"threads": 256, "items": 2}                                    # today's candidate
    assert "#define ITEMS 8" in m.render(v, {"threads": 256, "items": 8}, task)
    four, eight = (m.launch(v, {"threads": 256, "items": i}, task) for i in (4, 8))
    # twice the tile: half the tiles (half the look-backs), twice the loads in flight, and the
    # 8 x 8 fp32 partial sums a bf16 thread holds across the block scan
    assert eight.grid * 2 == four.grid and eight.bytes_per_access == 2 * four.bytes_per_access
    assert eight.regs - four.regs == 2 * 4 + 32
    # a 2048-wide row is an eighth of a 16384-element tile
    _, short = _task("prefix_scan_cuda", {"R": 16384, "C": 2048})
    assert m.launch(v, {"threads": 256, "items": 8}, short).lane_util == 2048 / 16384
