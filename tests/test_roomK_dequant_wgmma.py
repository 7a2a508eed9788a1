"""roomK: the dequant_then_wgmma rungs of gemm_fp4_cuda and gemm_int4_cuda (_dequant_wgmma.py): a copy pass writes
16-bit operands, then the Hopper TMA + wgmma GEMM runs on them. Device-unverified until scripts/roomK_device.py plan
k5 runs."""
from kernelstrain.ops import REGISTRY
from kernelstrain.ops.matmul import _dequant_wgmma
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

CASES = (("gemm_fp4_cuda", "cp_async_dequant", {"M": 1024, "N": 2048, "K": 4096, "G": 16}),
         ("gemm_int4_cuda", "split_k_small_m", {"M": 1024, "N": 14336, "K": 4096}))


def _render(name, shape, bug=None, dtype="bf16", **params):
    m = REGISTRY[name]
    v = m.variant("dequant_then_wgmma")
    return m.render(v, {**v.defaults(), **params}, make_task(m, "H100", dtype, shape), bug)


def test_the_rung_follows_the_register_dequant_rungs_and_runs_only_where_wgmma_does():
    for name, below, shape in CASES:
        m = REGISTRY[name]
        tags = [v.tag for v in m.variants]
        assert tags.index("dequant_then_wgmma") == tags.index(below) + 1, tags
        v = m.variant("dequant_then_wgmma")
        for gpu, ok in (("H100", True), ("H200", True), ("A100", False)):
            assert simulate(m, v, v.defaults(), make_task(m, gpu, "bf16", shape)).ok is ok, (name, gpu)


def test_the_code_copies_then_calls_the_wgmma_kernel_and_the_bugs_change_it():
    for name, _, shape in CASES:
        op = REGISTRY[name].op
        good = _render(name, shape)
        assert f"{op}_wgmma(" in good and "wgmma.mma_async" in good and "cudaMallocAsync" in good
        assert "#include <cudaTypedefs.h>" in good            # the tensor-map encoder's type
        assert f"#define BN 256" in _render(name, shape, BN=256)
        scaled = good.count(" * s)")
        assert scaled and _render(name, shape, bug="missing_scale").count(" * s)") == 0, name
        assert "kt < KT - 1;" in _render(name, shape, bug="off_by_one") and "kt < KT - 1;" not in good
    fp4 = _render("gemm_fp4_cuda", CASES[0][2])
    assert "fp4_to_16bit<<<" in fp4 and fp4.count("fp4_to_16bit<<<") == 2       # A and B
    assert _render("gemm_int4_cuda", CASES[1][2]).count("dequant_int4<<<") == 1  # W only


def test_the_copy_pass_is_its_bytes_at_the_copy_bandwidth_before_the_gemm():
    for name, _, shape in CASES:
        m = REGISTRY[name]
        v = m.variant("dequant_then_wgmma")
        task = make_task(m, "H100", "bf16", shape)
        launch = v.launch(v.defaults(), task)
        n, k = shape["N"], shape["K"]
        w16 = n * k * 2 + (shape["M"] * k * 2 if name == "gemm_fp4_cuda" else 0)   # the 16-bit copies written
        assert launch.later_s > w16 / (task.gpu.bw_tbs * 1e12 * _dequant_wgmma.COPY_EFF), name
        assert launch.launches == (3 if name == "gemm_fp4_cuda" else 2)
