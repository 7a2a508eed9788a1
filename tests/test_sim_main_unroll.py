"""The generic main_unroll knob gains what its loop allows (knobs.launch, main_loop_kind), against the H100's
seed-30303 gpu-check: a pragma on a zero-fill gains nothing, one on a loop that waits at a barrier every
iteration keeps no more loads in flight, one on a streaming loop keeps the loads-in-flight credit."""
import pytest

from kernelstrain import knobs
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task


def _with_knobs(module, dtype, shape, tag):
    m = REGISTRY[module]
    task = make_task(m, "H100", dtype, shape)
    v = m.variant(tag)
    ext = knobs.extend(v, m.impl, m.render(v, v.defaults(), task), ("min_blocks", "main_unroll"))
    return m, ext, task


def _time(m, v, task, **params):
    r = simulate(m, v, {**v.defaults(), **params}, task)
    assert r.ok
    return r.time_ms


# (rung, its parameters, measured us with main_unroll 8) at topk_cuda B=32 V=32000 K=40 fp32 on the H100
TOPK_H100 = (("cdf_pick", {"threads": 1024, "cap": 2048}, 51.98), ("warp_ballot_scan", {"threads": 1024, "cap": 2048},
             48.35), ("vectorized_float4", {"threads": 1024, "cap": 2048}, 23.98))


@pytest.mark.parametrize("tag, params, measured_us", TOPK_H100)
def test_a_pragma_on_the_histograms_zero_fill_changes_nothing(tag, params, measured_us):
    m, v, task = _with_knobs("topk_cuda", "fp32", {"B": 32, "V": 32000, "K": 40}, tag)
    code = knobs.render(m, v, {**v.defaults(), **params, "main_unroll": 8}, task)
    assert "#pragma unroll 8\n    for (int i = threadIdx.x; i < 2048; i += THREADS) hist[i] = 0u;" in code
    assert knobs.main_loop_kind(m.render(v, knobs.own(v.defaults()), task)) == "fill"
    plain, unrolled = _time(m, v, task, **params), _time(m, v, task, **params, main_unroll=8)
    assert unrolled == plain
    assert 0.8 <= unrolled * 1e3 / measured_us <= 1.25      # was 0.51-0.71 with the loads-in-flight credit


def test_a_barrier_loop_keeps_no_more_loads_in_flight():
    """fused_qkv_rope_cuda cp_async_pipeline's K-tile loop waits at __syncthreads every tile: main_unroll 8 costs
    registers and gains nothing (H100 T=4096 HID=2048 BM=128 BN=128 BK=64: 201.2 us measured; the credit put it
    at 168 us, sim/measured 0.83)."""
    m, v, task = _with_knobs("fused_qkv_rope_cuda", "fp16", {"T": 4096, "HID": 2048, "H": 16, "KVH": 16, "D": 64},
                             "cp_async_pipeline")
    assert knobs.main_loop_kind(m.render(v, knobs.own(v.defaults()), task)) == "barrier"
    params = {"BM": 128, "BN": 128, "BK": 64, "stages": 3, "warps": 8}
    base = knobs.launch(m, v, {**v.defaults(), **params}, task)
    unrolled = knobs.launch(m, v, {**v.defaults(), **params, "main_unroll": 8}, task)
    assert unrolled.regs == base.regs + 24
    assert (unrolled.bytes_per_access, unrolled.compute_scale) == (base.bytes_per_access, base.compute_scale)
    assert 0.8 <= _time(m, v, task, **params, main_unroll=8) * 1e3 / 201.18 <= 1.25


def test_a_streaming_loop_keeps_the_credit():
    m, v, task = _with_knobs("adamw_cuda", "fp32", {"N": 16777216, "T": 1}, "fused_elementwise")
    assert knobs.main_loop_kind(m.render(v, knobs.own(v.defaults()), task)) == "stream"
    base = knobs.launch(m, v, v.defaults(), task)
    unrolled = knobs.launch(m, v, {**v.defaults(), "main_unroll": 8}, task)
    assert unrolled.bytes_per_access > base.bytes_per_access and unrolled.regs == base.regs + 24
