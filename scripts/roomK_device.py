"""roomK's device plans (issue 26 room, issue 30 order) for the compute-heavy modules, through
scripts/room_device_check.py's harness (every case built, checked against the PyTorch reference and timed beside the
simulator; every bug render of a NEW entry at its first and last value, first shape, must fail) and
room_device_check_triton.ranking (each group's values ordered by the device and by the simulator).

    python3 scripts/roomK_device.py                    # on a CUDA machine; $OUT/summary.txt, knob_device.json, ranking.txt
    ROOMK_PLAN=k12 python3 scripts/roomK_device.py     # another plan of PLANS (k12: k1 and k2 in one call)
    KNOBA_REHEARSE=3 python3 scripts/roomK_device.py   # no GPU: the first 3 cases through every path but the GPU's
    ROOMK_LIST=1 python3 scripts/roomK_device.py       # no GPU: list the plan's cases with the simulator's time

Plan k1: gemm_fp16_cuda's new wgmma_tma_persistent rung beside wgmma_tma (the tiles and stages the model ranks
first at 2048^3 and 4096^3); values past the end of a parameter's list where the episodes' best sat at that end (scripts/room_table.py --modules compute
--by-rung, kernelinfer seed 7171), each beside its in-list neighbours on the menu's shapes the H100 runs:
gemm_int4_cuda split_k_small_m 2 stages and 128-row tiles, gemm_splitk_cuda cp_async_split_k 128-wide K slices,
conv2d_nhwc_cuda cp_async_pipeline 256-wide filter tiles; gemm_fp4_triton pipelined_copies
256-row / 256-column tiles, 32-wide K and 5 stages, gemm_splitk_triton split_k_fused_reduce 32-wide N, 2 warps and
128-row tiles, conv2d_nhwc_triton pipelined_stages 256-wide filter tiles, 5 stages and 256-row tiles.
(module, rung, parameter, shapes, base, values): base sets the other parameters (the model's best at the first
shape), values the ones timed (in the list or not). grouped_gemm's edges (256-wide N, 128-wide K) sit at the menu's
large-T shapes, past what gpucheck's sample fits (8x the check shape's memory): not in k1.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import room_device_check  # noqa: E402
import room_device_check_triton  # noqa: E402  (sets PLANS["default"]; this script sets its own)

INT4 = [{"M": 16, "N": 4096, "K": 14336}, {"M": 128, "N": 4096, "K": 4096}]
SPLITK = [{"M": 16, "N": 4096, "K": 14336}, {"M": 1, "N": 4096, "K": 14336}]
CONV_C256 = [{"N": 16, "H": 14, "W": 14, "C": 256, "K": 256, "R": 3, "S": 3, "U": 1, "PD": 1}]
CONV_C64 = [{"N": 8, "H": 56, "W": 56, "C": 64, "K": 64, "R": 3, "S": 3, "U": 1, "PD": 1}]
FP4 = [{"M": 2048, "N": 4096, "K": 4096, "G": 32}, {"M": 8192, "N": 5120, "K": 8192, "G": 32}]
COPIES = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 4, "num_warps": 8, "GROUP_M": 8}

GEMM = [{"M": 2048, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 4096}]
K1_NEW = [
    ("gemm_fp16_cuda", "wgmma_tma_persistent", "BN", GEMM, {"BM": 128, "stages": 4}, (128, 256)),
    ("gemm_int4_cuda", "split_k_small_m", "STAGES", INT4[:1], {"BM": 32, "BN": 64, "SPLITS": 8, "BK": 128}, (2, 3, 4)),
    ("gemm_splitk_cuda", "cp_async_split_k", "BK", SPLITK, {"BM": 32, "BN": 64, "stages": 2, "warps": 4, "SPLITS": 16},
     (32, 64, 128)),
    ("gemm_splitk_triton", "split_k_fused_reduce", "BLOCK_N", SPLITK[:1], {}, (32, 64, 128)),
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_M", FP4[:1], COPIES, (128, 256)),
]
K1_REFERENCE = [
    ("gemm_fp16_cuda", "wgmma_tma", "BN", GEMM, {"BM": 128, "stages": 4}, (128, 256)),
    ("gemm_fp16_cuda", "wgmma_tma_persistent", "BM", GEMM[1:], {"BN": 128, "stages": 4}, (256,)),
    ("gemm_fp16_cuda", "wgmma_tma", "BM", GEMM[1:], {"BN": 128, "stages": 4}, (256,)),
    ("gemm_int4_cuda", "split_k_small_m", "STAGES", INT4[1:], {"BM": 64, "BN": 128, "SPLITS": 4, "BK": 128}, (2, 3, 4)),
    ("gemm_int4_cuda", "split_k_small_m", "BM", INT4[1:], {"BN": 128, "SPLITS": 4, "BK": 128, "STAGES": 3}, (32, 64, 128)),
    ("conv2d_nhwc_cuda", "cp_async_pipeline", "BN", CONV_C256, {"BM": 32, "BK": 64, "stages": 4}, (64, 128, 256)),
    ("gemm_splitk_triton", "split_k_fused_reduce", "num_warps", SPLITK[:1], {}, (2, 4, 8)),
    ("gemm_splitk_triton", "split_k_fused_reduce", "BLOCK_M", [{"M": 128, "N": 4096, "K": 4096}], {}, (32, 64, 128)),
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_N", FP4[:1], COPIES, (128, 256)),
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_K", FP4[:1], COPIES, (32, 64, 128)),
    ("gemm_fp4_triton", "pipelined_copies", "num_stages", FP4[:1], {**COPIES, "BLOCK_K": 32}, (3, 4, 5)),
    ("conv2d_nhwc_triton", "pipelined_stages", "BN", CONV_C256, {"BM": 64, "BK": 64, "GROUP_M": 4, "STAGES": 4},
     (64, 128, 256)),
    ("conv2d_nhwc_triton", "pipelined_stages", "STAGES", CONV_C256, {"BM": 64, "BN": 128, "BK": 64, "GROUP_M": 4}, (3, 4, 5)),
    ("conv2d_nhwc_triton", "pipelined_stages", "BM", CONV_C64, {"BN": 64, "BK": 64, "GROUP_M": 4, "STAGES": 4}, (64, 128, 256)),
]
# plan k2: gemm_fp16_cuda's wgmma_split_k (SPLITS CTAs a tile over shares of K, fp32 partial slices, a reduce kernel)
# at the menu's small-M shapes, beside wgmma_tma's and wgmma_tma_persistent's best modelled tiles there
DECODE = [{"M": 16, "N": 8192, "K": 8192}, {"M": 128, "N": 4096, "K": 14336}]
K2_NEW = [
    ("gemm_fp16_cuda", "wgmma_split_k", "SPLITS", DECODE, {"BM": 64, "BN": 128, "stages": 6}, (2, 4, 8)),
]
K2_REFERENCE = [
    ("gemm_fp16_cuda", "wgmma_split_k", "SPLITS", DECODE, {"BM": 128, "BN": 128, "stages": 6}, (2,)),
    ("gemm_fp16_cuda", "wgmma_tma", "stages", DECODE, {"BM": 64, "BN": 128}, (6,)),
    ("gemm_fp16_cuda", "wgmma_tma_persistent", "stages", DECODE, {"BM": 64, "BN": 128}, (6,)),
]
# plan k12 (k1 and k2 in one call, trimmed to ~120 s after the device refused k1's starts): the values and rungs this
# session added, each beside its neighbours (NEW: bug renders too), and the ones it may add (conv2d 256-wide filter
# tiles and 5 stages, fp4 copies' stages at 32-wide K)
K12_NEW = [
    ("gemm_fp16_cuda", "wgmma_tma_persistent", "BN", GEMM, {"BM": 128, "stages": 4}, (128, 256)),
    ("gemm_fp16_cuda", "wgmma_split_k", "SPLITS", DECODE, {"BM": 64, "BN": 128, "stages": 6}, (2, 4, 8)),
    ("gemm_int4_cuda", "split_k_small_m", "STAGES", INT4[:1], {"BM": 32, "BN": 64, "SPLITS": 8, "BK": 128}, (2, 3, 4)),
    ("gemm_splitk_cuda", "cp_async_split_k", "BK", SPLITK, {"BM": 32, "BN": 64, "stages": 2, "warps": 4, "SPLITS": 16},
     (32, 64, 128)),
    ("gemm_splitk_triton", "split_k_fused_reduce", "BLOCK_N", SPLITK[:1], {}, (32, 64, 128)),
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_K", FP4[:1], COPIES, (32, 64, 128)),
]
K12_REFERENCE = [
    ("gemm_fp16_cuda", "wgmma_tma", "BN", GEMM, {"BM": 128, "stages": 4}, (128, 256)),
    ("gemm_fp16_cuda", "wgmma_tma_persistent", "BM", GEMM[1:], {"BN": 128, "stages": 4}, (256,)),
    ("gemm_fp16_cuda", "wgmma_tma", "BM", GEMM[1:], {"BN": 128, "stages": 4}, (256,)),
    ("gemm_fp16_cuda", "wgmma_split_k", "SPLITS", DECODE, {"BM": 128, "BN": 128, "stages": 6}, (2,)),
    ("gemm_fp16_cuda", "wgmma_tma", "stages", DECODE, {"BM": 64, "BN": 128}, (6,)),
    ("gemm_fp16_cuda", "wgmma_tma_persistent", "stages", DECODE, {"BM": 64, "BN": 128}, (6,)),
    ("gemm_int4_cuda", "split_k_small_m", "STAGES", INT4[1:], {"BM": 64, "BN": 128, "SPLITS": 4, "BK": 128}, (2, 3, 4)),
    ("gemm_splitk_cuda", "mma_split_k", "BK", SPLITK[:1], {"BM": 32, "BN": 64, "warps": 4, "SPLITS": 16}, (64, 128)),
    ("conv2d_nhwc_cuda", "cp_async_pipeline", "BN", CONV_C256, {"BM": 32, "BK": 64, "stages": 4}, (64, 128, 256)),
    ("gemm_fp4_triton", "pipelined_copies", "num_stages", FP4[:1], {**COPIES, "BLOCK_K": 32}, (3, 4, 5)),
    ("conv2d_nhwc_triton", "pipelined_stages", "STAGES", CONV_C256, {"BM": 64, "BN": 128, "BK": 64, "GROUP_M": 4}, (3, 4, 5)),
]
# plan k3 (this session): gemm_int8_cuda's tensor-core rows the new single-CTA / register-staged BK terms predict and no
# device has timed (issue 30 order); gemm_fp16_cuda's register_blocked BK 32 and cp_async_pipeline 5 stages beside
# their neighbours (the room tables' BK+ / stages+ edges); RACES: grouped_gemm_cuda's missing_barrier renders (a
# dropped __syncthreads: races, like the off_by_one taken out after it passed on an H100) on three shapes, each bug
# case run RACE_REPEATS times with fresh inputs (bug_all_runs: every run counted); races.txt lists failed runs / runs
S2K, S4K = {"M": 2048, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 4096}
LONG_K = {"M": 128, "N": 4096, "K": 14336}
K3_NEW = [
    ("gemm_fp16_cuda", "register_blocked", "BK", [S2K], {"BM": 128, "BN": 128, "TM": 8}, (8, 16, 32), "fp16"),
    ("gemm_fp16_cuda", "cp_async_pipeline", "stages", [S4K], {"BM": 128, "BN": 128, "BK": 32, "warps": 8}, (3, 4, 5)),
]
K3_REFERENCE = [
    ("gemm_int8_cuda", "mma_sync", "BK", [LONG_K], {"BM": 128, "BN": 128, "warps": 8}, (64, 128)),
    ("gemm_int8_cuda", "mma_sync", "BK", [LONG_K], {"BM": 128, "BN": 256, "warps": 8}, (64, 128)),
    ("gemm_int8_cuda", "cp_async_pipeline", "BN", [S4K], {"BM": 128, "BK": 128, "stages": 3, "warps": 8}, (128, 256)),
    ("gemm_int8_cuda", "cp_async_pipeline", "stages", [S4K], {"BM": 128, "BN": 128, "BK": 128, "warps": 8}, (4,)),
    ("gemm_fp16_cuda", "cp_async_pipeline", "stages", [S4K], {"BM": 128, "BN": 256, "BK": 32, "warps": 8}, (3, 4)),
]
GROUPED = [{"T": 64, "E": 64, "K": 2048, "N": 2816, "topk": 6}, {"T": 16, "E": 8, "K": 4096, "N": 14336, "topk": 2},
           {"T": 512, "E": 64, "K": 2048, "N": 2816, "topk": 6}]
# (rung, params): the rings and tiles the gpu-check seeds drew (s50505's 128 x 128 x 3 stages x BK 64 ran only 92
# elements wrong), the thinnest and deepest
RACES = [("cp_async_pipeline", {"BM": 128, "BN": 128, "STAGES": 3, "BK": 64}),
         ("cp_async_pipeline", {"BM": 128, "BN": 128, "STAGES": 2, "BK": 32}),
         ("cp_async_pipeline", {"BM": 64, "BN": 128, "STAGES": 4, "BK": 32}),
         ("cp_async_pipeline", {"BM": 32, "BN": 64, "STAGES": 5, "BK": 16}),
         ("mma_sync", {"BM": 64, "BN": 128, "BK": 32})]
RACE_REPEATS = 5
# plan k4 (follow-up): the 256-wide tiles of the register-blocked FMA rungs (gemm_fp16_cuda register_blocked, 512
# threads of 8 x 8 micro-tiles; grouped_gemm_cuda expert_lookup_single, 16 x 16 threads of up to 8 x 16) where the
# default profile's episodes (MI300X: no tensor-core rung) ended at BM+ / BN+, beside the list's old end
GROUPED_FMA = [{"T": 128, "E": 8, "K": 4096, "N": 14336, "topk": 2}, {"T": 512, "E": 64, "K": 2048, "N": 2816, "topk": 6}]
K4_NEW = [
    ("gemm_fp16_cuda", "register_blocked", "BN", [S2K], {"BM": 128, "BK": 16, "TM": 8}, (128, 256), "fp16"),
    ("gemm_fp16_cuda", "register_blocked", "BM", [S2K], {"BN": 128, "BK": 16, "TM": 8}, (256,), "fp16"),
    ("grouped_gemm_cuda", "expert_lookup_single", "BM", GROUPED_FMA, {"BN": 128}, (64, 128)),
    ("grouped_gemm_cuda", "expert_lookup_single", "BN", GROUPED_FMA, {"BM": 64}, (256,)),
    # the ring's new off_by_one (the K loop one trip short: deterministic) beside its missing_barrier
    ("grouped_gemm_cuda", "cp_async_pipeline", "STAGES", GROUPED[:1], {"BM": 64, "BN": 128, "BK": 32}, (3,)),
]
K4_REFERENCE = [
    ("gemm_fp16_cuda", "register_blocked", "BN", [S2K], {"BM": 256, "BK": 16, "TM": 8}, (256,), "fp16"),
    ("gemm_fp16_cuda", "register_blocked", "BK", [S2K], {"BM": 128, "BN": 256, "TM": 8}, (8, 32), "fp16"),
    ("grouped_gemm_cuda", "expert_lookup_single", "BN", GROUPED_FMA, {"BM": 128}, (256,)),
]
# plan k34 (one call, when the device lends few): k3 without its two reference-only fp16 / int8 ring rows, and k4's
# new values at one shape each
K34_NEW = K3_NEW + [
    ("gemm_fp16_cuda", "register_blocked", "BN", [S2K], {"BM": 128, "BK": 16, "TM": 8}, (128, 256), "fp16"),
    ("gemm_fp16_cuda", "register_blocked", "BM", [S2K], {"BN": 128, "BK": 16, "TM": 8}, (256,), "fp16"),
    ("grouped_gemm_cuda", "expert_lookup_single", "BM", GROUPED_FMA[:1], {"BN": 128}, (64, 128)),
    ("grouped_gemm_cuda", "expert_lookup_single", "BN", GROUPED_FMA[:1], {"BM": 64}, (256,)),
    ("grouped_gemm_cuda", "cp_async_pipeline", "STAGES", GROUPED[:1], {"BM": 64, "BN": 128, "BK": 32}, (3,)),
]
K34_REFERENCE = K3_REFERENCE[:3]
# plan k5: gemm_fp4_cuda's dequant_then_wgmma (a vectorized pass writes 16-bit copies of A and B, then the TMA + wgmma
# GEMM on them: 3 launches) across its tiles and ring depths at the menu's shapes that fit gpucheck's sample, beside
# cp_async_dequant's best modelled configs (the rung below it; register dequant into mma.sync)
FP4_CUDA = [{"M": 1024, "N": 2048, "K": 4096, "G": 16}, {"M": 4096, "N": 4096, "K": 4096, "G": 16},
            {"M": 128, "N": 14336, "K": 4096, "G": 16}, {"M": 16, "N": 7168, "K": 2048, "G": 32}]
K5_NEW = [
    ("gemm_fp4_cuda", "dequant_then_wgmma", "BN", FP4_CUDA, {"BM": 128, "stages": 4}, (64, 128, 256)),
]
K5_TILES = [        # no bug renders (K5_NEW's prove them)
    ("gemm_fp4_cuda", "dequant_then_wgmma", "BM", FP4_CUDA[:2], {"BN": 128, "stages": 4}, (64, 256)),
    ("gemm_fp4_cuda", "dequant_then_wgmma", "stages", FP4_CUDA[:1], {"BM": 128, "BN": 128}, (2, 3, 6)),
    ("gemm_int4_cuda", "dequant_then_wgmma", "BM", [{"M": 1024, "N": 14336, "K": 4096}, {"M": 4096, "N": 4096, "K": 4096}],
     {"BN": 128, "stages": 4}, (64, 256)),
]
# gemm_int4_cuda's dequant_then_wgmma (the 16-bit copy of W once, then the same wgmma GEMM on x and the copy) at the
# menu's M=128 / 1024 / 4096, beside split_k_small_m's and cp_async_pipeline's best modelled configs; the two large
# shapes are past gpucheck's 8x the check shape's FLOPs (LARGE: k5 times them, a few ms each)
INT4_WG = [{"M": 1024, "N": 14336, "K": 4096}, {"M": 4096, "N": 4096, "K": 4096}, {"M": 128, "N": 4096, "K": 4096}]
K5_NEW += [
    ("gemm_int4_cuda", "dequant_then_wgmma", "BN", INT4_WG, {"BM": 128, "stages": 4}, (128, 256)),
]
K5_REFERENCE = K5_TILES + [
    ("gemm_fp4_cuda", "cp_async_dequant", "stages", FP4_CUDA, {"BM": 128, "BN": 128}, (4,)),
    ("gemm_fp4_cuda", "cp_async_dequant", "BN", FP4_CUDA[3:], {"BM": 32, "stages": 4}, (64,)),
    ("gemm_int4_cuda", "split_k_small_m", "SPLITS", INT4_WG, {"BM": 64, "BN": 128, "STAGES": 2, "BK": 128}, (4,)),
    ("gemm_int4_cuda", "cp_async_pipeline", "STAGES", INT4_WG[:2], {"BM": 64, "BN": 128, "BK": 128}, (2,)),
]
# the fp8 modules' wgmma_split_k at the menu's decode shapes, BM 64 beside BM 128 (gemm_fp16_cuda's BM 128 ran slower
# than its BM 64 there, the model faster: is it so for the 8-bit ring, whose K tile is also 128 bytes?)
FP8_DECODE = [{"M": 16, "N": 8192, "K": 8192}, {"M": 128, "N": 4096, "K": 14336}]
K5_REFERENCE += [
    ("gemm_fp8_cuda", "wgmma_split_k", "BM", FP8_DECODE, {"BN": 128, "stages": 4, "SPLITS": 4}, (64, 128), "fp8"),
    ("gemm_fp8_blockwise_cuda", "wgmma_split_k", "BM", [{"M": 128, "N": 4096, "K": 7168}],
     {"BN": 128, "stages": 4, "SPLITS": 4}, (64, 128), "fp8"),
]
# plan k6 (follow-up): grouped_gemm_cuda's BK on both mma.sync rungs at one tile (the ring's SHORT_SLICE term, fitted on
# the measured BK 16 / 32 rows; mma_sync's BK 64 ran 1.5x faster than its model in the two rows measured)
G64 = [{"T": 64, "E": 64, "K": 2048, "N": 2816, "topk": 6}, {"T": 16, "E": 8, "K": 4096, "N": 14336, "topk": 2}]
K6_NEW = []
K6_REFERENCE = [
    ("grouped_gemm_cuda", "mma_sync", "BK", G64, {"BM": 32, "BN": 128}, (16, 32, 64)),
    ("grouped_gemm_cuda", "cp_async_pipeline", "BK", G64, {"BM": 32, "BN": 128, "STAGES": 3}, (16, 32, 64)),
    ("grouped_gemm_cuda", "cp_async_pipeline", "BK", G64[:1], {"BM": 64, "BN": 128, "STAGES": 4}, (16, 32, 64)),
]
# plan k7 (follow-up, held out: the k5 terms' predictions at configs and shapes k5 did not time): k6, and
# dequant_then_wgmma's ring depth at M=1024 (int4) and at mxfp4 2048 x 4096 x 4096 (fp4), int4's rung against split-K
# at M=16 (the model keeps split-K ahead there), fp8 split-K's half-empty 128-row tile at M=64 and at 2 splits
K7_REFERENCE = K6_REFERENCE + [
    ("gemm_int4_cuda", "dequant_then_wgmma", "stages", INT4_WG[:1], {"BM": 128, "BN": 256}, (2, 3, 6)),
    ("gemm_int4_cuda", "dequant_then_wgmma", "BN", [{"M": 16, "N": 4096, "K": 14336}], {"BM": 64, "stages": 4}, (128,)),
    ("gemm_int4_cuda", "split_k_small_m", "SPLITS", [{"M": 16, "N": 4096, "K": 14336}],
     {"BM": 32, "BN": 64, "STAGES": 2, "BK": 128}, (8,)),
    ("gemm_fp4_cuda", "dequant_then_wgmma", "stages", [{"M": 2048, "N": 4096, "K": 4096, "G": 32}], {"BM": 128, "BN": 256},
     (3, 4, 5)),
    ("gemm_fp8_blockwise_cuda", "wgmma_split_k", "BM", [{"M": 64, "N": 24576, "K": 1536}],
     {"BN": 128, "stages": 4, "SPLITS": 2}, (64, 128), "fp8"),
    ("gemm_fp8_cuda", "wgmma_split_k", "BM", FP8_DECODE[:1], {"BN": 128, "stages": 6, "SPLITS": 2}, (64, 128), "fp8"),
]
# plan k8: grouped_gemm_cuda's wgmma_pipeline with two consumer warpgroups (BM 128: 256 threads, each warpgroup's
# m64nBNk16 wgmma on its 64 A rows of one shared B tile) beside the one-warpgroup BM 64 it had, at the menu's decode
# shape (~6 rows an expert: BM 128 half empty), 2048 tokens over 64 experts, and 512 / 4096 tokens over 8 (w 0.9 GB:
# past gpucheck's size cap, LARGE); two tiles of BN / BK (k87: then k7, if it has not run)
GW = [{"T": 64, "E": 64, "K": 2048, "N": 2816, "topk": 6}, {"T": 2048, "E": 64, "K": 2048, "N": 2816, "topk": 6},
      {"T": 4096, "E": 8, "K": 4096, "N": 14336, "topk": 2}, {"T": 512, "E": 8, "K": 4096, "N": 14336, "topk": 2}]
K8_NEW = [
    ("grouped_gemm_cuda", "wgmma_pipeline", "BM", GW, {"BN": 128, "STAGES": 4, "BK": 64}, (64, 128)),
]
K8_REFERENCE = [
    # cp_async_pipeline's 256-wide N tiles (2 x 2 warps of 32 x 128 at BM 64: ptxas 237 registers, no spill; not
    # offered, see grouped_gemm_cuda.py)
    ("grouped_gemm_cuda", "cp_async_pipeline", "BN", GW[1:3], {"BM": 64, "STAGES": 4, "BK": 32}, (128, 256)),
    ("grouped_gemm_cuda", "wgmma_pipeline", "BM", GW, {"BN": 256, "STAGES": 4, "BK": 64}, (64, 128)),
    ("grouped_gemm_cuda", "wgmma_pipeline", "BM", GW[:1] + GW[3:], {"BN": 256, "STAGES": 5, "BK": 32}, (64, 128)),
    ("grouped_gemm_cuda", "cp_async_pipeline", "BM", GW[1:], {"BN": 128, "STAGES": 4, "BK": 32}, (128,)),
    # BM 128 x BN 256: 64 x 128 a warp, 255 registers and 580 bytes of spill stores (ptxas -v, sm_90a)
    ("grouped_gemm_cuda", "cp_async_pipeline", "BN", GW[1:2], {"BM": 128, "STAGES": 3, "BK": 32}, (128, 256)),
]
# plan k9 (follow-up): gemm_fp4_triton pipelined_copies' 256-row tiles (the room tables' BLOCK_M+ edge: 5 of 8
# kernelinfer episodes of seed 8787 ended at 128 x 128) beside 128 x 128, at 8 warps (Triton's matmul tutorial
# configs); reference rows: 128 x 256 (not offered: the model has it level with 128 x 128), 256 x 64, and 256 x 256
# (256 fp32 accumulators a thread: the model spills it)
FP4_SQ = [{"M": 2048, "N": 4096, "K": 4096, "G": 32}, {"M": 4096, "N": 4096, "K": 4096, "G": 32}]
WIDE_BASE = {"BLOCK_K": 64, "num_stages": 3, "num_warps": 8, "GROUP_M": 8}
K9_NEW = [
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_M", FP4_SQ, {**WIDE_BASE, "BLOCK_N": 128}, (128, 256)),
]
K9_REFERENCE = [
    # grouped_gemm_cuda mma_sync's 256-wide N tiles (not offered, see grouped_gemm_cuda.py); static smem
    # (BM + BN) x (BK + 8) x 2 bytes: 46 KB at 64 x 256 x 64
    ("grouped_gemm_cuda", "mma_sync", "BN", GW[:1], {"BM": 32, "BK": 16}, (128, 256)),
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_N", FP4_SQ, {**WIDE_BASE, "BLOCK_M": 128}, (256,)),
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_M", FP4_SQ, {**WIDE_BASE, "BLOCK_N": 128, "num_stages": 4}, (128, 256)),
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_N", FP4_SQ[:1], {**WIDE_BASE, "BLOCK_M": 256}, (64, 256)),
    ("grouped_gemm_cuda", "mma_sync", "BN", GW[1:2], {"BM": 64, "BK": 64}, (128, 256)),
]
# plan k10 (one call, the device lending ~5 commands to the team): k8's two-warpgroup rows with their bug renders, two
# anchors of each neighbouring tile / rung, and k9's 256-row fp4 copies tiles beside 128 (no bug renders: the Triton
# edits are the same text at every tile, proven at 128 by k12)
K10_NEW = K8_NEW
K10_REFERENCE = [
    ("grouped_gemm_cuda", "wgmma_pipeline", "BM", GW[1:3], {"BN": 256, "STAGES": 4, "BK": 64}, (64, 128)),
    ("grouped_gemm_cuda", "cp_async_pipeline", "BM", GW[1:3], {"BN": 128, "STAGES": 4, "BK": 32}, (128,)),
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_M", FP4_SQ, {**WIDE_BASE, "BLOCK_N": 128}, (128, 256)),
]
# plan k11 (2026-12-07, one call, job /work/dev/roomK/j1): the Triton values this session checked with TRITON_INTERPRET=1
# (scripts/roomK_interpret.py), each beside its old neighbour, with their bug renders: grouped_gemm_triton's 256-wide N
# tiles (on the menu), 128-wide K and 5 stages (off: the smem corpus figures they add) on m_fastest_order (and a
# block_lookup anchor) at the decode shape (~6 rows an expert) and 2048 tokens over 64 experts; gemm_splitk_triton's 2
# warps at M=16 / 128 (off, as 128-wide K); gemm_fp4_triton pipelined_copies' 256-row tiles (plan k9's, on the menu);
# and plan k10's grouped_gemm_cuda two-warpgroup wgmma rows (off the menus until this runs)
GT = GW[:2]
GT_BASE = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 4, "num_warps": 4}
SPLITK2 = [{"M": 16, "N": 4096, "K": 14336}, {"M": 128, "N": 4096, "K": 4096}]
K11_NEW = K8_NEW + [      # the CUDA rows first: only a device can put them on the menus
    ("grouped_gemm_triton", "m_fastest_order", "BLOCK_N", GT, GT_BASE, (128, 256)),
    ("gemm_splitk_triton", "split_k_fused_reduce", "num_warps", SPLITK2, {"BLOCK_N": 64, "SPLIT_K": 8}, (2, 4)),
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_M", FP4_SQ, {**WIDE_BASE, "BLOCK_N": 128}, (128, 256)),
]
K11_REFERENCE = [     # no bug renders: the Triton bug edits are the same text at every tile (K11_NEW proves them)
    ("grouped_gemm_triton", "m_fastest_order", "BLOCK_K", GT, GT_BASE, (64, 128)),
    ("grouped_gemm_triton", "m_fastest_order", "num_stages", GT, GT_BASE, (4, 5)),
    ("grouped_gemm_triton", "m_fastest_order", "BLOCK_N", GT[1:], {**GT_BASE, "BLOCK_M": 128, "num_warps": 8}, (128, 256)),
    ("grouped_gemm_triton", "block_lookup", "BLOCK_K", GT[:1], {**GT_BASE, "BLOCK_N": 256}, (64, 128)),
    ("gemm_splitk_triton", "pipelined_split_k", "num_warps", SPLITK2[:1], {"BLOCK_N": 64, "SPLIT_K": 8}, (2, 4)),
    ("grouped_gemm_cuda", "cp_async_pipeline", "BM", GW[1:2], {"BN": 128, "STAGES": 4, "BK": 32}, (128,)),
]
LARGE = {"k5": ("gemm_int4_cuda", "gemm_fp4_cuda"), "k7": ("gemm_int4_cuda", "gemm_fp4_cuda"),
         "k8": ("grouped_gemm_cuda",), "k87": ("gemm_int4_cuda", "gemm_fp4_cuda", "grouped_gemm_cuda"),
         "k9": ("grouped_gemm_cuda",), "k97": ("gemm_int4_cuda", "gemm_fp4_cuda", "grouped_gemm_cuda"),
         "k10": ("grouped_gemm_cuda",), "k11": ("grouped_gemm_cuda", "grouped_gemm_triton")}   # plans whose modules' shapes skip gpucheck's size cap
PLANS = {"k1": (K1_NEW, K1_REFERENCE), "k2": (K2_NEW, K2_REFERENCE), "k12": (K12_NEW, K12_REFERENCE),
         "k3": (K3_NEW, K3_REFERENCE), "k4": (K4_NEW, K4_REFERENCE), "k34": (K34_NEW, K34_REFERENCE),
         "k5": (K5_NEW, K5_REFERENCE), "k6": (K6_NEW, K6_REFERENCE),
         "k7": ([], K7_REFERENCE), "k8": (K8_NEW, K8_REFERENCE), "k87": (K8_NEW, K8_REFERENCE + K7_REFERENCE),
         "k9": (K9_NEW, K9_REFERENCE), "k97": (K9_NEW, K9_REFERENCE + K7_REFERENCE), "k10": (K10_NEW, K10_REFERENCE),
         "k11": (K11_NEW, K11_REFERENCE)}


def race_cases(gpu: str, start: int) -> list:
    """grouped_gemm_cuda's missing_barrier renders of RACES on each GROUPED shape (bf16), and each RACES config's
    ok render at the check shape; every bug case runs RACE_REPEATS times."""
    from kernelstrain import knobs
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    m = REGISTRY["grouped_gemm_cuda"]
    out = []
    for tag, base in RACES:
        v = m.variant(tag)
        params = {**v.defaults(), **base}
        for shape in GROUPED:
            task = make_task(m, gpu, "bf16", shape)
            for bug in ([None] if shape == GROUPED[0] else []) + ["missing_barrier"]:
                where = ",".join(f"{k}={x}" for k, x in base.items())
                out.append({"id": f"grouped_gemm_cuda|{tag}|{where}|{','.join(f'{k}={x}' for k, x in shape.items())}|{bug}",
                            "episode": f"grouped_gemm_cuda|{tag}|{shape}", "step": start + len(out),
                            "module": m.name, "impl": m.impl, "variant": tag, "params": params, "dtype": "bf16",
                            "shape": dict(shape), "at": "task", "label": "wrong_result" if bug else "ok",
                            "kind": "wrong_result" if bug else "ok", "bug": bug,
                            "bug_repeats": RACE_REPEATS if bug else 1, "bug_all_runs": bool(bug), "main": True,
                            "rendered": True, "code": knobs.render(m, v, params, task, bug)})
    return out


def with_races(cases_fn):
    def cases(gpu: str, plan: str = "default") -> list:
        out = cases_fn(gpu, plan)
        out += race_cases(gpu, len(out))
        for i, c in enumerate(out):
            c["idx"] = i
        return out
    return cases


def race_report(passes_fn):
    """room_device_check._passes, then $OUT/races.txt: each race case's failed runs of its runs and elements off."""
    def passes(cases, work, jobs, budget_s):
        rows = passes_fn(cases, work, jobs, budget_s)
        lines = [f"{r['id']:100} {'runs ' + str(r.get('failed_runs')) + '/' + str(r.get('runs')) + ' failed':18} "
                 f"nbad {r.get('nbad')} err {(r.get('error') or '').splitlines()[0][:80] if r.get('error') else ''}"
                 for r in rows if r["module"] == "grouped_gemm_cuda" and r.get("bug")]
        # a case whose source another case shares (the same render at another shape: the shape is a runtime
        # argument) may fail to build when both compile the same file at once (plan k3, 16:40 UTC): no verdict
        passed = [r["id"] for r in rows if r["module"] == "grouped_gemm_cuda" and r.get("bug") and r.get("build_ok")
                  and r.get("runs") and (r.get("failed_runs") or 0) < r["runs"]]
        text = "\n".join(lines) + f"\n{len(lines)} race cases; {len(passed)} passed at least one run:\n" + "\n".join(passed)
        out = Path(os.environ.get("OUT", "/tmp/knobA_device_out"))
        out.mkdir(parents=True, exist_ok=True)
        (out / "races.txt").write_text(text + "\n")
        print(text)
        return rows
    return passes


def listing(plan: str) -> str:
    """The plan's ok cases with the simulator's time (no GPU)."""
    from kernelstrain.gpucheck import _sim_ms
    rows = [c for c in room_device_check.cases("H100", "default") if not c["bug"]]
    bugs = sum(1 for c in room_device_check.cases("H100", "default") if c["bug"])
    lines = [f"{c['id']:110} sim {(_sim_ms(c, 'H100') or 0) * 1e3:8.1f} us" for c in rows]
    return "\n".join(lines) + f"\n{plan}: {len(rows)} ok cases, {bugs} bug renders\n"


if __name__ == "__main__":
    plan = os.environ.get("ROOMK_PLAN", "k1")
    room_device_check.PLANS["default"] = PLANS[plan]
    if plan in LARGE:       # every shape of the plan (each a few ms on the GPU), not only gpucheck's
        fits = room_device_check.fits
        room_device_check.fits = lambda m, *a, **k: m.name in LARGE[plan] or fits(m, *a, **k)
    if plan in ("k3", "k34"):
        room_device_check.cases = with_races(room_device_check.cases)
        room_device_check._passes = race_report(room_device_check._passes)
    if os.environ.get("ROOMK_LIST"):
        print(listing(plan))
        sys.exit(0)
    sys.exit(room_device_check_triton.run_ranked())
