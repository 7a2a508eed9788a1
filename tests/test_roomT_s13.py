"""roomT (issue 26 Build 2, thirteenth session): gemm_fp4_triton's copies_persistent_tma rung, off the menus until a
device job times it (KERNELSTRAIN_DEVICE_UNCHECKED=1 reaches it; scripts/roomT_device.py plan c1). It is the dequant
kernel's 16-bit copies (pipelined_copies') followed by gemm_fp16_triton's own persistent TMA GEMM, which the H100 ran
1.29x ahead of the pipelined tl.dot loop at 4096^3 (188.7 / 243.8 us). docs/roomT_s13.md."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.ops.matmul.gemm_fp16_triton import tile_launch
from kernelstrain.ops.matmul.gemm_fp4_triton import fp4_launch
from kernelstrain.tasks import make_task

ROOT = Path(__file__).resolve().parents[1]
TILE = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 3, "num_warps": 8}


def run(code: str) -> str:
    """`code` in a fresh process with the off-menu rung on (the registry reads the variable at import)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELSTRAIN_DEVICE_UNCHECKED": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_new_rung_is_off_the_menus_without_a_device_check():
    if os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1":
        pytest.skip("the off-menu values are on in this process")
    assert "copies_persistent_tma" not in [v.tag for v in REGISTRY["gemm_fp4_triton"].variants]


def test_the_persistent_copies_launch_keeps_the_persistent_grid_and_adds_the_copies():
    """The GEMM's grid, shared memory and tile efficiency are gemm_fp16_triton's persistent ones on the same M, N, K
    (the compiler's metadata.shared for 128 x 256 x 64 at 3 stages on sm_90a: 213,016 B); the copies add two
    launches and their bytes, as pipelined_copies' do."""
    m = REGISTRY["gemm_fp4_triton"]
    task = make_task(m, "H100", "bf16", {"M": 4096, "N": 4096, "K": 4096, "G": 32})
    fp16 = tile_launch(0.95, "persistent")(TILE, task)
    one = fp4_launch("persistent", extra_launches=2)(TILE, task)
    assert one.grid == fp16.grid == 132 and one.smem_bytes == fp16.smem_bytes == 213016
    assert one.launches == 3 and one.compute_scale == fp16.compute_scale
    pipelined = fp4_launch("pipelined", extra_launches=2)({**TILE, "GROUP_M": 8}, task)
    assert pipelined.grid == 32 * 16 and one.traffic == pipelined.traffic


def test_the_render_runs_gemm_fp16_triton_s_persistent_kernel_on_the_copies():
    code = """
from kernelstrain.ops import REGISTRY
from kernelstrain.ops.matmul.gemm_fp16_triton import persistent_tma_kernel
from kernelstrain.tasks import make_task
m = REGISTRY["gemm_fp4_triton"]
v = m.variant("copies_persistent_tma")
src = m.render(v, {**v.defaults(), "BLOCK_N": 256}, make_task(m, "H100", "bf16", {"M": 4096, "N": 4096, "K": 4096, "G": 32}))
print(persistent_tma_kernel() in src)
print(src)
"""
    out = run(code)
    assert out.startswith("True\n")
    assert "dequant_kernel[(N // 16, K // 128)](B, scale_b, b, K, BLOCK_R=16, BLOCK_K=128)" in out
    assert "gemm_kernel[grid](a, b, C, M, N, K, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_PROGS=num_progs" in out


@pytest.mark.slow       # Triton's interpreter over 3 cases and their bug renders: ~1 min
def test_the_new_rung_runs_correct_under_the_interpreter_and_its_bugs_fail():
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELSTRAIN_DEVICE_UNCHECKED": "1", "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "scripts/roomT_interpret.py", "copies_persistent_tma"],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT, env=env)
    assert done.returncode == 0 and "0 problems" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("copies_persistent_tma") == 9 and done.stdout.count("bug=None: rel_l2") == 3
