"""roomK (issue 26 room, 2026-12-07): the Triton values put on the menus of the GEMM family after Triton's interpreter
ran them against the PyTorch reference (scripts/roomK_interpret.py): grouped_gemm_triton m_fastest_order's 256-wide N
tiles and gemm_fp4_triton pipelined_copies' 256-row tiles; and the accumulator spill grouped_gemm_triton's tiles now
pay where a 256-wide N tile sits on 4 warps (the term gemm_fp16_triton's tiles already paid). The interpreter also
runs the values checked but not offered (each would add hundreds of Triton smem corpus figures): grouped_gemm_triton's
128-wide K and 5 stages, gemm_splitk_triton's 2 warps."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstrain import knobs
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

ROOT = Path(__file__).resolve().parents[1]
GROUPED, SPLITK, FP4 = REGISTRY["grouped_gemm_triton"], REGISTRY["gemm_splitk_triton"], REGISTRY["gemm_fp4_triton"]
MOE = {"T": 2048, "E": 64, "K": 2048, "N": 2816, "topk": 6}


def _sim(module, tag, shape, gpu="H100", dtype="fp16", **over):
    v = module.variant(tag)
    params = {**v.defaults(), **over}
    return simulate(module, v, params, make_task(module, gpu, dtype, shape))


def test_grouped_m_fastest_order_offers_256_wide_n_tiles_only():
    v = GROUPED.variant("m_fastest_order")
    assert v.param("BLOCK_N").values == (64, 128, 256)
    assert v.param("BLOCK_K").values == (32, 64) and v.param("num_stages").values == (2, 3, 4)
    # the rungs below keep their lists
    assert GROUPED.variant("block_lookup").param("BLOCK_N").values == (64, 128)


def test_grouped_256_wide_tile_spills_on_4_warps_only():
    """128 x 256 on 4 warps holds 256 fp32 accumulators a thread: past the register file, as gemm_fp16_triton's
    H100 / H200 rows of that tile showed (4-14x); on 8 warps (128) it is the fastest of the three."""
    spill = _sim(GROUPED, "m_fastest_order", MOE, BLOCK_M=128, BLOCK_N=256, num_warps=4, num_stages=4)
    wide8 = _sim(GROUPED, "m_fastest_order", MOE, BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=4)
    base8 = _sim(GROUPED, "m_fastest_order", MOE, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=4)
    assert spill.ok and wide8.ok and base8.ok
    assert spill.time_ms > 3 * wide8.time_ms
    assert wide8.time_ms < base8.time_ms


def test_grouped_new_values_render_their_tiles():
    v = GROUPED.variant("m_fastest_order")
    params = {**v.defaults(), "BLOCK_N": 256}
    code = knobs.render(GROUPED, v, params, make_task(GROUPED, "H100", "fp16", MOE))
    assert "BLOCK_N=256" in code and "triton.cdiv(N, 256)" in code


def test_off_menu_values_stay_off():
    # gemm_splitk_triton's 2 warps on the menus: priced as Triton's 2-warp mma.sync lowering (base.triton_wgmma;
    # tests/test_sim8_models.py), device-checked by plan w2 (measurements/h100_sim_w2.json), builds in the smem corpus
    assert SPLITK.variant("split_k_fused_reduce").param("num_warps").values == (2, 4, 8)
    assert FP4.variant("pipelined_copies").param("num_stages").values == (3, 4)


@pytest.mark.slow      # Triton's interpreter on the CPU: ~30 s on a loaded machine
@pytest.mark.parametrize("module", ["grouped_gemm_triton", "gemm_splitk_triton", "gemm_fp4_triton"])
def test_interpreter_runs_the_new_values_correct_and_their_bugs_wrong(module):
    pytest.importorskip("triton", reason="triton not installed: pip install 'kernelstrain[verify]'")
    pytest.importorskip("torch")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "roomK_interpret.py"), module], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "0 problems" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
