"""No fused task a zeros or constant kernel solves (issue 35): the programs scripts/fused_trivial.py
found passing on seeds 7 and 11 before the rules below are now rejected by the static rules, and their real
outputs (PyTorch on the CPU) show why."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kernelstrain.fused.degenerate import reason
from kernelstrain.fused.magnitude import magnitudes
from kernelstrain.fused.module import fused_module

ROOT = Path(__file__).resolve().parent.parent
# program -> the trivial kernel that passed KernelBench's allclose on its real output
FOUND = {"fused_s0_04114": "zero", "fused_s0_00173": "zero", "fused_s0_01268": "constant",
         "fused_s0_09923": "constant", "fused_s0_04037": "constant",
         # found on seed 11 after the first rules: a layer norm's rows (mean 0) averaged; logsumexp of tiny values
         "fused_s0_07106": "zero", "fused_s0_06464": "constant",
         # found among every 10th task of the profile: a row's extreme at a clamp's bound, relu of all-negative rows
         "fused_s0_00340": "constant", "fused_s0_01145": "constant", "fused_s0_00356": "zero",
         # ... a row's min of an activation with one minimum (gelu, silu, mish, hardswish): that minimum
         "fused_s0_04686": "constant", "fused_s0_02406": "constant", "fused_s0_07656": "constant"}


@pytest.mark.parametrize("op", sorted(FOUND))
def test_programs_a_trivial_kernel_solves_are_rejected(op):
    m = fused_module(op + "_cuda")
    why = reason(m.view.steps, m.view.dtype)
    assert why is not None and why.startswith(("constant_output", "vanishing_output")), why


def test_magnitudes_of_softmax_saturation_and_channel_params():
    rows = [{"op": "softmax", "role": "softmax", "params": {"dim": -1}, "in": {"shape": [8, 512]}},
            {"op": "hardtanh", "role": "elementwise", "params": {"min_val": 0.5, "max_val": 1.0}, "in": {"shape": [8, 512]}},
            {"op": "bias_add", "role": "elementwise", "params": {}, "in": {"shape": [8, 512]}},
            {"op": "scale_param", "role": "elementwise", "params": {}, "in": {"shape": [8, 512]}},
            {"op": "relu", "role": "elementwise", "params": {}, "in": {"shape": [8, 512]}}]
    mags = magnitudes(rows)
    assert mags[1][0] == pytest.approx(1 / 512)            # a softmax's values average 1/C
    assert mags[2] == (0.5, 0.0)                            # every value under the clamp's floor: the floor
    assert mags[3] == (0.5, 1.0)                            # a bias keeps the mean and adds its spread
    assert mags[4][0] == 0.0                                # a randn scale has mean 0


@pytest.mark.parametrize("op", sorted(FOUND))
def test_their_real_outputs_pass_the_trivial_kernel(op):
    torch = pytest.importorskip("torch", reason="PyTorch (CPU) runs the program")
    spec = importlib.util.spec_from_file_location("fused_trivial", ROOT / "scripts" / "fused_trivial.py")
    triv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(triv)
    from kernelstrain.fused.execute import KB_TOLERANCE, _load
    m = fused_module(op + "_cuda")
    mod = _load(m.view.row["source"], op)
    dtype = torch.bfloat16 if m.view.dtype == "bf16" else torch.float32
    torch.manual_seed(42)
    model = mod.Model(*mod.get_init_inputs()).to(dtype)
    torch.manual_seed(1000)
    with torch.no_grad():
        y = model(*[x.to(dtype) if torch.is_tensor(x) and x.is_floating_point() else x for x in mod.get_inputs()])
    zero, constant = triv.margins(y, KB_TOLERANCE[m.view.dtype])
    assert (zero if FOUND[op] == "zero" else constant) <= 1.0
