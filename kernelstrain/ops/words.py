"""The vector width of a scalar rung's global accesses, shared by the op modules: VEC adjacent 16-bit
values a thread moves as one 4-byte uint32_t or 8-byte uint2 word (LDG.32 / LDG.64, STG.32 / STG.64)
instead of one 2-byte access each. Each load then brings VEC times the bytes (Little's law: the grid
keeps VEC times the bytes in flight) for VEC times fewer load and store instructions. The 16-byte
uint4 is each module's own vectorized rung. A row of D values needs D % VEC == 0 (the word's
alignment: feasibility's word4 / vector8 rules refuse the candidate at a row they would misalign).
scripts/room_device_check.py (ROOM_PLAN=vec and vec2) checks every value and bug on a GPU beside the model's times
(an H100, 2026-12-06: all labels held; on 256 threads VEC 4 ran 0.51-0.95x of VEC 1's time).

>>> print(word_union(4))
union Word { uint2 u; scalar_t h[4]; };
>>> WORD[2], VEC.values
('uint32_t', (1, 2, 4))
"""
import math
from dataclasses import replace

from .base import DTYPE_BYTES, Param
from .occupancy import in_flight_ratio

VEC = Param("vec", (1, 2, 4), 1)       # 16-bit values a global access moves: 2, 4 or 8 bytes
WORD = {2: "uint32_t", 4: "uint2"}     # the word of VEC 16-bit values


# The memory side's gain of a wider word past what its bytes in flight give (the simulator credits those by Little's
# law, ** 0.7 in sim.efficiencies): fewer load and store instructions a byte. An H100 (simS device call s1,
# 2026-12-06, scripts/simS_device.py) at grids that already saturate DRAM, where that credit gave 1.00x:
# kv_append_cuda block_per_token fp16 T=4096 H=16 D=256 on 256 threads VEC 1 / 2 / 4 58.3 / 50.5 / 48.3 us (0.87x,
# 0.83x; 128 threads 0.87x, 0.85x), H=8 D=128 18.3 / 16.7 / 16.0 (0.91x, 0.87x); rmsnorm_cuda warp_shuffle bf16
# T=8192 D=5120 65.3 / 61.7 / 59.5 (0.95x, 0.91x); the stored gpu-check rows: embedding_gather_cuda row_per_block
# VEC 2 0.95x VEC 1 (5 pairs), rmsnorm_cuda warp_shuffle 0.91x. Their geometric means, 0.91x a doubling at VEC 2
# and 0.93x at VEC 4: VEC ** -0.12 (0.92x, 0.85x). The rungs were calibrated at VEC 1 (the fit's rows predate it).
# Taken by kv_append_cuda and embedding_gather_cuda (narrow_of); rmsnorm_cuda / add_rmsnorm_cuda's block-per-row
# rungs leave it out: their fitted factor already undoes the in-flight term's credit, so the credit narrow_of
# subtracts (1.58x at VEC 2 there) hides it, and applied in full it lowered their stored rows' order (0.948 -> 0.945,
# 0.899 -> 0.896) and the held-out s62828 rmsnorm group's (Spearman 0.40 -> 0.20).
WORD_EXPONENT = 0.12


def narrow_of(launch):
    """A words.VEC rung's launch model with the wider word's gain (WORD_EXPONENT) where its bytes in flight credit
    less: Launch.narrow = min(1, credit x VEC ** -WORD_EXPONENT), credit the in-flight gain over the same launch at
    VEC 1 (so the two never add)."""
    def wrapped(params, task):
        out, vec = launch(params, task), params.get("vec", 1)
        if vec <= 1:
            return out
        one = launch({**params, "vec": 1}, task)
        credit = (in_flight_ratio(out, task.gpu) / max(1e-9, in_flight_ratio(one, task.gpu))) ** 0.7
        return replace(out, narrow=out.narrow * min(1.0, credit * vec ** -WORD_EXPONENT))
    return wrapped


def word_union(vec: int) -> str:
    """The union a thread loads VEC values through."""
    return f"union Word {{ {WORD[vec]} u; scalar_t h[{vec}]; }};"


def word_trips(*dims: str):
    """unroll.launch_of's trips() of a block-per-row loop over the product of `dims` (D when none) in
    VEC-value words."""
    def trips(params, task):
        return math.prod(task[d] for d in dims or ("D",)) / (params["threads"] * params.get("vec", 1))
    return trips


def word_regs(params, task) -> int:
    """Registers one loaded word holds until it is used (unroll.launch_of's load_regs)."""
    return max(1, params.get("vec", 1) * DTYPE_BYTES[task.dtype] // 4)
