"""Device plans of helper sim (issue 30). f1: flash_prefill_cuda's tensor-core rungs timed at the large menu shapes the
calibration fit extrapolates to, so a refit gets rows there (scripts/room_device_check.py's harness: every
configuration built, checked against the PyTorch reference and timed beside the simulator).

    python3 scripts/sim_device.py                        # on a CUDA machine; writes $OUT/summary.txt, knob_device.json, ranking.txt
    KNOBA_REHEARSE=3 python3 scripts/sim_device.py       # no GPU: the first 3 cases through every path but the GPU's
    SIM_PLAN=w1 python3 scripts/sim_device.py            # plan w1 (below) through scripts/sim2_device_check.py's harness
    SIM_PLAN=w1 SIM2_REHEARSE=3 python3 scripts/sim_device.py    # its rehearsal, no GPU (w2, j1 likewise)

w1 (eighth session): the rung and parameter orders of the modules the held-out gpu-checks (seeds 61717 / 62828)
found weak, timed as new stored rows (never the held-out rows themselves): layernorm_triton's staged loops
(num_stages 1 / 3 at 2-8 warps) and chunked_three_pass's resident-row re-reads at BLOCK 2048, whole_row_registers'
warps; gemm_fp16_cuda wgmma_split_k's SPLITS at a square and a skinny shape beside wgmma_tma; gemm_splitk_triton's
SPLIT_K x warps; mla_decode_triton's split_kv splits and pipelined_stages tiles (1.3x slow in the model at B=32);
prefix_scan_cuda decoupled_lookback where one tile holds the row (fp32 R=16384 C=2048: 1.25-1.6x slow in the model).

f1: the fit's stored rows of flash_prefill_cuda's mma.sync / cp.async / wgmma rungs have roofline floors of at most
0.035 ms (B=1 H=32 S=2048 D=128 and smaller), the menu's large shapes 0.28-1.11 ms (B=2 and B=4 at S=4096, B=2 at
S=8192); the old fit took mma_sync's size exponent (-0.415) out to the module's whole range and timed it at 625
TFLOP/s at B=4 S=4096 on the H100, past the 494 that mma.sync can issue there (gpus.mma_sync_rate). Each rung at the
configuration the model ranks best there (mma_sync at four), fp16 (the dtype of the case found), and one fp32-FMA rung (online_softmax)
at the smallest of the three for the module's slow end.

The shapes are past gpu-check's sampling cap (gpucheck.sample.fits: 8x the check shape's FLOPs) on purpose: the
reference (fp32 scores, B*H*S*S*4 bytes: 8.6 GB at B=2 S=4096, 17 GB at B=4 S=4096 and at B=2 S=8192, two live at
its peak) fits one card; KNOBA_CHECK_JOBS=2 keeps two checks a time on the GPU (room_device_check.main), and a case
whose allocation still fails runs again alone (gpucheck._checked).
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402
import room_device_check_triton  # noqa: E402

FP16 = "fp16"
BIG = [{"B": 2, "H": 32, "S": 4096, "D": 128}, {"B": 4, "H": 32, "S": 4096, "D": 128},
       {"B": 2, "H": 32, "S": 8192, "D": 128}]
# (module, rung, parameter, shapes, base, values, dtype): as room_device_check's entries
F1 = [
    ("flash_prefill_cuda", "mma_sync", "BLOCK_N", BIG, {"BLOCK_M": 64}, (32, 64, 128), FP16),
    ("flash_prefill_cuda", "mma_sync", "BLOCK_N", BIG, {"BLOCK_M": 128}, (64,), FP16),
    ("flash_prefill_cuda", "cp_async_pipeline", "BLOCK_N", BIG, {"BLOCK_M": 128, "stages": 3}, (128,), FP16),
    ("flash_prefill_cuda", "wgmma_warpgroup", "BLOCK_M", BIG, {"BLOCK_N": 64, "stages": 3}, (64,), FP16),
    ("flash_prefill_cuda", "warp_specialized", "stages", BIG, {"BLOCK_M": 128, "BLOCK_N": 128}, (3,), FP16),
    ("flash_prefill_cuda", "online_softmax", "BLOCK_M", BIG[:1], {"BLOCK_N": 64, "threads": 128}, (16,), FP16),
]
PLANS = {"f1": ([], F1)}

# (module, dtype, shapes, [(rung, {param: values, the product}), ...]): scripts/sim2_device_check.py's entries
W1 = [
    ("layernorm_triton", "bf16", [{"T": 16384, "D": 8192}], [
        ("welford_chunked", {"BLOCK": (512, 1024, 2048), "num_warps": (2, 8), "num_stages": (1, 3)}),
        ("chunked_three_pass", {"BLOCK": (1024, 2048), "num_warps": (4, 8), "num_stages": (1, 3)}),
        ("whole_row_registers", {"num_warps": (1, 2, 4, 8)})]),
    ("layernorm_triton", "fp16", [{"T": 8192, "D": 5120}], [
        ("welford_chunked", {"BLOCK": (1024,), "num_warps": (2, 4, 8), "num_stages": (1, 3)})]),
    ("gemm_fp16_cuda", "fp16", [{"M": 2048, "N": 2048, "K": 2048}, {"M": 16, "N": 8192, "K": 8192}], [
        ("wgmma_split_k", {"SPLITS": (2, 4, 8), "BN": (128, 256)}),
        ("wgmma_tma", {"BN": (256,)})]),
    ("gemm_splitk_triton", "fp16", [{"M": 16, "N": 4096, "K": 14336}], [
        ("split_k_reduce", {"SPLIT_K": (4, 8, 16), "num_warps": (4, 8)}),
        ("pipelined_split_k", {"SPLIT_K": (4, 8), "num_warps": (4, 8)})]),
    ("mla_decode_triton", "bf16", [{"B": 32, "H": 128, "S": 4000}], [
        ("split_kv", {"num_splits": (2, 4, 8, 16), "BLOCK_H": (16, 32)}),
        ("pipelined_stages", {"BLOCK_H": (16, 32, 64), "num_stages": (2, 3)})]),
    ("prefix_scan_cuda", "fp32", [{"R": 16384, "C": 2048}], [
        ("decoupled_lookback", {"threads": (128, 256, 512), "items": (1, 2, 4)})]),
]
# w2: gemm_splitk_triton's 2 warps (on the menus since base.triton_wgmma priced Triton's 2-warp mma.sync lowering):
# the model puts small tiles on 2 warps 2-4% ahead of 4 (the fitted warps exponent, extrapolated) and 64 x 128 x 128
# tiles 1.3-2.8x behind (mma.sync's rate); both untimed
W2 = [
    ("gemm_splitk_triton", "fp16", [{"M": 16, "N": 4096, "K": 14336}, {"M": 128, "N": 4096, "K": 4096}], [
        ("pipelined_split_k", {"BLOCK_M": (16, 64), "BLOCK_N": (64, 128), "num_warps": (2, 4)}),
        ("split_k_fused_reduce", {"BLOCK_M": (16,), "BLOCK_K": (64, 128), "num_warps": (2, 4)}),
        ("split_k_reduce", {"BLOCK_M": (16, 64), "num_warps": (2, 4)})]),
]
# j1 (ninth session): rows past what the stored ones cover, for the three models this session changed or found wrong.
# grouped_gemm_cuda at the menu's largest shape (T=8192 E=128 top-8, never timed) and T=512: wgmma_pipeline's BN, BK
# and ring depth under its operand-stream floor (WGMMA_STREAM_BPS_SM, fitted on BN 64-256 rows at T <= 64 and BN 128
# at T >= 512) beside cp_async_pipeline; mla_decode_triton exp2_tail_peel's BLOCK_H 32 (ptxas: 255 registers and
# 2,100 B of spill at BLOCK_N 64 on 4 warps) and pipelined_stages at one stage (s91331's 602 us row, modelled 385);
# gemm_fp16_triton's pipelined / grouped rungs at 2048^3, where the stored rows run 2-3x faster than the model.
# Past gpucheck.sample.fits on purpose (grouped_gemm's 412 GFLOP shape): the reference fits one card.
J1 = [
    ("grouped_gemm_cuda", "bf16", [{"T": 8192, "E": 128, "K": 2048, "N": 1536, "topk": 8}], [
        ("wgmma_pipeline", {"BN": (64, 128, 256), "BK": (64,)}),
        ("wgmma_pipeline", {"BN": (128,), "BK": (32, 128)}),
        ("cp_async_pipeline", {"BM": (64, 128), "BK": (32, 64)})]),
    ("grouped_gemm_cuda", "fp16", [{"T": 512, "E": 8, "K": 4096, "N": 14336, "topk": 2}], [
        ("wgmma_pipeline", {"BN": (64, 256), "STAGES": (3, 6)}),
        ("cp_async_pipeline", {"BM": (64, 128), "STAGES": (3, 4)})]),
    ("mla_decode_triton", "fp16", [{"B": 32, "H": 128, "S": 4000}], [
        ("exp2_tail_peel", {"BLOCK_H": (16, 32), "BLOCK_N": (32, 64), "num_warps": (4, 8)}),
        ("pipelined_stages", {"BLOCK_H": (16, 32), "num_stages": (1, 2)})]),
    ("gemm_fp16_triton", "bf16", [{"M": 2048, "N": 2048, "K": 2048}], [
        ("pipelined_stages", {"BLOCK_M": (64, 128), "BLOCK_K": (32, 64), "num_warps": (4, 8)}),
        ("grouped_swizzle", {"BLOCK_M": (64, 128), "BLOCK_K": (32, 64)}),
        ("persistent_tma", {"BLOCK_K": (64,), "num_stages": (3, 5)})]),
    ("gemm_fp16_triton", "bf16", [{"M": 4096, "N": 4096, "K": 4096}, {"M": 128, "N": 4096, "K": 14336}], [
        ("pipelined_stages", {"BLOCK_M": (64, 128), "BLOCK_K": (32, 64)}),
        ("grouped_swizzle", {"BLOCK_M": (128,), "BLOCK_K": (32, 64)})]),
]
# j2 (tenth session): what the CPU cannot settle for the fit and the mma.sync price. (1) Triton's 2-warp tl.dot on
# sm_90a is mma.sync (base.triton_wgmma): gemm_fp16_triton pipelined_stages at 4096^3, 64- and 128-row tiles on 2
# warps (off the menus: WARPS is (4, 8)) beside 4, the compute-bound end of what gemm_fp16_triton._launch's
# mma_sync_scale prices (the model: 2 warps 1.6-1.8x slower); gemm_splitk_triton's 64-row tiles on 2 / 4 warps at
# M=16 and M=64 (padding rows, bound by streaming B). (2) gemm_fp16_triton's size trend past the stored 2048^3 /
# 4096^3 rows (the fit's size exponent, -0.66 a doubling): the pointer rungs at 1024^3 and 8192^3 and N=14336.
J2 = [
    ("gemm_fp16_triton", "bf16", [{"M": 4096, "N": 4096, "K": 4096}], [
        ("pipelined_stages", {"BLOCK_M": (64,), "BLOCK_N": (64, 128), "num_warps": (2, 4)}),
        ("pipelined_stages", {"BLOCK_M": (128,), "BLOCK_N": (64,), "num_warps": (2, 4)})]),
    ("gemm_splitk_triton", "fp16", [{"M": 16, "N": 4096, "K": 14336}, {"M": 64, "N": 2048, "K": 16384}], [
        ("split_k_atomic", {"BLOCK_M": (64,), "num_warps": (2, 4)}),
        ("tl_dot_tiles", {"BLOCK_M": (64,), "num_warps": (2, 4)}),
        ("split_k_reduce", {"BLOCK_M": (64,), "BLOCK_N": (128,), "num_warps": (2, 4)})]),
    ("gemm_fp16_triton", "bf16", [{"M": 1024, "N": 1024, "K": 1024}, {"M": 8192, "N": 8192, "K": 8192},
                                  {"M": 4096, "N": 14336, "K": 4096}], [
        ("pipelined_stages", {"BLOCK_K": (32, 64)}),
        ("grouped_swizzle", {"BLOCK_K": (32, 64)})]),
]
# j3 (tenth session, follow-up): an out-of-sample check of gemm_fp16_triton's refit (no size term, parameter
# exponents refitted, floor-bound rows as bounds; the model frozen at the commit this plan ships in) at menu shapes and
# configurations no stored row has: M=16 N=8192 K=8192 (the unpipelined rungs' chain floor, BLOCK_N 256), 8192^3 and
# 4096x14336x4096 on persistent_tma and 256-wide tiles; and gemm_splitk_triton's 2 / 4 warps at M=1 and M=32.
J3 = [
    ("gemm_fp16_triton", "bf16", [{"M": 16, "N": 8192, "K": 8192}], [
        ("tl_dot_blocked", {"BLOCK_M": (32, 64), "BLOCK_K": (32, 64)}),
        ("grouped_swizzle", {"BLOCK_M": (64,), "BLOCK_N": (64, 128)}),
        ("pipelined_stages", {"BLOCK_M": (64,), "BLOCK_N": (128, 256), "num_stages": (3, 5)}),
        ("persistent_tma", {"BLOCK_M": (64,), "BLOCK_N": (128, 256)})]),
    ("gemm_fp16_triton", "bf16", [{"M": 8192, "N": 8192, "K": 8192}, {"M": 4096, "N": 14336, "K": 4096}], [
        ("persistent_tma", {"BLOCK_N": (128, 256), "num_stages": (3,)}),
        ("pipelined_stages", {"BLOCK_N": (256,), "BLOCK_K": (32, 64)})]),
    ("gemm_splitk_triton", "bf16", [{"M": 1, "N": 4096, "K": 14336}, {"M": 32, "N": 4096, "K": 11008}], [
        ("split_k_reduce", {"BLOCK_M": (16, 64), "num_warps": (2, 4)}),
        ("pipelined_split_k", {"BLOCK_M": (16, 64), "num_warps": (2, 4)})]),
]
# j4 (eleventh session): the held-out misorders of sim's GEMM rungs that the CPU could not explain (docs/sim_issue30_s11.md
# section 3), timed as new rows for the next session's launch models: (1) gemm_fp16_triton grouped_swizzle at 2048^3,
# every BLOCK_M x BLOCK_N x BLOCK_K of 64/128 x 64/128 x 32/64 on 4 warps and 64x128 on 8: is 64 x 128 x 64's 2x (131
# vs 66 us) its own or the two-wave cliff of 3 blocks an SM (128 x 64 x 64 has the same 3 and ran 72 vs 68.5)?
# (2) gemm_fp16_cuda mma_sync at M=128 N=4096 K=14336 (a grid under one wave of SMs, a K loop of 224-448 register-staged
# steps): the step time against the step's bytes. (3) gemm_splitk_triton split_k_reduce BLOCK_M 16 on 2 / 4 warps at
# SPLIT_K 4 / 8 / 16 (2 warps 1.21-1.25x slower at M=1-32, level at M=128). (4) grouped_gemm_cuda mma_sync BK 16 / 32
# / 64 at BM 32 / 64 (held out: BK 64 ran 1.3x faster than BK 32, the model has it 6% slower).
J4 = [
    ("gemm_fp16_triton", "bf16", [{"M": 2048, "N": 2048, "K": 2048}], [
        ("grouped_swizzle", {"BLOCK_M": (64, 128), "BLOCK_N": (64, 128), "BLOCK_K": (32, 64)}),
        ("grouped_swizzle", {"BLOCK_M": (64,), "BLOCK_N": (128,), "BLOCK_K": (32, 64), "num_warps": (8,)})]),
    ("gemm_fp16_cuda", "bf16", [{"M": 128, "N": 4096, "K": 14336}], [
        ("mma_sync", {"BM": (64, 128), "BN": (64, 128), "BK": (32, 64)})]),
    ("gemm_splitk_triton", "bf16", [{"M": 16, "N": 4096, "K": 14336}], [
        ("split_k_reduce", {"SPLIT_K": (4, 8, 16), "num_warps": (2, 4)})]),
    ("grouped_gemm_cuda", "bf16", [{"T": 64, "E": 64, "K": 2048, "N": 2816, "topk": 6}], [
        ("mma_sync", {"BM": (32, 64), "BK": (16, 32, 64)})]),
]
# j5 (eleventh session, follow-up): the out-of-sample check of grouped_gemm_cuda mma_sync's REG_STAGED_TRIP (set from
# j4's T=64 E=64 rows, the model frozen at the commit this plan ships in) at the other menu shape, T=16 E=8 K=4096
# N=14336 top-2 (4 rows an expert: BM 32 and 64 both one m-block), bf16, BM 32 / 64 x BK 16 / 32 / 64.
J5 = [
    ("grouped_gemm_cuda", "bf16", [{"T": 16, "E": 8, "K": 4096, "N": 14336, "topk": 2}], [
        ("mma_sync", {"BM": (32, 64), "BK": (16, 32, 64)})]),
]
# j6 (twelfth session): j5's six cases (the eleventh session's unrun check, the model frozen at the commit this plan
# ships in) and a tile-geometry grid at 4096^3 bf16 that no stored row has: gemm_fp16_triton grouped_swizzle and
# pipelined_stages BLOCK_M x BLOCK_N x BLOCK_K 64/128 x 64/128 x 32/64 on 4 warps (and 128x128 on 8), gemm_fp16_cuda
# cp_async_pipeline BM x BN x BK likewise: out-of-sample rows for the per-rung tile-geometry term (the interactions of
# the tile's dimensions with each other and with the warps that the log-linear fit cannot hold).
J6 = J5 + [
    ("gemm_fp16_triton", "bf16", [{"M": 4096, "N": 4096, "K": 4096}], [
        ("grouped_swizzle", {"BLOCK_M": (64, 128), "BLOCK_N": (64, 128), "BLOCK_K": (32, 64)}),
        ("pipelined_stages", {"BLOCK_M": (64, 128), "BLOCK_N": (64, 128), "BLOCK_K": (32, 64)}),
        ("pipelined_stages", {"BLOCK_M": (128,), "BLOCK_N": (128,), "BLOCK_K": (32, 64), "num_warps": (8,)})]),
    ("gemm_fp16_cuda", "bf16", [{"M": 4096, "N": 4096, "K": 4096}], [
        ("cp_async_pipeline", {"BM": (64, 128), "BN": (64, 128), "BK": (32, 64)})]),
]
# j7 (thirteenth session): the per-SM partial wave (sim.sm_waves). One tile a case, M = N swept over 2048-3072 at
# K=4096 bf16, so the grid crosses whole rounds of the SMs' slots by a few blocks: 128 x 128 tiles at 2 an SM run
# 256 blocks in one round at 2048 and 289-484 (busiest SM 3-4: two rounds, the last of 1 or 2) from 2176 to 2816.
# Whole waves of all the slots (the model before) time 2176 2x 2048; per-SM rounds 1.6x (the last block alone on its
# SM at the rate one block makes). wgmma_tma (one block an SM: no partial round) is the control.
MN_SWEEP = [{"M": n, "N": n, "K": 4096} for n in (2048, 2176, 2304, 2560, 2816, 3072)]
J7 = [
    ("gemm_fp16_triton", "bf16", MN_SWEEP, [
        ("pipelined_stages", {"BLOCK_M": (128,), "BLOCK_N": (128,), "BLOCK_K": (64,), "num_warps": (4,), "num_stages": (3,)}),
        ("pipelined_stages", {"BLOCK_M": (64,), "BLOCK_N": (128,), "BLOCK_K": (32,), "num_warps": (4,), "num_stages": (3,)})]),
    ("gemm_fp16_cuda", "bf16", MN_SWEEP, [
        ("cp_async_pipeline", {"BM": (128,), "BN": (128,), "BK": (32,)}),
        ("wgmma_tma", {})]),
]
# and gemm_fp16_triton persistent_tma at the same shapes (one program an SM, each taking tiles in turn: its tail is the
# programs' last tiles, which the launch model counts as Launch.rounds), beside pipelined_stages (roomT's reversed
# pair at 2048^3: persistent_tma 29.1 us vs pipelined_stages 33.1 on the H100, modelled the other way round)
J7[0][3].append(("persistent_tma", {}))
SIM2_PLANS = {"w1": W1, "w2": W2, "j1": J1, "j2": J2, "j3": J3, "j4": J4, "j5": J5, "j6": J6, "j7": J7}
# plans whose shapes pass gpu-check's size cap on purpose (the check's reference still fits one card)
UNCAPPED = ("j1", "j2", "j3", "j4", "j5", "j6", "j7")

if __name__ == "__main__":
    plan = os.environ.get("SIM_PLAN", "f1")
    if plan in SIM2_PLANS:
        import sim2_device_check  # noqa: E402
        sim2_device_check.PLANS[plan] = SIM2_PLANS[plan]
        if plan in UNCAPPED:
            sim2_device_check.fits = lambda module, dtype, shape, gpu="H200": True
        os.environ["SIM2_PLAN"] = plan
        sys.exit(sim2_device_check.main())
    room_device_check.PLANS["default"] = PLANS[plan]
    room_device_check.fits = lambda module, dtype, shape, gpu="H200": True      # the cap is passed on purpose (above)
    os.environ.setdefault("KNOBA_CHECK_JOBS", "2")
    sys.exit(room_device_check_triton.run_ranked())
