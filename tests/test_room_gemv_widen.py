"""gemv_cuda's widened ranges (issue 26 item 2): 16 warps (512-thread blocks) and 8 rows of W a warp (eight
independent 16-byte loads a lane in flight). The values are in the code; where ptxas must fit 8 rows x 8 tokens
of accumulators under __launch_bounds__(512)'s 128 registers (nvcc 13 sm_90a: 128 registers, 344 bytes of spill
stores; 8 warps: 177 registers, no spill) the model spills too."""
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

M = REGISTRY["gemv_cuda"]


def _time(tag, shape, **params):
    v = M.variant(tag)
    return simulate(M, v, {**v.defaults(), **params}, make_task(M, "H100", "fp16", shape)).time_ms


def test_the_new_values_are_in_the_code():
    v = M.variant("multi_row_warp")
    assert 16 in v.param("warps").values and 8 in v.param("rows_per_warp").values
    task = make_task(M, "H100", "fp16", M.check_shape)
    code = M.render(v, {**v.defaults(), "warps": 16, "rows_per_warp": 8}, task)
    assert "#define WARPS 16" in code and "#define ROWS 8" in code


def test_eight_rows_of_eight_tokens_spill_on_sixteen_warps():
    shape = {"M": 8, "N": 8192, "K": 8192}
    spilled = _time("multi_row_warp", shape, warps=16, rows_per_warp=8)
    assert spilled > 1.5 * _time("multi_row_warp", shape, warps=8, rows_per_warp=8)
    assert spilled > 1.5 * _time("multi_row_warp", shape, warps=16, rows_per_warp=4)


def test_one_token_gains_little_from_either():
    # one token: a lane holds 8 W chunks and 8 accumulators (ptxas 40-62 registers), DRAM-bound at any depth here
    shape = {"M": 1, "N": 14336, "K": 4096}
    base = _time("multi_row_warp", shape, warps=8, rows_per_warp=2)
    for w, r in ((16, 2), (8, 8), (16, 8)):
        assert 0.85 < _time("multi_row_warp", shape, warps=w, rows_per_warp=r) / base < 1.15
