"""Room to tune on the memory-bound families' top rungs (issue 26 item 2): the ranges a real kernel of
the op tunes, each written into the candidate's code and modelled in its launch in the direction the
hardware moves, with the rung's default candidate unchanged (its render and launch are golden)."""
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task


def _task(name, shape, gpu="H100", dtype="bf16"):
    m = REGISTRY[name]
    return m, make_task(m, gpu, dtype, shape)


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


def test_swiglu_tiles_take_64_to_1024_threads_and_8_chunks_a_thread():
    m, task = _task("swiglu_fwd_cuda", {"T": 4096, "I": 11008})
    v = m.variant("unrolled_ilp")
    assert v.defaults() == {"threads": 256, "unroll": 2}                                   # today's candidate
    code = m.render(v, {"threads": 1024, "unroll": 8}, task)
    assert "#define THREADS 1024" in code and "#define UNROLL 8" in code
    four, eight = (m.launch(v, {"threads": 256, "unroll": u}, task) for u in (4, 8))
    assert eight.bytes_per_access == 2 * four.bytes_per_access and eight.regs > four.regs
    # a row of 1376 uint4 chunks: tiles of 64 x 2 waste 32 chunk slots, tiles of 256 x 2 waste 160
    narrow, default = m.launch(v, {"threads": 64, "unroll": 2}, task), m.launch(v, v.defaults(), task)
    assert narrow.lane_util == 1376 / 1408 > default.lane_util == 1376 / 1536


def test_causal_conv1d_strips_take_one_step_to_a_whole_row():
    m, task = _task("causal_conv1d_cuda", {"B": 4, "D": 4096, "L": 8192})
    v = m.variant("register_strip")
    assert v.defaults() == {"threads": 128, "strip": 2048}                                 # today's candidate
    code = m.render(v, {"threads": 512, "strip": 8192}, task)
    assert "#define STRIP 8192" in code and "#define THREADS 512" in code
    # a warp a whole row, or 32 warps a row each walking one step of 256
    whole, step = (m.launch(v, {"threads": 128, "strip": s}, task) for s in (8192, 256))
    assert step.grid == 32 * whole.grid

def test_mamba_step_blocks_take_128_channels_of_a_batch_row():
    m, task = _task("mamba_step_cuda", {"B": 256, "D": 2048, "N": 16})
    v = m.variant("smem_staged_channels")
    assert v.defaults() == {"channels": 32}                                                # today's candidate
    assert "#define CHANNELS 128" in m.render(v, {"channels": 128}, task)
    # B_t / C_t staged once for 128 channels: a quarter of the blocks (and of their staging loads)
    c32, c128 = (m.launch(v, {"channels": c}, task) for c in (32, 128))
    assert c128.grid * 4 == c32.grid and c128.threads == 512
    # N = 64: 128 channels of 16 float4 lanes is a 2048-thread block, which no launch accepts
    _, wide = _task("mamba_step_cuda", {"B": 32, "D": 8192, "N": 64})
    r = simulate(m, v, {"channels": 128}, wide)
    assert not r.ok and r.error_class == "resources" and "CUDA error: invalid argument" in r.error


def test_selective_scan_registers_take_16_steps_a_thread():
    m, task = _task("selective_scan_cuda", {"B": 2, "L": 8192, "D": 4096, "N": 16})
    v = m.variant("vectorized_regs")
    assert v.defaults() == {"threads": 128, "items": 8}                                    # today's candidate
    code = m.render(v, {"threads": 64, "items": 16}, task)
    assert "#define ITEMS 16" in code and "Pack pu[ITEMS / 8]" in code
    assert "Pack pu[ITEMS / 8]" not in m.render(v, v.defaults(), task)                     # 8: one uint4 each
    eight, sixteen = (m.launch(v, {"threads": 64, "items": i}, task) for i in (8, 16))
    # two uint4s of each input in flight, 48 more registers, the chunk's scan and barriers over twice the steps
    assert sixteen.bytes_per_access == 2 * eight.bytes_per_access and sixteen.regs == eight.regs + 48
    assert sixteen.compute_scale > eight.compute_scale
    # L = 256: a 128 x 16 chunk is 8x the row, an 8-step one 4x
    _, short = _task("selective_scan_cuda", {"B": 64, "L": 256, "D": 2048, "N": 16})
    assert m.launch(v, {"threads": 128, "items": 16}, short).lane_util == 0.125
    assert m.launch(v, {"threads": 128, "items": 8}, short).lane_util == 0.25


def test_prefix_scan_shuffle_rows_take_4_vectors_a_thread():
    m, task = _task("prefix_scan_cuda", {"R": 8, "C": 1048576})
    v = m.variant("warp_shuffle_scan")
    assert v.defaults() == {"threads": 256, "items": 1}                                    # today's candidate
    code = m.render(v, {"threads": 256, "items": 4}, task)
    assert "#define ITEMS 4" in code and "Pack in[ITEMS];" in code
    assert "#define ITEMS" not in m.render(v, v.defaults(), task)                          # 1: one uint4, as before
    one, four = (m.launch(v, {"threads": 256, "items": i}, task) for i in (1, 4))
    # four vectors in flight a thread, one block scan (two barriers) for four times the elements
    assert four.bytes_per_access == 4 * one.bytes_per_access and four.compute_scale > one.compute_scale == 1.0
    assert four.regs == one.regs + 3 * (8 + 4)                                            # v[4][8] and the packs
    # a 2048-wide row is a quarter of a 256 x 8 x 4 tile
    _, short = _task("prefix_scan_cuda", {"R": 16384, "C": 2048})
    assert m.launch(v, {"threads": 256, "items": 4}, short).lane_util == 0.25


def test_min_p_chunks_take_4_float4s_a_thread():
    m, task = _task("min_p_cuda", {"B": 16, "V": 151936}, dtype="fp32")
    v = m.variant("chunk_mass_pick")
    assert v.defaults() == {"threads": 512, "vecs": 1}                                     # today's candidate
    code = m.render(v, {"threads": 512, "vecs": 4}, task)
    assert "#define VECS 4" in code and "float w[4 * VECS]" in code and "VECS" not in m.render(v, v.defaults(), task)
    one, four = (m.launch(v, {"threads": 512, "vecs": k}, task) for k in (1, 4))
    # four float4 loads in flight a thread, a block sum a four-times-longer chunk, which the pick re-reads
    assert four.bytes_per_access == 4 * one.bytes_per_access and four.compute_scale > one.compute_scale
    assert abs(four.traffic - one.traffic - 3 * 4 * 512 / 151936) < 1e-12 and four.regs > one.regs


def test_selective_scan_triton_programs_take_one_channel():
    m, task = _task("selective_scan_triton", {"B": 2, "L": 8192, "D": 4096, "N": 16})
    v = m.variant("exp2_fused_epilogue")
    assert v.param("BLOCK_D").default == 4                                                 # today's candidate
    p = {**v.defaults(), "BLOCK_D": 1}
    assert "BLOCK_D=1" in m.render(v, p, task)
    assert all(k.constexprs.get("BLOCK_D") == 1 for k in m.triton_kernels(v, p, task) if "BLOCK_D" in k.constexprs)
    one, two = m.launch(v, p, task), m.launch(v, {**p, "BLOCK_D": 2}, task)
    # a [1, N, CHUNK] tile a program: twice the programs, half the values a thread holds
    assert one.grid == 2 * two.grid and one.regs < two.regs


def test_rmsnorm_triton_persistent_takes_8_programs_an_sm():
    m, task = _task("rmsnorm_triton", {"T": 65536, "D": 128})
    v = m.variant("persistent")
    assert v.param("programs_per_sm").default == 1                                         # today's candidate
    p = {**v.defaults(), "num_warps": 2, "programs_per_sm": 8}
    assert "PROGRAMS_PER_SM = 8" in m.render(v, p, task)
    four, eight = m.launch(v, {**p, "programs_per_sm": 4}, task), m.launch(v, p, task)
    # 128-wide rows: each program's loop is a chain of row latencies; twice the programs, half the chain
    assert eight.grid == 2 * four.grid and eight.rounds == 63 < four.rounds == 125                # 132 SMs
