"""Device check of the Triton loop_unroll credit (ops/unroll.TRITON_IN_FLIGHT), of layernorm_cuda's words at
1,024 threads and of gemv_cuda's load pipe at one and eight rows of x: every value of the knob at few-row shapes (where bytes in flight decide the time) and a many-row one,
each case checked against the PyTorch reference and timed beside the simulator (scripts/room_device_check.py's
harness, plan `unroll`).

    python3 scripts/gpu_check_unroll.py                    # on an H100/H200; writes $OUT/summary.txt, knob_device.json
    KNOBA_REHEARSE=3 python3 scripts/gpu_check_unroll.py   # no GPU: the first 3 cases through every path but the GPU's
    KNOBA_RUN_S=60 python3 scripts/gpu_check_unroll.py     # the run pass's time budget

What it tells: where the SASS says ptxas keeps the rolled loop's loads in flight (softmax, rmsnorm, layernorm), the
unrolled loop times within a few percent of the rolled one; where it says the copies' loads issue ahead
(cross_entropy_fwd_triton's online and split rungs), unrolling gains on a few-row grid.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402

UNROLL = (0, 2, 4, 8)
GEMV = [{"M": 1, "N": 4096, "K": 14336}, {"M": 8, "N": 4096, "K": 4096}]
# (module, rung, parameter, shapes, base, values)
PLAN = [
    ("softmax_triton", "online_softmax", "loop_unroll", [{"R": 32, "C": 128256}], {}, UNROLL),
    ("softmax_triton", "chunked_three_pass", "loop_unroll", [{"R": 32, "C": 128256}], {"BLOCK": 512, "num_warps": 16}, UNROLL),
    ("cross_entropy_fwd_triton", "online_softmax", "loop_unroll", [{"T": 16, "V": 128256}], {}, UNROLL),
    ("cross_entropy_fwd_triton", "split_v_combine", "loop_unroll", [{"T": 16, "V": 128256}], {}, UNROLL),
    ("cross_entropy_fwd_triton", "chunked_two_pass", "loop_unroll", [{"T": 16, "V": 128256}], {}, (0, 8)),
    ("rmsnorm_triton", "chunked_two_pass", "loop_unroll", [{"T": 64, "D": 4096}], {"BLOCK": 256}, UNROLL),
    ("layernorm_triton", "chunked_three_pass", "loop_unroll", [{"T": 64, "D": 4096}], {"BLOCK": 256}, (0, 8)),
    ("fp8_quant_triton", "fused_row_loop", "loop_unroll", [{"T": 32, "D": 8192}], {}, (0, 8)),
    # layernorm_cuda's words on 1,024 threads (ptxas: VEC 1/2/4 hold 32/32/37 registers there), beside 256
    ("layernorm_cuda", "smem_block_reduce", "vec", [{"T": 4096, "D": 4096}, {"T": 64, "D": 4096}], {"threads": 1024}, (1, 2, 4)),
    ("layernorm_cuda", "smem_block_reduce", "vec", [{"T": 4096, "D": 4096}], {"threads": 256}, (1, 2, 4)),
    # gemv_cuda's load pipe beside DRAM (ops/matmul/_gemv_launch.py): one row of x (M=1), where the pipe hides
    # under the W stream, and M=8, where it binds
    ("gemv_cuda", "warp_per_row", "warps", GEMV, {}, (4,)),
    ("gemv_cuda", "vectorized_uint4", "warps", GEMV, {}, (4,)),
    ("gemv_cuda", "multi_row_warp", "warps", GEMV, {}, (4,)),
]
room_device_check.PLANS["unroll"] = ([], PLAN)
# ROOM_PLAN=ln_words: layernorm_cuda's words where the proposed fix of its launch model (nvcc's own four loads in
# flight on the scalar loop) and the words' test disagree: welford_shuffle at T=4096 (the test asserts a 1.4x VEC
# gain there), both rungs at T=64 on 256 threads (the gains the fix keeps), welford on 1,024 threads
LN_WORDS = [
    ("layernorm_cuda", "welford_shuffle", "vec", [{"T": 4096, "D": 4096}, {"T": 64, "D": 4096}], {"threads": 256},
     (1, 2, 4)),
    ("layernorm_cuda", "smem_block_reduce", "vec", [{"T": 64, "D": 4096}], {"threads": 256}, (1, 2, 4)),
    ("layernorm_cuda", "welford_shuffle", "vec", [{"T": 4096, "D": 4096}], {"threads": 1024}, (1, 2, 4)),
]
room_device_check.PLANS["ln_words"] = ([], LN_WORDS)
# ROOM_PLAN=lone: layernorm_triton's lone persistent program (layernorm_triton.LONE_SYNC_S: 16 warps slower than 8 at
# one program a SM over many rows, rows from seeds 98282 / sim31c) at those shapes, a shape no stored row has
# (T=16384 D=4096) and two programs a SM; and what num_stages does to the chunked rungs on a grid that already covers
# DRAM (T=16384 D=8192: the held-out s61717 rows at 3 stages ran 1.3-1.5x their 1-stage peers, the model has no cost)
LONE = [
    ("layernorm_triton", "persistent", "num_warps", [{"T": 16384, "D": 8192}, {"T": 8192, "D": 5120},
                                                     {"T": 16384, "D": 4096}], {"programs_per_sm": 1}, (4, 8, 16), "fp16"),
    ("layernorm_triton", "persistent", "num_warps", [{"T": 16384, "D": 8192}], {"programs_per_sm": 2}, (8, 16), "fp16"),
    ("layernorm_triton", "whole_row_registers", "num_warps", [{"T": 16384, "D": 8192}], {}, (8,), "fp16"),
    ("layernorm_triton", "welford_chunked", "num_stages", [{"T": 16384, "D": 8192}], {"BLOCK": 1024, "num_warps": 8},
     (1, 2, 3), "fp16"),
    ("layernorm_triton", "chunked_three_pass", "num_stages", [{"T": 16384, "D": 8192}], {"BLOCK": 1024, "num_warps": 8},
     (1, 2, 3), "fp16"),
]
room_device_check.PLANS["lone"] = ([], LONE)

if __name__ == "__main__":
    os.environ.setdefault("ROOM_PLAN", "unroll")
    sys.exit(room_device_check.main())
