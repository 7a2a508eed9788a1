"""Launch parameters shared by the SwiGLU Triton modules, forward and backward (not an op
module itself): the column-block and warp menus, and the persistent variant's grid.
"""
from ..base import DTYPE_BYTES, Param, Task, cdiv

# Programs under ~512 elements measured 1.7x slower on an H200 (block scheduling dominates).
BLOCK = Param("BLOCK", (512, 1024, 2048, 4096), 1024)
# 2 warps hold a 4096-wide block in 64 elements a thread (registers); 16 spread a 512-wide one to a
# lane an element (2-byte accesses): the ends an engineer rules out
WARPS = Param("num_warps", (2, 4, 8, 16), 4)


def persistent_programs(params: dict, task: Task) -> int:
    """#SMs x programs_per_sm resident programs, capped by the T x column-block tiles."""
    tiles = cdiv(task["I"], params["BLOCK"]) * task["T"]
    return min(tiles, task.gpu.sms * params["programs_per_sm"])


def flat_lanes(p: dict, task: Task) -> str:
    """What a lane of a flat BLOCK-wide program (offs = pid * BLOCK + arange, (row, col) from // and % by I) loads,
    as Triton compiles it: a block wider than the program's lanes gives each lane BLOCK / lanes consecutive elements,
    which Triton loads as one vector of up to 16 bytes where it can prove them contiguous -- it specializes an integer
    argument divisible by 16 as such, so with I a multiple of 16 `offs % I` keeps runs of 16 contiguous columns (PTX
    for sm_90a, Triton 3.x, bf16: ld.global.b16 at 1 element a lane, .b32 at 2, .v2.b32 at 4, .v4.b32 at 8); a
    block narrower than the program holds each element in lanes / BLOCK lanes. Two comment lines of the kernel."""
    lanes, block, elt = p["num_warps"] * task.gpu.warp, p["BLOCK"], DTYPE_BYTES[task.dtype]
    where = f"(BLOCK {block} over {p['num_warps']} warps)"
    if block <= lanes:
        held = "one element a lane" if block == lanes else f"each element in {lanes // block} lanes"
        return f"# {held} {where}: {elt}-byte accesses,\n    # and an integer division and modulo per element to find (row, col)"
    per = block // lanes
    if task["I"] % 16:
        return (f"# {per} elements a lane {where}: gate and up in {elt}-byte accesses (I is not a multiple\n"
                f"    # of 16, so Triton cannot prove the columns contiguous); a // and % per element")
    width = min(16, per * elt)
    count = "one" if per * elt <= 16 else f"{per * elt // 16}"
    return (f"# {per} consecutive elements a lane {where}: {count} {width}-byte access{'es' if count != 'one' else ''}"
            f" (I is a\n    # multiple of 16, so Triton proves runs of 16 columns contiguous); a // and % per element")
