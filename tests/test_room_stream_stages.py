"""Room on the Triton rungs that stream a row in BLOCK-wide chunks (issue 26 item 2): the loop's own
num_stages (ops/stream_stages.py, `tl.range(..., num_stages=N)`) stages the next trips' loads through
shared memory with cp.async. Each value is written on every streaming loop of the kernel (1: the loop
as before), the launch model's shared memory is Triton 3.9's metadata.shared (sm_90), and the depth
pays where a program per row leaves the grid short of DRAM's bandwidth-latency product (a few rows),
not where the rows already fill the GPU."""
import re

import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

# (module, rung, a short grid: few long rows, a full grid: thousands of rows)
RUNGS = [
    ("rmsnorm_triton", "chunked_two_pass", {"T": 64, "D": 4096}, {"T": 4096, "D": 4096}),
    ("layernorm_triton", "chunked_three_pass", {"T": 64, "D": 4096}, {"T": 4096, "D": 4096}),
    ("layernorm_triton", "welford_chunked", {"T": 64, "D": 4096}, {"T": 4096, "D": 4096}),
    ("add_rmsnorm_triton", "two_kernels", {"T": 64, "D": 4096}, {"T": 4096, "D": 4096}),
    ("softmax_triton", "chunked_three_pass", {"R": 32, "C": 128256}, {"R": 4096, "C": 32000}),
    ("softmax_triton", "online_softmax", {"R": 32, "C": 128256}, {"R": 4096, "C": 32000}),
    ("swiglu_fwd_triton", "row_program", {"T": 32, "I": 11008}, {"T": 4096, "I": 11008}),
    ("fp8_quant_triton", "fused_row_loop", {"T": 32, "D": 8192}, {"T": 4096, "D": 4096}),
    ("min_p_triton", "fused_row", {"B": 64, "V": 128256}, {"B": 1024, "V": 128256}),
]
LOOP = re.compile(r"for \w+ in (?:tl\.)?range\(([^()\n]*)\):")


@pytest.mark.parametrize("name,tag,short,full", RUNGS)
def test_every_streaming_loop_names_its_depth_and_one_stage_is_the_plain_loop(name, tag, short, full):
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, "H100", m.dtypes[-1], short)
    stages = v.param("num_stages")
    assert stages.values == (1, 2, 3, 4) and stages.default == 1
    one = m.render(v, v.defaults(), task)
    assert "num_stages=" not in one.split("def ", 2)[1]
    for n in (2, 4):
        code = m.render(v, {**v.defaults(), "num_stages": n}, task)
        streaming = [a for a in LOOP.findall(code) if re.search(r",\s*BLOCK\w*", a)]
        assert streaming and all(a.endswith(f"num_stages={n}") for a in streaming)
        assert re.sub(r"(?:, )?num_stages=\d", "", code).replace("tl.range(0, I, BLOCK)", "range(0, I, BLOCK)") \
            .replace("tl.range(", "range(") == one.replace("tl.range(", "range(")
        for bug in v.bugs:
            assert m.render(v, {**v.defaults(), "num_stages": n}, task, bug) != code


# Triton 3.9 metadata.shared (sm_90, bf16, 4 warps, D / C divisible by 16): (num_stages - 1) x the loads of one
# trip of the loop that loads the most (x and w; layernorm x, w and b), x loop_unroll_factor; the reduction
# scratch shares those buffers
FIGURES = {  # (module, rung, BLOCK, loop_unroll, num_stages): bytes
    ("rmsnorm_triton", "chunked_two_pass", 1024, 0, 1): 16, ("rmsnorm_triton", "chunked_two_pass", 1024, 0, 2): 4096,
    ("rmsnorm_triton", "chunked_two_pass", 1024, 2, 2): 8192, ("rmsnorm_triton", "chunked_two_pass", 1024, 0, 4): 12288,
    ("rmsnorm_triton", "chunked_two_pass", 1024, 2, 4): 24576,
    ("layernorm_triton", "welford_chunked", 1024, 0, 2): 6144, ("layernorm_triton", "welford_chunked", 1024, 2, 4): 36864,
    ("softmax_triton", "online_softmax", 1024, 0, 2): 2048, ("swiglu_fwd_triton", "row_program", 1024, 0, 4): 12288,
}
# min_p fused_row (fp32, 8 warps): its three loops live in helper functions; the tl.cumsum's scratch stays beside
# the buffers (Triton: 4128 and 49280 B at BLOCK 1024, 2 stages and 4096, 4 stages; the model's scratch is 8 B a
# warp where Triton's is 32-128 B)
MIN_P = {(1024, 2): 4160, (4096, 4): 49216}


@pytest.mark.parametrize("key,smem", FIGURES.items())
def test_shared_memory_is_tritons(key, smem):
    name, tag, block, unroll, stages = key
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, "H100", "bf16", RUNGS[[r[:2] for r in RUNGS].index((name, tag))][2])
    p = {**v.defaults(), "BLOCK": block, "num_warps": 4, "num_stages": stages}
    if "loop_unroll" in p:
        p["loop_unroll"] = unroll
    assert m.launch(v, p, task).smem_bytes == smem


@pytest.mark.parametrize("name,tag,short,full", RUNGS)
def test_depth_pays_on_a_short_grid_only(name, tag, short, full):
    m = REGISTRY[name]
    v = m.variant(tag)
    for gpu in ("H100", "H200"):
        few, many = (make_task(m, gpu, m.dtypes[-1], s) for s in (short, full))
        t = [simulate(m, v, {**v.defaults(), "num_stages": n}, few).time_ms for n in (1, 2, 3, 4)]
        # the H100 (stream_stages.TRIPS_IN_FLIGHT): 2 stages lose to the plain loop, 3 and 4 gain on a short grid
        assert t[1] > t[0] > t[2] >= t[3] and t[0] > 1.1 * t[3]
        big = [simulate(m, v, {**v.defaults(), "num_stages": n}, many).time_ms for n in (1, 2, 3, 4)]
        assert max(big) / min(big) < 1.01                        # the rows already cover DRAM's latency


def test_the_copies_ahead_stop_at_the_loops_end():
    """A row of one trip has nothing to stage: the loop is as fast at every depth and declares no buffers."""
    m = REGISTRY["rmsnorm_triton"]
    v = m.variant("chunked_two_pass")
    task = make_task(m, "H100", "bf16", {"T": 64, "D": 4096})
    p = {**v.defaults(), "BLOCK": 2048, "loop_unroll": 2}          # 4096 / (2048 x 2): one unrolled trip
    launches = [m.launch(v, {**p, "num_stages": n}, task) for n in (1, 4)]
    assert launches[0] == launches[1]


def test_stages_compile_to_the_modelled_buffers():
    """Triton stages the loop at 3 stages and not at 1 (sm_90): its metadata.shared is the model's."""
    pytest.importorskip("triton")
    from kernelstrain.compilers import compile_triton
    m = REGISTRY["rmsnorm_triton"]
    v = m.variant("chunked_two_pass")
    task = make_task(m, "H100", "bf16", {"T": 64, "D": 4096})
    for n, smem in ((1, 16), (3, 8192)):
        p = {**v.defaults(), "num_stages": n}
        r = compile_triton(m.render(v, p, task), m.compile_specs(v, p, task), task.gpu.arch)
        assert r.ok and r.smem_bytes == smem == m.launch(v, p, task).smem_bytes


@pytest.mark.parametrize("key,smem", MIN_P.items())
def test_min_p_keeps_its_scan_scratch_beside_the_buffers(key, smem):
    block, stages = key
    m = REGISTRY["min_p_triton"]
    v = m.variant("fused_row")
    task = make_task(m, "H100", "fp32", {"B": 64, "V": 128256})
    assert m.launch(v, {"BLOCK": block, "num_warps": 8, "num_stages": stages}, task).smem_bytes == smem


def test_rows_triton_cannot_vectorize_stay_unstaged():
    """D = 4100 (not a 16-byte multiple): the row's loads are one element wide, which cp.async cannot copy, so
    the depth buys no bytes in flight; Triton 3.9's metadata.shared stays 2048 B at 2 and 3 stages (no buffer
    that grows with the depth: a layout scratch the model does not hold, far under any cap)."""
    m = REGISTRY["rmsnorm_triton"]
    v = m.variant("chunked_two_pass")
    task = make_task(m, "H100", "bf16", {"T": 64, "D": 4100})
    launches = [m.launch(v, {**v.defaults(), "num_stages": n}, task) for n in (1, 2, 3)]
    assert launches[0] == launches[1] == launches[2]
    pytest.importorskip("triton")
    from kernelstrain.compilers import compile_triton
    figures = set()
    for n in (2, 3):
        p = {**v.defaults(), "num_stages": n}
        r = compile_triton(m.render(v, p, task), m.compile_specs(v, p, task), task.gpu.arch)
        assert r.ok
        figures.add(r.smem_bytes)
    assert len(figures) == 1


def test_a_thread_share_under_cp_async_minimum_stays_unstaged():
    """softmax_triton chunked_three_pass, BLOCK 512 on 16 warps (bf16): one 2-byte value a thread a trip, under
    cp.async's 4-byte minimum: Triton 3.9's sm_90a SASS has 21 LDG.U16 and no LDGSTS at num_stages 3 (BLOCK 1024:
    9 LDGSTS). The H100 timed it 85.5-85.9 us at every depth 1-4 (2026-12-06); the staging credit had it
    91 / 107 / 72 / 63 us. Every depth is now the plain loop's launch; two values a thread (4 bytes) still stage."""
    m = REGISTRY["softmax_triton"]
    v = m.variant("chunked_three_pass")
    task = make_task(m, "H100", "bf16", {"R": 32, "C": 128256})
    p = {**v.defaults(), "BLOCK": 512, "num_warps": 16}
    launches = [m.launch(v, {**p, "num_stages": n}, task) for n in (1, 2, 3, 4)]
    assert all(x == launches[0] for x in launches)
    t = [simulate(m, v, {**p, "num_stages": n}, task).time_ms for n in (1, 2, 3, 4)]
    assert max(t) / min(t) < 1.01
    wide = {**p, "BLOCK": 1024}
    assert m.launch(v, {**wide, "num_stages": 3}, task).smem_bytes > m.launch(v, {**wide, "num_stages": 1}, task).smem_bytes
