"""gemm_int8_cuda's split-K rung (issue 26 item 2: the rung the op has in the literature): decode-shaped int8
GEMMs have fewer M x N tiles than SMs, so the cp.async mma.sync ring runs over a share of K per CTA and a
reduce kernel sums the exact int32 partial slices and dequantizes once."""
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate, writable
from kernelstrain.tasks import make_task, param_grid

DECODE = {"M": 16, "N": 8192, "K": 8192}


def _best(m, v, task):
    runs = [(simulate(m, v, p, task), p) for p in param_grid(v) if writable(m, v, p, task)]
    return min((r.time_ms, p) for r, p in runs if r.ok)[0]


def test_split_rung_writes_int32_partials_and_a_reduce():
    m = REGISTRY["gemm_int8_cuda"]
    v = m.variant("cp_async_split_k")
    assert m.variants[-1] is v                                              # appended: the older rungs keep their order
    task = make_task(m, "H100", "int8", DECODE)
    code = m.render(v, v.defaults(), task)
    assert "#define SPLITS 4" in code and "KT0 = blockIdx.z * KT_PER" in code
    assert "make_int2(v0, v1);   // this split's exact int32 partial" in code
    assert "gemm_int8_reduce<<<" in code and "cudaMallocAsync((void**)&ws, SPLITS * MN * sizeof(int), stream);" in code
    assert "for (int s = 0; s < SPLITS - 1; ++s)" in m.render(v, v.defaults(), task, "bad_combine_index")
    two, eight = (m.launch(v, {**v.defaults(), "SPLITS": s}, task) for s in (2, 8))
    assert eight.grid == 4 * two.grid and eight.traffic > two.traffic and eight.launches == two.launches == 2


def test_split_wins_where_the_tiles_are_fewer_than_the_sms():
    m = REGISTRY["gemm_int8_cuda"]
    split, ring = m.variant("cp_async_split_k"), m.variant("cp_async_pipeline")
    for gpu in ("A100", "H100"):
        task = make_task(m, gpu, "int8", DECODE)
        assert _best(m, split, task) < _best(m, ring, task)
