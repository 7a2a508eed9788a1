"""roomK (issue 26 room): the wider tiles of the register-blocked FMA rungs (gemm_fp16_cuda register_blocked BK 32 and
BM / BN 256; grouped_gemm_cuda expert_lookup_single BM 128 / BN 256) and grouped_gemm_cuda cp_async_pipeline's
deterministic off_by_one. What nvcc 13.0 said of them here (sm_90a builds; sm_80 refuses the static tiles past 48 KB:
"uses too much shared data (0xc08c bytes, 0xc000 max)" for expert_lookup_single 128 x 256) is what the model says."""
import difflib

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

FP16, GROUPED = REGISTRY["gemm_fp16_cuda"], REGISTRY["grouped_gemm_cuda"]
GEMM = {"M": 4096, "N": 4096, "K": 4096}
MOE = {"T": 4096, "E": 8, "K": 4096, "N": 14336, "topk": 2}


def _sim(module, tag, gpu, shape, dtype, **params):
    v = module.variant(tag)
    return simulate(module, v, {**v.defaults(), **params}, make_task(module, gpu, dtype, shape))


def test_register_blocked_wide_tiles_render_512_threads_and_launch_only_under_1024():
    v = FP16.variant("register_blocked")
    assert 256 in v.param("BM").values and 256 in v.param("BN").values and 32 in v.param("BK").values
    code = FP16.render(v, {**v.defaults(), "BM": 256, "BN": 128, "TM": 8}, make_task(FP16, "H100", "fp16", GEMM))
    assert "#define BM 256" in code and "#define THREADS ((BM / TM) * (BN / TN))" in code
    assert _sim(FP16, "register_blocked", "H100", GEMM, "fp16", BM=256, BN=128, TM=8).ok
    # TM 4 at 256 x 128: 2,048 threads a block, which no launch accepts
    bad = _sim(FP16, "register_blocked", "H100", GEMM, "fp16", BM=256, BN=128, TM=4)
    assert not bad.ok and "invalid configuration argument" in bad.error


def test_static_tiles_past_48_kb_fail_where_ptxas_refuses_them():
    # expert_lookup_single 128 x 256: 49,292 bytes of static smem (ptxas, sm_80: 0xc08c); sm_90a takes it
    a100 = _sim(GROUPED, "expert_lookup_single", "A100", MOE, "bf16", BM=128, BN=256)
    assert not a100.ok and "uses too much shared data (0xc08c bytes, 0xc000 max)" in a100.error
    assert _sim(GROUPED, "expert_lookup_single", "H100", MOE, "bf16", BM=128, BN=256).ok
    # register_blocked 256 x 128 at BK 32: (256 + 128 + 8) x 32 x 4 = 50,176 bytes (ptxas, sm_80: 0xc400)
    assert not _sim(FP16, "register_blocked", "A100", GEMM, "fp16", BM=256, BN=128, BK=32, TM=8).ok
    assert _sim(FP16, "register_blocked", "A100", GEMM, "fp16", BM=256, BN=128, BK=16, TM=8).ok


def test_the_ring_off_by_one_drops_the_last_k_tile_and_nothing_else():
    v = GROUPED.variant("cp_async_pipeline")
    task = make_task(GROUPED, "H100", "bf16", GROUPED.check_shape)
    good, bad = (GROUPED.render(v, v.defaults(), task, bug) for bug in (None, "off_by_one"))
    changed = [line for line in difflib.unified_diff(good.splitlines(), bad.splitlines(), n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-    for (int kt = 0; kt < k_tiles; ++kt) {", "+    for (int kt = 0; kt < k_tiles - 1; ++kt) {"]
    # the wgmma ring shares the loop and keeps its full trip count
    wg = GROUPED.variant("wgmma_pipeline")
    assert "kt < k_tiles; ++kt" in GROUPED.render(wg, wg.defaults(), task)
