"""Device check of sim's modules that the fresh-seed gpu-check of the merged model (seeds 96161 / 96262, H100,
docs/gpu_check_h100_s96161_s96262.txt) and the earlier calls contradict: each case checked against the PyTorch
reference and timed beside the simulator (scripts/room_device_check.py's harness).

    python3 scripts/gpu_check_sim31.py                    # on an H100/H200; writes $OUT/summary.txt, knob_device.json
    KNOBA_REHEARSE=3 python3 scripts/gpu_check_sim31.py   # no GPU: the first 3 cases through every path but the GPU's
    ROOM_PLAN=sim31b python3 scripts/gpu_check_sim31.py   # the follow-up plan (held-out shapes of the fixes)
    ROOM_PLAN=sim31c python3 scripts/gpu_check_sim31.py   # one call of both: what this session's fixes need

Plan sim31 (first call): every rung the fresh seeds put off at the seed's shape, beside the module's other rungs and
the parameter's other values, so that a fix is fitted on the order as well as on the ratio:
- layernorm_triton persistent on 2 warps at T=8192 D=5120 (7.75x slow modelled on the H100, fp16; the H200's bf16
  rows ran 1.25 ms): both dtypes on one card, and the persistent rung's warps / programs an SM at two shapes;
- softmax_triton split_row_online SPLITS at R=256 C=151936 (modelled in the reverse order) and R=1024 C=32000;
- softmax_cuda vectorized_online on 1,024 threads (0.18x), warp_shuffle / smem_block_reduce (1.3-1.4x slow);
- gemv_cuda M=1 N=14336 (Spearman 0) and M=4; layernorm_cuda smem_block_reduce's threads at T=8192 D=1024 (0.67x
  at 512); embedding_bwd_cuda sort_segmented_reduce (0.69x); reduction_cuda warp_shuffle's items (1.37x);
  gemm_fp16_triton's skinny M=128 grouped_swizzle (0.61x at 64x64, 1.37x at 128x128) and its size exponent.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402

LN5120 = [{"T": 8192, "D": 5120}]
SM_BIG = [{"R": 256, "C": 151936}]
SM_KI = [{"R": 1024, "C": 32000}]
SMC_1K = [{"R": 16384, "C": 1024}]
SMC_4K = [{"R": 2048, "C": 4096}]
GEMV1 = [{"M": 1, "N": 14336, "K": 4096}]
GEMV4 = [{"M": 4, "N": 14336, "K": 4096}]
SKINNY = [{"M": 128, "N": 4096, "K": 14336}]
CUBES = [{"M": 2048, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 4096}]
# (module, rung, parameter, shapes, base, values[, dtype])
SIM31 = [
    ("layernorm_triton", "persistent", "num_warps", LN5120, {"programs_per_sm": 1}, (2, 4, 8, 16), "fp16"),
    ("layernorm_triton", "persistent", "num_warps", LN5120, {"programs_per_sm": 1}, (2, 4, 8, 16), "bf16"),
    ("layernorm_triton", "persistent", "programs_per_sm", LN5120, {"num_warps": 2}, (2, 4), "fp16"),
    ("layernorm_triton", "persistent", "num_warps", [{"T": 4096, "D": 4096}], {"programs_per_sm": 2}, (4, 8, 16), "fp16"),
    ("layernorm_triton", "persistent", "num_warps", [{"T": 4096, "D": 8192}], {"programs_per_sm": 1}, (2, 4, 8), "bf16"),
    ("layernorm_triton", "whole_row_registers", "num_warps", LN5120, {}, (2, 4, 8, 16), "fp16"),
    ("softmax_triton", "split_row_online", "SPLITS", SM_BIG, {"BLOCK": 2048, "num_warps": 8}, (2, 4, 8, 16, 32)),
    ("softmax_triton", "online_softmax", "num_warps", SM_BIG, {"BLOCK": 2048}, (4, 8, 16)),
    ("softmax_triton", "split_row_online", "SPLITS", SM_KI, {"BLOCK": 2048, "num_warps": 8}, (2, 8, 32)),
    ("softmax_triton", "online_softmax", "num_warps", SM_KI, {"BLOCK": 2048}, (8,)),
    ("softmax_cuda", "vectorized_online", "threads", SMC_1K, {"rows_per_block": 1, "pragma_unroll": 4, "min_blocks": 1},
     (128, 256, 512, 1024)),
    ("softmax_cuda", "vectorized_online", "pragma_unroll", SMC_1K, {"threads": 1024, "rows_per_block": 1}, (0,)),
    ("softmax_cuda", "warp_shuffle", "threads", SMC_1K, {}, (128, 256, 512)),
    ("softmax_cuda", "smem_block_reduce", "threads", SMC_1K, {}, (128, 512)),
    ("softmax_cuda", "warp_shuffle", "threads", SMC_4K, {}, (128, 512)),
    ("softmax_cuda", "online_softmax", "threads", SMC_4K, {}, (256,)),
    ("softmax_cuda", "vectorized_online", "rows_per_block", SMC_4K, {"threads": 256}, (1, 4)),
    ("gemv_cuda", "vectorized_uint4", "warps", GEMV1, {}, (2, 4, 8, 16)),
    ("gemv_cuda", "multi_row_warp", "rows_per_warp", GEMV1, {"warps": 8}, (2, 4)),
    ("gemv_cuda", "split_k_combine", "splits", GEMV1, {"warps": 8, "rows_per_warp": 4}, (2, 4)),
    ("gemv_cuda", "warp_per_row", "warps", GEMV1 + GEMV4, {}, (4,)),
    ("gemv_cuda", "vectorized_uint4", "warps", GEMV4, {}, (4, 16)),
    ("gemv_cuda", "multi_row_warp", "rows_per_warp", GEMV4, {"warps": 8}, (2,)),
    ("layernorm_cuda", "smem_block_reduce", "threads", [{"T": 8192, "D": 1024}], {}, (128, 256, 512, 1024)),
    ("layernorm_cuda", "register_cached", "threads", [{"T": 8192, "D": 1024}], {}, (128,)),
    ("embedding_bwd_cuda", "sort_segmented_reduce", "threads", [{"T": 4096, "D": 4096, "V": 32000}], {}, (128, 256, 512), "fp16"),
    ("embedding_bwd_cuda", "sort_segmented_reduce", "vec", [{"T": 4096, "D": 4096, "V": 32000}], {}, (2, 4), "fp16"),
    ("embedding_bwd_cuda", "vectorized_atomic2", "warps_per_block", [{"T": 4096, "D": 4096, "V": 32000}], {}, (4,), "fp16"),
    ("reduction_cuda", "warp_shuffle", "items", [{"N": 67108864}], {"threads": 1024}, (1, 2, 4, 8)),
    ("reduction_cuda", "warp_shuffle", "threads", [{"N": 67108864}], {"items": 8}, (256, 512)),
    ("gemm_fp16_triton", "grouped_swizzle", "BLOCK_N", SKINNY, {"BLOCK_M": 64, "BLOCK_K": 64}, (64, 128)),
    ("gemm_fp16_triton", "grouped_swizzle", "BLOCK_N", SKINNY, {"BLOCK_M": 128, "BLOCK_K": 64}, (128,)),
    ("gemm_fp16_triton", "pipelined_stages", "num_stages", SKINNY, {"BLOCK_K": 64}, (3, 4)),
    ("gemm_fp16_triton", "persistent_tma", "BLOCK_M", SKINNY, {}, (64, 128)),
    ("gemm_fp16_triton", "persistent_tma", "BLOCK_M", CUBES, {}, (128,)),
    ("gemm_fp16_triton", "pipelined_stages", "num_stages", CUBES, {"BLOCK_K": 64}, (3,)),
    ("gemm_fp16_triton", "grouped_swizzle", "GROUP_M", CUBES, {}, (8,)),
]
room_device_check.PLANS["sim31"] = ([], SIM31)
# sim31b (the follow-up): the two landed fixes at shapes they were not designed on, beside their references
# - softmax_cuda's block merge issue (_softmax_rows.MERGE_LANE_SLOTS, from one H100 row at R=16384 C=1024): online
#   and vectorized_online at 256-1,024 threads on other shapes, split_row_online (pass 2 merges SPLITS partials);
# - layernorm_triton persistent's registers by dtype (PERSISTENT_REGS): fp16 and bf16 on 2 warps on ONE card, and
#   fp16 at 2 and 4 programs an SM (more spilled rows resident), whole_row_registers beside them.
SM_HELD = [{"R": 4096, "C": 4096}, {"R": 8192, "C": 2048}]
SIM31B = [
    ("softmax_cuda", "online_softmax", "threads", SM_HELD, {}, (256, 512, 1024)),
    ("softmax_cuda", "vectorized_online", "threads", SM_HELD, {"rows_per_block": 1}, (256, 1024)),
    ("softmax_cuda", "split_row_online", "splits", SM_HELD[:1], {"threads": 256}, (2, 8)),
    ("softmax_cuda", "warp_shuffle", "threads", SM_HELD, {}, (256,)),
    ("layernorm_triton", "persistent", "num_warps", LN5120, {"programs_per_sm": 1}, (2, 8), "fp16"),
    ("layernorm_triton", "persistent", "num_warps", LN5120, {"programs_per_sm": 1}, (2, 8), "bf16"),
    ("layernorm_triton", "persistent", "programs_per_sm", LN5120, {"num_warps": 2}, (2, 4), "fp16"),
    ("layernorm_triton", "persistent", "num_warps", [{"T": 4096, "D": 8192}], {"programs_per_sm": 1}, (2, 4), "fp16"),
    ("layernorm_triton", "whole_row_registers", "num_warps", LN5120, {}, (8,), "fp16"),
    ("layernorm_triton", "whole_row_registers", "num_warps", LN5120, {}, (8,), "bf16"),
]
room_device_check.PLANS["sim31b"] = ([], SIM31B)
# sim31c: the one call the device may give (the lead, 13:14 UTC): sim31 without the modules this session left
# (gemm_fp16_triton, reduction_cuda, embedding_bwd_cuda) and sim31b's cases sim31 does not hold already
SIM31C = ([e for e in SIM31 if e[0] not in ("gemm_fp16_triton", "reduction_cuda", "embedding_bwd_cuda")]
          + [e for e in SIM31B if e[0] == "softmax_cuda"]
          + [("layernorm_triton", "persistent", "num_warps", [{"T": 4096, "D": 8192}], {"programs_per_sm": 1}, (2, 4), "fp16"),
             ("layernorm_triton", "whole_row_registers", "num_warps", LN5120, {}, (8,), "bf16")])
room_device_check.PLANS["sim31c"] = ([], SIM31C)

if __name__ == "__main__":
    os.environ.setdefault("ROOM_PLAN", "sim31")
    sys.exit(room_device_check.main())
