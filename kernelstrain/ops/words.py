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

from .base import DTYPE_BYTES, Param

VEC = Param("vec", (1, 2, 4), 1)       # 16-bit values a global access moves: 2, 4 or 8 bytes
WORD = {2: "uint32_t", 4: "uint2"}     # the word of VEC 16-bit values


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
