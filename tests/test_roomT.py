"""roomT (issue 26 Build 2): cross_attention_triton split_kv's 32 splits, built and checked with the interpreter, ran
correct on the H100 (roomT/j1) but no faster than 16 where the model has it 6-12% ahead, so they are off the menus
(KERNELSTRAIN_DEVICE_UNCHECKED=1). A split count adds programs and fp32 partials, never shared memory; at prefill
shapes the pipelined rung stays ahead of every split. rmsnorm_triton persistent's 16 programs an SM ran correct and
1.6x faster than 8 at q/k-norm rows (roomT/j3): on the menus. The interpreter case runs one value and its bugs
(scripts/roomT_interpret.py runs all six)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

CROSS = REGISTRY["cross_attention_triton"]
SPLIT = CROSS.variant("split_kv")
PREFILL = [s for s in CROSS.shapes if s["Sq"] >= 448]
TILES = [{"BLOCK_M": bm, "BLOCK_N": bn, "num_stages": st} for bm in (16, 64) for bn in (32, 64) for st in (2, 3, 4)]


def best_split_ms(task, splits: int) -> float:
    return min(r.time_ms for t in TILES if (r := simulate(CROSS, SPLIT, {**t, "num_splits": splits}, task)).ok)


def test_32_splits_are_off_the_menus_and_16_programs_an_sm_on():
    """Each as its device job found it (module-level lists, read with the environment of this process)."""
    unchecked = os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1"
    assert SPLIT.param("num_splits").values[-1] == (32 if unchecked else 16)
    assert REGISTRY["rmsnorm_triton"].variant("persistent").param("programs_per_sm").values[-1] == 16


@pytest.mark.parametrize("gpu", ["H100", "A100", "RTX5090", "A10"])
def test_a_split_count_adds_programs_not_shared_memory(gpu):
    for shape in CROSS.shapes:
        task = make_task(CROSS, gpu, "fp16", shape)
        for t in TILES:
            at16, at32 = (CROSS.launch(SPLIT, {**t, "num_splits": n}, task) for n in (16, 32))
            assert at32.smem_bytes == at16.smem_bytes and at32.grid == 2 * at16.grid


@pytest.mark.parametrize("gpu", ["H100", "A100"])
def test_prefill_shapes_keep_the_pipelined_rung_ahead_of_every_split(gpu):
    tiled = CROSS.variant("pipelined_tiles")
    for shape in PREFILL:
        task = make_task(CROSS, gpu, "fp16", shape)
        pipelined = simulate(CROSS, tiled, tiled.defaults(), task).time_ms
        assert pipelined < min(best_split_ms(task, n) for n in (2, 4, 8, 16, 32))


def interpret(cases) -> str:
    """scripts/roomT_interpret.py's check on `cases` under TRITON_INTERPRET=1, in a fresh process; its output."""
    code = ("import sys; sys.path.insert(0, 'scripts'); import roomT_interpret as t; "
            f"sys.exit(sum(t.check(*c) for c in {cases!r}))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         cwd=Path(__file__).resolve().parents[1], env={**os.environ, "TRITON_INTERPRET": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_32_splits_match_the_reference_under_the_interpreter(monkeypatch):
    """TRITON_INTERPRET=1: Skv 2050 in 96-key splits leaves the last ten of 32 empty; both bugs fail."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")      # the script sets it on import: not left for the tests after this
    import roomT_interpret
    cases = [c for c in roomT_interpret.CASES if c[0] == "cross_attention_triton" and c[3]["Skv"] == 2050
             and c[3]["D"] == 128 and c[2]["BLOCK_N"] == 64]
    out = interpret(cases)
    assert out.count("rel_l2") == 1 + len(SPLIT.bugs) and "PROBLEM" not in out
