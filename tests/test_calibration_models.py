"""Launch-model terms the H200 measurements asked for (issue 17): spills, block-reduction chains, labels."""
from kernelstrain.ops import REGISTRY
from kernelstrain.ops.norms._norms import SPILL_SATURATION, block_row_rounds, triton_spill
from kernelstrain.tasks import make_task


def test_triton_spill_counts_loop_carried_registers_in_full_and_saturates():
    assert triton_spill(500, 255) == 1.0                       # packed / rematerialised: 2x the cap holds
    assert triton_spill(408, 255) == 1.0
    assert triton_spill(408, 255, pinned=192) > 1.5             # accumulators + prefetched row cannot be recomputed
    steps = [triton_spill(r, 255) for r in (600, 1200, 4000, 40000)]
    assert steps == sorted(steps) and steps[-1] < 1.0 + SPILL_SATURATION


def test_layernorm_bwd_prefetch_spills_at_64_elements_a_thread_not_at_32():
    m = REGISTRY["layernorm_bwd_triton"]
    v = m.variant("persistent_prefetch")
    task = make_task(m, "H200", "bf16", {"T": 16384, "D": 8192})
    wide = m.launch(v, {"num_warps": 8, "programs_per_sm": 1}, task)      # 32 elements a thread
    narrow = m.launch(v, {"num_warps": 4, "programs_per_sm": 1}, task)    # 64
    persistent = m.launch(m.variant("persistent"), {"num_warps": 4, "programs_per_sm": 1}, task)
    assert narrow.traffic > 1.3 * wide.traffic
    assert narrow.traffic > 1.3 * persistent.traffic


def test_block_per_row_kernels_wait_longer_on_wider_blocks():
    assert block_row_rounds(128, 32, 1) < block_row_rounds(512, 32, 1) < block_row_rounds(1024, 32, 2)
    for name, shape in (("softmax_cuda", {"R": 16384, "C": 1024}), ("layernorm_cuda", {"T": 16384, "D": 1024}),
                        ("rmsnorm_cuda", {"T": 16384, "D": 1024})):
        m = REGISTRY[name]
        v = m.variant("smem_block_reduce")
        task = make_task(m, "H200", "fp16", shape)
        small, big = (m.launch(v, {"threads": t}, task) for t in (128, 1024))
        assert big.rounds > small.rounds >= 2


def test_flash_prefill_pipeline_injects_a_bug_that_fails_at_every_shape():
    m = REGISTRY["flash_prefill_cuda"]
    v = m.variant("cp_async_pipeline")
    assert "missing_barrier" not in v.bugs and "off_by_one" in v.bugs
    task = make_task(m, "H200", "fp16", {"B": 1, "H": 32, "S": 512, "D": 128})
    params = {"BLOCK_M": 64, "BLOCK_N": 128, "stages": 2}
    good, bad = m.render(v, params, task), m.render(v, params, task, "off_by_one")
    assert " > row0 + lane / 4" in good and " >= row0 + lane / 4" in bad and " >= row0" not in good


def test_spilled_loop_carried_registers_do_not_saturate():
    # a spilled accumulator is reloaded every row: more of it costs more, past the row term's ceiling
    low, high = triton_spill(408, 255, pinned=192), triton_spill(1200, 255, pinned=700)
    assert high > low and high > 1.0 + SPILL_SATURATION


def test_gemm_triton_accumulator_past_the_register_file_spills():
    m = REGISTRY["gemm_fp16_triton"]
    v = m.variant("pipelined_stages")
    task = make_task(m, "H200", "bf16", {"M": 2048, "N": 2048, "K": 2048})
    base = {"BLOCK_M": 128, "BLOCK_K": 32, "num_stages": 3}
    spilled = m.launch(v, {**base, "BLOCK_N": 256, "num_warps": 4}, task)     # 256 fp32 accumulators a thread
    held = m.launch(v, {**base, "BLOCK_N": 256, "num_warps": 8}, task)        # 128
    assert spilled.compute_scale < 0.25 * held.compute_scale


def test_gemm_triton_broadcast_sum_gains_with_block_k():
    m = REGISTRY["gemm_fp16_triton"]
    v = m.variant("broadcast_sum")
    task = make_task(m, "H200", "bf16", {"M": 2048, "N": 2048, "K": 2048})
    k8, k16 = (m.launch(v, {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": bk}, task).compute_scale for bk in (8, 16))
    assert k16 > 1.3 * k8


def test_mla_naive_two_pass_slows_with_warps_over_a_small_tile():
    m = REGISTRY["mla_decode_triton"]
    v = m.variant("naive_two_pass")
    task = make_task(m, "H200", "fp16", {"B": 32, "H": 128, "S": 4000})
    scales = [m.launch(v, {"BLOCK_N": 16, "num_warps": w}, task).compute_scale for w in (2, 4, 8)]
    assert scales == sorted(scales, reverse=True) and scales[0] > 3 * scales[-1]


def test_softmax_triton_row_spills_like_rmsnorm_with_the_prefetched_row_pinned():
    """H100, fp32 R=4096 C=32000 (measurements/h100_gpucheck_kigrid.json): persistent on 8 warps (355 registers
    wanted, cap 255) ran 1.15x the unspilled whole-row rung, on 4 warps (694, the prefetched row loop-carried)
    7.7x. The spill is triton_spill's, not a flat 2.5x at both; H200 fp16 C=151936: persistent 2.4-2.8x whole-row."""
    m = REGISTRY["softmax_triton"]
    h100 = make_task(m, "H100", "fp32", {"R": 4096, "C": 32000})
    persistent, whole = m.variant("persistent"), m.variant("whole_row_registers")
    eight = m.launch(persistent, {"num_warps": 8, "programs_per_sm": 2}, h100)
    four = m.launch(persistent, {"num_warps": 4, "programs_per_sm": 2}, h100)
    assert eight.traffic < 1.2 and four.traffic > 4 * eight.traffic
    h200 = make_task(m, "H200", "fp16", {"R": 256, "C": 151936})
    p, w = m.launch(persistent, {"num_warps": 8, "programs_per_sm": 2}, h200), m.launch(whole, {"num_warps": 8}, h200)
    assert 1.5 < p.traffic / w.traffic < 4.0
