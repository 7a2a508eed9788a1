"""Device check of the launch models issue 30 found contradicted on the H100 (sim's modules): each case checked
against the PyTorch reference and timed beside the simulator (scripts/room_device_check.py's harness).

    python3 scripts/gpu_check_sim30.py                    # on an H100/H200; writes $OUT/summary.txt, knob_device.json
    KNOBA_REHEARSE=3 python3 scripts/gpu_check_sim30.py   # no GPU: the first 3 cases through every path but the GPU's
    ROOM_PLAN=sim30b python3 scripts/gpu_check_sim30.py   # the follow-up plan (held-out shapes of the same fixes)

Plan sim30 (first call): the rungs at the shapes where the fresh seeds put them 1.4-2x off, beside the module's
other rungs at the same shape, so that a fix can be fitted on the order as well as on the ratio.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402

LN_MANY = [{"T": 4096, "D": 4096}, {"T": 8192, "D": 1024}]
PD_NOGROUP = [{"B": 16, "H": 32, "KVH": 32, "S": 4096, "D": 128, "P": 16}]
PD_GQA = [{"B": 64, "H": 64, "KVH": 8, "S": 4096, "D": 128, "P": 16}]
MOE = [{"T": 512, "E": 256, "topk": 8, "K": 7168}, {"T": 4096, "E": 8, "topk": 2, "K": 4096},
       {"T": 64, "E": 64, "topk": 6, "K": 2048}]
FD_B1 = [{"B": 1, "H": 32, "S": 4096, "D": 128}]
CE = [{"T": 16, "V": 128256}, {"T": 4096, "V": 32000}]
SWA = [{"B": 2, "H": 16, "S": 3000, "D": 128, "W": 1024}, {"B": 1, "H": 32, "S": 4096, "D": 128, "W": 1024}]
XA = [{"B": 4, "H": 20, "Sq": 448, "Skv": 1500, "D": 64}, {"B": 16, "H": 20, "Sq": 448, "Skv": 1500, "D": 64}]
SM32 = [{"R": 32, "C": 128256}]
# (module, rung, parameter, shapes, base, values[, dtype])
SIM30 = [
    # layernorm_triton: the chunked rungs 1.2-1.6x slow at many rows (13 rows, 6 seeds), beside whole_row_registers
    ("layernorm_triton", "chunked_three_pass", "BLOCK", LN_MANY, {}, (256, 1024)),
    ("layernorm_triton", "welford_chunked", "BLOCK", LN_MANY, {}, (256, 1024)),
    ("layernorm_triton", "whole_row_registers", "num_warps", LN_MANY, {}, (4, 8)),
    ("layernorm_triton", "chunked_three_pass", "num_stages", LN_MANY[:1], {"BLOCK": 1024}, (1, 3)),
    # layernorm_cuda smem_block_reduce on 1,024 threads at another shape than the one measured (T=4096 D=4096)
    ("layernorm_cuda", "smem_block_reduce", "vec", [{"T": 8192, "D": 5120}], {"threads": 1024}, (1, 2, 4)),
    ("layernorm_cuda", "smem_block_reduce", "vec", [{"T": 8192, "D": 5120}], {"threads": 512}, (1, 2)),
    # paged_decode_cuda: no grouping (KVH = H) and B=64 H=64 KVH=8, every rung at its defaults and the stages
    ("paged_decode_cuda", "vectorized_uint4", "keys_per_step", PD_NOGROUP + PD_GQA, {}, (4,)),
    ("paged_decode_cuda", "split_kv", "partition", PD_NOGROUP + PD_GQA, {}, (256, 1024)),
    ("paged_decode_cuda", "gqa_cp_async", "stages", PD_NOGROUP + PD_GQA, {}, (2, 4)),
    ("paged_decode_cuda", "gqa_cp_async", "tile_n", PD_NOGROUP, {}, (16, 64)),
    # moe_scatter_cuda: the one-launch rung's recount at T >= 512 beside the fused and the uint4 rungs
    ("moe_scatter_cuda", "redundant_rank_one_launch", "threads", MOE, {}, (128, 512)),
    ("moe_scatter_cuda", "warp_aggregated_fused", "threads", MOE, {}, (256,)),
    ("moe_scatter_cuda", "vectorized_uint4", "threads", MOE[:2], {}, (256,)),
    # flash_decode_triton register_prefetch at B=1 (32 programs), beside online_softmax and split_kv
    ("flash_decode_triton", "register_prefetch", "BLOCK_N", FD_B1, {}, (32, 64, 128)),
    ("flash_decode_triton", "register_prefetch", "num_warps", FD_B1, {"BLOCK_N": 64}, (2, 8)),
    ("flash_decode_triton", "online_softmax", "BLOCK_N", FD_B1, {}, (32, 64)),
    ("flash_decode_triton", "split_kv", "NUM_SPLITS", FD_B1, {}, (8, 32)),
    ("flash_decode_triton", "register_prefetch", "BLOCK_N", [{"B": 32, "H": 32, "S": 4096, "D": 128}], {}, (64,)),
    ("flash_decode_triton", "online_softmax", "BLOCK_N", [{"B": 32, "H": 32, "S": 4096, "D": 128}], {}, (64,)),
    # cross_entropy_fwd_triton: the rungs' loads (2-byte scalars where the offset is not 16-aligned), num_stages
    ("cross_entropy_fwd_triton", "split_v_combine", "SPLIT", CE, {}, (4, 16)),
    ("cross_entropy_fwd_triton", "chunked_two_pass", "num_stages", CE, {}, (1, 3)),
    ("cross_entropy_fwd_triton", "online_softmax", "num_stages", CE, {}, (1, 3)),
    ("cross_entropy_fwd_triton", "full_row", "num_warps", CE[1:], {}, (8,)),
    # grad_clip_cuda bf16 vs fp32 at equal bytes: both fixed-grid rungs
    ("grad_clip_cuda", "two_stage_deterministic", "threads", [{"N": 33554432}], {}, (256, 1024), "bf16"),
    ("grad_clip_cuda", "two_stage_deterministic", "threads", [{"N": 16777216}], {}, (256, 1024), "fp32"),
    ("grad_clip_cuda", "vectorized_persistent", "threads", [{"N": 33554432}], {}, (256,), "bf16"),
    ("grad_clip_cuda", "two_stage_deterministic", "pragma_unroll", [{"N": 124439808}], {}, (0, 4), "bf16"),
    # sliding_window / cross_attention: the stages of the persistent and split rungs
    ("sliding_window_attn_triton", "persistent_tiles", "num_stages", SWA, {}, (2, 3, 4)),
    ("sliding_window_attn_triton", "pipelined_tiles", "num_stages", SWA[:1], {}, (2, 4)),
    ("cross_attention_triton", "split_kv", "num_stages", XA, {}, (2, 3, 4)),
    ("cross_attention_triton", "pipelined_tiles", "num_stages", XA[:1], {}, (2, 4)),
    # softmax_triton R=32: the old rungs' best (online BLOCK 4096 16 warps, its stages) against split_row_online
    ("softmax_triton", "online_softmax", "num_stages", SM32, {"BLOCK": 4096, "num_warps": 16}, (1, 4)),
    ("softmax_triton", "online_softmax", "num_stages", SM32, {"BLOCK": 4096, "num_warps": 8}, (1, 4)),
    ("softmax_triton", "split_row_online", "SPLITS", SM32, {}, (8, 32)),
    ("softmax_triton", "chunked_three_pass", "num_stages", SM32, {"BLOCK": 4096, "num_warps": 16}, (1, 4)),
]
room_device_check.PLANS["sim30"] = ([], SIM30)
# sim30b (the follow-up): the fixes at shapes they were not fitted on (ops/l2_reuse, grad_clip's scalar issue,
# the one-launch recount from L1, the spilling persistent tile alone on its SM), and paged split_kv's one outlier
SIM30B = [
    ("layernorm_triton", "chunked_three_pass", "num_warps", [{"T": 2048, "D": 8192}, {"T": 16384, "D": 2048}],
     {"BLOCK": 1024}, (4,)),
    ("layernorm_triton", "whole_row_registers", "num_warps", [{"T": 2048, "D": 8192}, {"T": 16384, "D": 2048}], {}, (4,)),
    ("paged_decode_cuda", "vectorized_uint4", "keys_per_step", [{"B": 128, "H": 32, "KVH": 8, "S": 1024, "D": 128, "P": 32}],
     {}, (4,)),
    ("paged_decode_cuda", "split_kv", "partition", [{"B": 128, "H": 32, "KVH": 8, "S": 1024, "D": 128, "P": 32}], {},
     (512,)),
    ("paged_decode_cuda", "split_kv", "keys_per_step", [{"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16}],
     {"threads": 256, "partition": 256, "main_unroll": 2}, (4, 8)),
    ("paged_decode_cuda", "vectorized_uint4", "keys_per_step", [{"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16}],
     {"threads": 256}, (4,)),
    ("grad_clip_cuda", "two_stage_deterministic", "blocks", [{"N": 67108864}], {"threads": 512}, (512, 2048), "bf16"),
    ("grad_clip_cuda", "two_stage_deterministic", "blocks", [{"N": 33554432}], {"threads": 512}, (2048,), "fp32"),
    ("moe_scatter_cuda", "redundant_rank_one_launch", "threads", [{"T": 2048, "E": 64, "topk": 6, "K": 2048}], {}, (128,)),
    ("moe_scatter_cuda", "vectorized_uint4", "threads", [{"T": 2048, "E": 64, "topk": 6, "K": 2048}], {}, (256,)),
    ("sliding_window_attn_triton", "persistent_tiles", "num_stages", [{"B": 4, "H": 32, "S": 3000, "D": 128, "W": 1024}],
     {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4}, (2, 3)),
]
room_device_check.PLANS["sim30b"] = ([], SIM30B)

if __name__ == "__main__":
    os.environ.setdefault("ROOM_PLAN", "sim30")
    sys.exit(room_device_check.main())
