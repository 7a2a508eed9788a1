"""Room to tune on the tiled tensor-core families (issue 26 item 2): each knob a real kernel of the
op tunes is written into the candidate's code, moves the launch model in the physical direction,
and leaves the rung's default candidate as it was (its render is golden)."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.ops.ktile import BARRIER_STALL, WGMMA_DRAIN, trip_scale
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task


def _task(name, gpu="H100", dtype="bf16", shape=None):
    m = REGISTRY[name]
    return m, make_task(m, gpu, dtype, shape or m.shapes[0])


def _launches(m, v, task, name, values, base=None):
    p = dict(base or v.defaults())
    return [m.launch(v, {**p, name: x}, task) for x in values]


def test_a_deeper_k_tile_synchronises_less_often():
    assert trip_scale(64, 32, BARRIER_STALL) > 1.0 > trip_scale(16, 32, BARRIER_STALL)
    assert trip_scale(128, 64, WGMMA_DRAIN) > 1.0 > trip_scale(32, 64, WGMMA_DRAIN)
    assert trip_scale(32, 32, BARRIER_STALL) == trip_scale(64, 64, WGMMA_DRAIN) == 1.0


@pytest.mark.parametrize("tag,default,values", [("mma_sync", 32, (16, 32, 64)), ("cp_async_pipeline", 32, (16, 32, 64)),
                                                ("wgmma_pipeline", 64, (32, 64, 128))])
def test_grouped_gemm_k_depth(tag, default, values):
    m, task = _task("grouped_gemm_cuda", shape={"T": 4096, "E": 8, "K": 4096, "N": 14336, "topk": 2})
    v = m.variant(tag)
    assert v.param("BK").values == values and v.param("BK").default == default
    assert f"#define BK {values[-1]}\n" in m.render(v, {**v.defaults(), "BK": values[-1]}, task)
    shallow, mid, deep = _launches(m, v, task, "BK", values)
    # a stage holds BK columns of the x and w tiles; fewer trips, each synchronised once
    assert shallow.smem_bytes < mid.smem_bytes < deep.smem_bytes
    assert shallow.compute_scale < mid.compute_scale < deep.compute_scale
    if "STAGES" in v.defaults():        # a ring keeps (STAGES - 1) deeper stages in flight
        assert shallow.bytes_per_access < deep.bytes_per_access


def test_grouped_gemm_rings_and_wide_wgmma():
    m, task = _task("grouped_gemm_cuda", shape={"T": 4096, "E": 8, "K": 4096, "N": 14336, "topk": 2})
    ring, wg = m.variant("cp_async_pipeline"), m.variant("wgmma_pipeline")
    assert ring.param("STAGES").values == (2, 3, 4, 5) and wg.param("STAGES").values == (3, 4, 5, 6)
    three, five = _launches(m, ring, task, "STAGES", (3, 5))
    assert five.smem_bytes > three.smem_bytes and five.bytes_per_access > three.bytes_per_access
    code = m.render(wg, {**wg.defaults(), "BN": 256}, task)
    assert "#define BN 256" in code and "wgmma.mma_async.sync.aligned.m64n256k16" in code
    narrow, wide = _launches(m, wg, task, "BN", (128, 256))
    # twice the accumulators a thread, half the n-blocks (x re-read half as often)
    assert wide.regs > narrow.regs and wide.grid * 2 == narrow.grid and wide.traffic < narrow.traffic
    # the deepest ring of the widest tile is more shared memory than a block may have
    assert not simulate(m, wg, {"BN": 256, "STAGES": 6, "BK": 128}, task).ok


@pytest.mark.parametrize("name", ["flash_prefill_cuda", "chunked_prefill_cuda"])
def test_flash_mma_takes_128_key_tiles(name):
    m, task = _task(name, dtype="fp16")
    v = m.variant("mma_sync")
    assert v.param("BLOCK_N").values == (32, 64, 128) and v.param("BLOCK_N").default == 64
    assert "#define BLOCK_N 128" in m.render(v, {**v.defaults(), "BLOCK_N": 128}, task)
    mid, wide = _launches(m, v, task, "BLOCK_N", (64, 128))
    # S = Q K^T of 128 keys a warp lives in registers; K and V tiles of 128 rows in smem
    assert wide.regs > mid.regs and wide.smem_bytes > mid.smem_bytes


def test_flash_prefill_ring_takes_four_stages():
    m, task = _task("flash_prefill_cuda", dtype="fp16")
    v = m.variant("cp_async_pipeline")
    assert v.param("stages").values == (2, 3, 4) and v.param("stages").default == 2
    assert "constexpr int STAGES = 4;" in m.render(v, {**v.defaults(), "stages": 4}, task)
    three, four = _launches(m, v, task, "stages", (3, 4))
    assert four.smem_bytes > three.smem_bytes


def test_chunked_prefill_takes_two_warp_query_tiles():
    m, task = _task("chunked_prefill_cuda", dtype="fp16")
    for tag in ("mma_sync", "cp_async_pipeline"):
        v = m.variant(tag)
        assert v.param("BLOCK_M").values == (32, 64, 128) and v.param("BLOCK_M").default == 64
        code = m.render(v, {**v.defaults(), "BLOCK_M": 32}, task)
        assert "#define BLOCK_M 32" in code and "constexpr int THREADS = BLOCK_M / 16 * 32;" in code
        small, mid = _launches(m, v, task, "BLOCK_M", (32, 64))
        # 2 warps a block: twice the blocks, each K/V tile's fill and barrier shared by fewer warps
        assert small.threads == 64 and small.grid == 2 * mid.grid and small.compute_scale < mid.compute_scale


@pytest.mark.parametrize("name,shape", [("paged_decode_cuda", {"B": 1, "H": 32, "KVH": 8, "S": 4096, "D": 128, "P": 16}),
                                        ("swa_decode_cuda", None)])
def test_decode_keys_in_flight_and_ring_depth(name, shape):
    m, task = _task(name, gpu="H200", shape=shape)
    for tag in ("vectorized_uint4", "split_kv", "gqa_cp_async"):
        v = m.variant(tag)
        assert v.param("keys_per_step").values == (2, 4, 8) and v.param("keys_per_step").default == 4
        assert "constexpr int U = 8;" in m.render(v, {**v.defaults(), "keys_per_step": 8}, task)
        two, four, eight = _launches(m, v, task, "keys_per_step", (2, 4, 8))
        assert two.regs < four.regs < eight.regs        # a K and a V uint4 and a score a key held
        if tag != "gqa_cp_async":                        # loads straight from DRAM: U of them in flight a lane
            assert two.bytes_per_access < four.bytes_per_access < eight.bytes_per_access
    v = m.variant("gqa_cp_async")
    assert v.param("stages").values == (2, 3, 4) and v.param("stages").default == 2
    code = m.render(v, {**v.defaults(), "stages": 3}, task)
    assert "constexpr int STAGES = 3," in code and "cp.async.wait_group 2;" in code
    assert "if (tile + STAGES - 1 < ntiles) load_tile(tile + STAGES - 1" in code
    double, triple = _launches(m, v, task, "stages", (2, 3))
    assert triple.smem_bytes > double.smem_bytes and triple.bytes_per_access == 2 * double.bytes_per_access


@pytest.mark.parametrize("tag", ["mma_lop3_dequant", "cp_async_pipeline", "split_k_small_m"])
def test_int4_k_depth_up_to_a_group(tag):
    m, task = _task("gemm_int4_cuda", gpu="H200", shape={"M": 1024, "N": 14336, "K": 4096})
    v = m.variant(tag)
    assert v.param("BK").values == (32, 64, 128) and v.param("BK").default == 64
    code = m.render(v, {**v.defaults(), "BK": 128}, task)
    assert "#define BK 128                   // K per tile: one group, so one scale per column per tile" in code
    assert "272-byte stride" in code
    shallow, mid, deep = _launches(m, v, task, "BK", (32, 64, 128))
    assert shallow.smem_bytes < mid.smem_bytes < deep.smem_bytes
    assert shallow.compute_scale < mid.compute_scale < deep.compute_scale


def test_int4_split_k_takes_16_splits():
    m, task = _task("gemm_int4_cuda", gpu="H200", shape={"M": 1, "N": 4096, "K": 4096})
    v = m.variant("split_k_small_m")
    assert 16 in v.param("SPLITS").values and "#define SPLITS 16" in m.render(v, {**v.defaults(), "SPLITS": 16}, task)
    eight, sixteen = _launches(m, v, task, "SPLITS", (8, 16))
    # twice the blocks over K, twice the fp32 partials the combine reads
    assert sixteen.grid == 2 * eight.grid and sixteen.traffic > eight.traffic


@pytest.mark.parametrize("tag", ["mma_sync", "cp_async_pipeline"])
def test_conv_k_slice_of_a_filter_tap(tag):
    m, task = _task("conv2d_nhwc_cuda", dtype="fp16")
    v = m.variant(tag)
    assert v.param("BK").values == (16, 32, 64) and v.param("BK").default == 32
    assert "#define BK 64                        // GEMM-K slice: 64 channels of one filter tap" in \
        m.render(v, {**v.defaults(), "BK": 64}, task)
    shallow, mid, deep = _launches(m, v, task, "BK", (16, 32, 64))
    assert shallow.smem_bytes < mid.smem_bytes < deep.smem_bytes
    assert shallow.compute_scale < mid.compute_scale < deep.compute_scale


def test_fp4_register_dequant_ring_takes_six_stages():
    m, task = _task("gemm_fp4_cuda", dtype="bf16", shape={"M": 16, "N": 7168, "K": 2048, "G": 32})
    ring, native = m.variant("cp_async_dequant"), m.variant("mxf4nvf4_block_scaled")
    assert ring.param("stages").values == (2, 3, 4, 5, 6) and ring.param("stages").default == 3
    assert native.param("stages").values == (2, 3, 4)
    assert "#define STAGES 6" in m.render(ring, {**ring.defaults(), "stages": 6}, task)
    four, six = _launches(m, ring, task, "stages", (4, 6))
    assert six.smem_bytes == 6 * four.smem_bytes // 4 and six.bytes_per_access > four.bytes_per_access


def test_thin_tiles_fill_short_grids():
    """32-wide tiles: more blocks where the big tile leaves SMs idle (a 56 x 56 image of one batch,
    16 tokens of FP4 GEMM), fewer accumulators a thread."""
    m, task = _task("conv2d_nhwc_cuda", dtype="fp16", shape=REGISTRY["conv2d_nhwc_cuda"].shapes[0])
    v = m.variant("cp_async_pipeline")
    assert v.param("BM").values == (32, 64, 128) and v.param("BN").values == (32, 64, 128)
    assert "#define BM 32" in m.render(v, {**v.defaults(), "BM": 32}, task)
    thin, wide = _launches(m, v, task, "BM", (32, 128))
    assert thin.grid > 3 * wide.grid and thin.regs < wide.regs        # 3136 pixels: 98 blocks, not 25
    assert simulate(m, v, {**v.defaults(), "BM": 32}, task).time_ms < simulate(m, v, v.defaults(), task).time_ms
    m, task = _task("gemm_fp4_cuda", dtype="bf16", shape={"M": 16, "N": 7168, "K": 2048, "G": 32})
    ring = m.variant("cp_async_dequant")
    assert ring.param("BN").values == (32, 64, 128) and m.variant("mxf4nvf4_block_scaled").param("BN").values == (64, 128)
    narrow, default = _launches(m, ring, task, "BN", (32, 128))
    assert narrow.grid == 4 * default.grid and narrow.regs < default.regs
    m, task = _task("grouped_gemm_cuda")
    assert m.variant("cp_async_pipeline").param("BM").values == (32, 64, 128)
    m, task = _task("flash_prefill_cuda", dtype="fp16")
    v = m.variant("cp_async_pipeline")
    assert v.param("BLOCK_M").values == (32, 64, 128)
    assert m.launch(v, {**v.defaults(), "BLOCK_M": 32}, task).threads == 64
