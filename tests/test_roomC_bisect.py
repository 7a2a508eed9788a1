"""top_p_cuda's pivot_bisect (ops/sampling/_top_p_bisect.py, issue 26 Build 2): off the menus until a device job
checks it (scripts/roomC_device.py plan v3), its search right on the module's inputs (a torch emulation of the
kernel's passes: scripts/roomC_bisect_emulate.py), its launch model's registers as ptxas gives them."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = "from kernelstrain.ops import REGISTRY; print([v.tag for v in REGISTRY['top_p_cuda'].variants])"


def _rungs(unchecked: bool) -> list:
    env = {k: v for k, v in os.environ.items() if k != "KERNELSTRAIN_DEVICE_UNCHECKED"}
    if unchecked:
        env["KERNELSTRAIN_DEVICE_UNCHECKED"] = "1"
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT,
                         env={**env, "PYTHONPATH": str(ROOT)}, timeout=120, check=True)
    return eval(out.stdout)  # noqa: S307 - a list of names printed by our probe


def test_pivot_bisect_is_off_until_a_device_checks_it():
    off, on = _rungs(False), _rungs(True)
    assert "pivot_bisect" not in off and on == off + ["pivot_bisect"]


@pytest.mark.parametrize("pivots, cap", [(4, 256), (8, 512), (16, 256)])
def test_the_search_keeps_the_nucleus_the_reference_keeps(pivots, cap):
    """The kernel's bracket search, emulated in float32 on randn x 4 logits, ends on a threshold whose pick passes
    the module's check (top_p_spec.check_adapter) on every row."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "scripts"))
    from roomC_bisect_emulate import pick, search
    from kernelstrain.ops.sampling.top_p_spec import check_adapter
    g = torch.Generator().manual_seed(7)
    rows, V = 12, 8192
    logits = torch.randn(rows, V, generator=g) * 4
    top_p = torch.rand(rows, generator=g) * 0.45 + 0.5
    uniform = torch.rand(rows, generator=g)
    runs = [search(logits[r], float(top_p[r]), pivots, cap) for r in range(rows)]
    toks = torch.tensor([pick(logits[r], runs[r][2], runs[r][3], float(uniform[r])) for r in range(rows)],
                        dtype=torch.int32)
    _, checks = check_adapter({"B": rows, "V": V}, None, [logits, top_p, uniform], toks, lambda ref: ref.clone())
    assert checks[0][3](torch, toks, toks)["nbad"] == 0
    assert all(1 <= r[0] for r in runs) and all(r[1] <= cap for r in runs)      # it searched, the bracket fits CAP
    # a wrong threshold (one key too high: the boundary token dropped) fails the same check on some row
    wrong = torch.tensor([pick(logits[r], torch.nextafter(runs[r][2], torch.tensor(1e9)), runs[r][3], float(uniform[r]))
                          if (logits[r] > runs[r][2]).any() else 0 for r in range(rows)], dtype=torch.int32)
    assert checks[0][3](torch, wrong, wrong)["nbad"] > 0


def test_registers_and_smem_as_ptxas_gives_them():
    """ptxas sm_90a (nvcc 13.0) at 512 threads, CAP 2048: 32 / 40 / 64 registers and 17,116 / 17,676 / 18,796 B of
    static smem at 4 / 8 / 16 pivots (docs/roomC_s13.md); the model within 70 B."""
    from kernelstrain.ops.sampling._top_p_bisect import bisect_launch
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    task = make_task(REGISTRY["top_p_cuda"], "H100", "fp32", {"B": 128, "V": 32000})
    for pivots, regs, smem in ((4, 32, 17116), (8, 40, 17676), (16, 64, 18796)):
        launch = bisect_launch({"threads": 512, "pivots": pivots, "cap": 2048}, task)
        assert launch.regs == regs and 0 <= smem - launch.smem_bytes <= 70, (pivots, launch.regs, launch.smem_bytes)


def test_more_search_passes_cost_more_time():
    from kernelstrain.ops.sampling import _top_p_bisect as b
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    task = make_task(REGISTRY["top_p_cuda"], "H100", "fp32", {"B": 256, "V": 128256})
    p = {"threads": 512, "pivots": 4, "cap": 2048}
    assert b.search_passes(task, {**p, "cap": 1024}) > b.search_passes(task, {**p, "cap": 4096})
    assert b.bisect_launch({**p, "cap": 1024}, task).issue_s > b.bisect_launch({**p, "cap": 4096}, task).issue_s
