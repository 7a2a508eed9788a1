"""Device plan of roomM's modules (issue 26 item 2, issue 30): scripts/room_device_check.py's harness (every value
built, checked against the PyTorch reference and timed beside the simulator; every bug at a NEW entry's smallest and
largest values, first shape, must fail), then each group's values ranked by the device and by the simulator
(room_device_check_triton.ranking).

    python3 scripts/roomM_device.py                       # on a CUDA machine; writes $OUT/summary.txt, knob_device.json, ranking.txt
    ROOMM_PLAN=m2 python3 scripts/roomM_device.py          # another plan of PLANS (default: m1)
    KNOBA_REHEARSE=3 python3 scripts/roomM_device.py       # no GPU: the first 3 cases through every path but the GPU's

m1: prefix_scan_cuda's reduce-then-scan rung (new: its values and bugs) beside the rungs around it (block-per-row
warp-shuffle scan, decoupled look-back) at long rows (R=8 C=1M, R=64 C=128256) and many short rows, with the
look-back's items 16 and 1024 threads (off its lists: edges of room_table.py); moe_scatter_cuda's fused rung at 1024
threads (new: room_table.py's `threads+` edge) at 7168-, 4096- and 2048-wide rows; conv2d_nhwc_cuda's cp.async rung
past its lists' ends (BK 128, 5 stages: room_table.py's edges; 256-wide filter tiles were timed by roomK, 1.24x slow), to see whether the model's order holds there;
min_p_triton's split-row rung at 64 splits and 16 warps, its chunk rung at 16384-wide blocks, conv2d_nhwc_triton's
BK (its 5 stages were timed by roomK: level with 3 and 4) (all off the menus or at their ends: the ranking decides whether to extend them).
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402
import room_device_check_triton  # noqa: E402
from roomA_device import modelled  # noqa: E402  (the values the launch model can time at every shape)

# (module, rung, parameter, shapes, base, values): as room_device_check's entries
LONG = [{"R": 8, "C": 1048576}, {"R": 64, "C": 128256}]
MANY = [{"R": 4096, "C": 4096}]
ONE = [{"R": 1, "C": 128256}]
# moe_scatter shapes with the model's best tokens_per_block at 512 threads
MOE = [({"T": 512, "E": 256, "topk": 8, "K": 7168}, 4), ({"T": 2048, "E": 64, "topk": 6, "K": 2048}, 8),
       ({"T": 4096, "E": 8, "topk": 2, "K": 4096}, 32)]
M1_NEW = [
    ("prefix_scan_cuda", "reduce_then_scan", "threads", LONG + MANY, {"items": 8}, (128, 256, 512)),
    ("prefix_scan_cuda", "reduce_then_scan", "items", LONG + ONE, {"threads": 256}, (1, 2, 4, 8)),
] + [("moe_scatter_cuda", "warp_aggregated_fused", "threads", [s], {"tokens_per_block": tpb}, (1024,))
      for s, tpb in MOE]
CONV = [{"N": 8, "H": 28, "W": 28, "C": 128, "K": 128, "R": 3, "S": 3, "U": 1, "PD": 1},
        {"N": 16, "H": 14, "W": 14, "C": 256, "K": 256, "R": 3, "S": 3, "U": 1, "PD": 1}]
M1_REF = [("moe_scatter_cuda", "warp_aggregated_fused", "threads", [s], {"tokens_per_block": tpb}, (256, 512))
          for s, tpb in MOE] + [
    ("prefix_scan_cuda", "decoupled_lookback", "items", LONG + MANY + ONE, {"threads": 512}, (4, 8, 16)),
    ("prefix_scan_cuda", "decoupled_lookback", "threads", LONG + MANY, {"items": 8}, (256, 512, 1024)),
    ("prefix_scan_cuda", "warp_shuffle_scan", "threads", LONG + MANY + ONE, {"items": 4}, (128, 1024)),
    ("conv2d_nhwc_cuda", "cp_async_pipeline", "BK", CONV, {"BM": 32, "BN": 128, "stages": 4}, (32, 64, 128)),
    ("conv2d_nhwc_cuda", "cp_async_pipeline", "stages", CONV, {"BM": 32, "BN": 128, "BK": 64}, (3, 4, 5)),
    ("conv2d_nhwc_cuda", "cp_async_pipeline", "BM", CONV, {"BN": 128, "BK": 64, "stages": 4}, (32, 64, 128)),
]
# Triton: min_p's split-row rung past its split and warp lists, the chunk rung's 16384-wide blocks (room_table.py's
# edges); conv2d_nhwc_triton's K tile and pipeline depth (the launch model has no BK term but smem/registers)
MINP1, MINP64 = [{"B": 1, "V": 128256}], [{"B": 64, "V": 128256}]
CONVT = [{"N": 8, "H": 28, "W": 28, "C": 128, "K": 128, "R": 3, "S": 3, "U": 1, "PD": 1}]
M1_TRITON = [
    ("min_p_triton", "split_row_combine", "split", MINP1, {"BLOCK": 2048, "num_warps": 8}, (16, 32, 64)),
    ("min_p_triton", "split_row_combine", "split", MINP64, {"BLOCK": 2048, "num_warps": 2}, (16, 32, 64)),
    ("min_p_triton", "split_row_combine", "num_warps", MINP1, {"BLOCK": 2048, "split": 32}, (4, 8, 16)),
    ("min_p_triton", "chunk_mass_pick", "BLOCK", MINP1 + MINP64, {"num_warps": 16}, (8192, 16384)),
    ("conv2d_nhwc_triton", "pipelined_stages", "BK", CONVT, {"BM": 64, "BN": 128, "num_warps": 4, "GROUP_M": 4,
                                                              "STAGES": 4}, (32, 64)),
    ("conv2d_nhwc_triton", "grouped_swizzle", "BK", CONVT, {"BM": 128, "BN": 64, "num_warps": 4, "GROUP_M": 4},
     (32, 64)),
]
# m3 (this session): top_p_cuda's split_mass_hist rung (new: stage 1's CTAs a row (its slice), threads, bugs at the
# B=64 row count where missing_scale fails) beside vectorized_float4 (the one-block-a-row rung it splits); prefix_scan_cuda
# warp_shuffle_scan across items and threads at the long rows (the row-chain term, docs/roomM_device_h100_m1/ 1.9x);
# selective_scan_cuda smem_bc_multi_channel across threads and rows beyond B=1 (the rung ran flat there)
TOPP = [{"B": 64, "V": 128256}, {"B": 1, "V": 32000}, {"B": 8, "V": 128256}, {"B": 256, "V": 128256}]
M3_NEW = [
    ("top_p_cuda", "split_mass_hist", "slice", TOPP, {"threads": 512}, (2048, 4096, 8192, 16384)),
    ("top_p_cuda", "split_mass_hist", "threads", TOPP[:3], {"slice": 4096}, (256, 1024)),
    # the look-back's bugs where a row now just spans two tiles (offered only there: prefix_scan_cuda.several_tiles;
    # an H100 passed missing_barrier at R=16384 C=2048 512 threads items 2, one tile a row), each run 3 times
    ("prefix_scan_cuda", "decoupled_lookback", "items", [{"R": 16384, "C": 2048}], {"threads": 128}, (1,)),
    ("prefix_scan_cuda", "decoupled_lookback", "threads", [{"R": 4096, "C": 4096}], {"items": 2}, (128,)),
]
SCAN8 = [{"B": 1, "L": 2048, "D": 1536, "N": 16}, {"B": 4, "L": 2048, "D": 1536, "N": 16},
         {"B": 16, "L": 256, "D": 2048, "N": 16}]        # within gpucheck's 8x the check shape
M3_REF = [
    ("top_p_cuda", "vectorized_float4", "threads", TOPP, {"cap": 2048}, (512, 1024)),
    ("prefix_scan_cuda", "warp_shuffle_scan", "items", LONG + ONE, {"threads": 1024}, (1, 2, 4)),
    ("prefix_scan_cuda", "warp_shuffle_scan", "threads", LONG, {"items": 4}, (256, 512)),
    ("prefix_scan_cuda", "warp_shuffle_scan", "items", LONG[1:], {"threads": 128}, (1, 2)),
    ("selective_scan_cuda", "smem_bc_multi_channel", "threads", SCAN8, {"rows": 4}, (32, 64, 128, 256)),
    ("selective_scan_cuda", "smem_bc_multi_channel", "rows", SCAN8, {"threads": 64}, (1, 2, 8)),
]
# m4 (follow-up): split_mass_hist at the menu's other two shapes (V=32000 with 32 and 128 rows), its cap at B=8, beside
# vectorized_float4 there
TOPP4 = [{"B": 32, "V": 32000}, {"B": 128, "V": 32000}]
M4_NEW = [("top_p_cuda", "split_mass_hist", "slice", TOPP4, {"threads": 512}, (2048, 4096, 8192))]
M4_REF = [
    ("top_p_cuda", "split_mass_hist", "threads", TOPP4, {"slice": 4096}, (256, 1024)),
    ("top_p_cuda", "split_mass_hist", "cap", [{"B": 8, "V": 128256}], {"threads": 512, "slice": 4096}, (1024, 4096)),
    # past the slice list's end (room_table.py's slice+ edge: B=64 ran 16384 at 146 us against 8192's 216)
    ("top_p_cuda", "split_mass_hist", "slice", [{"B": 64, "V": 128256}, {"B": 256, "V": 128256}], {"threads": 512},
     (32768,)),
    ("top_p_cuda", "vectorized_float4", "threads", TOPP4, {"cap": 2048}, (512, 1024)),
    # min_p_triton chunk_mass_pick past its 16384-wide blocks (room_table.py's BLOCK+ edge; the model has 32768 slower)
    ("min_p_triton", "chunk_mass_pick", "BLOCK", MINP1 + MINP64, {"num_warps": 16}, (16384, 32768)),
]
# m5 (this session; the lead: plan for landing without the device, so every value here is OFF its rung's list, a
# probe): first selective_scan_triton's top rung across the two parameters whose order the model has against the H200
# rows in _scan_state_outer.py's docstring (no measurement file holds them, so no fit saw them: the model puts 1 warp
# slowest and BLOCK_D 16 slower than 4 at B=1 L=2048 D=1536, where the H200 ran both fastest), H100 rows for a refit;
# then values past a list's end where fresh-seed episodes (room_table.py seeds 7171 / 7272 / 7474) stopped at the edge,
# each beside the list's end (bugs at the probe value): mamba_step_triton's persistent rung at BLOCK_D 128 and 16 warps
# on the wide-state shapes (N 128 / 64; roomA timed BLOCK_D 128 at N 16: 1.11x slower), selective_scan_cuda's staged
# rung at 16 channels a block on one-warp channels (rows+: 7 of 10 kernelinfer episodes; the model has 8 and 16 each
# 1.2x faster from the fit's rows exponent, m3 measured rows 4 -> 8 at 64 threads 1.00-1.04x), min_p_triton
# split_row_combine's one-block slices (BLOCK 4096: 6 of 10), topk_cuda vectorized_float4's 512 candidate slots
# (cap-: 3 of 10 in each profile; 9 of 20 default episodes of seed 7474) and the split rung's 64 threads (threads-),
# prefix_scan_cuda warp_shuffle_scan's 64 threads (threads-: 3 of 10 default episodes) at many short rows; last the
# conv2d_nhwc_triton tl.dot rung past BM / BK (informational)
SST = [{"B": 1, "L": 2048, "D": 1536, "N": 16}, {"B": 4, "L": 1024, "D": 3072, "N": 16}]
MAMBA = [{"B": 8, "D": 4096, "N": 128}, {"B": 32, "D": 8192, "N": 64}, {"B": 16, "D": 4096, "N": 16}]
MINP = [{"B": 1, "V": 128256}, {"B": 64, "V": 128256}]
TOPK = [{"B": 64, "V": 128256, "K": 20}, {"B": 256, "V": 128256, "K": 50}]
TOPK_F4 = [{"B": 32, "V": 32000, "K": 40}, {"B": 128, "V": 32000, "K": 50}, {"B": 256, "V": 128256, "K": 50}]
SHORT = [{"R": 4096, "C": 4096}, {"R": 16384, "C": 2048}]
M5_NEW = [
    ("selective_scan_triton", "state_outer_scan", "num_warps", SST, {"BLOCK_D": 4, "CHUNK": 128}, (1, 2, 4, 8)),
    ("selective_scan_triton", "state_outer_scan", "BLOCK_D", SST, {"CHUNK": 128, "num_warps": 4}, (1, 4, 16)),
    ("mamba_step_triton", "persistent_vectorized", "BLOCK_D", MAMBA[:2], {"num_warps": 16, "programs_per_sm": 32},
     (64, 128)),
    ("mamba_step_triton", "persistent_vectorized", "num_warps", MAMBA[:2], {"BLOCK_D": 128, "programs_per_sm": 32},
     (8, 16)),
    ("selective_scan_cuda", "smem_bc_multi_channel", "rows", SCAN8, {"threads": 32}, (4, 8, 16)),
    ("min_p_triton", "split_row_combine", "BLOCK", MINP[:1], {"num_warps": 8, "split": 32}, (2048, 4096)),
    ("min_p_triton", "split_row_combine", "BLOCK", MINP[1:], {"num_warps": 4, "split": 32}, (2048, 4096)),
    ("topk_cuda", "vectorized_float4", "cap", TOPK_F4, {"threads": 512}, (512, 1024)),
    ("topk_cuda", "split_row_two_stage", "threads", TOPK, {"chunk": 8192}, (64, 128)),
    ("prefix_scan_cuda", "warp_shuffle_scan", "threads", SHORT, {"items": 1}, (64, 128, 256)),
]
M5_REF = [
    ("mamba_step_triton", "persistent_vectorized", "num_warps", MAMBA, {"BLOCK_D": 64, "programs_per_sm": 32}, (1, 8)),
    ("conv2d_nhwc_triton", "implicit_gemm_dot", "BK", CONVT, {"BM": 128, "BN": 64, "num_warps": 4}, (64, 128)),
    ("conv2d_nhwc_triton", "implicit_gemm_dot", "BM", CONVT, {"BN": 64, "BK": 64, "num_warps": 8}, (128, 256)),
]
# m8 (seventh session, job j2): the split rungs' last_combine 1, the combine folded into the mass kernel's last
# program of a row (min_p_triton: on the menu after scripts/roomM_interpret.py; min_p_cuda: KERNELSTRAIN_DEVICE_UNCHECKED=1
# until this runs), correctness at every value (the arrival count's ordering is what the CPU interpreter cannot show),
# bugs at the ends, and the launch it saves beside last_combine 0 at the same values: decode-time rows (B=1, 4)
# where the launch is most of the time, B=64 where it is not; min_p_triton's BLOCK 4096 beside 2048
MINP8 = [{"B": 1, "V": 128256}, {"B": 4, "V": 32000}, {"B": 64, "V": 128256}]
M8_NEW = [
    ("min_p_triton", "split_row_combine", "split", MINP8, {"BLOCK": 2048, "num_warps": 8, "last_combine": 1}, (2, 8, 32)),
    ("min_p_triton", "split_row_combine", "BLOCK", MINP8[::2], {"num_warps": 8, "split": 32, "last_combine": 1},
     (512, 4096)),
    ("min_p_triton", "split_row_combine", "BLOCK", MINP8[::2], {"num_warps": 8, "split": 32, "last_combine": 0}, (4096,)),
    ("min_p_cuda", "split_row_combine", "split", MINP8, {"threads": 256, "last_combine": 1}, (2, 8, 32)),
]
M8_REF = [
    ("min_p_triton", "split_row_combine", "split", MINP8, {"BLOCK": 2048, "num_warps": 8, "last_combine": 0}, (8, 32)),
    ("min_p_triton", "split_row_combine", "BLOCK", MINP8[::2], {"num_warps": 8, "split": 32, "last_combine": 1}, (2048,)),
    ("min_p_cuda", "split_row_combine", "split", MINP8, {"threads": 256, "last_combine": 0}, (8, 32)),
]
# the new rungs and values first (the run pass times cases in order: what its budget leaves is `not run`)
PLANS = {"m1": (M1_NEW, M1_REF[:-3] + M1_TRITON[:4]),     # the conv probes (informational) in m2
         "m2": ([], M1_TRITON[4:] + M1_REF[-3:]), "m3": (M3_NEW, M3_REF), "m4": (M4_NEW, M4_REF),
         "m5": (M5_NEW, M5_REF), "m6": (M4_NEW, M4_REF),
         # m7 (seventh session, job j1): m5's probes alone (last session's values kept off the menus), for a 90 s job
         "m7": (M5_NEW, []), "m8": (M8_NEW, M8_REF)}


# the harness's default plan (room_device_check.PLANS, read by its cases()) becomes this one's
room_device_check.PLANS["default"] = tuple(modelled(x) for x in PLANS[os.environ.get("ROOMM_PLAN", "m1")])

if __name__ == "__main__":
    sys.exit(room_device_check_triton.run_ranked())
