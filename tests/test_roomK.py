"""roomK (issue 26 room, compute-heavy modules): gemm_fp16_cuda's wgmma_tma_persistent and wgmma_split_k rungs, held
out of the ladder (PENDING) until a device checks them; the CPU interpreter's check of the new Triton values."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.ops.matmul.gemm_fp16_cuda import PENDING
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

FP16 = REGISTRY["gemm_fp16_cuda"]
NEW = {v.tag: v for v in PENDING}
ROOT = Path(__file__).resolve().parents[1]


def _variant(tag):
    return NEW.get(tag) or FP16.variant(tag)


def _render(tag, shape, bug=None, dtype="bf16", **params):
    v = _variant(tag)
    return FP16.render(v, {**v.defaults(), **params}, make_task(FP16, "H100", dtype, shape), bug)


def test_the_unchecked_rungs_stay_out_of_the_ladder_until_a_device_run_adds_them():
    tags = [v.tag for v in FP16.variants]
    assert tags[-1] == "wgmma_tma" and not set(NEW) & set(tags)
    sys.path.insert(0, str(ROOT / "scripts"))
    import roomK_device
    before = type(FP16).variants
    try:
        roomK_device.with_pending()
        assert [v.tag for v in FP16.variants][-3:] == ["wgmma_tma", "wgmma_tma_persistent", "wgmma_split_k"]
    finally:
        type(FP16).variants = before


def test_the_new_rungs_change_wgmma_tmas_code():
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
            v = NEW[tag]
            assert simulate(FP16, v, v.defaults(), task).ok is ok, (gpu, tag)


@pytest.mark.slow
def test_the_new_triton_values_are_right_in_the_interpreter():
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "roomK_interpret.py")], capture_output=True, text=True,
                       env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=1800)
    assert r.returncode == 0 and "0 problems" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
