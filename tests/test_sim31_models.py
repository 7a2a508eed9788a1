"""Launch-model fixes of issue 30's fresh seeds 96161 / 96262 (sim, 2026-12-06): each against the H100 rows it was
fitted on, so that a change back fails here (docs/calibration_sim31_h100.md)."""
import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task


def sim_us(module, rung, params, shape, dtype, gpu="H100"):
    m = REGISTRY[module]
    v = m.variant(rung)
    r = simulate(m, v, {**v.defaults(), **params}, make_task(m, gpu, dtype, shape))
    assert r.ok
    return r.time_ms * 1e3


def test_softmax_block_merge_every_thread_issues():
    """vectorized_online on 1,024 threads a row: every thread merges the 32 warps' partials (_softmax_rows.
    MERGE_LANE_SLOTS); H100 R=16384 C=1024 bf16, 4 x unrolled, min_blocks 1: 464.8 us (seed 96161), modelled 83.8
    before the merge's issue was counted."""
    t = sim_us("softmax_cuda", "vectorized_online", {"threads": 1024, "rows_per_block": 1, "pragma_unroll": 4,
                                                     "min_blocks": 1}, {"R": 16384, "C": 1024}, "bf16")
    assert 0.8 <= t / 464.8 <= 1.25
    # a 128-thread row merges 4 warps' partials: far cheaper than the 1,024-thread one
    t128 = sim_us("softmax_cuda", "vectorized_online", {"threads": 128, "rows_per_block": 1},
                  {"R": 16384, "C": 1024}, "bf16")
    assert t128 < t / 4
