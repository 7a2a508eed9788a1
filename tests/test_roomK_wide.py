"""roomK (issue 26 room, this session): grouped_gemm_cuda wgmma_pipeline's two consumer warpgroups (BM 128), the mma
rungs' 256-wide N tiles (modelled, not offered: see grouped_gemm_cuda.py), gemm_fp4_triton pipelined_copies' 256-row
tiles. What ptxas (nvcc 13.0, sm_90a, -Xptxas -v)
said of them here is what the launch models say: the renders build one warpgroup per 64 rows, and the 128 x 256
mma.sync tiles spill (255 registers, 580 / 1,912 bytes of spill stores for BK 32 / 64) where 64 x 256 does not
(237 / 240 registers)."""
from kernelstrain import knobs
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

GROUPED, FP4 = REGISTRY["grouped_gemm_cuda"], REGISTRY["gemm_fp4_triton"]
MOE = {"T": 2048, "E": 64, "K": 2048, "N": 2816, "topk": 6}


def _run(module, tag, gpu, shape, dtype, **params):
    v = module.variant(tag)
    p = {**v.defaults(), **params}
    task = make_task(module, gpu, dtype, shape)
    return simulate(module, v, p, task), knobs.launch(module, v, p, task), module.render(v, p, task)


def test_wgmma_pipeline_bm128_is_two_warpgroups_over_one_b_tile():
    # off the menu until a device times it (plans k8 / k10): the rung offers BN, STAGES and BK only
    assert "BM" not in [p.name for p in GROUPED.variant("wgmma_pipeline").params]
    r64, l64, c64 = _run(GROUPED, "wgmma_pipeline", "H100", MOE, "bf16", BM=64, BN=128, STAGES=4, BK=64)
    r128, l128, c128 = _run(GROUPED, "wgmma_pipeline", "H100", MOE, "bf16", BM=128, BN=128, STAGES=4, BK=64)
    assert r64.ok and r128.ok
    assert (l64.threads, l128.threads) == (128, 256)
    assert "#define BM 128" in c128 and "#define THREADS (BM * 2)" in c128 and "__launch_bounds__(THREADS)" in c128
    assert "make_desc(sa + wg * WG_A_BYTES + kk * 256)" in c128 and "<<<grid, THREADS, smem, stream>>>" in c128
    # a stage holds both warpgroups' A rows and the one B tile they share
    assert l128.smem_bytes - l64.smem_bytes == 4 * 64 * 64 * 2 + 64 * 4
    # the missing_barrier bug still leaves the ids of rows past the first BM threads unpublished
    v = GROUPED.variant("wgmma_pipeline")
    bug = GROUPED.render(v, {**v.defaults(), "BM": 128}, make_task(GROUPED, "H100", "bf16", MOE), "missing_barrier")
    assert "s_ids visible to every thread" not in bug and "s_ids visible to every thread" in c128


def test_cp_async_ring_256_wide_tiles_spill_only_at_128_rows():
    ok, _, _ = _run(GROUPED, "cp_async_pipeline", "H100", MOE, "bf16", BM=64, BN=256, STAGES=4, BK=32)
    spill, l_spill, _ = _run(GROUPED, "cp_async_pipeline", "H100", MOE, "bf16", BM=128, BN=256, STAGES=3, BK=32)
    level, _, _ = _run(GROUPED, "cp_async_pipeline", "H100", MOE, "bf16", BM=128, BN=128, STAGES=3, BK=32)
    assert ok.ok and spill.ok
    assert ok.regs < 255 and l_spill.regs > 255 and spill.regs == 255     # sim.cap_registers spills the rest
    assert spill.time_ms > 1.3 * level.time_ms and spill.time_ms > 1.3 * ok.time_ms


def test_mma_sync_256_wide_tiles_spill_only_at_128_rows():
    assert GROUPED.variant("mma_sync").param("BN").values == GROUPED.variant("cp_async_pipeline").param("BN").values == (64, 128)
    ok, _, _ = _run(GROUPED, "mma_sync", "H100", MOE, "bf16", BM=64, BN=256, BK=64)
    spill, l_spill, _ = _run(GROUPED, "mma_sync", "H100", MOE, "bf16", BM=128, BN=256, BK=64)
    assert ok.ok and spill.ok and ok.regs < 255 and l_spill.regs > 255 and spill.regs == 255
    assert spill.time_ms > 1.3 * ok.time_ms


def test_fp4_copies_model_256_rows_not_256_columns():
    from kernelstrain.ops.matmul.gemm_fp4_triton import WIDE
    v = FP4.variant("pipelined_copies")
    # WIDE's 256 rows are on the copies' menu (TRITON_INTERPRET=1: scripts/roomK_interpret.py), not the other rungs'
    assert v.param("BLOCK_M").values == (64, 128, 256) and WIDE[0].values == (64, 128, 256) and WIDE[1].values == (64, 128)
    assert FP4.variant("pipelined_dequant").param("BLOCK_M").values == (64, 128)
    assert FP4.variant("pipelined_dequant").param("BLOCK_M").values == (64, 128)
    shape = {"M": 4096, "N": 4096, "K": 4096, "G": 32}
    wide, _, code = _run(FP4, "pipelined_copies", "H100", shape, "bf16", BLOCK_M=256, BLOCK_N=128, BLOCK_K=64,
                         num_stages=4, num_warps=8)
    base, _, _ = _run(FP4, "pipelined_copies", "H100", shape, "bf16", BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                      num_stages=4, num_warps=8)
    assert wide.ok and "BLOCK_M=256" in code and wide.time_ms < base.time_ms
    # 256 rows on 4 warps: 256 fp32 accumulators a thread, the spill gemm_fp16_triton's H100 / H200 rows show (4-14x)
    spill, _, _ = _run(FP4, "pipelined_copies", "H100", shape, "bf16", BLOCK_M=256, BLOCK_N=128, BLOCK_K=64,
                       num_stages=4, num_warps=4)
    assert spill.time_ms > 3 * wide.time_ms
