"""The texts and labels of build failures against the real tools (issue 28): each case renders a
candidate, takes the simulator's / messages' verdict and text, compiles it, and compares the
whole text after path normalisation (compilers.tool_text). Skipped, with the reason, where a
tool is missing."""
import shutil

import pytest

from kernelstrain import messages
from kernelstrain.compilers import compile_cuda, compile_hip, compile_triton, find_hip_compiler, tool_text
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit 12.4+) not installed")
needs_hip = pytest.mark.skipif(find_hip_compiler() is None, reason="no HIP compiler (hipcc, or clang-17+ with HIP headers)")
FLASH = ("flash_prefill_cuda", "online_softmax", "fp16", {"B": 1, "H": 32, "S": 512, "D": 128})


def _case(name, tag, gpu, dtype, shape, params):
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, gpu, dtype, shape)
    return m, v, task, m.render(v, params, task), simulate(m, v, params, task)


@needs_nvcc
@pytest.mark.parametrize("gpu, fails", [("A100", True), ("RTX4090", True), ("H100", False), ("RTX5090", False)])
def test_static_shared_memory_label_and_text_are_ptxas(gpu, fails):
    """49,920 B of static __shared__: over ptxas's 48 KB on sm_80/89, within the arch-specific
    sm_90a / sm_120a limit the H100 and RTX 5090 builds use."""
    name, tag, dtype, shape = FLASH
    m, v, task, code, sim = _case(name, tag, gpu, dtype, shape, {"BLOCK_M": 32, "BLOCK_N": 64, "threads": 128})
    real = compile_cuda(code, task.gpu.arch, f"{m.op}_kernel")
    assert real.ok == sim.ok == (not fails)
    if fails:
        assert sim.error_class == real.error_class == "smem" and tool_text(real.log) == sim.error


@needs_hip
def test_static_lds_overflow_is_clangs_text():
    name, tag, dtype, shape = FLASH
    m, v, task, code, sim = _case(name, tag, "MI300X", dtype, shape, {"BLOCK_M": 128, "BLOCK_N": 64, "threads": 128})
    real = compile_hip(code, task.gpu.arch, f"{m.op}_kernel")
    assert not real.ok and sim.error_class == "smem" and tool_text(real.log) == sim.error


def test_triton_fp8_arch_error_is_tritons_text():
    pytest.importorskip("triton", reason="triton not installed: pip install 'kernelstrain[verify]'")
    m = REGISTRY["fp8_quant_triton"]
    for tag, gpu in (("persistent_rows", "A100"), ("fp8_native_cast", "A10")):
        v = m.variant(tag)
        task = make_task(m, gpu, "fp16", m.shapes[0])
        code = m.render(v, v.defaults(), task)
        real = compile_triton(code, m.compile_specs(v, v.defaults(), task), task.gpu.arch)
        assert not real.ok and tool_text(real.log) == messages.arch_error(v.needs - task.gpu.features, task, m, code)
