"""selective_scan_cuda's register-scan rungs tune what Mamba's own kernel tunes (issue 26 item 2): 32-thread
blocks for short sequences, two uint4s of each input on the staged rung, and STATES state scans a pass (one
barrier pair for STATES independent scans). Each value is written into the candidate's code and modelled in
its launch; the defaults' renders are today's candidates."""
import shutil

import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task

LONG = {"B": 4, "L": 2048, "D": 1536, "N": 16}
SHORT = {"B": 16, "L": 256, "D": 2048, "N": 16}


def _rung(tag, shape=LONG):
    m = REGISTRY["selective_scan_cuda"]
    return m, m.variant(tag), make_task(m, "H100", "bf16", shape)


def test_one_state_a_pass_is_todays_kernel():
    m, v, task = _rung("vectorized_regs")
    code = m.render(v, v.defaults(), task)
    assert v.defaults()["states"] == 1
    assert "#define STATES" not in code and "__shared__ float2 warp_tot[ROWS][WPR];" in code
    assert code.count("__syncthreads();") == 2                 # the barrier pair of every state


def test_states_a_pass_share_one_barrier_pair():
    for tag in ("vectorized_regs", "smem_bc_multi_channel"):
        m, v, task = _rung(tag)
        code = m.render(v, {**v.defaults(), "states": 4}, task)
        assert "#define STATES 4" in code and "warp_tot[ROWS][STATES][WPR]" in code
        assert "n0 += STATES" in code and "warp_tot[grp][k][warp] = winc" in code
        one, four = (m.launch(v, {**v.defaults(), "states": s}, task) for s in (1, 4))
        # the pairs and C of 4 scans held at once: more registers; a quarter of the barriers and chains
        assert four.regs > one.regs + 60 and four.compute_scale > one.compute_scale
    m, v, task = _rung("smem_bc_multi_channel")
    bad = m.render(v, {**v.defaults(), "states": 2}, task, "bad_combine_index")
    assert "warp_tot[grp][k][w + 1 < WPR ? w + 1 : w]" in bad                # the bug reads the pass's next warp


def test_32_threads_scan_a_short_row_without_idle_lanes():
    m, v, task = _rung("vectorized_regs", SHORT)
    assert 32 in v.param("threads").values and 32 in m.variant("smem_bc_multi_channel").param("threads").values
    # L = 256: 32 x 8 steps is the row (Mamba's launch up to 256 steps); 64 threads scan 256 steps of padding
    assert m.launch(v, {"threads": 32, "items": 8, "states": 1}, task).lane_util == 1.0
    assert m.launch(v, {"threads": 64, "items": 8, "states": 1}, task).lane_util == 0.5
    assert "#define WPR (THREADS / WARP_SIZE)" in m.render(v, {"threads": 32, "items": 8, "states": 1}, task)


def test_next_warp_bug_only_where_a_channel_has_several_warps():
    m = REGISTRY["selective_scan_cuda"]
    for tag in ("warp_shuffle_scan", "smem_bc_multi_channel"):
        v = m.variant(tag)
        nv = make_task(m, "H100", "bf16", LONG)
        amd = make_task(m, "MI300X", "fp16", LONG)
        one = {**v.defaults(), "threads": 32}
        # one warp (WPR = 32 / 32): the 'next' warp's index w + 1 < WPR ? w + 1 : w is w, today's read
        assert "w + 1 < WPR ? w + 1 : w" in m.render(v, one, nv, "bad_combine_index")
        assert not v.breaks_at("bad_combine_index", nv, one)
        assert v.breaks_at("bad_combine_index", nv, {**one, "threads": 64})
        assert not v.breaks_at("bad_combine_index", amd, {**one, "threads": 64})      # one 64-lane wavefront
        assert v.breaks_at("bad_combine_index", amd, {**one, "threads": 128})


def test_amd_32_threads_are_half_a_wavefront():
    m = REGISTRY["selective_scan_cuda"]
    v = m.variant("vectorized_regs")
    task = make_task(m, "MI300X", "fp16", SHORT)
    p = {"threads": 32, "items": 8, "states": 1}
    code = m.render(v, p, task)
    assert "#define WPR 1" in code and "lane == THREADS - 1" in code and "lane == WARP_SIZE - 1" not in code
    assert m.launch(v, p, task).lane_util == 0.5


def test_staged_rung_takes_two_uint4s_of_each_input():
    m, v, task = _rung("smem_bc_multi_channel")
    p8, p16 = {**v.defaults(), "items": 8}, {**v.defaults(), "items": 16}
    code = m.render(v, p16, task)
    assert "#define ITEMS 16" in code and "Pack pu[ITEMS / 8]" in code
    assert "reinterpret_cast<const uint4*>(&sBC[n][tid * ITEMS])[q]" in code
    assert "Pack pu[ITEMS / 8]" not in m.render(v, p8, task)
    eight, sixteen = m.launch(v, p8, task), m.launch(v, p16, task)
    # the staged B/C chunk is twice as long; two uint4s of each input in flight
    assert sixteen.smem_bytes - 8 * 2 * 4 == 2 * (eight.smem_bytes - 8 * 2 * 4)
    assert sixteen.bytes_per_access == 2 * eight.bytes_per_access
    assert f"cudaFuncAttributeMaxDynamicSharedMemorySize, {2 * 16 * 64 * 16 * 2}" in code


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc not installed")
def test_four_states_a_pass_build_for_sm90():
    from kernelstrain.compilers import compile_cuda
    m, v, task = _rung("smem_bc_multi_channel")
    r = compile_cuda(m.render(v, {**v.defaults(), "states": 4, "items": 8}, task), task.gpu.arch, "selective_scan_kernel")
    assert r.ok, r.log
