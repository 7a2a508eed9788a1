"""Rungs of the literature added to the attention and matmul ladders. FP8 GEMM: the Marlin-style Ampere rung
(e4m3 bytes through a cp.async ring, widened to fp16 in registers), the persistent wgmma rung and
the split-K wgmma rung (gemm_fp8_cuda, gemm_fp8_blockwise_cuda). Flash prefill: the Hopper wgmma rung."""
import re
import shutil
import struct

import pytest

from kernelstrain.compilers import compile_cuda
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import built_launch, simulate
from kernelstrain.tasks import make_task

FP8 = ("gemm_fp8_cuda", "gemm_fp8_blockwise_cuda")
SMALL_M = {"gemm_fp8_cuda": {"M": 128, "N": 4096, "K": 14336}, "gemm_fp8_blockwise_cuda": {"M": 128, "N": 4096, "K": 7168}}
DEQUANT = {"gemm_fp8_cuda": "dequant_mma", "gemm_fp8_blockwise_cuda": "dequant_mma_promote"}


def e4m3(b: int) -> float:
    """Independent decode of an e4m3fn byte: bias 7, subnormals m * 2^-9."""
    e, m = (b >> 3) & 0xF, b & 7
    mag = (1 + m / 8) * 2.0 ** (e - 7) if e else m * 2.0 ** -9
    return -mag if b & 0x80 else mag


def widen(src: str, b: int) -> float:
    """The render's e4m3x2_to_f16x2 on byte b, replayed: its masks and shifts read from the code."""
    sign, sign_shift, body, body_shift, bias = re.search(
        r"\(\(x & (0x[0-9A-F]+)u\) << (\d+)\) \| \(\(x & (0x[0-9A-F]+)u\) << (\d+)\);\n.*__float2half2_rn\(([\d.]+)f\)",
        src).groups()
    low = lambda mask: int(mask, 16) & 0xFFFF   # noqa: E731 -- the lane of byte 0
    h = ((b & low(sign)) << int(sign_shift)) | ((b & low(body)) << int(body_shift))
    return struct.unpack("<e", h.to_bytes(2, "little"))[0] * float(bias)


@pytest.mark.parametrize("name", FP8)
def test_register_widening_is_exact_for_every_e4m3_byte(name):
    m = REGISTRY[name]
    v = m.variant("cp_async_reg_dequant")
    src = m.render(v, v.defaults(), make_task(m, "A100", "fp8", SMALL_M[name]))
    finite = [b for b in range(256) if b & 0x7F != 0x7F]          # 0x7F / 0xFF are NaN
    assert [widen(src, b) for b in finite] == [e4m3(b) for b in finite]
    bug = m.render(v, v.defaults(), make_task(m, "A100", "fp8", SMALL_M[name]), "missing_scale")
    assert widen(bug, 0x38) == 2.0 ** -8       # 1.0 without the exponent-bias restore


@pytest.mark.parametrize("gpu", ["A100", "A10"])
@pytest.mark.parametrize("name", FP8)
def test_ampere_gets_a_rung_past_widening_in_smem(name, gpu):
    """Without fp8 tensor cores the fp8 rungs fail; the register-widening rung runs, and at small M
    (latency-bound: the loads must overlap the mmas) it beats widening while staging."""
    m = REGISTRY[name]
    t = make_task(m, gpu, "fp8", SMALL_M[name])
    reg, old = m.variant("cp_async_reg_dequant"), m.variant(DEQUANT[name])
    fast = simulate(m, reg, reg.defaults(), t)
    assert fast.ok and not simulate(m, m.variants[3], m.variants[3].defaults(), t).ok
    assert fast.time_ms < simulate(m, old, old.defaults(), t).time_ms


@pytest.mark.parametrize("name", FP8)
def test_split_k_grid_and_combine(name):
    m = REGISTRY[name]
    v = m.variant("wgmma_split_k")
    t = make_task(m, "H100", "fp8", SMALL_M[name])
    p = {**v.defaults(), "BM": 128, "BN": 128, "SPLITS": 4}
    launch = built_launch(m, v, p, t)
    assert launch.grid == 4 * (128 // 128) * (4096 // 128) and launch.launches == 2
    src, bug = m.render(v, p, t), m.render(v, p, t, "bad_combine_index")
    assert "s < SPLITS;" in src and "s < SPLITS - 1;" in bug
    assert "dim3(tiles, SPLITS)" in src and "KT0 = min(KT_ALL, (int)blockIdx.y * KT_PER)" in src


def test_persistent_rung_walks_tiles_on_resident_ctas():
    m = REGISTRY["gemm_fp8_cuda"]
    t = make_task(m, "H100", "fp8", {"M": 4096, "N": 4096, "K": 4096})
    per, one = m.variant("wgmma_tma_persistent"), m.variant("wgmma_tma")
    assert built_launch(m, per, per.defaults(), t).grid <= t.gpu.sms < built_launch(m, one, one.defaults(), t).grid
    assert "tile += gridDim.x" in m.render(per, per.defaults(), t)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", FP8)
def test_new_rungs_compile_with_their_bugs(name):
    m = REGISTRY[name]
    for tag, gpu in (("cp_async_reg_dequant", "A100"), ("wgmma_split_k", "H100"), ("wgmma_tma_persistent", "H100")):
        v = m.variant(tag)
        t = make_task(m, gpu, "fp8", SMALL_M[name])
        for bug in (None, *v.bugs):
            result = compile_cuda(m.render(v, v.defaults(), t, bug), t.gpu.arch, f"{m.op}_kernel")
            assert result.ok, (tag, bug, result.log)


# -- flash_prefill_cuda: the Hopper wgmma rung (FlashAttention-3's core) -----------------------------

def test_flash_wgmma_rung_is_hopper_only_and_beats_mma_sync_at_length():
    m = REGISTRY["flash_prefill_cuda"]
    v, fa2 = m.variant("wgmma_warpgroup"), m.variant("cp_async_pipeline")
    for gpu, dtype in (("A100", "fp16"), ("MI300X", "bf16")):
        assert simulate(m, v, v.defaults(), make_task(m, gpu, dtype, {"B": 1, "H": 32, "S": 2048, "D": 128})).error_class == "arch"
    t = make_task(m, "H100", "bf16", {"B": 1, "H": 32, "S": 2048, "D": 128})
    assert simulate(m, v, v.defaults(), t).time_ms < simulate(m, fa2, fa2.defaults(), t).time_ms


def test_flash_wgmma_feeds_p_from_registers_and_v_transposed():
    m = REGISTRY["flash_prefill_cuda"]
    v = m.variant("wgmma_warpgroup")
    src = m.render(v, {"BLOCK_N": 128, "stages": 3}, make_task(m, "H100", "bf16", {"B": 1, "H": 32, "S": 2048, "D": 64}))
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in src            # S = Q K^T, both from smem
    assert "m64n64k16.f32.bf16.bf16 " in src and "{%32, %33, %34, %35}, %36, p, 1, 1, 1;" in src   # A regs, B transposed
    assert "fence.proxy.async.shared::cta" in src                                   # cp.async writes -> async proxy


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_flash_wgmma_compiles_for_every_head_dim_and_tile():
    m = REGISTRY["flash_prefill_cuda"]
    v = m.variant("wgmma_warpgroup")
    for d, bn, st, dtype in ((128, 64, 2, "fp16"), (64, 128, 3, "bf16"), (128, 128, 3, "bf16")):
        t = make_task(m, "H100", dtype, {"B": 1, "H": 32, "S": 512, "D": d})
        for bug in (None, *v.bugs):
            result = compile_cuda(m.render(v, {"BLOCK_N": bn, "stages": st}, t, bug), "sm_90a", "flash_prefill_kernel")
            assert result.ok and "0 bytes spill stores" in result.log, (d, bn, bug, result.log[-2000:])
