"""selective_scan_cuda's register-scan rungs take one warp a channel (issue 26 item 2): 32 threads, Mamba's own
launch for rows up to 256 steps, on warp_shuffle_scan and smem_bc_multi_channel, where an H200
(scripts/room_device_check.py) measured it fastest; not on vectorized_regs, where it lost on long rows. The value
is written into the candidate's code, modelled in its launch in the hardware's direction, and gates the bug that
needs several warps."""
import shutil

import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

CHECK = {"B": 1, "L": 2048, "D": 1536, "N": 16}
SHORT = {"B": 16, "L": 256, "D": 2048, "N": 16}
MENU_SHORT = {"B": 64, "L": 256, "D": 2048, "N": 16}


def _sim_us(tag, params, shape, gpu="H200"):
    m = REGISTRY["selective_scan_cuda"]
    v = m.variant(tag)
    return simulate(m, v, {**v.defaults(), **params}, make_task(m, gpu, "bf16", shape)).time_ms * 1e3


def test_one_warp_a_channel_where_the_h200_measured_it_fastest():
    m = REGISTRY["selective_scan_cuda"]
    assert 32 in m.variant("warp_shuffle_scan").param("threads").values
    assert 32 in m.variant("smem_bc_multi_channel").param("threads").values
    assert 32 not in m.variant("vectorized_regs").param("threads").values        # 147 vs 69 us at B=1 L=2048
    # H200: warp_shuffle_scan L=256 32/64 threads 249/422 us; smem_bc_multi_channel 161/396 there and 87/104 at
    # the check shape: the model's order
    for shape in (SHORT, MENU_SHORT):
        assert _sim_us("warp_shuffle_scan", {"threads": 32}, shape) < 0.8 * _sim_us("warp_shuffle_scan", {"threads": 64}, shape)
    for shape in (SHORT, CHECK):
        assert _sim_us("smem_bc_multi_channel", {"threads": 32}, shape) < _sim_us("smem_bc_multi_channel", {"threads": 64}, shape)


def test_32_threads_scan_a_short_row_without_idle_lanes():
    m = REGISTRY["selective_scan_cuda"]
    v = m.variant("warp_shuffle_scan")
    task = make_task(m, "H100", "bf16", SHORT)
    # L = 256: 32 x 8 steps is the row; 64 threads scan 256 steps of padding
    assert m.launch(v, {"threads": 32, "items": 8}, task).lane_util == 1.0
    assert m.launch(v, {"threads": 64, "items": 8}, task).lane_util == 0.5
    assert "#define THREADS 32" in m.render(v, {"threads": 32, "items": 8}, task)


def test_next_warp_bug_only_where_a_channel_has_several_warps():
    m = REGISTRY["selective_scan_cuda"]
    for tag in ("warp_shuffle_scan", "smem_bc_multi_channel"):
        v = m.variant(tag)
        nv, amd = make_task(m, "H100", "bf16", CHECK), make_task(m, "MI300X", "fp16", CHECK)
        one = {**v.defaults(), "threads": 32}
        # one warp (WPR = 32 / 32): the 'next' warp's index w + 1 < WPR ? w + 1 : w is w, today's read
        assert "w + 1 < WPR ? w + 1 : w" in m.render(v, one, nv, "bad_combine_index")
        assert not v.breaks_at("bad_combine_index", nv, one)
        assert v.breaks_at("bad_combine_index", nv, {**one, "threads": 64})
        assert not v.breaks_at("bad_combine_index", amd, {**one, "threads": 64})      # one 64-lane wavefront
        assert v.breaks_at("bad_combine_index", amd, {**one, "threads": 128})


def test_amd_32_threads_are_half_a_wavefront():
    m = REGISTRY["selective_scan_cuda"]
    v = m.variant("warp_shuffle_scan")
    task = make_task(m, "MI300X", "fp16", SHORT)
    code = m.render(v, {"threads": 32, "items": 8}, task)
    assert "#define WPR 1" in code and "lane == THREADS - 1" in code and "lane == WARP_SIZE - 1" not in code
    assert m.launch(v, {"threads": 32, "items": 8}, task).lane_util == 0.5
    assert "#define WPR (THREADS / WARP_SIZE)" in m.render(v, {"threads": 32, "items": 8}, make_task(m, "H100", "bf16", SHORT))


@pytest.mark.skipif(not shutil.which("clang++-19"), reason="clang++-19 (HIP) not installed")
def test_amd_32_thread_staged_rung_builds():
    from kernelstrain.compilers import compile_hip
    m = REGISTRY["selective_scan_cuda"]
    v = m.variant("smem_bc_multi_channel")
    task = make_task(m, "MI300X", "fp16", CHECK)
    r = compile_hip(m.render(v, {**v.defaults(), "threads": 32}, task), task.gpu.arch, "selective_scan_kernel")
    assert r.ok, r.log
