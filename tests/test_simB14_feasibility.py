"""simB session 14 (issue 30 item 2): what scripts/simB_align_audit.py found feasibility.py missing, each at a shape
`kernelstrain sim` accepts.

- Tensors of a dtype that is not a task dtype (gemm_fp4's operands as raw uint8 codes, gemm_int4's uint32-packed
  weights) had no row, so no rule checked them: at K = 4080 (G = 16) gemm_fp4_cuda's A and B rows are 2,040 bytes, and
  cp_async_dequant copied them with 16-byte cp.async, timed ok.
- A cp.async's source was never traced: it reached only the task-dtype tensors (C here).
- `base = is_a ? A : B` took its condition's name for its value: `is_a = r < BM` shares a name with a local array
  `r[4]` of another function, so base, and `src = base + ...`, counted as on-chip, and mma_reg_dequant's uint4 loads
  of src were never checked.
- With the packed weights traced, gemm_int4_cuda's mma_lop3_dequant stops blaming its uint4 weight loads on the
  scales (rows K / 128 x 2 bytes): at K = 3840 (60-byte scale rows, read as half2) it runs.
"""
import pytest

from kernelstrain import feasibility
from kernelstrain.errors import UsageError
from kernelstrain.ops import REGISTRY
from kernelstrain.shapes import sim_report
from kernelstrain.sim import simulate, writable
from kernelstrain.tasks import make_task

FP4_K4080 = {"M": 1024, "N": 2048, "K": 4080, "G": 16}


def test_rows_of_every_declared_dtype():
    m = REGISTRY["gemm_fp4_cuda"]
    rows = {name: row for name, row, _ in feasibility.rows(m, make_task(m, "H100", "bf16", FP4_K4080))}
    assert rows["A"] == rows["B"] == 2040 and rows["scale_a"] == 255 and rows["C"] == 4096
    q = REGISTRY["gemm_int4_cuda"]
    rows = {name: row for name, row, _ in feasibility.rows(q, make_task(q, "H100", "fp16", {"M": 16, "N": 4096, "K": 3840}))}
    assert rows["qweight"] == 3840 // 8 * 4


@pytest.mark.parametrize("tag", ["cp_async_dequant", "mma_reg_dequant"])
def test_fp4_16_byte_copies_of_misaligned_packed_rows_fault(tag):
    """cp_async_dequant's cp.async and mma_reg_dequant's uint4 loads take 16-byte chunks of A's and B's rows: at
    2,040-byte rows every odd row starts 8 bytes off. Both ran ok before."""
    m = REGISTRY["gemm_fp4_cuda"]
    v = m.variant(tag)
    task = make_task(m, "H100", "bf16", FP4_K4080)
    assert feasibility.violation(m, v, v.defaults(), task) == ("vector16", "A", 2040, 16)
    r = simulate(m, v, v.defaults(), task)
    assert not r.ok and r.error_class == "align" and "misaligned address" in r.error
    assert not writable(m, v, v.defaults(), task)
    for k in (4096, 4224):                                  # 2,048 / 2,112-byte rows: aligned
        aligned = make_task(m, "H100", "bf16", {**FP4_K4080, "K": k})
        assert feasibility.violation(m, v, v.defaults(), aligned) is None and simulate(m, v, v.defaults(), aligned).ok
    # `sim` refuses the shape itself since session 14 (the op's K is a multiple of 128: tests/test_shapes_fp4.py); the
    # rule above still guards any task built past the CLI
    with pytest.raises(UsageError, match="K=4080"):
        sim_report("H100", "gemm_fp4", "cuda", "bf16", "M=1024,N=2048,K=4080,G=16")


def test_cp_async_sources_are_traced():
    m = REGISTRY["gemm_fp4_cuda"]
    task = make_task(m, "H100", "bf16", FP4_K4080)
    code = m.render(m.variant("cp_async_dequant"), m.variant("cp_async_dequant").defaults(), task)
    assert feasibility.copied_by_cp_async(code, feasibility.rows(m, task)) == {"A", "B"}
    g = REGISTRY["gemm_fp16_cuda"]
    gt = make_task(g, "H100", "fp16", {"M": 1000, "N": 3000, "K": 777})
    code = g.render(g.variant("cp_async_pipeline"), g.variant("cp_async_pipeline").defaults(), gt)
    assert feasibility.copied_by_cp_async(code, feasibility.rows(g, gt)) <= {"A", "B"}


def test_a_ternary_pointer_is_its_branches():
    code = ("void f() { float r[4]; }\n"
            "void g(const uint8_t* A, const uint8_t* B, int i) {\n"
            "    const bool is_a = r < 64;\n    const uint8_t* base = is_a ? A : B;\n"
            "    const uint8_t* src = base + i;\n    __shared__ float tile[64];\n    float* t = i ? tile : tile + 1;\n}\n")
    names = feasibility.on_chip_names(code)
    assert "base" not in names and "src" not in names and {"tile", "t"} <= names


def test_int4_weights_traced_free_the_scales():
    """K = 3840: scales rows of 60 bytes (a half2 read is aligned), qweight rows of 1,920: nothing misaligned for
    what mma_lop3_dequant does; the rule had blamed its uint4 weight loads on the scales."""
    m = REGISTRY["gemm_int4_cuda"]
    v = m.variant("mma_lop3_dequant")
    task = make_task(m, "H100", "fp16", {"M": 16, "N": 4096, "K": 3840})
    assert feasibility.violation(m, v, v.defaults(), task) is None
    assert simulate(m, v, v.defaults(), task).ok
    odd = make_task(m, "H100", "fp16", {"M": 16, "N": 4096, "K": 3968})      # scales rows of 62 bytes
    assert feasibility.violation(m, v, v.defaults(), odd)[:2] == ("vector4", "scales")


def test_tensor_map_strides_as_the_driver_gets_them():
    """dequant_then_wgmma maps bf16 copies of A and B (K x 2 bytes a row) that are no entry tensor: at K = 4095 the
    maps' global stride is 8,190 bytes, which cuTensorMapEncodeTiled refuses (the kernel then runs on no map:
    'an illegal instruction'); before, sim timed it ok. The helper's strides[] is read with its parameters bound."""
    m = REGISTRY["gemm_fp4_cuda"]
    v = m.variant("dequant_then_wgmma")
    odd = make_task(m, "H100", "bf16", {**FP4_K4080, "K": 4095})
    code = m.render(v, v.defaults(), odd)
    assert feasibility.map_strides(code, odd.dims) == [("A", 8190), ("B", 8190)]
    assert feasibility.violation(m, v, v.defaults(), odd) == ("tma", "A", 8190, 16)
    r = simulate(m, v, v.defaults(), odd)
    assert not r.ok and "an illegal instruction was encountered" in r.error
    even = make_task(m, "H100", "bf16", FP4_K4080)
    assert feasibility.violation(m, v, v.defaults(), even) is None and simulate(m, v, v.defaults(), even).ok
    t = REGISTRY["transpose_cuda"]
    task = make_task(t, "H100", "fp16", {"R": 4095, "C": 4096})
    code = t.render(t.variant("tma_swizzled"), t.variant("tma_swizzled").defaults(), task)
    assert sorted(s for _, s in feasibility.map_strides(code, task.dims)) == [8190, 8192]
