"""The unroll knob of the op modules' streaming loops (kernelstrain/ops/unroll.py): written into the
code, modelled in the launch, and a no-op at its default (the calibration's records carry no value)."""
import pytest

from kernelstrain import knobs
from kernelstrain.ops import REGISTRY
from kernelstrain.ops.unroll import LOOP_UNROLL, NAMES, PRAGMA_UNROLL
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

KNOB_RUNGS = [(name, v.tag, p.name) for name, m in sorted(REGISTRY.items()) for v in m.variants
              for p in v.params if p.name in NAMES]


def _task(m, gpu="H100"):
    return make_task(m, gpu, m.dtypes[0], m.shapes[0])


def test_some_rungs_have_the_knob():
    assert len({name for name, _, _ in KNOB_RUNGS}) >= 10


@pytest.mark.parametrize("name,tag,knob", KNOB_RUNGS)
def test_value_is_in_the_code_and_default_is_todays(name, tag, knob):
    m = REGISTRY[name]
    v, task = m.variant(tag), _task(m)
    base = v.defaults()
    today = {k: x for k, x in base.items() if k != knob}       # a candidate from before the knob
    assert m.render(v, base, task) == m.render(v, today, task)
    assert m.launch(v, base, task) == m.launch(v, today, task)
    top = v.param(knob).values[-1]
    code = m.render(v, {**base, knob: top}, task)
    written = f"#pragma unroll {top}" if knob == PRAGMA_UNROLL.name else f"loop_unroll_factor={top}"
    assert written in code and written not in m.render(v, base, task)


def _times(name, tag, gpu, dtype, shape, knob):
    m = REGISTRY[name]
    v, task = m.variant(tag), make_task(m, gpu, dtype, shape)
    out = []
    for value in v.param(knob).values:
        r = simulate(m, v, {**v.defaults(), knob: value}, task)
        out.append((r.time_ms, r.regs))
    return out


def test_cuda_unroll_helps_a_short_grid_of_long_rows():
    # 64 rows of 4096 on a 132-SM H100: too few loads in flight at nvcc's own depth of four
    times = _times("rmsnorm_cuda", "warp_shuffle", "H100", "fp16", {"T": 64, "D": 4096}, PRAGMA_UNROLL.name)
    (t0, r0), (t2, r2), (t4, r4), (t8, r8) = times                     # values 0 (nvcc's own), 2, 4, 8
    assert t8 < 0.9 * t0 and t2 > t0 and t4 == t0                     # under nvcc's 4 loses, 4 is nvcc's 4
    assert r2 == r0 == r4 < r8                                         # registers for the loads issued ahead


def test_cuda_unroll_of_a_loop_with_few_trips_costs_registers_and_buys_nothing():
    # C = 1024 over 512 threads: two trips a thread, so eight deep overlaps nothing and holds registers
    times = _times("softmax_cuda", "warp_shuffle", "H100", "fp16", {"R": 16384, "C": 1024}, PRAGMA_UNROLL.name)
    assert times[-1][0] > times[0][0] and times[-1][1] > times[0][1]


def test_cuda_unroll_under_the_compilers_own_depth_loses_loads_in_flight():
    # grad_clip's two-stage loops: nvcc unrolls them 4x on its own; a pragma of 2 keeps fewer in flight
    m = REGISTRY["grad_clip_cuda"]
    v, task = m.variant("two_stage_deterministic"), make_task(m, "H100", "bf16", {"N": 16777216})
    own, two = (knobs.launch(m, v, {**v.defaults(), PRAGMA_UNROLL.name: u}, task) for u in (0, 2))
    assert two.bytes_per_access < own.bytes_per_access and two.regs == own.regs
    assert simulate(m, v, {**v.defaults(), PRAGMA_UNROLL.name: 2}, task).time_ms > simulate(m, v, v.defaults(), task).time_ms


def test_triton_unroll_buys_what_the_compiled_loop_holds_in_flight():
    # softmax's online loop: ptxas issues each unrolled copy's load after the previous copy's exps (sm_90a SASS,
    # ops/unroll.TRITON_IN_FLIGHT), and an H100 timed R=32 C=128256 bf16 at 57.4 us rolled, 52.8 at loop_unroll 8
    # (0.92x; scripts/room_device_check_triton.py, 2026-12-06 04:33 UTC), where N times the loads had modelled 0.36x
    few = _times("softmax_triton", "online_softmax", "H100", "bf16", {"R": 32, "C": 128256}, LOOP_UNROLL.name)
    assert 0.87 <= few[-1][0] / few[0][0] <= 0.97
    assert few[-1][1] - few[0][1] <= 8            # 32 -> 40 registers (cuobjdump): no copy's load held ahead
    # cross_entropy_fwd at 16 rows: Triton 3.9's SASS issues the copies' loads ahead, but the H100 (Triton 3.6) ran
    # every unrolled value slower (online_softmax 26.4 us rolled, 34.5-36.3 unrolled; sim's device call of 07:40
    # UTC): no credit, so no gain and no registers for loads held ahead
    ce = _times("cross_entropy_fwd_triton", "online_softmax", "H100", "bf16", {"T": 16, "V": 128256}, LOOP_UNROLL.name)
    assert all(t >= 0.99 * ce[0][0] and r == ce[0][1] for t, r in ce)
    full = _times("softmax_triton", "online_softmax", "H100", "fp16", {"R": 4096, "C": 32000}, LOOP_UNROLL.name)
    assert full[-1][0] >= 0.98 * full[0][0]       # the rows cover DRAM's latency (H100 kigrid, fp32: 538.5 -> 539.3 us)


def test_generic_main_unroll_is_not_offered_beside_the_rungs_own():
    m = REGISTRY["rmsnorm_cuda"]
    task = _task(m)
    own = m.variant("warp_shuffle")
    extended = knobs.extend(own, "cuda", m.render(own, own.defaults(), task), ("min_blocks", "main_unroll"))
    names = [p.name for p in extended.params]
    assert "min_blocks" in names and "main_unroll" not in names
    plain = m.variant("row_per_thread")
    assert "main_unroll" in [p.name for p in knobs.extend(plain, "cuda", m.render(plain, plain.defaults(), task),
                                                           ("main_unroll",)).params]
