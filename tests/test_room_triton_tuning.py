"""The tuning values added to the Triton rungs (issue 26 item 2, roomT): each is written where a real kernel has it
(the launch line, the loop's tl.range, a constexpr), reaches the compile spec, moves the launch model the way the
hardware reason says, and leaves the rung's default candidate as it rendered before. Triton 3.9's figures quoted
come from scripts/room_compile_triton.py."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task


def rung(name, tag):
    m = REGISTRY[name]
    return m, m.variant(tag)


@pytest.mark.parametrize("name,tag,param,value", [
    ("gemm_fp16_triton", "pipelined_stages", "BLOCK_N", 64), ("gemm_fp16_triton", "pipelined_stages", "num_stages", 2),
    ("gemm_fp16_triton", "persistent_tma", "num_stages", 2),
    ("fused_qkv_rope_triton", "dot_then_rope", "num_warps", 8), ("fused_qkv_rope_triton", "fused_epilogue", "num_warps", 8),
    ("fused_qkv_rope_triton", "grouped_swizzle", "num_warps", 8),
    ("fused_qkv_rope_triton", "pipelined_stages", "num_stages", 2),
    ("flash_prefill_triton", "persistent", "num_stages", 4), ("chunked_prefill_triton", "persistent", "num_stages", 4),
    ("sliding_window_attn_triton", "persistent_tiles", "num_stages", 4),
    ("cross_attention_triton", "split_kv", "num_stages", 4), ("tree_attention_triton", "split_kv", "num_stages", 4),
    ("cross_entropy_fwd_triton", "online_softmax", "num_stages", 3),
    ("cross_entropy_fwd_triton", "chunked_two_pass", "num_stages", 3),
    ("cross_entropy_bwd_triton", "persistent_evict_first", "num_stages", 3),
    ("paged_decode_triton", "gqa_dot", "num_warps", 2), ("paged_decode_triton", "split_kv", "num_warps", 2),
    ("paged_decode_triton", "split_kv", "NUM_SPLITS", 32),
])
def test_an_added_value_is_in_the_code_the_spec_and_the_model(name, tag, param, value):
    m, v = rung(name, tag)
    assert value in v.param(param).values and v.param(param).default != value
    task = make_task(m, "H100", m.dtypes[0], m.check_shape or m.shapes[0])
    base = v.defaults()
    p = {**base, param: value}
    code = m.render(v, p, task)
    assert code != m.render(v, base, task)
    assert f"{param}={value}" in code or f"{param.upper()} = {value}" in code
    specs = m.compile_specs(v, p, task)
    if param == "num_warps":
        assert any(s.num_warps == value for s in specs)
    elif param == "num_stages":
        assert any(s.num_stages == value for s in specs) or f"num_stages={value})" in code
    assert m.launch(v, p, task) != m.launch(v, base, task)
    assert simulate(m, v, p, task).ok


def test_gemm_two_stages_hold_less_shared_memory_and_keep_the_tensor_cores_less_fed():
    m, v = rung("gemm_fp16_triton", "pipelined_stages")
    task = make_task(m, "H100", "fp16", {"M": 4096, "N": 4096, "K": 4096})
    two, three = ({**v.defaults(), "num_stages": s} for s in (2, 3))
    # wgmma keeps every stage (base.triton_stage_buffers): (128 + 128) x 32 x 2 B a stage (metadata.shared 32,768 at 2)
    assert m.launch(v, two, task).smem_bytes == 2 * 256 * 32 * 2
    assert m.launch(v, two, task).compute_scale < m.launch(v, three, task).compute_scale
    assert simulate(m, v, two, task).time_ms > simulate(m, v, three, task).time_ms


def test_gemm_two_stages_fit_where_three_of_the_widest_tile_do_not():
    """sm_86's 99 KB block: 128 x 256 x 64 at 3 stages (two buffers on mma.sync) is 96 KB of operands
    plus none, at 2 one buffer."""
    m, v = rung("gemm_fp16_triton", "pipelined_stages")
    task = make_task(m, "A10", "fp16", {"M": 4096, "N": 4096, "K": 4096})
    p = {**v.defaults(), "BLOCK_N": 256, "BLOCK_K": 64}
    assert m.launch(v, {**p, "num_stages": 2}, task).smem_bytes < m.launch(v, {**p, "num_stages": 3}, task).smem_bytes
    assert simulate(m, v, {**p, "num_stages": 2}, task).ok


def test_qkv_eight_warps_halve_the_accumulator_a_thread_holds():
    m, v = rung("fused_qkv_rope_triton", "fused_epilogue")
    task = make_task(m, "H100", "fp16", m.check_shape)
    p = {**v.defaults(), "BLOCK_M": 128, "BLOCK_N": 128}
    four, eight = (m.launch(v, {**p, "num_warps": w}, task) for w in (4, 8))
    assert eight.threads == 2 * four.threads and eight.regs < four.regs


def test_qkv_epilogue_scratch_is_never_more_than_the_tile():
    """Triton 3.9, A100, fused_epilogue 64 x 64 at 8 warps: metadata.shared 8,192 B (the tile), not 16,384."""
    m, v = rung("fused_qkv_rope_triton", "fused_epilogue")
    task = make_task(m, "A100", "fp16", m.check_shape)
    assert m.launch(v, {**v.defaults(), "num_warps": 8}, task).smem_bytes == 8192


def test_a_four_stage_flash_ring_is_over_an_sm86_block_where_triton_says_so():
    """flash_prefill_triton persistent, 128 x 64 tiles, D=128, 4 stages: metadata.shared 131,072 B on sm_86 (three
    K/V buffers beside q) and 163,840 on sm_90a (every stage; Triton 3.9): over an A10's 101,376-byte block
    (Triton's launcher refuses it), within an H100's."""
    m, v = rung("flash_prefill_triton", "persistent")
    shape = {"B": 1, "H": 32, "S": 2048, "D": 128}
    p = {**v.defaults(), "num_stages": 4}
    a10, h100 = (simulate(m, v, p, make_task(m, g, "fp16", shape)) for g in ("A10", "H100"))
    assert a10.error_class == "smem" and "Required: 131072" in a10.error
    assert h100.ok and m.launch(v, p, make_task(m, "H100", "fp16", shape)).smem_bytes == 163840


def test_cross_entropy_stages_follow_the_h100s_streaming_order():
    """The forward's two-pass V loop is softmax's streaming loop (ops/stream_stages.py, H100-timed): on 16 rows of a
    128k vocabulary 2 stages lose to the plain loop and 3-4 gain; on 4096 rows the grid covers more of DRAM's latency,
    so the deepest ring gains less."""
    m, v = rung("cross_entropy_fwd_triton", "chunked_two_pass")
    few = make_task(m, "H100", "bf16", {"T": 16, "V": 128256})
    t = {s: simulate(m, v, {**v.defaults(), "num_stages": s}, few).time_ms for s in (1, 2, 3, 4)}
    assert t[2] > t[1] > t[3] >= t[4]
    code = m.render(v, {**v.defaults(), "num_stages": 3}, few)
    assert "tl.range(0, V, BLOCK, num_stages=3)" in code
    many = make_task(m, "H100", "bf16", {"T": 4096, "V": 32000})
    one, four = (simulate(m, v, {**v.defaults(), "num_stages": s}, many).time_ms for s in (1, 4))
    assert four / one > t[4] / t[1]


def test_cross_entropy_bwd_tile_loop_depth():
    m, v = rung("cross_entropy_bwd_triton", "persistent_evict_first")
    task = make_task(m, "H100", "bf16", {"T": 256, "V": 32000})
    codes = {s: m.render(v, {**v.defaults(), "num_stages": s}, task) for s in (1, 2, 3)}
    assert "for tile in range(tl.program_id(0), n_tiles, tl.num_programs(0)):" in codes[1]
    assert "tl.num_programs(0), num_stages=3):" in codes[3]
    smem = {s: m.launch(v, {**v.defaults(), "num_stages": s}, task).smem_bytes for s in (1, 2, 3)}
    assert smem[1] < smem[2] < smem[3]          # the tiles ahead: BLOCK x 2 B each, in shared memory


def test_paged_two_warp_programs_and_32_splits():
    m, v = rung("paged_decode_triton", "split_kv")
    task = make_task(m, "H100", "fp16", {"B": 1, "H": 32, "KVH": 8, "S": 4096, "D": 128, "P": 16})
    p = v.defaults()
    assert m.launch(v, {**p, "num_warps": 2}, task).threads == 64
    assert m.launch(v, {**p, "NUM_SPLITS": 32}, task).grid == 8 * 32


# -- the H100's order (room_device_check_triton KNOBT_SET=tuning, 2026-12-06, 112 cases: every value correct, every
# bug caught); the figures are in the constants' comments
def _order(name, tag, shape, dtype, values: dict) -> list:
    m, v = rung(name, tag)
    task = make_task(m, "H100", dtype, shape)
    times = {k: simulate(m, v, {**v.defaults(), **p}, task).time_ms for k, p in values.items()}
    return sorted(times, key=times.get)


def test_gemm_64_wide_tiles_lose_on_a_square_gemm_and_win_on_a_skinny_one():
    wide = {"BN64": {"BLOCK_N": 64}, "BN128": {"BLOCK_N": 128}, "BN256": {"BLOCK_N": 256}}
    # H100: 280.1 < 400.6 < 3563.9 us at 4096^3; 183.4 < 203.8 < 1881.2 at M=128 N=4096 K=14336
    assert _order("gemm_fp16_triton", "pipelined_stages", {"M": 4096, "N": 4096, "K": 4096}, "fp16", wide) == \
        ["BN128", "BN64", "BN256"]
    assert _order("gemm_fp16_triton", "pipelined_stages", {"M": 128, "N": 4096, "K": 14336}, "fp16", wide) == \
        ["BN64", "BN128", "BN256"]


def test_gemm_two_stages_are_the_slowest_pipeline():
    deep = {s: {"num_stages": s} for s in (2, 3, 5)}
    # H100: 2 stages 357.8 us against 277.5 / 284.6 at 4096^3, 397.5 against 206.3 / 139.0 at M=128 K=14336
    for shape in ({"M": 4096, "N": 4096, "K": 4096}, {"M": 128, "N": 4096, "K": 14336}):
        assert _order("gemm_fp16_triton", "pipelined_stages", shape, "fp16", deep)[-1] == 2


@pytest.mark.parametrize("tag,tile,low,high", [("fused_epilogue", 128, 1.2, 9), ("grouped_swizzle", 128, 1.2, 9),
                                                ("dot_then_rope", 64, 1.2, 9), ("fused_epilogue", 64, 1.0, 1.4)])
def test_qkv_eight_warps_run_slower_unpipelined(tag, tile, low, high):
    """H100: 1.48-1.51x at 128 x 128 (dot_then_rope 1.51x at 64 x 64); fused_epilogue 64 x 64 1.07x, which the
    tile model's halved bytes in flight a thread puts at 1.35x (left: gemm_fp16_triton shares that model)."""
    m, v = rung("fused_qkv_rope_triton", tag)
    task = make_task(m, "H100", "fp16", {"T": 1000, "HID": 2048, "H": 16, "KVH": 4, "D": 128})
    p = {**v.defaults(), "BLOCK_M": tile, "BLOCK_N": tile}
    four, eight = (simulate(m, v, {**p, "num_warps": w}, task).time_ms for w in (4, 8))
    assert low * four < eight < high * four


def test_cross_entropy_bwd_tile_loop_gains_with_depth_on_many_tiles():
    stages = {s: {"num_stages": s} for s in (1, 2, 3)}
    # H100: 93.1 < 110.2 < 118.4 us
    assert _order("cross_entropy_bwd_triton", "persistent_evict_first", {"T": 512, "V": 128256}, "bf16", stages) == [3, 2, 1]


def test_cross_entropy_online_loop_at_four_stages_loses_to_three():
    stages = {s: {"num_stages": s} for s in (1, 2, 3, 4)}
    # H100 at 16 rows: 19.4 (3) < 25.7 (1) < 27.6 (4) < 31.0 (2) us; the two-pass loop 24.1 (4) < 26.7 < 27.7 < 33.8
    assert _order("cross_entropy_fwd_triton", "online_softmax", {"T": 16, "V": 128256}, "bf16", stages) == [3, 1, 4, 2]
    assert _order("cross_entropy_fwd_triton", "chunked_two_pass", {"T": 16, "V": 128256}, "bf16", stages) == [4, 3, 1, 2]
