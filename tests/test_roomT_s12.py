"""roomT (issue 26 Build 2, twelfth session): mla_decode_triton's latent_halves rung and grouped_gemm_triton
persistent_tma's 256-wide N tiles, both off the menus until a device job times them (KERNELSTRAIN_DEVICE_UNCHECKED=1
reaches them; scripts/roomT_device.py plan r1). latent_halves is pipelined_stages with the 512 latent output columns
over two programs (FlashMLA splits them over its two consumer warpgroups): each program scores the whole 576-wide row
and keeps a [BLOCK_H, 256] fp32 accumulator, where pipelined_stages' [64, 512] one (the H100's best at B=128 H=128,
427.2 us) builds at 255 registers and 896 B of stack on sm_90a. docs/roomT_s12.md ranks the Triton modules' room."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task

ROOT = Path(__file__).resolve().parents[1]
BIG = {"B": 128, "H": 128, "S": 2000}
WIDE = {"BLOCK_H": 64, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2}


def run(code: str) -> str:
    """`code` in a fresh process with the off-menu values on (the registry reads the variable at import)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELSTRAIN_DEVICE_UNCHECKED": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_rung_that_ran_behind_stays_off_and_the_value_that_ran_ahead_is_on():
    """roomT/j1 (measurements/h100_roomT_r1.json, thirteenth session): latent_halves ran behind pipelined_stages'
    best at both shapes (681.7 / 433.0 us, 297.6 / 271.1), the 256-wide persistent_tma tiles ahead of 128 (1.18x,
    1.10x at 3 stages); all correct, every bug failing."""
    if os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1":
        pytest.skip("the off-menu values are on in this process")
    assert "latent_halves" not in [v.tag for v in REGISTRY["mla_decode_triton"].variants]
    assert 256 in REGISTRY["grouped_gemm_triton"].variant("persistent_tma").param("BLOCK_N").values
    import json
    rows = json.load(open(ROOT / "measurements" / "h100_roomT_r1.json"))["rows"]
    assert len(rows) == 25 and all(r["ok"] == (r["bug"] is None) for r in rows)

    def best(variant, shape):
        return min(r["time_ms"] for r in rows if r["variant"] == variant and r["shape"] == shape and not r["bug"]
                   and r["module"] == "mla_decode_triton")
    for shape in ({"B": 128, "H": 128, "S": 2000}, {"B": 32, "H": 128, "S": 4000}):
        assert best("latent_halves", shape) > best("pipelined_stages", shape)


def test_halves_double_the_programs_and_halve_the_accumulator_at_the_cost_of_rescoring():
    """Each half: the accumulator's registers halved, twice split_kv's programs, the 576 score columns done twice
    ((2 x 576 + 512) / 1088 of the MMA work), the sibling half's latent reads mostly L2 hits."""
    from kernelstrain.ops.attention.mla_decode_triton import halves_launch, tiled_launch
    task = make_task(REGISTRY["mla_decode_triton"], "H100", "bf16", BIG)
    whole, half = tiled_launch(WIDE, task), halves_launch(WIDE, task)
    assert half.grid == 2 * whole.grid == 2 * 128 * 2 and half.launches == whole.launches == 1
    # 48 + acc + q + scores: 264 (capped at 255) -> 64 fewer ([64, 256] fp32 over 8 warps)
    assert whole.regs == 255 and half.regs == 264 - 64 * 256 // 256
    assert half.compute_scale == pytest.approx(whole.compute_scale * 1088 / (2 * 576 + 512))
    assert half.traffic > whole.traffic
    assert tiled_launch(WIDE, task, halves=1) == whole


def test_the_halves_render_splits_the_latent_columns_and_stores_only_its_own():
    code = """
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task
m = REGISTRY["mla_decode_triton"]
v = m.variant("latent_halves")
print(m.render(v, {**v.defaults(), "BLOCK_H": 64}, make_task(m, "H100", "bf16", {"B": 128, "H": 128, "S": 2000})))
"""
    src = run(code)
    assert "tl.zeros([BLOCK_H, KV_LORA // 2], dtype=tl.float32)" in src
    assert "grid = (B, triton.cdiv(H, BLOCK_H) * 2)" in src and "tl.store(o_rows + offs_mine[None, :]" in src
    assert "offs_other = (1 - half) * (KV_LORA // 2)" in src and "tl.dot(q_other, tl.trans(other))" in src


@pytest.mark.slow       # Triton's interpreter over 7 cases and their bug renders: ~1 min
def test_the_new_rung_and_value_run_correct_under_the_interpreter_and_their_bugs_fail():
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELSTRAIN_DEVICE_UNCHECKED": "1", "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "scripts/roomT_interpret.py", "mla_decode_triton", "grouped_gemm_triton"],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT, env=env)
    assert done.returncode == 0 and "0 problems" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("latent_halves") >= 12 and done.stdout.count("persistent_tma") >= 6
