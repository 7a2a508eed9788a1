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
PLANS = {"k1": (K1_NEW, K1_REFERENCE), "k2": (K2_NEW, K2_REFERENCE), "k12": (K12_NEW, K12_REFERENCE)}


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
    if os.environ.get("ROOMK_LIST"):
        print(listing(plan))
        sys.exit(0)
    sys.exit(room_device_check_triton.run_ranked())
