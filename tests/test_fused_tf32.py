"""The tf32_dot bug of fused candidates (fused/precision.py tf32_gemm_breaks): an fp32 Triton GEMM whose tl.dot
runs at Triton's default input precision (TF32) instead of input_precision="ieee", offered only where the emulated
error breaks KernelBench's fp32 allclose (atol = rtol = 1e-4). Checked against the programs' real outputs: PyTorch
(CPU) with the GEMM's operands rounded to TF32, as the tensor cores take them."""
from __future__ import annotations

import pytest

from kernelstrain.fused.kernels import kernels_of
from kernelstrain.fused.module import fused_module
from kernelstrain.fused.precision import tf32
from kernelstrain.tasks import make_task

# one GEMM, the Triton gemm_epilogue's, an elementwise run after it: (program, whether the bug is offered)
PROGRAMS = {"fused_s0_00012": True,      # matmul -> quick_gelu -> add_scalar
            "fused_s0_00068": True,      # bmm -> relu
            "fused_s0_00070": True,      # matmul -> leaky_relu
            "fused_s0_00078": True,      # linear -> abs
            "fused_s0_00001": False,     # linear -> gelu -> sigmoid -> add_scalar -> scale_param -> mish
            "fused_s0_00053": False,     # linear -> relu -> add_scalar -> scale -> clamp
            "fused_s0_00169": False}     # linear -> relu -> scale


def test_tf32_rounds_to_eleven_significant_bits_ties_to_even():
    assert tf32(1.0 + 2.0 ** -11) == 1.0                  # half an ulp (2^-10): to even
    assert tf32(1.0 + 3.0 * 2.0 ** -11) == 1.0 + 2.0 ** -9
    assert tf32(-3.0) == -3.0 and tf32(0.0) == 0.0


def _real_failures(op: str) -> int:
    """Elements of the program's output outside KernelBench's fp32 allclose when its GEMM multiplies TF32 operands."""
    torch = pytest.importorskip("torch", reason="PyTorch (CPU) runs the program")
    from kernelstrain.fused.execute import KB_TOLERANCE, _load

    def rounded(t):                                       # to nearest even at bit 13 of the fp32 pattern
        i = t.contiguous().view(torch.int32)
        return ((i + 0xFFF + ((i >> 13) & 1)) & ~0x1FFF).view(torch.float32)

    m = fused_module(op + "_triton")
    mod = _load(m.view.row["source"], op)
    F = torch.nn.functional
    linear, matmul, bmm = F.linear, torch.matmul, torch.bmm
    outputs = []
    for tf in (False, True):
        torch.manual_seed(42)
        model = mod.Model(*mod.get_init_inputs()).float()
        torch.manual_seed(1000)
        if tf:
            F.linear = lambda x, w, b=None: linear(rounded(x), rounded(w), b)
            torch.matmul = lambda a, b: matmul(rounded(a), rounded(b))
            torch.bmm = lambda a, b: bmm(rounded(a), rounded(b))
        try:
            with torch.no_grad():
                outputs.append(model(*mod.get_inputs()))
        finally:
            F.linear, torch.matmul, torch.bmm = linear, matmul, bmm
    tol = KB_TOLERANCE["fp32"]
    return int((~torch.isclose(outputs[1], outputs[0], atol=tol, rtol=tol)).sum())


@pytest.mark.parametrize("op", sorted(PROGRAMS))
def test_the_bug_is_offered_where_the_real_output_breaks(op):
    m = fused_module(op + "_triton")
    assert sum(k.kind == "gemm" for k in kernels_of(m._plans["gemm_epilogue"])) == 1
    offered = "tf32_dot" in m.variant("gemm_epilogue").bugs
    assert offered == PROGRAMS[op]
    failures = _real_failures(op)
    assert failures >= 5 if offered else failures == 0


def test_the_bug_renders_tl_dot_at_its_default_precision():
    m = fused_module("fused_s0_00068_triton")
    v = m.variant("gemm_epilogue")
    task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
    clean, buggy = m.render(v, v.defaults(), task), m.render(v, v.defaults(), task, bug="tf32_dot")
    assert 'input_precision="ieee"' in clean and "input_precision" not in buggy
    cuda = fused_module("fused_s0_00068_cuda")             # the CUDA GEMM (cuda_gemm.py) multiplies fp32 on FMA
    assert all("tf32_dot" not in v.bugs for v in cuda.variants)
