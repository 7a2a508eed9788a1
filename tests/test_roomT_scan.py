"""roomT (issue 26 Build 2, 2026-12-07, eleventh session): selective_scan_triton's split_l_state_outer rung. state_outer_scan
at B=1 L=2048 D=1536 ran 88.2 us on the H100 (~11x its DRAM floor) on 768 one-warp programs, a few warps an SM; the rung
runs state_outer_scan's order over SPLITS spans of L (span end states, then each span again from the spans before it
folded in), multiplying the programs. Correct under Triton's interpreter with its bugs failing
(scripts/roomT_interpret.py), built for the targets (scripts/room_compile_triton.py), correct on the H100 with its bugs
failing (roomT/j1) and 1.4-1.7x slower than state_outer_scan there (roomT/j2: 255 registers hold an SM to 8 one-warp
programs, which the B=1 grid nearly fills; the spans add a second pass): off the menus (KERNELSTRAIN_DEVICE_UNCHECKED=1
reaches it), since on them it took selective_scan sessions further from the oracle."""
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstrain.tasks import make_task

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

B1 = {"B": 1, "L": 2048, "D": 1536, "N": 16}


def run(code: str, unchecked: bool = False) -> str:
    """`code` in a fresh process (its environment set there, not left for later tests); `unchecked`: with the
    off-menu values on (KERNELSTRAIN_DEVICE_UNCHECKED=1: the registry reads it at import)."""
    import os
    env = {**os.environ, "PYTHONPATH": str(ROOT), **({"KERNELSTRAIN_DEVICE_UNCHECKED": "1"} if unchecked else {})}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_spans_multiply_state_outer_programs_over_two_launches():
    """SPLITS x state_outer_scan's programs, two kernels, u / delta / B read twice (1.5x the op's bytes)."""
    from kernelstrain.ops.ssm._scan_split_outer import split_l_state_outer_launch
    from kernelstrain.ops.ssm._scan_state_outer import state_outer_launch
    from kernelstrain.ops import REGISTRY
    task = make_task(REGISTRY["selective_scan_triton"], "H100", "fp16", B1)
    p = {"BLOCK_D": 2, "CHUNK": 256, "num_warps": 1, "SPLITS": 8}
    one, split = state_outer_launch(p, task), split_l_state_outer_launch(p, task)
    assert split.grid == 8 * one.grid == 8 * 768 and split.launches == 2
    assert split.traffic == pytest.approx(1.5 * one.traffic)


def test_the_model_has_the_spans_slower_than_state_outer_as_the_h100_ran_them():
    """measurements/h100_roomT_scan.json (roomT/j2): every split slower than state_outer_scan at its shape, on the
    device and in the model; each row within 1.6x of the device (the rung read with the unchecked values on)."""
    code = """
import json
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task
m = REGISTRY["selective_scan_triton"]
rows = json.load(open("measurements/h100_roomT_scan.json"))["rows"]
for r in rows:
    sim = simulate(m, m.variant(r["variant"]), r["params"], make_task(m, "H100", r["dtype"], r["shape"])).time_ms
    print(r["variant"], r["shape"]["B"], r["time_ms"], sim)
"""
    rows = [line.split() for line in run(code, unchecked=True).splitlines()]
    outer = {b: (float(t), float(s)) for v, b, t, s in rows if v == "state_outer_scan"}
    splits = [(b, float(t), float(s)) for v, b, t, s in rows if v == "split_l_state_outer"]
    assert len(splits) == 5 and len(outer) == 2
    for b, t, s in splits:
        assert t > outer[b][0] and s > outer[b][1]
    assert all(1 / 1.6 < float(s) / float(t) < 1.6 for _, _, t, s in rows)


def test_the_fold_bug_is_offered_only_where_a_second_span_has_steps():
    from kernelstrain.ops.ssm._scan_split_outer import spans_busy
    from kernelstrain.ops import REGISTRY
    m = REGISTRY["selective_scan_triton"]
    short = make_task(m, "H100", "fp16", {"B": 64, "L": 256, "D": 2048, "N": 16})
    assert not spans_busy(short, {"CHUNK": 512, "SPLITS": 2})       # one 512-step span holds all 256 steps
    assert spans_busy(short, {"CHUNK": 64, "SPLITS": 2})
    assert spans_busy(make_task(m, "H100", "fp16", B1), {"CHUNK": 512, "SPLITS": 16})


def test_an_end_state_read_early_is_offered_only_where_a_next_chunk_reads_it():
    """state_outer_scan's bad_combine_index at L 256 in 256- or 512-step chunks (one chunk: its end state never used)
    ran correct under TRITON_INTERPRET=1 (rel_l2 5.1e-7; at CHUNK 128 1.0e-2): a false wrong_result label, no longer
    offered there; the split rung's the same (7.9e-7 at L 256, CHUNK 512)."""
    from kernelstrain.ops import REGISTRY
    m = REGISTRY["selective_scan_triton"]
    v = m.variant("state_outer_scan")
    task = make_task(m, "H100", "fp16", {"B": 64, "L": 256, "D": 2048, "N": 16})
    offered = {c: v.breaks_at("bad_combine_index", task, {**v.defaults(), "CHUNK": c}) for c in (64, 128, 256, 512)}
    assert offered == {64: True, 128: True, 256: False, 512: False}


def test_state_outer_renders_as_before_the_chunk_body_was_shared():
    """The chunk body factored out of state_outer_scan (outer_chunk) renders the kernel it rendered before: the
    output pass is state_outer's body; the state pass drops the C loads, y and its store, and sums dt."""
    from kernelstrain.ops.ssm._scan_state_outer import outer_chunk
    out, state = outer_chunk(), outer_chunk(outputs=False)
    assert "tl.store(y_ptr" in out and "ct = tl.load" in out and "dsum" not in out
    assert "tl.store" not in state and "C_ptr" not in state and "dsum += tl.sum(dt, axis=1)" in state


@pytest.mark.slow     # the interpreter runs 16 unrolled [BLOCK_D, CHUNK] scans a chunk in numpy: ~1 min a case
def test_split_spans_match_the_reference_under_the_interpreter():
    """TRITON_INTERPRET=1: 4 spans of L 200 in 64-step chunks (the last short), one render and its four bugs."""
    pytest.importorskip("triton")
    code = ("import os, sys; os.environ['TRITON_INTERPRET'] = '1'; sys.path.insert(0, 'scripts'); "
            "import roomT_interpret as t; "
            "sys.exit(sum(t.check(*c) for c in t.CASES if c[1] == 'split_l_state_outer' and c[3]['L'] == 200))")
    out = run(code, unchecked=True)
    assert out.count("rel_l2") == 5 and "PROBLEM" not in out
