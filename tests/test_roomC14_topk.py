"""topk_cuda's pivot_count rung (kernelstrain/ops/sampling/_topk_bisect.py): off the menus until a device runs it
(KERNELSTRAIN_DEVICE_UNCHECKED), its algorithm right against the module's check on the module's inputs (the bound
path and the count-only search it falls back to), its bugs wrong, its renders built by nvcc where it is here."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TAGS = "from kernelstrain.ops import REGISTRY; print(' '.join(v.tag for v in REGISTRY['topk_cuda'].variants))"


def tags(gate: bool) -> list:
    env = {k: v for k, v in os.environ.items() if k != "KERNELSTRAIN_DEVICE_UNCHECKED"}
    if gate:
        env["KERNELSTRAIN_DEVICE_UNCHECKED"] = "1"
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", TAGS], env=env, cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def test_rung_is_off_until_the_device_checks_it():
    off, on = tags(False), tags(True)
    assert "pivot_count" not in off
    assert on == off + ["pivot_count"]


torch = pytest.importorskip("torch")
sys.path.insert(0, str(ROOT / "scripts"))


def emulated(rows: int, V: int, K: int, threads: int, cap: int, bug=None):
    from roomC_topk_emulate import row_token

    from kernelstrain.ops.sampling.topk_spec import check_adapter
    gen = torch.Generator().manual_seed(7)
    logits = torch.randn(rows, V, generator=gen) * 2            # the module's inputs
    uniform = torch.rand(rows, generator=gen)
    runs = [row_token(logits[r], K, float(uniform[r]), threads, cap, bug) for r in range(rows)]
    toks = torch.tensor([r[0] for r in runs], dtype=torch.int32)
    _, checks = check_adapter({"B": rows, "V": V, "K": K}, None, [logits, uniform], toks, lambda ref: ref.clone())
    return checks[0][3](torch, toks, toks)["nbad"], runs


def test_bound_path_is_right_and_leaves_few_candidates():
    bad, runs = emulated(6, 32000, 50, 512, 1024)
    assert bad == 0
    assert all(50 <= r[1] <= 1024 and r[2] == 0 for r in runs)   # >= K at or above the bound, no search


def test_fallback_search_is_right():
    bad, runs = emulated(6, 128256, 20, 256, 64)                 # CAP 64: the bound leaves more, the search runs
    assert bad == 0
    assert all(r[2] >= 1 and r[3] <= 64 + 20 for r in runs)


def test_bugs_pick_wrong_tokens():
    assert emulated(8, 32000, 50, 512, 1024, "missing_scale")[0] >= 6
    assert emulated(24, 32000, 50, 512, 1024, "off_by_one")[0] >= 1


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
def test_builds_without_spill_and_bugs_differ(monkeypatch):
    monkeypatch.setenv("KERNELSTRAIN_DEVICE_UNCHECKED", "1")      # undone after the test: later tests see the gate shut
    from kernelstrain.compilers import compile_cuda
    from kernelstrain.ops.sampling._topk_bisect import count_launch, count_rung
    from kernelstrain.ops.sampling.topk_cuda import DROPPED_KTH_ROWS, LAST_KEPT_ROWS, TopkCuda
    from kernelstrain.tasks import make_task
    m = TopkCuda()
    rung = count_rung(LAST_KEPT_ROWS, DROPPED_KTH_ROWS)
    task = make_task(m, "H100", "fp32", {"B": 128, "V": 32000, "K": 50})
    p = {"threads": 512, "cap": 1024}
    body = rung.source(p, task)
    src = m.assemble(body, rung, p, task)
    assert rung.bugs == ("missing_scale", "off_by_one")
    for bug in rung.bugs:
        assert rung.source(p, task, bug) != body, bug
    r = compile_cuda(src, task.gpu.arch, "topk_kernel")
    assert r.ok, r.log
    assert "0 bytes spill stores" in r.log
    assert abs(r.smem_bytes - count_launch(p, task).smem_bytes) <= 1024
