"""The literature rungs added to the memory-bound / sampling / MoE ladders (issue 26 item 2): each is
appended after the rungs it builds on, writes its technique into the code, and the simulator times
it faster than the old ladder's best only at the shapes whose bottleneck it removes (a grid smaller
than the GPU, a second DRAM read), never under the roofline floor, and slower where it costs more."""
import pytest

from kernelstrain.calibration.fit import read_measurement
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import roofline_floor_ms, simulate
from kernelstrain.tasks import make_task, param_grid

NEW = {"topk_cuda": ("split_row_two_stage",), "softmax_cuda": ("split_row_online",),
       "softmax_triton": ("split_row_online",),
"moe_scatter_cuda": ("redundant_rank_one_launch",),
       "moe_combine_cuda": ("column_split_ilp",)}


def best(m, task, tags):
    """Fastest (ms, tag) over every parameter point of the rungs `tags`."""
    return min((r.time_ms, v.tag) for v in m.variants if v.tag in tags and v.offered(task.dtype)
               for p in param_grid(v) for r in [simulate(m, v, p, task)] if r.ok)


def split(name, shape, gpu="H100", dtype=None):
    m = REGISTRY[name]
    task = make_task(m, gpu, dtype or m.dtypes[0], shape)
    old = tuple(v.tag for v in m.variants if v.tag not in NEW[name])
    return m, task, best(m, task, old), best(m, task, NEW[name])


@pytest.mark.parametrize("name", sorted(NEW))
def test_new_rungs_are_appended_and_name_their_technique(name):
    m = REGISTRY[name]
    assert tuple(v.tag for v in m.variants[-len(NEW[name]):]) == NEW[name]
    task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
    marks = {"split_row_two_stage": "topk_merge_kernel", "split_row_online": "softmax_stats_kernel",
             "redundant_rank_one_launch": "block_sum_int(before", "column_split_ilp": "COL_SPLITS"}
    for tag in NEW[name]:
        v = m.variant(tag)
        code = m.render(v, v.defaults(), task)
        assert marks[tag] in code
        for bug in v.bugs:
            assert m.render(v, v.defaults(), task, bug) != code


# Gains the simulator claims on the H100 and no card contradicts (never timed: the old rungs at these shapes are
# not in the measurements); the gains an H200 measured are asserted below.
@pytest.mark.parametrize("name, shape, gain", [
    # the whole-row rungs' spill model (refit on the H100/H200 grids) narrowed this one to a few percent, and the
    # dram term (calibration.REFERENCE_DRAM_TBS: the old rungs' 32 programs are latency-bound, as long on the H100 as
    # on the H200) to a near-tie in the model. An H100 timed it (04:33 UTC, scripts/room_device_check_triton.py):
    # split_row_online SPLITS 32 17.3 us against the old rungs' best 41.1 (online_softmax, 4 stages), a 2.4x gain.
    # The Triton loop_unroll credit that tied them is gone (ops/unroll.TRITON_IN_FLIGHT: loop_unroll 8 now 0.93x of
    # the rolled loop, 0.92x measured; tests/test_triton_unroll_depth.py holds the H100's order). What keeps the
    # gain at 1.1x in the model: the old rungs' best is online_softmax BLOCK 4096 on 16 warps at 4 stages, never
    # timed, on ops/stream_stages' staging credit, which the same run puts ahead of the hardware (4 stages on 8
    # warps 30.9 us modelled, 41.1 measured) and split_row_online SPLITS 32 modelled slower than SPLITS 8 (23.0 vs
    # 18.6 us; measured 17.3 vs 20.4): open defects of the model
    pytest.param("softmax_triton", {"R": 32, "C": 128256}, 2.0, marks=pytest.mark.xfail(
        strict=True, reason="H100: 2.4x measured; the model gives 1.1 (ops/stream_stages staging credit, SPLITS)")),
    ("moe_scatter_cuda", {"T": 64, "E": 64, "topk": 6, "K": 2048}, 2.0),   # 3 dependent launches
])
def test_a_new_rung_wins_where_it_removes_the_bottleneck(name, shape, gain):
    m, task, (old_ms, _), (new_ms, _) = split(name, shape)
    assert old_ms / new_ms >= gain
    assert new_ms > roofline_floor_ms(m, task, m.variants[-1].path)


def h200_testgrid(name, shape):
    """{rung: [(params, measured ms)]} of the H200's rows at one shape (measurements/h200_gpucheck_testgrid.json:
    every rung at its defaults and each parameter moved one step at a time)."""
    rows = read_measurement("h200_gpucheck_testgrid.json")["rows"]
    out = {}
    for r in rows:
        if r["module"] == name and r["shape"] == shape and r["label"] == "ok" and r["ok"] and r.get("time_ms"):
            out.setdefault(r["variant"], []).append((r["dtype"], r["params"], r["time_ms"]))
    return out


def gain_over(times, name):
    """Fastest time of the old rungs over the fastest of the new ones, among `times` {rung: [ms]}."""
    old = min(t for tag, ts in times.items() if tag not in NEW[name] for t in ts)
    return old / min(t for tag in NEW[name] for t in times[tag])


# The gains the H200 measured (h200_gpucheck_testgrid.json, device call of 21:47 UTC; fastest measured candidate of
# the old rungs over that of the new ones): topk B=1 vectorized_float4 18.0 us vs split_row_two_stage 20.2 (0.89x: one
# block already reads a 32000-float row near the latency floor), topk B=8 60.9 vs 25.4 (2.40x), softmax R=32 fp32
# vectorized_online 27.5 vs split_row_online 19.6 (1.41x), moe_combine T=16 vectorized_uint4 4.1 vs column_split_ilp
# 3.9 (1.06x). These tests asserted the H100 model's 2.0x, 3.0x, 1.2x and 1.1x, never measured.
@pytest.mark.parametrize("name, shape, measured", [
    ("topk_cuda", {"B": 1, "V": 32000, "K": 50}, 0.89),
    ("topk_cuda", {"B": 8, "V": 128256, "K": 50}, 2.40),
    ("softmax_cuda", {"R": 32, "C": 128256}, 1.41),
    ("moe_combine_cuda", {"T": 16, "topk": 2, "K": 4096}, 1.06),
])
def test_a_new_rungs_gain_is_the_one_the_h200_measured(name, shape, measured):
    """Over the candidates the H200 timed, the simulator's gain on the H200 is within 0.8-1.25x of the measured
    one; a gain the hardware shows (>= 1.2x) the model shows too, and where the new rung lost it claims no win."""
    m = REGISTRY[name]
    rows = h200_testgrid(name, shape)
    assert gain_over({tag: [ms for _, _, ms in rs] for tag, rs in rows.items()}, name) == pytest.approx(measured, abs=0.005)
    task = make_task(m, "H200", rows[NEW[name][0]][0][0], shape)
    sim = gain_over({tag: [simulate(m, m.variant(tag), {**m.variant(tag).defaults(), **p}, task).time_ms
                           for _, p, _ in rs] for tag, rs in rows.items()}, name)
    assert 0.8 <= sim / measured <= 1.25
    if measured >= 1.2:
        assert sim >= 1.2
    if measured < 1.0:
        assert sim < 1.1


@pytest.mark.parametrize("name, shape", [
    ("topk_cuda", {"B": 256, "V": 128256, "K": 50}),   # an H100 took 0.208 ms: the grid already fills the GPU
    ("softmax_cuda", {"R": 4096, "C": 32000}),
    ("softmax_triton", {"R": 16384, "C": 1024}),
    ("moe_scatter_cuda", {"T": 8192, "E": 128, "topk": 8, "K": 2048}),  # the recount reads n^2 ids
    ("moe_combine_cuda", {"T": 8192, "topk": 8, "K": 2048}),
])
def test_a_new_rung_does_not_win_where_its_bottleneck_is_absent(name, shape):
    """At most a few % (the timing noise of a ~10 us kernel is 6 %): a different fitted ceiling."""
    _, _, (old_ms, _), (new_ms, _) = split(name, shape)
    assert new_ms >= 0.93 * old_ms


# Default-params times an H100 (80GB HBM3) measured (scripts/gpu_check_rounds.sh with the command
# of the rungs' check: /tmp/roomD/DEVICE_CMD.txt; moe_combine T=16 and moe_scatter T=16 timed
# L2-resident, the sim assumes a flushed L2); the sim was 0.27-0.76x of them before the rungs'
# dependent phases (Launch.rounds) and split memory efficiency were modelled.
H100_MS = [
    ("topk_cuda", "split_row_two_stage", "fp32", {"B": 1, "V": 32000, "K": 50}, 0.0208),
    ("topk_cuda", "split_row_two_stage", "fp32", {"B": 8, "V": 128256, "K": 50}, 0.0290),
    ("topk_cuda", "split_row_two_stage", "fp32", {"B": 256, "V": 128256, "K": 50}, 0.2083),
    ("softmax_cuda", "split_row_online", "bf16", {"R": 32, "C": 128256}, 0.0162),
    ("softmax_cuda", "split_row_online", "bf16", {"R": 32, "C": 32000}, 0.0096),
    ("softmax_cuda", "split_row_online", "bf16", {"R": 256, "C": 151936}, 0.0939),
    ("softmax_triton", "split_row_online", "bf16", {"R": 32, "C": 128256}, 0.0204),
    ("softmax_triton", "split_row_online", "bf16", {"R": 32, "C": 32000}, 0.0087),
    ("softmax_triton", "split_row_online", "bf16", {"R": 256, "C": 151936}, 0.1092),
    ("moe_scatter_cuda", "redundant_rank_one_launch", "bf16", {"T": 64, "E": 64, "topk": 6, "K": 2048}, 0.0049),
    ("moe_scatter_cuda", "redundant_rank_one_launch", "bf16", {"T": 16, "E": 8, "topk": 2, "K": 4096}, 0.0028),
    ("moe_combine_cuda", "column_split_ilp", "bf16", {"T": 16, "topk": 2, "K": 4096}, 0.0051),
    ("moe_combine_cuda", "column_split_ilp", "bf16", {"T": 64, "topk": 6, "K": 2048}, 0.0067),
]


@pytest.mark.parametrize("name, tag, dtype, shape, measured_ms", H100_MS)
def test_a_new_rung_is_timed_near_what_an_h100_measured(name, tag, dtype, shape, measured_ms):
    """Not faster than 0.8x the measurement (the engine would see a win the hardware lacks), nor
    slower than 1.25x."""
    m = REGISTRY[name]
    v = m.variant(tag)
    r = simulate(m, v, v.defaults(), make_task(m, "H100", dtype, shape))
    assert 0.8 <= r.time_ms / measured_ms <= 1.25


@pytest.mark.parametrize("name", ["softmax_cuda", "softmax_triton"])
def test_split_row_online_declares_no_bug_that_passes_the_check(name):
    """A merged or per-lane sum started at 1 was within tolerance on an H100 (3 runs of 3): no wrong_init."""
    assert REGISTRY[name].variant("split_row_online").bugs == ("missing_scale",)
