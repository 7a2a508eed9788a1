"""Device check of sim2's decode-attention modules (issue 30's contradictions, issue 26's room): each case built,
checked against the PyTorch reference and timed beside the simulator (scripts/room_device_check.py's harness and
summary; its PLANS gain this script's plans).

    python3 scripts/sim2_decode_check.py                    # on an H100/H200; writes $OUT/summary.txt, knob_device.json
    KNOBA_REHEARSE=3 python3 scripts/sim2_decode_check.py   # no GPU: the first 3 cases through every path but the GPU's
    ROOM_PLAN=decode2 python3 scripts/sim2_decode_check.py  # the follow-up plan
    ROOM_PLAN=decode3 python3 scripts/sim2_decode_check.py  # the fourth session's (paged cases full-length and ragged; decode4: its follow-up)

Plan decode1 (first call):
- paged_decode_cuda gqa_cp_async across the GQA group size G = H / KVH at equal KV bytes (B=16 S=4096 KVH=8,
  H 8-64), beside vectorized_uint4: the compute of the G heads over each staged tile (sim30: G=1 276-288 us where
  the model said 432-542, G=8 586-657 where it said 455-558);
- paged_decode_cuda split_kv / vectorized_uint4 keys_per_step x main_unroll (sim30b: 8 keys unrolled twice 240 us,
  4 keys 141);
- flash_decode_triton register_prefetch / online_softmax / split_kv on grids of 256 programs (B=1's 32 measured);
- cross_attention_triton split_kv's stages at the decode shapes (sim30 timed Sq=448), its num_warps;
- mla_decode_triton split_kv at 16 heads (B=8 S=32700, B=64 S=8000): splits, BLOCK_N 128, 3 stages;
- paged_decode_triton gqa_dot / split_kv launch depth (num_stages 1 / 2 beside Triton's default 3), 64 splits.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402
import sim2_lens  # noqa: E402

G_SWEEP = [{"B": 16, "H": h, "KVH": 8, "S": 4096, "D": 128, "P": 16} for h in (8, 16, 32, 64)]
PD_B32 = [{"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16}]
PD_B128 = [{"B": 128, "H": 32, "KVH": 8, "S": 1024, "D": 128, "P": 32}]
PD_B1 = [{"B": 1, "H": 32, "KVH": 8, "S": 4096, "D": 128, "P": 16}]
FD_256 = [{"B": 8, "H": 32, "S": 2048, "D": 128}, {"B": 4, "H": 64, "S": 16384, "D": 128}]
FD_B1 = [{"B": 1, "H": 32, "S": 4096, "D": 128}]
XA_DEC = [{"B": 1, "H": 32, "Sq": 1, "Skv": 6404, "D": 128}, {"B": 4, "H": 20, "Sq": 1, "Skv": 1500, "D": 64}]
MLA_16 = [{"B": 8, "H": 16, "S": 32700}, {"B": 64, "H": 16, "S": 8000}]
MLA_128 = [{"B": 32, "H": 128, "S": 4000}]
# (module, rung, parameter, shapes, base, values[, dtype])
DECODE1_NEW = [
    # values no menu has yet (issue 26 room): each with its bug renders at the ends, first shape
    ("mla_decode_triton", "split_kv", "BLOCK_N", MLA_16, {"num_splits": 32}, (32, 64, 128)),
    ("mla_decode_triton", "split_kv", "num_stages", MLA_16, {"num_splits": 32, "BLOCK_N": 64}, (1, 2, 3)),
    ("cross_attention_triton", "split_kv", "num_warps", XA_DEC, {"num_splits": 8}, (4, 8)),
    ("paged_decode_triton", "split_kv", "num_stages", PD_B1 + PD_B32, {"NUM_SPLITS": 8}, (1, 2)),
    ("paged_decode_triton", "gqa_dot", "num_stages", PD_B32, {}, (1, 2)),
]
DECODE1_REF = [
    ("paged_decode_cuda", "gqa_cp_async", "threads", G_SWEEP, {}, (128, 256)),
    ("paged_decode_cuda", "vectorized_uint4", "threads", G_SWEEP, {}, (128,)),
    ("paged_decode_cuda", "gqa_cp_async", "stages", PD_B1, {}, (2, 4)),
    ("paged_decode_cuda", "split_kv", "keys_per_step", PD_B32, {"threads": 256, "partition": 256}, (2, 4, 8)),
    ("paged_decode_cuda", "split_kv", "keys_per_step", PD_B32, {"threads": 256, "partition": 256, "main_unroll": 2},
     (2, 8)),
    ("paged_decode_cuda", "vectorized_uint4", "keys_per_step", PD_B32 + PD_B128, {"main_unroll": 2}, (4, 8)),
    ("paged_decode_cuda", "vectorized_uint4", "keys_per_step", PD_B128, {}, (8,)),
    ("flash_decode_triton", "register_prefetch", "BLOCK_N", FD_256, {}, (32, 64, 128)),
    ("flash_decode_triton", "register_prefetch", "num_warps", FD_256, {"BLOCK_N": 64}, (2, 8)),
    ("flash_decode_triton", "online_softmax", "BLOCK_N", FD_256, {}, (64,)),
    ("flash_decode_triton", "split_kv", "NUM_SPLITS", FD_256[:1], {}, (4, 16)),
    ("flash_decode_triton", "split_kv", "NUM_SPLITS", FD_B1, {}, (16, 64)),
    ("cross_attention_triton", "split_kv", "num_stages", XA_DEC, {}, (2, 3, 4)),
    ("mla_decode_triton", "split_kv", "num_splits", MLA_16[1:], {"BLOCK_N": 64}, (4, 16)),
    ("mla_decode_triton", "split_kv", "num_stages", MLA_128, {"num_splits": 16, "BLOCK_N": 64}, (2, 3)),
    ("paged_decode_triton", "split_kv", "NUM_SPLITS", PD_B1, {}, (16, 64)),
    ("paged_decode_triton", "split_kv", "NUM_SPLITS", PD_B1 + PD_B32, {}, (8,)),
    ("paged_decode_triton", "gqa_dot", "num_warps", PD_B32, {}, (4,)),
]
room_device_check.PLANS["decode1"] = (DECODE1_NEW, DECODE1_REF)
# decode1b: decode1 cut to ~45 cases (one device call shared with a fresh-seed gpu-check): the bug renders only for
# mla's values now offered, one 256-program flash shape, the G sweep on the default gqa launch
DECODE1B_NEW = [("mla_decode_triton", "split_kv", "BLOCK_N", MLA_16[:1], {"num_splits": 32}, (64, 128)),
                ("mla_decode_triton", "split_kv", "num_stages", MLA_16[:1], {"num_splits": 32, "BLOCK_N": 64}, (2, 3))]
DECODE1B_REF = [
    ("mla_decode_triton", "split_kv", "BLOCK_N", MLA_16, {"num_splits": 32}, (32,)),
    ("mla_decode_triton", "split_kv", "BLOCK_N", MLA_16[1:], {"num_splits": 32}, (64, 128)),
    ("mla_decode_triton", "split_kv", "num_stages", MLA_128, {"num_splits": 16, "BLOCK_N": 64}, (2, 3)),
    ("mla_decode_triton", "split_kv", "BLOCK_N", MLA_128, {"num_splits": 16}, (128,)),
    ("paged_decode_cuda", "gqa_cp_async", "threads", G_SWEEP, {}, (128,)),
    ("paged_decode_cuda", "vectorized_uint4", "threads", G_SWEEP, {}, (128,)),
    ("paged_decode_cuda", "split_kv", "keys_per_step", PD_B32, {"threads": 256, "partition": 256}, (4, 8)),
    ("paged_decode_cuda", "split_kv", "keys_per_step", PD_B32, {"threads": 256, "partition": 256, "main_unroll": 2},
     (4, 8)),
    ("flash_decode_triton", "register_prefetch", "BLOCK_N", FD_256[:1], {}, (32, 64, 128)),
    ("flash_decode_triton", "register_prefetch", "num_warps", FD_256[:1], {"BLOCK_N": 64}, (8,)),
    ("flash_decode_triton", "online_softmax", "BLOCK_N", FD_256[:1], {}, (64,)),
    ("flash_decode_triton", "split_kv", "NUM_SPLITS", FD_B1, {}, (32, 64)),
    ("cross_attention_triton", "split_kv", "num_stages", XA_DEC, {}, (2, 3, 4)),
    ("cross_attention_triton", "split_kv", "num_warps", XA_DEC, {"num_splits": 8}, (4, 8)),
    ("paged_decode_triton", "split_kv", "num_stages", PD_B1 + PD_B32, {"NUM_SPLITS": 8}, (1, 2)),
    ("paged_decode_triton", "split_kv", "NUM_SPLITS", PD_B1 + PD_B32, {}, (8,)),
    ("paged_decode_triton", "split_kv", "NUM_SPLITS", PD_B1, {}, (64,)),
]
room_device_check.PLANS["decode1b"] = (DECODE1B_NEW, DECODE1B_REF)
# decode2 (the follow-up, on the final tree): the block chain and ptxas registers of paged_decode_cuda's direct-load
# rungs (048a1e6) at shapes they were not read off, and decode1's cases decode1b left out
PD_B16G1 = [{"B": 16, "H": 32, "KVH": 32, "S": 4096, "D": 128, "P": 16}]
DECODE2_REF = [
    ("paged_decode_cuda", "split_kv", "main_unroll", PD_B128, {"threads": 256, "partition": 256, "keys_per_step": 8},
     (0, 2)),
    ("paged_decode_cuda", "split_kv", "main_unroll", PD_B128 + PD_B16G1, {"threads": 256, "keys_per_step": 8}, (0, 2)),
    ("paged_decode_cuda", "split_kv", "keys_per_step", PD_B128 + PD_B16G1, {"threads": 256}, (4,)),
    ("paged_decode_cuda", "vectorized_uint4", "main_unroll", PD_B32 + PD_B128, {"threads": 256, "keys_per_step": 8},
     (0, 2)),
    ("flash_decode_triton", "register_prefetch", "BLOCK_N", FD_256[1:], {}, (32, 64)),
    ("flash_decode_triton", "online_softmax", "BLOCK_N", FD_256[1:], {}, (64,)),
    ("paged_decode_cuda", "gqa_cp_async", "threads", G_SWEEP, {}, (256,)),
    ("paged_decode_cuda", "gqa_cp_async", "stages", PD_B1, {}, (2, 4)),
    ("paged_decode_triton", "gqa_dot", "num_stages", PD_B32, {}, (1, 2)),
    ("paged_decode_triton", "gqa_dot", "num_warps", PD_B32, {}, (4,)),
]
room_device_check.PLANS["decode2"] = ([], DECODE2_REF)

# decode3 (fourth session): mla split_kv's BLOCK_N 128 and 3 stages timed (their labels were checked on the H100 by
# decode1b, their times not) at the three menu shapes the model reads them differently (under a wave at B=8 H=16,
# several waves at B=64 H=16 and B=32 H=128), beside BLOCK_N 32 / 64 and 1 / 2 stages; the paged-decode rows of the
# fresh seeds 98181 / 98282 whose order the model missed, each timed on the task's full-length contexts and on
# gpu-check's ragged ones (scripts/sim2_lens.py), with the GQA group-size sweep and the B=1 split
S661 = [{"B": 8, "H": 28, "KVH": 4, "S": 8192, "D": 128, "P": 16}]
S521 = [{"B": 16, "H": 32, "KVH": 32, "S": 4096, "D": 128, "P": 16}]
S878 = [{"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16}]
MLA_ALL = [dict(s, n=32) for s in MLA_16] + [dict(s, n=16) for s in MLA_128]
DECODE3_REF = [
    *[("mla_decode_triton", "split_kv", "BLOCK_N", [{k: x for k, x in s.items() if k != "n"}], {"num_splits": s["n"]},
       (32, 64, 128)) for s in MLA_ALL],
    *[("mla_decode_triton", "split_kv", "num_stages", [{k: x for k, x in s.items() if k != "n"}],
       {"num_splits": s["n"], "BLOCK_N": 64}, (1, 3) if s["B"] == 8 else (3,)) for s in MLA_ALL],
    *[("mla_decode_triton", "split_kv", "num_stages", [{k: x for k, x in s.items() if k != "n"}],
       {"num_splits": s["n"], "BLOCK_N": 128}, (3,)) for s in MLA_ALL],
    # seed 98181 episode 661 (G=7) and seed 98282 episode 521 (G=1), fp16 as they ran
    ("paged_decode_cuda", "vectorized_uint4", "threads", S661, {"min_blocks": 1}, (256,), "fp16"),
    ("paged_decode_cuda", "split_kv", "keys_per_step", S661, {"threads": 256}, (4, 8), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "partition", S661, {"threads": 256, "keys_per_step": 8, "main_unroll": 2},
     (512, 1024), "fp16"),
    ("paged_decode_cuda", "vectorized_uint4", "threads", S521, {}, (64, 128), "fp16"),
    ("paged_decode_cuda", "split_kv", "partition", S521, {"threads": 64}, (256,), "fp16"),
    ("paged_decode_cuda", "split_kv", "partition", S521, {"threads": 64, "keys_per_step": 2}, (512,), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "main_unroll", S521, {"threads": 256}, (0, 2), "fp16"),
    # the group-size sweep at equal KV bytes, default launches
    ("paged_decode_cuda", "gqa_cp_async", "threads", G_SWEEP, {}, (128,), "fp16"),
    ("paged_decode_cuda", "vectorized_uint4", "threads", G_SWEEP, {}, (128,), "fp16"),
    # B=1 (one sequence, its length S either way): split_kv 8 keys on 256 threads, partition 256 (28.1 us, model 11.7)
    ("paged_decode_cuda", "split_kv", "keys_per_step", PD_B1, {"threads": 256, "partition": 256}, (4, 8), "fp16"),
    ("paged_decode_cuda", "split_kv", "min_blocks", PD_B1, {"threads": 256, "partition": 256, "keys_per_step": 8},
     (1,), "fp16"),     # the 28.1 us row of seed 97272 (bf16 there), min_blocks 1 beside the 0 above
    ("paged_decode_cuda", "gqa_cp_async", "threads", PD_B1, {}, (128,), "fp16"),
    # paged_decode_triton: seed 98282 episode 431 (B=1) and seed 98181 episode 878 (B=32)
    ("paged_decode_triton", "page_tile", "num_warps", PD_B1, {"num_stages": 2}, (4,), "fp16"),
    ("paged_decode_triton", "multi_page_tile", "num_warps", PD_B1, {"num_stages": 2}, (8,), "fp16"),
    ("paged_decode_triton", "gqa_dot", "BLOCK_N", PD_B1, {"num_warps": 8}, (64, 128), "fp16"),
    ("paged_decode_triton", "page_tile", "num_warps", S878, {"num_stages": 1}, (8,)),
    ("paged_decode_triton", "multi_page_tile", "num_stages", S878, {"num_warps": 2}, (1, 2)),
    ("paged_decode_triton", "gqa_dot", "BLOCK_N", S878, {"num_warps": 2}, (64,)),
]
room_device_check.PLANS["decode3"] = ([], DECODE3_REF)

# decode4 (folded into decode3, one call being likely all there is): held-out checks of paged_decode_triton's chain of trips at B=1 (PAGED_WAITS, read off 11
# gpu-check rows: page_tile 2 / 4 warps, multi_page_tile 64 keys 2-8 warps, 128 keys 8 warps) at the warps, tiles
# and depths it was not read off; mla split_kv BLOCK_N 128 / 3 stages at 16 splits (128 programs, under a wave)
DECODE4_REF = [
    ("paged_decode_triton", "page_tile", "num_warps", PD_B1, {"num_stages": 1}, (2, 8), "fp16"),
    ("paged_decode_triton", "page_tile", "num_warps", PD_B1, {"num_stages": 2}, (8,), "fp16"),
    ("paged_decode_triton", "multi_page_tile", "num_stages", PD_B1, {"BLOCK_N": 32, "num_warps": 4}, (1, 2), "fp16"),
    ("paged_decode_triton", "multi_page_tile", "num_stages", PD_B1, {"BLOCK_N": 128, "num_warps": 4}, (1, 2), "fp16"),
    ("paged_decode_triton", "multi_page_tile", "num_stages", PD_B1, {"BLOCK_N": 128, "num_warps": 2}, (2,), "fp16"),
    ("mla_decode_triton", "split_kv", "BLOCK_N", MLA_16[:1], {"num_splits": 16}, (64, 128)),
    ("mla_decode_triton", "split_kv", "num_stages", MLA_16[:1], {"num_splits": 16, "BLOCK_N": 64}, (3,)),
]
room_device_check.PLANS["decode4"] = ([], DECODE4_REF)
room_device_check.PLANS["decode3"] = ([], DECODE3_REF + DECODE4_REF)      # one call may be all there is: both
# decode5 (a <= 60 s call after decode3 ran without decode4): decode4's paged_decode_triton cases only
room_device_check.PLANS["decode5"] = ([], [e for e in DECODE4_REF if e[0] == "paged_decode_triton"])


# decode6 (fifth session): mla split_kv across the head count at equal latent bytes (B=8 S=32700 at 32 splits, B=32
# S=4000 at 16; H 16-128, BLOCK_H 16, and one head block of 32 / 64 rows): what the heads add to the stream's time,
# _mla_split's term; paged_decode_cuda on full-length contexts at shapes no fix was read off: the group-size sweep at
# B=32 S=2048 (gqa_cp_async, vectorized_uint4, split_kv), vectorized_uint4's chain of key steps at one block an SM
# (G=1, B=16 KVH=8: rows x keys a step), gqa_cp_async's G heads on 256 threads and other tiles (B=16 S=4096), a long
# context (B=4 S=16384) and B=1's split partitions
MLA_H8 = [{"B": 8, "H": h, "S": 32700} for h in (16, 32, 64, 128)]
MLA_H32 = [{"B": 32, "H": h, "S": 4000} for h in (16, 32, 64, 128)]
G_SWEEP32 = [{"B": 32, "H": h, "KVH": 8, "S": 2048, "D": 128, "P": 16} for h in (8, 16, 32, 64)]
PD_LONG = [{"B": 4, "H": 32, "KVH": 8, "S": 16384, "D": 128, "P": 16}]
DECODE6_REF = [
    ("mla_decode_triton", "split_kv", "BLOCK_H", MLA_H8, {"num_splits": 32, "BLOCK_N": 64, "num_stages": 2}, (16,)),
    ("mla_decode_triton", "split_kv", "BLOCK_H", MLA_H32, {"num_splits": 16, "BLOCK_N": 64, "num_stages": 2}, (16,)),
    ("mla_decode_triton", "split_kv", "BLOCK_H", MLA_H8[1:2], {"num_splits": 32, "BLOCK_N": 64, "num_stages": 2}, (32,)),
    ("mla_decode_triton", "split_kv", "BLOCK_H", MLA_H8[2:3], {"num_splits": 32, "BLOCK_N": 64, "num_stages": 2}, (64,)),
    ("paged_decode_cuda", "gqa_cp_async", "threads", G_SWEEP32 + PD_LONG, {}, (128,), "fp16"),
    ("paged_decode_cuda", "vectorized_uint4", "threads", G_SWEEP32 + PD_LONG, {}, (128,), "fp16"),
    ("paged_decode_cuda", "split_kv", "threads", G_SWEEP32 + PD_LONG, {}, (128,), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "threads", G_SWEEP, {}, (256,), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "tile_n", G_SWEEP[3:], {"threads": 128}, (16, 64), "fp16"),
    ("paged_decode_cuda", "vectorized_uint4", "threads", G_SWEEP[:1], {}, (64, 256), "fp16"),
    ("paged_decode_cuda", "vectorized_uint4", "keys_per_step", G_SWEEP[:1], {"threads": 128}, (2, 8), "fp16"),
    ("paged_decode_cuda", "split_kv", "partition", PD_B1, {"threads": 128}, (512, 1024), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "threads", PD_B1, {}, (256,), "fp16"),
    # register_prefetch BLOCK_N 128 on 4 warps at D=128 (ptxas of Triton 3.9: 254 registers, no spill): 1926.0 us at
    # B=32 H=32 S=4096 on the H100's Triton 3.6 (seed 62828) against 730.9 for BLOCK_N 64 (model 710 / 768)
    ("flash_decode_triton", "register_prefetch", "BLOCK_N", [{"B": 32, "H": 32, "S": 4096, "D": 128}, FD_256[0]],
     {"num_warps": 4}, (64, 128)),
    ("flash_decode_triton", "register_prefetch", "num_warps", [{"B": 32, "H": 32, "S": 4096, "D": 128}, FD_256[0]],
     {"BLOCK_N": 128}, (8,)),
]
# issue 26's room: values past the end of a list where the final bests of room_table (seed 71717, 8 episodes a module,
# both profiles) sat at that end, each with its bug renders at the ends on the first shape
XA_PIPE = [{"B": 16, "H": 20, "Sq": 448, "Skv": 1500, "D": 64}, {"B": 2, "H": 10, "Sq": 4096, "Skv": 77, "D": 64},
           {"B": 1, "H": 32, "Sq": 1, "Skv": 6404, "D": 128}]
FD_ROOM = [{"B": 32, "H": 32, "S": 4096, "D": 128}, {"B": 16, "H": 16, "S": 1024, "D": 64}]
PD_ROOM = [{"B": 64, "H": 64, "KVH": 8, "S": 4096, "D": 128, "P": 16}, S661[0]]
DECODE6_NEW = [
    ("cross_attention_triton", "pipelined_tiles", "num_warps", XA_PIPE, {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 3},
     (2, 4)),
    ("flash_decode_triton", "online_softmax", "BLOCK_N", FD_ROOM, {"num_warps": 2, "num_stages": 1}, (128, 256)),
    ("flash_decode_triton", "online_softmax", "num_warps", FD_ROOM, {"BLOCK_N": 128, "num_stages": 1}, (1, 2)),
    ("paged_decode_cuda", "gqa_cp_async", "threads", PD_ROOM, {"keys_per_step": 8}, (256, 512), "fp16"),
]
room_device_check.PLANS["decode6"] = (DECODE6_NEW, DECODE6_REF)
room_device_check.PLANS["decode6_new"] = (DECODE6_NEW, [])      # decode6 runs its reference cases first (below)

# decode7 (the follow-up, held out): the fifth session's fixes at shapes they were not read off: mla split_kv's heads
# term (B=64 S=8000 and B=4 S=65000 at 16 / 128 heads, B=128 S=2000 across BLOCK_H), vectorized_uint4's key-step
# chain (G=1 at B=8 S=8192, B=1), gqa_cp_async's group overlap at B=8 KVH=4 S=8192 (G 1 / 2 / 4 / 7), and
# flash_decode_triton register_prefetch where Triton 3.6's ptxas spills (BLOCK_N 64 on 2 warps, 128 on 4)
PD_B8G1 = [{"B": 8, "H": 8, "KVH": 8, "S": 8192, "D": 128, "P": 16}]
G_SWEEP7 = [{"B": 8, "H": h, "KVH": 4, "S": 8192, "D": 128, "P": 16} for h in (4, 8, 16, 28)]
DECODE7_REF = [
    ("mla_decode_triton", "split_kv", "BLOCK_H", [{"B": 64, "H": h, "S": 8000} for h in (16, 128)],
     {"num_splits": 16, "BLOCK_N": 64, "num_stages": 2}, (16,)),
    ("mla_decode_triton", "split_kv", "BLOCK_H", [{"B": 4, "H": h, "S": 65000} for h in (16, 128)],
     {"num_splits": 16, "BLOCK_N": 64, "num_stages": 2}, (16,)),
    ("mla_decode_triton", "split_kv", "BLOCK_H", [{"B": 128, "H": 128, "S": 2000}],
     {"num_splits": 4, "BLOCK_N": 64, "num_stages": 2}, (16, 32, 64)),
    ("paged_decode_cuda", "vectorized_uint4", "keys_per_step", PD_B8G1, {"threads": 128}, (2, 4), "fp16"),
    ("paged_decode_cuda", "vectorized_uint4", "threads", PD_B1, {}, (128, 256), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "threads", G_SWEEP7, {}, (128,), "fp16"),
    ("flash_decode_triton", "register_prefetch", "BLOCK_N", [{"B": 32, "H": 32, "S": 4096, "D": 128}, FD_256[0]],
     {"num_warps": 2}, (64,)),
    ("flash_decode_triton", "register_prefetch", "BLOCK_N", FD_B1, {"num_warps": 4}, (128,)),
]
room_device_check.PLANS["decode7"] = ([], DECODE7_REF)

# decode8 (sixth session, held out): paged_decode_cuda where few blocks share the GPU (B=1: 32-128 blocks, under a
# wave), the shapes no row was taken at: what a block's time follows there, its tiles (tile_n), its keys a thread
# row (partition x G x D/8 / threads), its keys a step or the bytes an SM streams (partition x KV row): the
# G = 8 / 2 / 1 shapes at one sequence, gqa_cp_async and split_kv side by side; the held-out tilings of seed 61717's
# B=1 episode at H=32 KVH=8 (tile_n at 128 threads, 1024-token partitions on 256); register_prefetch BLOCK_N 128 on
# 4 warps twice (its bimodal rows); issue 26's room: keys_per_step 16 and 512 threads of the direct-load rungs
PD_B1G8 = [{"B": 1, "H": 32, "KVH": 4, "S": 8192, "D": 128, "P": 16}]
PD_B1G2 = [{"B": 1, "H": 16, "KVH": 8, "S": 8192, "D": 128, "P": 16}]
PD_B1G1 = [{"B": 1, "H": 8, "KVH": 8, "S": 16384, "D": 128, "P": 16}]
DECODE8_REF = [
    ("paged_decode_cuda", "gqa_cp_async", "tile_n", PD_B1, {"threads": 128, "partition": 256}, (16, 64), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "keys_per_step", PD_B1, {"threads": 256, "partition": 256}, (2, 4), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "partition", PD_B1, {"threads": 256, "keys_per_step": 8}, (1024,), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "threads", PD_B1G8 + PD_B1G2 + PD_B1G1, {"partition": 256}, (128, 256),
     "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "partition", PD_B1G8 + PD_B1G1, {"threads": 128}, (512, 1024), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "keys_per_step", PD_B1G8, {"threads": 256, "partition": 256}, (2, 8), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "tile_n", PD_B1G8, {"threads": 256, "partition": 256}, (16, 64), "fp16"),
    ("paged_decode_cuda", "split_kv", "threads", PD_B1G8 + PD_B1G1, {"partition": 512}, (128, 256), "fp16"),
    ("paged_decode_cuda", "split_kv", "partition", PD_B1G8, {"threads": 256}, (256, 1024), "fp16"),
    ("paged_decode_cuda", "split_kv", "keys_per_step", PD_B1G8, {"threads": 256, "partition": 512}, (8,), "fp16"),
    ("flash_decode_triton", "register_prefetch", "BLOCK_N", FD_B1 + [{"B": 32, "H": 32, "S": 4096, "D": 128}],
     {"num_warps": 4}, (64, 128)),
    # its fp16 twins: the rows of BLOCK_N 128 on 4 warps ran fast in fp16 (92.3 / 96.2 / 707.6 us, seeds 40404 /
    # 97171 / 98989) and slow in bf16 (226.7-228.1 / 315.1 / 1926-1970): the dtype, not the run?
    ("flash_decode_triton", "register_prefetch", "BLOCK_N", FD_B1 + [{"B": 32, "H": 32, "S": 4096, "D": 128}],
     {"num_warps": 4}, (64, 128), "fp16"),
]
PD_ROOM8 = {"threads": 256, "partition": 512, "keys_per_step": 8}
DECODE8_REF += [("paged_decode_cuda", "split_kv", "threads", PD_ROOM, PD_ROOM8, (256,), "fp16"),
                ("paged_decode_cuda", "vectorized_uint4", "threads", PD_ROOM[:1], {"keys_per_step": 8}, (256,), "fp16")]
DECODE8_NEW = [     # each past its list's end, with its bug renders (the first shape)
    ("paged_decode_cuda", "split_kv", "keys_per_step", PD_ROOM, PD_ROOM8, (16,), "fp16"),
    ("paged_decode_cuda", "split_kv", "threads", PD_ROOM, PD_ROOM8, (512,), "fp16"),
    ("paged_decode_cuda", "vectorized_uint4", "keys_per_step", PD_ROOM[:1], {"threads": 256}, (16,), "fp16"),
    ("paged_decode_cuda", "vectorized_uint4", "threads", PD_ROOM[:1], {"keys_per_step": 8}, (512,), "fp16"),
]
room_device_check.PLANS["decode8"] = (DECODE8_NEW, DECODE8_REF)
room_device_check.PLANS["decode8_new"] = (DECODE8_NEW, [])

# decode9 (the follow-up, held out): register_prefetch's bf16 / fp16 twins at 128 values a thread on the shapes no
# row was taken at (flash_decode_triton.PREFETCH_BF16_*: B=4 H=64 S=16384, B=64 H=32 S=8192; D=64 on 2 warps) and
# BLOCK_N 64 on 2 warps; paged_decode_cuda's split rungs on two to four waves (SPLIT_ONCE, GQA_KEY_TRIPS: B=2 / B=4)
FD_TWINS = [{"B": 4, "H": 64, "S": 16384, "D": 128}, {"B": 64, "H": 32, "S": 8192, "D": 128}]
PD_FEW = [{"B": 2, "H": 32, "KVH": 8, "S": 8192, "D": 128, "P": 16}, {"B": 4, "H": 32, "KVH": 4, "S": 4096, "D": 128,
                                                                       "P": 16}]
DECODE9_REF = [
    *[("flash_decode_triton", "register_prefetch", "BLOCK_N", FD_TWINS, {"num_warps": 4}, (128,), dt)
      for dt in ("bf16", "fp16")],
    *[("flash_decode_triton", "register_prefetch", "num_warps", [{"B": 16, "H": 16, "S": 1024, "D": 64}],
       {"BLOCK_N": 128}, (2, 4), dt) for dt in ("bf16", "fp16")],
    *[("flash_decode_triton", "register_prefetch", "num_warps", FD_TWINS[:1], {"BLOCK_N": 64}, (2,), dt)
      for dt in ("bf16", "fp16")],
    ("paged_decode_cuda", "gqa_cp_async", "threads", PD_FEW, {"partition": 256}, (128, 256), "fp16"),
    ("paged_decode_cuda", "gqa_cp_async", "partition", PD_FEW, {"threads": 128}, (1024,), "fp16"),
    ("paged_decode_cuda", "split_kv", "threads", PD_FEW, {"partition": 512}, (128, 256), "fp16"),
    ("paged_decode_cuda", "split_kv", "partition", PD_FEW, {"threads": 256, "keys_per_step": 8}, (256, 1024), "fp16"),
]
room_device_check.PLANS["decode9"] = ([], DECODE9_REF)


def decode3_cases(gpu: str, plan: str = "decode3") -> list:
    """decode3's cases, the paged-decode ones timed full-length and ragged (full only: B=1, one sequence of S, and
    the group-size sweep)."""
    cases = CASES(gpu, plan)
    if plan in ("decode6", "decode8"):      # the model's cases before the room's, should the run budget end first
        k = len(CASES(gpu, plan + "_new"))
        cases = cases[k:] + cases[:k]
    return sim2_lens.both(cases, full_only=lambda c: (plan in ("decode6", "decode7", "decode8", "decode9") or c["shape"]["B"] == 1
                                                                 or c["shape"] in G_SWEEP))


CASES = room_device_check.cases

if __name__ == "__main__":
    os.environ.setdefault("ROOM_PLAN", "decode1")
    if os.environ["ROOM_PLAN"] in ("decode3", "decode4", "decode5", "decode6", "decode7", "decode8", "decode9"):
        sim2_lens.install(Path(os.environ.get("SIM2_SITE", "/tmp/sim2_site")))
        room_device_check.cases = decode3_cases
    sys.exit(room_device_check.main())
