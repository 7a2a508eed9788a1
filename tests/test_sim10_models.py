"""Launch-model and fit fixes of issue 30, tenth session (helper sim), against the stored device rows they rest on
(measurements/h100_sim_w2.json, h100_sim_j1.json, h100_sim_j2.json; never the held-out gpu-check seeds)."""
import pytest

from kernelstrain.calibration import FIT
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import compute_ceiling, modelled_launch
from kernelstrain.tasks import make_task

from test_sim31_models import sim_us

SQUARE = {"M": 4096, "N": 4096, "K": 4096}


@pytest.mark.parametrize("bm,bn,measured_2,measured_4", [(64, 64, 526.6, 533.5), (64, 128, 397.3, 387.6),
                                                         (128, 64, 409.1, 403.7)])
def test_two_warp_mma_sync_is_a_ceiling_where_the_tile_is_compute_bound(bm, bn, measured_2, measured_4):
    """Triton builds a 2-warp tl.dot of 64+ rows with mma.sync (half wgmma's rate): the H100 ran gemm_fp16_triton
    pipelined_stages at 4096^3 on 2 warps level with 4 (sim j2), the fastest at 346 TFLOP/s, under the ceiling's 361
    (0.73 of the peak at half the rate); a factor of 0.5 on the compute term had timed 2 warps 1.3-1.8x slower."""
    params = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 32, "num_stages": 3}
    two = sim_us("gemm_fp16_triton", "pipelined_stages", {**params, "num_warps": 2}, SQUARE, "bf16")
    four = sim_us("gemm_fp16_triton", "pipelined_stages", {**params, "num_warps": 4}, SQUARE, "bf16")
    assert 0.8 <= (two / four) / (measured_2 / measured_4) <= 1.25, (two, four)
    ceiling_us = 2 * 4096 ** 3 / (989e12 * FIT.compute_cap["fp16"] * 0.5) * 1e6
    assert two >= ceiling_us * 0.99


def test_padded_rows_of_a_two_warp_tile_hide_under_the_weights_stream():
    """gemm_splitk_triton split_k_reduce 64 x 64 x 64 at M=16 N=4096 K=14336: 48 of the 64 tile rows are padding,
    and the launch is bound by streaming B (117 MB); the H100 ran 2 warps 0.95x of 4 (60.9 / 64.1 us, sim w2), the
    mma.sync factor had 1.39x. The ceiling over the padded work: 0.73 x 0.5 x a quarter of the rows' use."""
    m = REGISTRY["gemm_splitk_triton"]
    v = m.variant("split_k_reduce")
    shape = {"M": 16, "N": 4096, "K": 14336}
    params = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}
    two = sim_us(m.name, v.tag, {**params, "num_warps": 2}, shape, "fp16")
    four = sim_us(m.name, v.tag, {**params, "num_warps": 4}, shape, "fp16")
    assert 0.85 <= two / four <= 1.15
    launch = modelled_launch(m, v, {**v.defaults(), **params, "num_warps": 2}, make_task(m, "H100", "fp16", shape))
    assert launch.mma_rate == 0.5 and compute_ceiling(0.73, launch) == pytest.approx(0.73 * 0.5 * 0.25)


def test_gemm_fp16_triton_is_refitted_without_a_size_term():
    """The size exponent (pipelined_stages -0.66 a doubling of work, set by the floor-bound rows) timed 2048^3 1.6x
    slow and 4096^3 0.6x fast; the module refit (floor-bound rows as bounds) has none."""
    assert "gemm_fp16_triton" not in FIT.size_exponents
    assert "gemm_fp16_triton" not in FIT.size_ref_ms


# (shape, rung, params, measured us): stored H100 rows of sim j1 / j2 across the sizes (bf16, 128 x 128 tiles, 4 warps)
SIZES = [({"M": 1024, "N": 1024, "K": 1024}, "pipelined_stages", {"BLOCK_K": 64}, 13.0),
         ({"M": 2048, "N": 2048, "K": 2048}, "pipelined_stages", {"BLOCK_K": 32}, 39.6),
         ({"M": 4096, "N": 4096, "K": 4096}, "pipelined_stages", {"BLOCK_K": 32}, 285.4),
         ({"M": 8192, "N": 8192, "K": 8192}, "pipelined_stages", {"BLOCK_K": 32}, 2223.1),
         ({"M": 4096, "N": 14336, "K": 4096}, "pipelined_stages", {"BLOCK_K": 64}, 914.2)]


@pytest.mark.parametrize("shape,rung,params,measured", SIZES)
def test_pipelined_stages_follows_the_h100_from_1024_to_8192(shape, rung, params, measured):
    t = sim_us("gemm_fp16_triton", rung, params, shape, "bf16")
    assert 0.7 <= t / measured <= 1.45, t
