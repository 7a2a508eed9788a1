"""simB session 14 (issue 30 item 2): scripts/simB_align_audit.py reads the rules a build or launch enforces off each
candidate's rendered code, apart from kernelstrain/feasibility.py; no candidate `sim` times ok at an off-menu shape
breaks one."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import simB_align_audit as audit  # noqa: E402
from kernelstrain.knobs import render  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402


def findings_of(name: str, tag: str, shape: dict, params: dict | None = None, dtype: str = "fp16") -> list:
    """The audit's findings for one candidate's code, whatever `sim` says of it."""
    m = REGISTRY[name]
    v = m.variant(tag)
    params = {**v.defaults(), **(params or {})}
    task = make_task(m, "H100", dtype, shape)
    code = render(m, v, params, task)
    if m.impl == "triton":
        return audit.triton_findings(m, v, params, task, code)[0]
    return audit.cuda_findings(m, task, code, audit.entry_rows(m, task))[0]


def test_the_audit_sees_each_rule_broken():
    """Each check names the break where the code has one (the candidates sim refuses there) and stays quiet on
    the aligned twin: the audit is not a check that cannot fail."""
    odd = {"M": 1000, "N": 3000, "K": 777}
    even = {"M": 1000, "N": 3000, "K": 776}
    assert {r for r, _ in findings_of("gemm_fp16_triton", "persistent_tma", odd)} == {"tma_stride"}
    assert findings_of("gemm_fp16_triton", "persistent_tma", even) == []
    assert {r for r, _ in findings_of("gemm_fp16_cuda", "wgmma_tma", odd)} == {"tma_stride"}
    assert findings_of("gemm_fp16_cuda", "wgmma_tma", even) == []
    assert "vector" in {r for r, _ in findings_of("rmsnorm_cuda", "vectorized_uint4", {"T": 64, "D": 4095})}
    assert findings_of("rmsnorm_cuda", "vectorized_uint4", {"T": 64, "D": 4096}) == []
    assert "cp_async" in {r for r, _ in findings_of("gemm_fp16_cuda", "cp_async_pipeline", {**odd, "N": 3001})}
    # the boxes: a Triton block of 4 fp16 keys inner (8 bytes), a CUDA box of 512 rows and a 72-column inner box
    m = REGISTRY["gemm_fp16_triton"]
    v = m.variant("persistent_tma")
    task = make_task(m, "H100", "fp16", even)
    code = render(m, v, v.defaults(), task).replace("block_shape=[BLOCK_M, BLOCK_K]", "block_shape=[BLOCK_M, 4]")
    assert [r for r, _ in audit.triton_findings(m, v, v.defaults(), task, code)[0]] == ["tma_box"]
    box = ("#define BK 72\nstatic CUtensorMap wide_map(const void* base, int rows, int K) {\n    CUtensorMap map;\n"
           "    const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)K * 2};\n"
           "    const cuuint32_t box[2] = {BK, 512}, unit[2] = {1, 1};\n"
           "    encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, base, dims, strides, box, unit, CU_TENSOR_MAP_SWIZZLE_128B);\n"
           "    return map;\n}\nvoid host() { const CUtensorMap ta = wide_map(A, M, K); }\n")
    texts = [t for r, t in audit.cuda_findings(REGISTRY["gemm_fp16_cuda"], task, "cuTensorMapEncodeTiled\n" + box, {})[0]]
    assert any("> 256" in t for t in texts) and any("swizzle span" in t for t in texts)

def test_wgmma_instruction_shapes():
    """wgmma's shape rule, read off the instruction text: M 64, N a multiple of 8 up to 256, K by input type."""
    from kernelstrain.ops import REGISTRY as R
    m = R["gemm_fp16_cuda"]
    task = make_task(m, "H100", "fp16", {"M": 1024, "N": 1024, "K": 1024})
    bad = "wgmma.mma_async.sync.aligned.m64n260k16.f32.f16.f16 ; wgmma.mma_async.sync.aligned.m64n128k32.f32.bf16.bf16"
    rules = [r for r, _ in audit.cuda_findings(m, task, bad, {})[0]]
    assert rules == ["wgmma", "wgmma"]
    assert audit.cuda_findings(m, task, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", {})[0] == []


@pytest.mark.parametrize("name", ["gemm_fp16_triton", "gemm_fp16_cuda", "transpose_cuda", "embedding_gather_cuda",
                                  "gemm_fp8_cuda", "flash_prefill_triton", "grouped_gemm_triton", "kv_append_cuda"])
def test_no_ok_candidate_breaks_a_rule_off_the_menus(name):
    """Over the audit's off-menu shapes (rows 1, 2, 4, 8 elements short, one dim odd, tiny, huge), every dtype, on
    the H100: every candidate sim times ok passes every rule the audit reads off its code."""
    counts, findings = audit.audit([name], "H100", 3, False)
    assert counts["ok"] > 0
    assert findings == []
