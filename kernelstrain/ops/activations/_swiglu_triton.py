"""Launch parameters shared by the SwiGLU Triton modules, forward and backward (not an op
module itself): the column-block and warp menus, and the persistent variant's grid.
"""
from ..base import Param, Task, cdiv

# Programs under ~512 elements measured 1.7x slower on an H200 (block scheduling dominates).
BLOCK = Param("BLOCK", (512, 1024, 2048, 4096), 1024)
# 2 warps hold a 4096-wide block in 64 elements a thread (registers); 16 spread a 512-wide one to a
# lane an element (2-byte accesses): the ends an engineer rules out
WARPS = Param("num_warps", (2, 4, 8, 16), 4)


def persistent_programs(params: dict, task: Task) -> int:
    """#SMs x programs_per_sm resident programs, capped by the T x column-block tiles."""
    tiles = cdiv(task["I"], params["BLOCK"]) * task["T"]
    return min(tiles, task.gpu.sms * params["programs_per_sm"])
