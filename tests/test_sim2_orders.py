"""Launch models of sim2's modules (issue 30) against the compiled code and an H100's timings: the loads a thread
keeps in flight as nvcc 13 compiles the loops (sm_90a SASS), the two-stage reduction's finish, the rows a sorted
embedding-backward segment holds. Device rows: measurements/h100_sim2_fit.json (scripts/sim2_device_check.py)."""
import pytest

from kernelstrain import knobs
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task


def _launch(module, tag, dtype, shape, gpu="H100", **params):
    m = REGISTRY[module]
    v = m.variant(tag)
    return knobs.launch(m, v, {**v.defaults(), **params}, make_task(m, gpu, dtype, shape))


def _us(module, tag, dtype, shape, gpu="H100", **params):
    m = REGISTRY[module]
    v = m.variant(tag)
    return simulate(m, v, {**v.defaults(), **params}, make_task(m, gpu, dtype, shape)).time_ms * 1e3


N16M = {"N": 16777216}


def test_reduction_loads_in_flight_as_compiled():
    """SASS of the grid-stride loops: fp32 unrolled 4x (four LDG.128 ahead), bf16 not unrolled (one), the
    two-stage trip two at either dtype; bytes_per_access is that over the model's two loads in flight."""
    vec = {d: _launch("reduction_cuda", "vectorized_grid_stride", d, N16M).bytes_per_access for d in ("fp32", "bf16")}
    two = {d: _launch("reduction_cuda", "persistent_two_stage", d, N16M).bytes_per_access for d in ("fp32", "bf16")}
    assert vec["fp32"] == 2 * two["fp32"] and two["bf16"] == 2 * vec["bf16"] and two["fp32"] == two["bf16"]


def test_reduction_short_fp32_grid_prefers_the_unrolled_loop():
    """H100, N=16M fp32, 256 threads x 1 block an SM: grid-stride 28.4 us, two-stage 38.7 (the model had 51.9
    and 31.4: the two-stage loop's four vectors a thread against two)."""
    vec = _us("reduction_cuda", "vectorized_grid_stride", "fp32", N16M, threads=256, blocks_per_sm=1)
    two = _us("reduction_cuda", "persistent_two_stage", "fp32", N16M, threads=256, blocks_per_sm=1)
    assert 1.1 <= two / vec <= 1.7


def test_two_stage_finish_does_not_grow_with_the_grid():
    """H100, N=1M bf16: 128-512 blocks ran 5.4-5.7 us with no trend in the grid; the finish is the last block's
    chain of L2 round trips, not a queue of the blocks' tickets."""
    small = _launch("reduction_cuda", "persistent_two_stage", "bf16", {"N": 1048576}, threads=1024, blocks_per_sm=8)
    large = _launch("reduction_cuda", "persistent_two_stage", "bf16", {"N": 1048576}, threads=256, blocks_per_sm=4)
    assert small.grid * 4 == large.grid and small.serial_atomics == large.serial_atomics > 0


@pytest.mark.parametrize("shape", [{"M": 1, "N": 4096, "K": 14336}, {"M": 4, "N": 6144, "K": 4096}])
def test_gemv_rows_keep_max_two_r_loads_in_flight(shape):
    """SASS: a one-row warp issues two W vectors before their first use, a two-row warp two (its second row's
    guarded load waits behind the FMAs), a four-row warp four: per lane max(2, R), not 2 x R."""
    one = _launch("gemv_cuda", "multi_row_warp", "bf16", shape, rows_per_warp=1).bytes_per_access
    two = _launch("gemv_cuda", "multi_row_warp", "bf16", shape, rows_per_warp=2).bytes_per_access
    four = _launch("gemv_cuda", "multi_row_warp", "bf16", shape, rows_per_warp=4).bytes_per_access
    vec = _launch("gemv_cuda", "vectorized_uint4", "bf16", shape).bytes_per_access
    assert one == two == vec and four == 2 * two


def test_gemv_two_rows_a_warp_trail_one_at_one_token():
    """H100, M=1 N=4096 K=14336: one row a warp 41.4 us, two rows 51.4-51.6 (the model had two rows ahead)."""
    shape = {"M": 1, "N": 4096, "K": 14336}
    one = _us("gemv_cuda", "multi_row_warp", "bf16", shape, rows_per_warp=1, warps=4)
    two = _us("gemv_cuda", "multi_row_warp", "bf16", shape, rows_per_warp=2, warps=4)
    assert two >= 0.97 * one


def test_embedding_bwd_unroll_needs_segments_to_unroll():
    """T=8192 V=128256: a touched row sums ~1.03 grad rows, so UNROLL 1 and 4 keep the same loads in flight and
    ptxas gives both 32 registers; the H100 timed them within 0.5% (169.7-170.7 us at 4-8 warps)."""
    shape = {"T": 8192, "D": 8192, "V": 128256}
    u1, u4 = (_launch("embedding_bwd_cuda", "sorted_segment_vectorized", "bf16", shape, unroll=u) for u in (1, 4))
    assert (u1.regs, u1.grid) == (u4.regs, u4.grid) and u4.bytes_per_access <= 1.05 * u1.bytes_per_access
    long = _launch("embedding_bwd_cuda", "sorted_segment_vectorized", "bf16", {"T": 32768, "D": 2048, "V": 32000},
                   unroll=4)
    assert long.bytes_per_access > u4.bytes_per_access       # 1.5 rows a segment: some unrolled trips


@pytest.mark.parametrize("tag, params, rounds", [
    ("vectorized_multi_row", {"tile": 64, "block_rows": 4}, 4), ("vectorized_multi_row", {"tile": 64, "block_rows": 8}, 2),
    ("vectorized_multi_row", {"tile": 32, "block_rows": 8}, 1), ("padded_tile", {"block_rows": 8}, 1),
    ("smem_tile", {"block_rows": 8}, 1)])
def test_transpose_tile_loads_wait_in_rounds_of_four(tag, params, rounds):
    """SASS: the tile load loop is unrolled 4x whatever BLOCK_ROWS, so a block waits cdiv(TILE / BLOCK_ROWS, 4) round
    trips before its barrier; one wave of 64-tiles at R = C = 1024 ran 5.0 us at BLOCK_ROWS 8 and 6.2 at 4 (H100)."""
    assert _launch("transpose_cuda", tag, "bf16", {"R": 1024, "C": 1024}, **params).rounds == rounds


def test_transpose_one_wave_pays_its_rounds():
    shape = {"R": 1024, "C": 1024}
    slow, fast = (_us("transpose_cuda", "vectorized_multi_row", "bf16", shape, tile=64, block_rows=b) for b in (4, 8))
    assert 1.1 <= slow / fast <= 1.45              # measured 6.2 / 5.0 = 1.24


def test_reduction_pragma_adds_loads_only_where_hoisted():
    """SASS: #pragma unroll 4 on the bf16 grid-stride loop and on the two-stage loop leaves an exit branch between the
    copies, each copy's loads after the previous copy's adds; the fp32 grid-stride loop's copies issue together.
    H100 bf16 N=268M (256 threads x 1 block an SM): grid-stride 439.9 -> 432.6 us at pragma 4, two-stage 278.4 ->
    279.2; fp32 N=67M: the compiler's own 4 103.6 us, pragma 2 137.6."""
    shape = {"N": 268435456}
    for tag in ("vectorized_grid_stride", "persistent_two_stage"):
        own, prag = (_launch("reduction_cuda", tag, "bf16", shape, threads=256, blocks_per_sm=1, pragma_unroll=u)
                     for u in (0, 4))
        assert own.bytes_per_access == prag.bytes_per_access
    fp32 = {u: _launch("reduction_cuda", "vectorized_grid_stride", "fp32", {"N": 67108864}, threads=256,
                       blocks_per_sm=1, pragma_unroll=u).bytes_per_access for u in (0, 2)}
    assert fp32[2] * 2 == fp32[0]
