"""roomK (issue 26 room, compute-heavy modules): gemm_fp16_cuda's wgmma_tma_persistent and wgmma_split_k rungs and the
values added past the lists' ends, as an H100 ran them (2026-12-06 13:44-13:51 UTC, scripts/roomK_device.py
ROOMK_PLAN=k12, 72 cases, 0 problems: every value right against PyTorch, every bug render wrong;
measurements/h100_roomK_k12.json); the CPU interpreter's check of the Triton values."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

ROOT = Path(__file__).resolve().parents[1]
FP16 = REGISTRY["gemm_fp16_cuda"]
ROWS = json.loads((ROOT / "measurements" / "h100_roomK_k12.json").read_text())["rows"]


def _render(tag, shape, bug=None, dtype="bf16", **params):
    v = FP16.variant(tag)
    return FP16.render(v, {**v.defaults(), **params}, make_task(FP16, "H100", dtype, shape), bug)


def _measured(module, tag, **where):
    """The device time of the bug-free rows of (module, rung) whose params and shape hold `where` (their mean: two
    entries of the plan may time the same candidate)."""
    rows = [r for r in ROWS if r["module"] == module and r["variant"] == tag and r["bug"] is None and r["ok"]
            and all({**r["params"], **r["shape"]}.get(k) == x for k, x in where.items())]
    assert rows and len({json.dumps(r["params"], sort_keys=True) + json.dumps(r["shape"]) for r in rows}) == 1, (
        module, tag, where, len(rows))
    return sum(r["time_ms"] for r in rows) / len(rows)


def _time(module, tag, shape, dtype="bf16", **params):
    m = REGISTRY[module]
    v = m.variant(tag)
    return simulate(m, v, {**v.defaults(), **params}, make_task(m, "H100", dtype, shape)).time_ms


def test_the_new_rungs_follow_wgmma_tma_and_change_its_code():
    tags = [v.tag for v in FP16.variants]
    assert tags[tags.index("wgmma_tma") + 1:] == ["wgmma_tma_persistent", "wgmma_split_k"]
    shape = {"M": 4096, "N": 4096, "K": 4096}
    plain, persistent = _render("wgmma_tma", shape), _render("wgmma_tma_persistent", shape)
    assert "tile += gridDim.x" not in plain and "tile += gridDim.x" in persistent
    assert "cudaOccupancyMaxActiveBlocksPerMultiprocessor" in persistent
    split = _render("wgmma_split_k", {"M": 16, "N": 8192, "K": 8192}, SPLITS=4)
    assert "#define SPLITS 4" in split and "for (int kt = KT0; kt < KT; ++kt, ++it)" in split
    # a split's first K tile is KT0: its slot hand-back must not wait on kt > 0 (the unsplit kernel's test)
    assert "if (kt > KT0 && lane == 0) mbar_arrive" in split and "if (kt > 0 && lane == 0)" not in split
    assert "if (kt > 0 && lane == 0) mbar_arrive" in plain


def test_split_k_reduce_writes_the_task_dtype_and_its_bug_skips_a_slice():
    shape = {"M": 16, "N": 8192, "K": 8192}
    assert "__floats2half2_rn(t.x, t.y)" in _render("wgmma_split_k", shape, dtype="fp16")
    assert "__floats2bfloat162_rn(t.x, t.y)" in _render("wgmma_split_k", shape)
    good, bad = _render("wgmma_split_k", shape), _render("wgmma_split_k", shape, bug="bad_combine_index")
    assert "s < SPLITS;" in good and "s < SPLITS - 1;" in bad


def test_the_new_rungs_run_only_where_wgmma_does():
    for gpu, ok in (("H100", True), ("A100", False)):
        task = make_task(FP16, gpu, "bf16", {"M": 2048, "N": 2048, "K": 2048})
        for tag in ("wgmma_tma_persistent", "wgmma_split_k"):
            v = FP16.variant(tag)
            assert simulate(FP16, v, v.defaults(), task).ok is ok, (gpu, tag)


def test_persistent_ties_wgmma_tma_on_the_device_and_in_the_model():
    """0.96-1.02x wgmma_tma's time on the H100 at the same tiles; the model within 0.93-1.0x."""
    cases = [({"M": 2048, "N": 2048, "K": 2048}, {"BM": 128, "BN": 128, "stages": 4}),
             ({"M": 2048, "N": 2048, "K": 2048}, {"BM": 128, "BN": 256, "stages": 4}),
             ({"M": 4096, "N": 4096, "K": 4096}, {"BM": 128, "BN": 256, "stages": 4}),
             ({"M": 16, "N": 8192, "K": 8192}, {"BM": 64, "BN": 128, "stages": 6})]
    for shape, p in cases:
        dev = _measured("gemm_fp16_cuda", "wgmma_tma_persistent", **p, **shape) / _measured("gemm_fp16_cuda", "wgmma_tma", **p, **shape)
        sim = _time("gemm_fp16_cuda", "wgmma_tma_persistent", shape, **p) / _time("gemm_fp16_cuda", "wgmma_tma", shape, **p)
        assert 0.94 < dev < 1.03 and 0.93 <= sim <= 1.0, (shape, p, dev, sim)


def test_split_k_gains_at_m128_and_its_splits_order_as_measured():
    p = {"BM": 64, "BN": 128, "stages": 6}
    m128 = {"M": 128, "N": 4096, "K": 14336}
    dev = _measured("gemm_fp16_cuda", "wgmma_split_k", SPLITS=2, **p, **m128) / _measured("gemm_fp16_cuda", "wgmma_tma", **p, **m128)
    sim = _time("gemm_fp16_cuda", "wgmma_split_k", m128, SPLITS=2, **p) / _time("gemm_fp16_cuda", "wgmma_tma", m128, **p)
    assert dev < 0.9 and sim < 0.97, (dev, sim)          # 53.4 vs 60.6 us measured, 54.2 vs 57.7 modelled
    for shape in (m128, {"M": 16, "N": 8192, "K": 8192}):  # 2 < 4 < 8 splits on both
        dev = [_measured("gemm_fp16_cuda", "wgmma_split_k", SPLITS=s, **p, **shape) for s in (2, 4, 8)]
        sim = [_time("gemm_fp16_cuda", "wgmma_split_k", shape, SPLITS=s, **p) for s in (2, 4, 8)]
        assert dev == sorted(dev) and sim == sorted(sim), (shape, dev, sim)
        assert all(0.85 < s / d < 1.15 for s, d in zip(sim, dev)), (shape, dev, sim)


def test_split_k_offers_only_64_row_tiles_which_the_h100_ran_faster():
    """BM 128 (two consumer warpgroups) ran slower than BM 64 at both decode shapes, where the model had it faster."""
    assert FP16.variant("wgmma_split_k").param("BM").values == (64,)
    for shape in ({"M": 16, "N": 8192, "K": 8192}, {"M": 128, "N": 4096, "K": 14336}):
        wide = _measured("gemm_fp16_cuda", "wgmma_split_k", BM=128, BN=128, stages=6, SPLITS=2, **shape)
        assert wide > _measured("gemm_fp16_cuda", "wgmma_split_k", BM=64, BN=128, stages=6, SPLITS=2, **shape), shape


def test_added_values_order_as_the_h100_ran_them():
    # gemm_int4_cuda split_k_small_m: 2 stages ahead of 3 and 4 on both
    for shape, base in (({"M": 16, "N": 4096, "K": 14336}, {"BM": 32, "BN": 64, "SPLITS": 8, "BK": 128}),
                        ({"M": 128, "N": 4096, "K": 4096}, {"BM": 64, "BN": 128, "SPLITS": 4, "BK": 128})):
        dev = [_measured("gemm_int4_cuda", "split_k_small_m", STAGES=s, **base, **shape) for s in (2, 3, 4)]
        sim = [_time("gemm_int4_cuda", "split_k_small_m", shape, STAGES=s, **base) for s in (2, 3, 4)]
        assert dev == sorted(dev) and sim == sorted(sim), (shape, dev, sim)
    # gemm_splitk_cuda: the cp.async ring's 128-wide K slice ties or gains; the register-staged rung's does not
    # (not offered there)
    base = {"BM": 32, "BN": 64, "stages": 2, "warps": 4, "SPLITS": 16}
    for shape in ({"M": 16, "N": 4096, "K": 14336}, {"M": 1, "N": 4096, "K": 14336}):
        dev = _measured("gemm_splitk_cuda", "cp_async_split_k", BK=128, **base, **shape) / _measured(
            "gemm_splitk_cuda", "cp_async_split_k", BK=64, **base, **shape)
        sim = _time("gemm_splitk_cuda", "cp_async_split_k", shape, BK=128, **base) / _time(
            "gemm_splitk_cuda", "cp_async_split_k", shape, BK=64, **base)
        assert dev < 1.01 and sim <= 1.0, (shape, dev, sim)      # a tie (0.998 at M=16) or a gain
    split = REGISTRY["gemm_splitk_cuda"]
    assert 128 in split.variant("cp_async_split_k").param("BK").values
    assert 128 not in split.variant("mma_split_k").param("BK").values
    assert _measured("gemm_splitk_cuda", "mma_split_k", BK=128, M=16) > 1.2 * _measured("gemm_splitk_cuda", "mma_split_k", BK=64, M=16)
    # gemm_splitk_triton's 32-wide N tiles: within 2% of 64 on the device, within 5% in the model
    shape = {"M": 16, "N": 4096, "K": 14336}
    dev = _measured("gemm_splitk_triton", "split_k_fused_reduce", BLOCK_N=32, **shape) / _measured(
        "gemm_splitk_triton", "split_k_fused_reduce", BLOCK_N=64, **shape)
    sim = _time("gemm_splitk_triton", "split_k_fused_reduce", shape, BLOCK_N=32) / _time(
        "gemm_splitk_triton", "split_k_fused_reduce", shape, BLOCK_N=64)
    assert abs(dev - 1) < 0.02 and abs(sim - 1) < 0.05, (dev, sim)


def test_values_the_device_ran_slower_are_not_offered():
    # gemm_fp4_triton pipelined_copies BLOCK_K 32: 166.8 vs 147.1 us at 64 (model 126.6 vs 137.8, the wrong sign)
    fp4 = REGISTRY["gemm_fp4_triton"].variant("pipelined_copies")
    assert 32 not in fp4.param("BLOCK_K").values
    assert _measured("gemm_fp4_triton", "pipelined_copies", BLOCK_K=32, num_stages=4) > 1.1 * _measured(
        "gemm_fp4_triton", "pipelined_copies", BLOCK_K=64, num_stages=4)
    # conv2d_nhwc_cuda 256-wide filter tiles: 59.0 vs 47.4 us at 128 (model 48.8 vs 49.2)
    assert 256 not in REGISTRY["conv2d_nhwc_cuda"].variant("cp_async_pipeline").param("BN").values
    assert _measured("conv2d_nhwc_cuda", "cp_async_pipeline", BN=256) > 1.2 * _measured("conv2d_nhwc_cuda", "cp_async_pipeline", BN=128)


@pytest.mark.slow
def test_the_new_triton_values_are_right_in_the_interpreter():
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "roomK_interpret.py")], capture_output=True, text=True,
                       env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=1800)
    assert r.returncode == 0 and "0 problems" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
