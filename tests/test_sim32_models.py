"""Launch-model fixes of issue 30 from the pooled H100 gpu-check rows (sim, 2026-12-06 afternoon): each against the
H100 rows it rests on, so that a change back fails here (docs/calibration_sim32_h100.md)."""
from test_sim31_models import sim_us


def test_softmax_triton_chunked_rereads_from_l2():
    """R=2048 C=4096: every resident row fits the L2, so the chunked rungs' later passes cost little more than the
    whole row's one read (H100, seeds 95353 / 98282 / 98989, fp32: whole_row_registers 25.2-25.9 us,
    chunked_three_pass 26.9-30.7, online_softmax 26.5-28.4, where three / two DRAM reads modelled 39.9-46.5: 1.4-1.7x;
    seed 98181, bf16: chunked 15.4-17.7, online 16.6). The fp32 rows stay 1.2-1.35x over (the L2 model sends ~18% of
    their 17 MB of resident rows' re-reads to DRAM; the hardware, none): online_softmax BLOCK 4096 35.8 us after the
    rung refit (its ceiling placed against its episodes' peers, docs/calibration_sim33_h100.md), 40.3 on main's model. At R=4096 C=32000 fp32 (128 KB rows,
    resident rows past the L2) chunked ran 705-709 us, 1.96x whole_row's 359."""
    small, big = {"R": 2048, "C": 4096}, {"R": 4096, "C": 32000}
    whole = sim_us("softmax_triton", "whole_row_registers", {"num_warps": 4}, small, "fp32")
    for rung, p, dtype, measured, over in (("chunked_three_pass", {"BLOCK": 4096, "num_warps": 8}, "fp32", 26.85, 1.3),
                                           ("chunked_three_pass", {"BLOCK": 1024, "num_warps": 8, "num_stages": 2}, "fp32",
                                            30.74, 1.3),
                                           ("online_softmax", {"BLOCK": 4096, "num_warps": 8}, "fp32", 26.49, 1.4),
                                           ("online_softmax", {"BLOCK": 2048, "num_warps": 8}, "fp32", 28.24, 1.3),
                                           ("chunked_three_pass", {"BLOCK": 2048, "num_warps": 8}, "bf16", 15.42, 1.25),
                                           ("chunked_three_pass", {"BLOCK": 2048, "num_warps": 4}, "bf16", 17.65, 1.25),
                                           ("online_softmax", {"BLOCK": 1024, "num_warps": 4}, "bf16", 16.62, 1.25)):
        t = sim_us("softmax_triton", rung, p, small, dtype)
        assert 0.8 <= t / measured <= over, (rung, p, dtype, t)
        if dtype == "fp32":
            assert t < 1.6 * whole
    chunked = sim_us("softmax_triton", "chunked_three_pass", {"BLOCK": 4096, "num_warps": 8}, big, "fp32")
    assert 0.8 <= chunked / 705.2 <= 1.25
    assert chunked > 1.5 * sim_us("softmax_triton", "whole_row_registers", {"num_warps": 8}, big, "fp32")


def test_layernorm_triton_welford_issue_floor():
    """welford_chunked at T=8192 D=1024 is bound by its Welford updates and merges, not the DRAM: 2 warps 19.6 us,
    4 warps 25.4-26.2, 8 warps 36.1 on the H100 (whole_row_registers 15.0); at D >= 4096 it streams with its second
    read from L2 (T=4096 D=4096 32.7-36.6, T=8192 D=5120 69.3-75.3, where the DRAM model had 1.23-1.40x)."""
    shape = {"T": 8192, "D": 1024}
    w2 = sim_us("layernorm_triton", "welford_chunked", {"BLOCK": 512, "num_warps": 2}, shape, "fp16")
    w4 = sim_us("layernorm_triton", "welford_chunked", {"BLOCK": 1024, "num_warps": 4}, shape, "bf16")
    w8 = sim_us("layernorm_triton", "welford_chunked", {"BLOCK": 1024, "num_warps": 8, "loop_unroll": 2}, shape, "fp16")
    assert w2 < w4 < w8
    for t, measured in ((w2, 19.6), (w4, 25.4), (w8, 36.1)):
        assert 0.8 <= t / measured <= 1.25
    for shape, p, dtype, measured in (({"T": 4096, "D": 4096}, {"BLOCK": 1024, "num_warps": 4}, "bf16", 32.7),
                                      ({"T": 4096, "D": 4096}, {"BLOCK": 2048, "num_warps": 4}, "fp16", 36.6),
                                      ({"T": 8192, "D": 5120}, {"BLOCK": 1024, "num_warps": 4}, "fp16", 69.3)):
        assert 0.8 <= sim_us("layernorm_triton", "welford_chunked", p, shape, dtype) / measured <= 1.25


def test_layernorm_cuda_smem_block_reduce_rereads_from_l2():
    """smem_block_reduce's mean and variance passes re-read the row from L2 as far as the resident rows fit it, so
    more threads a row (fewer rows resident) run faster: H100 T=16384 D=8192 fp16 on 256 / 128 / 64 threads 230.8 /
    335.7 / 400.9 us (seed 98181; 64 threads 391.6 in s93131), where three DRAM reads modelled 371.6 for each;
    T=8192 D=5120 bf16 on 256 threads 73.7 (s40404) and fp16 on 128 threads vec 4 78.9 (s98282), modelled
    117.1-117.4 whatever the threads. welford_shuffle and vectorized_uint4 keep their DRAM second read: their rows
    ran 1.0-1.1x it (78-89 us at D=5120, 262-295 at D=8192), each element's Welford update dividing."""
    shape = {"T": 16384, "D": 8192}
    t256, t128, t64 = (sim_us("layernorm_cuda", "smem_block_reduce", {"threads": n}, shape, "fp16") for n in (256, 128, 64))
    assert t256 < t128 < t64
    for t, measured in ((t256, 230.8), (t128, 335.7), (t64, 400.9)):
        assert 0.8 <= t / measured <= 1.25
    assert 0.8 <= sim_us("layernorm_cuda", "smem_block_reduce", {"threads": 256}, {"T": 8192, "D": 5120}, "bf16") / 73.7 <= 1.25


def test_gemv_one_token_rides_the_dram_stream():
    """gemv_cuda at M=1 on the H100: the 16-byte rungs on one row a warp run at the W stream's pace and are the
    fastest measured (vectorized_uint4 40.6-42.7 us, multi_row_warp one row 41.4-42.4 at N x K = 4096 x 14336 and
    14336 x 4096, seeds 40404-98989 and device checks), ahead of split_k_combine (44.5-47.4: its partials and second
    launch); the sum of x loads and W stream put uint4 1.11-1.16x slow, behind split-K. At M=4 (N=6144 K=4096) uint4
    ran 29.1-29.5, 1.65x the M=1 pace: the x side binds there."""
    for shape in ({"M": 1, "N": 4096, "K": 14336}, {"M": 1, "N": 14336, "K": 4096}):
        vec = sim_us("gemv_cuda", "vectorized_uint4", {"warps": 4}, shape, "bf16")
        split = sim_us("gemv_cuda", "split_k_combine", {"warps": 4, "rows_per_warp": 2, "splits": 2}, shape, "bf16")
        assert 0.8 <= vec / 41.8 <= 1.1
        assert vec < split
    m4 = sim_us("gemv_cuda", "vectorized_uint4", {"warps": 2}, {"M": 4, "N": 6144, "K": 4096}, "bf16")
    assert 0.8 <= m4 / 29.3 <= 1.25
