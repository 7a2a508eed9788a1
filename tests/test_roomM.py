"""roomM's rungs (issue 26 item 2): prefix_scan_cuda's reduce-then-scan rung sits between the block-per-row scan
and decoupled look-back, writes its three passes into the code, compiles at every value with each bug, and the model
times it where the technique says and an H100 measured: ahead of a block per row when a few long rows leave the GPU
idle, behind it and the single-pass look-back when many short rows already fill it, ahead of the look-back at long
rows whose x L2 holds for the second read."""
import shutil

import pytest

from kernelstrain.compilers import compile_cuda
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import roofline_floor_ms, simulate
from kernelstrain.tasks import make_task, param_grid

SCAN = REGISTRY["prefix_scan_cuda"]


def best_ms(m, tag, task):
    v = m.variant(tag)
    return min(r.time_ms for p in param_grid(v) for r in [simulate(m, v, p, task)] if r.ok)


def test_reduce_then_scan_sits_before_the_look_back_and_writes_three_passes():
    tags = [v.tag for v in SCAN.variants]
    assert tags.index("reduce_then_scan") == tags.index("decoupled_lookback") - 1
    assert tags.index("reduce_then_scan") == tags.index("warp_shuffle_scan") + 1
    v = SCAN.variant("reduce_then_scan")
    task = make_task(SCAN, "H100", "bf16", SCAN.check_shape)
    code = SCAN.render(v, v.defaults(), task)
    for mark in ("tile_sum_kernel<<<", "tile_offsets_kernel<<<", "prefix_scan_kernel<<<", "block_sum(s"):
        assert mark in code
    for bug in v.bugs:
        assert SCAN.render(v, v.defaults(), task, bug) != code


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("shape, ahead", [({"R": 8, "C": 1048576}, True), ({"R": 1, "C": 128256}, True),
                                          ({"R": 16384, "C": 2048}, False), ({"R": 4096, "C": 4096}, False)])
def test_reduce_then_scan_wins_only_where_rows_leave_the_gpu_idle(dtype, shape, ahead):
    task = make_task(SCAN, "H100", dtype, shape)
    rts = best_ms(SCAN, "reduce_then_scan", task)
    assert (rts < best_ms(SCAN, "warp_shuffle_scan", task)) == ahead
    assert rts > roofline_floor_ms(SCAN, task, SCAN.variant("reduce_then_scan").path)
    if not ahead:       # many short rows: three launches and a second read lose to a single pass
        assert rts > best_ms(SCAN, "decoupled_lookback", task)


def test_the_h100_order_of_the_tile_rungs():
    """docs/roomM_device_h100_m1/ (H100, bf16, R=8 C=1M): reduce_then_scan's second read of a 16 MB x comes
    from L2, and its best (items 1, 24.8 us) beat the look-back's (items 4, 28.4 us); more vectors a thread ran
    slower on both (blocked()): reduce_then_scan items 1 / 2 / 4 / 8 24.8 / 28.1 / 30.6 / 40.5 us, the look-back's
    4 / 8 / 16 28.4 / 36.7 / 44.2 (a model of in-flight bytes alone had them the other way round)."""
    task = make_task(SCAN, "H100", "bf16", {"R": 8, "C": 1048576})
    rts, look = SCAN.variant("reduce_then_scan"), SCAN.variant("decoupled_lookback")
    assert best_ms(SCAN, "reduce_then_scan", task) < best_ms(SCAN, "decoupled_lookback", task)
    ms = [simulate(SCAN, rts, {"threads": 256, "items": i}, task).time_ms for i in (1, 2, 4, 8)]
    assert ms[0] <= ms[1] < ms[2] < ms[3]
    ms = [simulate(SCAN, look, {"threads": 512, "items": i}, task).time_ms for i in (4, 8, 16)]
    assert ms[0] < ms[1] < ms[2]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("params", [{"threads": 128, "items": 1}, {"threads": 512, "items": 8}])
def test_reduce_then_scan_compiles_with_its_bugs(params):
    v = SCAN.variant("reduce_then_scan")
    for dtype in SCAN.dtypes:
        task = make_task(SCAN, "H100", dtype, SCAN.check_shape)
        for bug in (None, *v.bugs):
            src = SCAN.render(v, params, task, bug) if bug else SCAN.render(v, params, task)
            r = compile_cuda(src, "sm_90a", "prefix_scan_kernel")
            assert r.ok, (dtype, params, bug, r.log[-400:])


def test_min_p_chunks_take_16384_wide_blocks_where_the_h100_ran_them_faster():
    """docs/roomM_device_h100_m1/: chunk_mass_pick on 16 warps, V=128256, BLOCK 16384 against 8192: 22.6 / 32.0 us
    at B=1, 32.3 / 43.0 at B=64 (the other rungs keep 8192 at most: fused_row ran 8192 slower than 4096)."""
    m = REGISTRY["min_p_triton"]
    v = m.variant("chunk_mass_pick")
    assert v.param("BLOCK").values[-1] == 16384 and v.defaults()["BLOCK"] == 2048
    assert m.variant("fused_row").param("BLOCK").values[-1] == 8192
    for b in (1, 64):
        task = make_task(m, "H100", "fp32", {"B": b, "V": 128256})
        wide, narrow = (simulate(m, v, {"BLOCK": x, "num_warps": 16}, task).time_ms for x in (16384, 8192))
        assert wide < narrow


@pytest.mark.parametrize("shape, params, offered", [
    ({"R": 16384, "C": 2048}, {"threads": 512, "items": 2}, False),     # the H100's passing missing_barrier (s61717)
    ({"R": 4096, "C": 4096}, {"threads": 256, "items": 2}, False),      # a 4096-element tile holds the row
    ({"R": 4096, "C": 4096}, {"threads": 128, "items": 2}, True),       # two tiles a row: the look-back runs
    ({"R": 8, "C": 1048576}, {"threads": 512, "items": 4}, True)])
def test_look_back_bugs_only_where_a_row_has_several_tiles(shape, params, offered):
    """With one tile a row the look-back never runs: its window and the barrier before tile_prefix's readers
    cannot show, so decoupled_lookback offers those bugs only where a row spans several tiles."""
    v = SCAN.variant("decoupled_lookback")
    task = make_task(SCAN, "H100", "bf16", shape)
    for bug in ("missing_barrier", "bad_combine_index"):
        assert v.breaks_at(bug, task, params) is offered


def test_warp_shuffle_scan_pays_its_row_chain_at_long_rows():
    """A block walks its row tile after tile (a DRAM round trip plus the tile's bytes at one SM's rate): eight rows of
    1M take eight times one row of 128K (the H100: 163.1 vs 20.9 us at 1024 threads, 331.4 vs 38.8 at 128), where the
    roofline terms alone said 4x (86.6 vs 21.7 us)."""
    v = SCAN.variant("warp_shuffle_scan")
    for threads, measured in ((1024, 163.1 / 20.9), (128, 331.4 / 38.8)):
        p = {"threads": threads, "items": 4}
        t = [simulate(SCAN, v, p, make_task(SCAN, "H100", "bf16", s)).time_ms
             for s in ({"R": 8, "C": 1048576}, {"R": 1, "C": 128256})]
        assert 0.8 * measured < t[0] / t[1] < 1.25 * measured


TOP_P = REGISTRY["top_p_cuda"]


@pytest.mark.parametrize("shape, measured", [({"B": 1, "V": 32000}, 57.5 / 28.7), ({"B": 8, "V": 128256}, 253.2 / 73.6)])
def test_top_p_split_histogram_wins_where_few_rows_leave_sms_idle(shape, measured):
    """An H100 (docs/roomM_device_h100_m3/): the histogram split over CTAs ran 2.0x (B=1 V=32000) and 3.4x (B=8
    V=128256) faster than the best one-block-a-row vectorized_float4 it finishes like."""
    task = make_task(TOP_P, "H100", "fp32", shape)
    ratio = best_ms(TOP_P, "vectorized_float4", task) / best_ms(TOP_P, "split_mass_hist", task)
    assert 0.6 * measured < ratio < 1.6 * measured


def test_top_p_split_slices_order_as_the_h100_ran_them():
    """B=1: the smaller the slice the more SMs share the row (28.7 us at 2048, 50.6 at 16384); B=64 fills the GPU
    anyway and its largest slice pays the fewest CTAs (146.0 us at 16384 against 229.0 at 2048)."""
    v = TOP_P.variant("split_mass_hist")
    def t(shape, sl):
        return simulate(TOP_P, v, {**v.defaults(), "slice": sl}, make_task(TOP_P, "H100", "fp32", shape)).time_ms
    assert t({"B": 1, "V": 32000}, 2048) < t({"B": 1, "V": 32000}, 16384)
    assert t({"B": 64, "V": 128256}, 16384) < t({"B": 64, "V": 128256}, 2048)


def test_tiles_wider_than_the_row_pay_their_idle_lanes_issue():
    """H100 (docs/roomM_device_h100_m1/, R=4096 C=4096 bf16): decoupled_lookback at 512 threads ITEMS 4 / 8 / 16 (tiles
    4 / 8 / 16x the row) 47.1 / 82.8 / 112.4 us, reduce_then_scan ITEMS 8 at 256 / 512 threads 73.1 / 101.7: the idle
    lanes run the whole tile code (prefix_scan_cuda.tile_issue_s). The roofline model had ITEMS 16 within 1.3x of 4
    and the rescan's 512 threads within 1.11x of 256; at long rows (R=8 C=1M, every lane busy) the floor stays under
    the memory time."""
    task = make_task(SCAN, "H100", "bf16", {"R": 4096, "C": 4096})
    lb, rts = SCAN.variant("decoupled_lookback"), SCAN.variant("reduce_then_scan")
    items = [simulate(SCAN, lb, {"threads": 512, "items": i}, task).time_ms for i in (4, 8, 16)]
    assert items[0] < items[1] < items[2] and items[2] > 2.2 * items[0], items
    wide = [simulate(SCAN, rts, {"threads": t, "items": 8}, task).time_ms for t in (256, 512)]
    assert wide[1] > 1.3 * wide[0], wide
    from kernelstrain.sim import built_launch, roofline_terms
    long_rows = make_task(SCAN, "H100", "bf16", {"R": 8, "C": 1048576})
    launch = built_launch(SCAN, lb, {"threads": 512, "items": 4}, long_rows)
    assert launch.issue_s < 0.5 * roofline_terms(SCAN, lb, launch, long_rows)[1]
# -- last_combine (seventh session): the split combine folded into the mass kernel's last program of a row ---------
MINP_T = REGISTRY["min_p_triton"]


@pytest.mark.parametrize("gpu", ["H100", "A100", "MI300X"])
@pytest.mark.parametrize("shape", [{"B": 1, "V": 128256}, {"B": 4, "V": 32000}, {"B": 256, "V": 128256}])
def test_last_combine_saves_the_combines_launch_and_nothing_else(gpu, shape):
    """The same kernels and bytes less one launch: faster by the fitted extra launch at every value of the split
    rung, nothing else (a fudge would show as any other difference)."""
    from kernelstrain.calibration import FIT
    task = make_task(MINP_T, gpu, "fp32", shape)
    v = MINP_T.variant("split_row_combine")
    extra_ms = FIT.extra_launch_us[task.gpu.vendor] * 1e-3
    for p in param_grid(v):
        if p["last_combine"]:
            t_new, t_old = simulate(MINP_T, v, p, task), simulate(MINP_T, v, {**p, "last_combine": 0}, task)
            assert t_new.ok and t_old.ok
            assert t_new.time_ms == pytest.approx(t_old.time_ms - extra_ms, rel=1e-9)


def test_last_combine_counts_arrivals_in_its_code():
    task = make_task(MINP_T, "H100", "fp32", {"B": 1, "V": 128256})
    v = MINP_T.variant("split_row_combine")
    three = MINP_T.render(v, v.defaults(), task)
    p = {**v.defaults(), "last_combine": 1}
    code = MINP_T.render(v, p, task)
    for mark in ('tl.atomic_add(cnt_ptr + row, 1, sem="acq_rel")', "if arrived == SPLIT - 1:",
                 "tl.store(cnt_ptr + row, 0)", "min_p_kernel[(B, 8)]"):
        assert mark in code and mark not in three
    assert "min_p_mass_kernel" in three and "min_p_mass_kernel" not in code          # two kernels, not three
    for bug in v.bugs:
        assert MINP_T.render(v, p, task, bug) != code


def test_min_p_cuda_last_combine_is_on_the_menu_since_the_h100_checked_it():
    """Plan m8 (roomM j2, 2026-12-07): correct at split 2 / 8 / 32, B=1 / 4 / 64, both bugs failing (roomT switched it on)."""
    names = [p.name for p in REGISTRY["min_p_cuda"].variant("split_row_combine").params]
    assert "last_combine" in names


def test_last_combine_samples_the_reference_token_under_the_interpreter():
    """TRITON_INTERPRET=1 (scripts/roomM_interpret.py runs every value): split 32 of V=20000 leaves empty slices
    past V; the value matches the reference's inverse-CDF token in every row and each bug does not."""
    pytest.importorskip("triton")
    import subprocess
    import sys
    from pathlib import Path
    code = ("import sys; sys.path.insert(0, 'scripts'); import roomM_interpret as r; "
            "from kernelstrain.ops import REGISTRY; m = REGISTRY['min_p_triton']; v = m.variant('split_row_combine'); "
            "sys.exit(r.min_p_case(m, v, {**v.defaults(), 'split': 32, 'BLOCK': 512, 'last_combine': 1}, "
            "{'B': 3, 'V': 20000}))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         cwd=Path(__file__).resolve().parents[1])
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count(": 0 rows differ, pass") == 1
    assert run.stdout.count("FAIL") == len(MINP_T.variant("split_row_combine").bugs)
