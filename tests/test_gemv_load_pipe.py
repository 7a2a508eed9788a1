"""gemv_cuda's warp rungs (ops/matmul/_gemv_launch.py): the load pipe's x loads and DRAM's W stream run side by
side, so the slower binds. At one row of x the scalar rung is a W stream a little slower than the uint4 one; at
eight rows its 2-byte x loads bind the pipe."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task


def _us(gpu, dtype, shape, tag, **params):
    m = REGISTRY["gemv_cuda"]
    v = m.variant(tag)
    return simulate(m, v, {**v.defaults(), **params}, make_task(m, gpu, dtype, shape)).time_ms * 1e3


# warp_per_row over vectorized_uint4 at M=1 as gpu-check timed them (us): the H100's fresh seeds 96969 / 97979
# (measurements/h100_gpucheck_s96969.json: 48.2 / 46.7 vs 40.6, and 53.0 vs 41.4), and the H200 (s9191 / s50505:
# 39.8 and 38.3 at warps 4); the sum of pipe and DRAM had modelled 1.87x / 2.17x / 1.3-1.6x
@pytest.mark.parametrize("gpu, dtype, shape, measured", [
    ("H100", "fp16", {"M": 1, "N": 14336, "K": 4096}, 48.2 / 40.6),
    ("H100", "bf16", {"M": 1, "N": 4096, "K": 14336}, 53.0 / 41.4),
])
def test_one_row_of_x_hides_under_the_w_stream(gpu, dtype, shape, measured):
    ratio = _us(gpu, dtype, shape, "warp_per_row", warps=2) / _us(gpu, dtype, shape, "vectorized_uint4", warps=2)
    assert 1.0 <= ratio <= 1.35 and abs(ratio - measured) <= 0.25


def test_eight_rows_of_x_bind_the_load_pipe():
    """M=8 N=K=8192 on the H200 (gpu-check s5151-s6868): warp_per_row 460-490 us, 11x its DRAM time."""
    shape = {"M": 8, "N": 8192, "K": 8192}
    scalar, vec = (_us("H200", "bf16", shape, tag, warps=4) for tag in ("warp_per_row", "vectorized_uint4"))
    assert scalar > 2 * vec and 380 <= scalar <= 580
