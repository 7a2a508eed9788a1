"""The CUDA gemm_epilogue rung (fused/cuda_gemm.py): a register-tiled GEMM with the elementwise run in its
epilogue, in place of the library GEMM's call and the kernel after it."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from kernelstrain.fused.cuda_gemm import cuda_gemm_ms, gemm_threads
from kernelstrain.fused.module import GRAPHED, fused_module
from kernelstrain.gpus import GPUS
from kernelstrain.ops.base import Task
from kernelstrain.tasks import make_task

# seed 0's programs with each GEMM head: linear with its bias (fp32), bmm with a residual in the epilogue (fp32),
# matmul then a row kernel (fp32), bmm (bf16)
PROGRAMS = ("fused_s0_00001", "fused_s0_00029", "fused_s0_00003", "fused_s0_00007")
CUDA_STRING = re.compile(r'cuda_source = r"""\n(.*?)"""', re.S)


def _task(m) -> Task:
    return Task(m.op, GPUS["H100"], m.view.dtype, ())


@pytest.mark.parametrize("op", PROGRAMS)
def test_cuda_programs_with_a_gemm_head_get_the_rung_and_drop_the_library_call(op):
    m = fused_module(op + "_cuda")
    tags = [v.tag for v in m.variants if v.tag not in GRAPHED]      # the graph rungs replay a plan below them
    assert tags[-1] == "gemm_epilogue"
    eager, gemm = m.host_calls("eager"), m.host_calls("gemm_epilogue")
    assert gemm["library"] == eager["library"] - 1 and gemm["cuda"] >= 1
    code = m.variant("gemm_epilogue").render(m.variant("gemm_epilogue").defaults(), _task(m))
    assert "_gemm_kernel<<<grid" in code and "__shared__ float As[" in code
    assert "self.linear(" not in code and "torch.matmul(" not in code and "torch.bmm(" not in code


def test_a_block_over_1024_threads_is_refused_at_launch():
    m = fused_module("fused_s0_00001_cuda")
    v = m.variant("gemm_epilogue")
    params = {**v.defaults(), "BLOCK_M": 128, "BLOCK_N": 128, "THREAD_M": 2, "THREAD_N": 2}
    assert gemm_threads(params) == 4096
    r = m.simulate(v, params, _task(m))
    assert not r.ok and r.error_class == "resources"
    assert m.simulate(v, v.defaults(), _task(m)).ok


def test_time_model_follows_the_register_patch_and_depth():
    gpu = GPUS["H100"]
    base = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 16, "THREAD_M": 4, "THREAD_N": 4}
    # the order the H100 measured (the third session's profiler, fused-s4747-000004: 512 x 512 x 1024, 64 blocks):
    # 4x4 105.7 us, 2x2 120.8, 8x8 247.8 -- 64 threads a block stage their tiles in 8 batches of loads a step
    assert cuda_gemm_ms(64, base, 1024, gpu) < cuda_gemm_ms(64, {**base, "THREAD_M": 2, "THREAD_N": 2}, 1024, gpu) \
        < cuda_gemm_ms(64, {**base, "THREAD_M": 8, "THREAD_N": 8}, 1024, gpu)
    # twice as deep: about twice the time; the same work on the H200's equal SMs: the same time
    assert cuda_gemm_ms(8, base, 2048, gpu) == pytest.approx(2 * cuda_gemm_ms(8, base, 1024, gpu), rel=0.01)
    assert cuda_gemm_ms(8, base, 1024, GPUS["H200"]) == pytest.approx(cuda_gemm_ms(8, base, 1024, gpu), rel=0.01)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc compiles the kernels (device code only)")
@pytest.mark.parametrize("op", PROGRAMS[:2])
def test_gemm_epilogue_kernels_compile(op, tmp_path):
    m = fused_module(op + "_cuda")
    v = m.variant("gemm_epilogue")
    for params in (v.defaults(), {**v.defaults(), "BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 32, "THREAD_M": 8, "THREAD_N": 2}):
        src = CUDA_STRING.search(v.render(params, _task(m))).group(1)
        path = tmp_path / "cuda.cu"
        path.write_text("#include <cuda_runtime.h>\n" + src[:src.index("\ntorch::Tensor ")] + "\n")
        r = subprocess.run(["nvcc", "-c", "-std=c++17", "-O3", "-arch=sm_90a", str(path), "-o", os.devnull],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]


# bf16 programs whose CUDA gemm_epilogue offers half_accumulator (the accumulators kept in bf16, every product rounded
# and added): every one of seed 0's first 1,500 with a GEMM and an elementwise tail does (K 128-2048), and its real output
# breaks; where a reduction follows the GEMM (bmm -> tanh -> sum, bmm -> amax) precision.gemm_breaks does not carry the
# error through it and the bug is not offered, though the real outputs break too (2,156 of 4,096 and 1,227 of 2,048
# elements): the rule errs towards no label. (program, offered)
HALF = {"fused_s0_00045": True,      # linear -> elu -> hardtanh (K 128)
        "fused_s0_00057": True,      # linear -> scale (K 2048)
        "fused_s0_00048": True,      # matmul -> gelu -> softplus (K 256)
        "fused_s0_00254": True,      # matmul -> softplus (K 512)
        "fused_s0_00007": False,     # bmm (K 64) -> tanh -> sum -> scale
        "fused_s0_00040": False}     # bmm -> amax


def _half_failures(op: str) -> int:
    """Elements of the program's real output (PyTorch CPU, bf16) outside KernelBench's allclose when its GEMM keeps
    each output's sum in bf16, one product at a time."""
    torch = pytest.importorskip("torch", reason="PyTorch (CPU) runs the program")
    from kernelstrain.fused.execute import KB_TOLERANCE, _load

    def sequential(a, b):                       # a [..., M, K] @ b [..., K, N], the sum rounded to bf16 at every add
        acc = torch.zeros(*a.shape[:-1], b.shape[-1], dtype=torch.float32)
        for k in range(a.shape[-1]):
            p = (a[..., :, k:k + 1].float() * b[..., k:k + 1, :].float()).bfloat16().float()
            acc = (acc + p).bfloat16().float()
        return acc

    m = fused_module(op + "_cuda")
    mod = _load(m.view.row["source"], op)
    F = torch.nn.functional
    linear, matmul, bmm = F.linear, torch.matmul, torch.bmm
    outputs = []
    for half in (False, True):
        torch.manual_seed(42)
        model = mod.Model(*mod.get_init_inputs()).to(torch.bfloat16)
        torch.manual_seed(1000)
        if half:
            F.linear = lambda x, w, b=None: (sequential(x, w.t()) + (0 if b is None else b.float())).bfloat16()
            torch.matmul = lambda a, b: sequential(a, b).bfloat16()
            torch.bmm = lambda a, b: sequential(a, b).bfloat16()
        try:
            with torch.no_grad():
                outputs.append(model(*[x.bfloat16() if x.is_floating_point() else x for x in mod.get_inputs()]).float())
        finally:
            F.linear, torch.matmul, torch.bmm = linear, matmul, bmm
    tol = KB_TOLERANCE["bf16"]
    return int((~torch.isclose(outputs[1], outputs[0], atol=tol, rtol=tol)).sum())


@pytest.mark.parametrize("op", sorted(HALF))
def test_half_accumulator_is_offered_where_the_real_output_breaks(op):
    m = fused_module(op + "_cuda")
    v = m.variant("gemm_epilogue")
    offered = "half_accumulator" in v.bugs_for("bf16", v.defaults())
    assert offered == HALF[op]
    if offered:
        assert _half_failures(op) >= 5
        code = m.render(v, v.defaults(), make_task(m, "H100", m.dtypes[0], m.shapes[0]), bug="half_accumulator")
        assert "__nv_bfloat16 acc[" in code
