"""`verify` compiles every candidate for its own GPU's target: sm_86 (A10, RTX A6000) and
sm_120a (RTX 5090) with nvcc, GPUTarget cuda 86 / 120 with Triton."""
import shutil

import pytest

from kernelstrain import verify
from kernelstrain.compilers import NVCC_GENCODE, CompileResult
from kernelstrain.fields import params_field, shape_field
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def job(module: str, gpu: str, tag: str, shape: dict, dtype: str = "bf16") -> dict:
    m = REGISTRY[module]
    v = m.variant(tag)
    code = m.render(v, v.defaults(), make_task(m, gpu, dtype, shape))
    return {"module": module, "gpu": gpu, "dtype": dtype, "shape": shape_field(shape), "tag": tag,
            "params": params_field(v.defaults()), "code": code, "status": "ok", "error": None, "smem_bytes": 0}


FP4 = {"M": 1024, "N": 2048, "K": 4096, "G": 32}
SPLITK = {"M": 16, "N": 4096, "K": 14336}


@pytest.mark.parametrize("gpu, arch, gencode", [("A10", "sm_86", "code=sm_86"), ("RTXA6000", "sm_86", "code=sm_86"),
                                                ("RTX5090", "sm_120", "code=sm_120a")])
def test_each_candidate_compiles_for_its_own_target(monkeypatch, gpu, arch, gencode):
    seen = []
    monkeypatch.setattr(verify, "compile_cuda", lambda code, a, k: seen.append(("nvcc", a)) or CompileResult(True, "", 0, 32))
    monkeypatch.setattr(verify, "compile_triton", lambda code, specs, a: seen.append(("triton", a)) or
                        CompileResult(True, "", 0, None))
    verify._compile_job(job("gemm_splitk_cuda", gpu, "cp_async_split_k", SPLITK))
    verify._compile_job(job("gemm_splitk_triton", gpu, "pipelined_split_k", SPLITK))
    assert seen == [("nvcc", arch), ("triton", arch)]
    assert gencode in NVCC_GENCODE[arch]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_sm120a_block_scaled_fp4_compiles_only_for_the_rtx5090():
    """kind::mxf4nvf4 exists on sm_120a alone: the RTX 5090's render builds, the same code for sm_86 fails."""
    ok = verify._compile_job(job("gemm_fp4_cuda", "RTX5090", "mxf4nvf4_block_scaled", FP4))
    assert ok["compiled"], ok["log"]
    a10 = dict(job("gemm_fp4_cuda", "RTX5090", "mxf4nvf4_block_scaled", FP4), gpu="A10")
    bad = verify._compile_job(a10)
    assert not bad["compiled"] and bad["class"] == "arch"
