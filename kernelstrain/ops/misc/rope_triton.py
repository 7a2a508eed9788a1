"""Rotary position embedding (GPT-NeoX style) in Triton, applied in place to q and k.

Ladder: flat blocks of rotation pairs with div/mod, q and k launched apart -> one program per
token looping over head blocks (cos/sin loaded once, broadcast over heads) -> 2-D grid
(token, head block) -> [BLOCK_T, BLOCK_H, D/2] tiles -> persistent programs over the tiles.
"""
from ..base import KernelSpec, Launch, Param, Rung, TRITON_PRELUDE, DTYPE_BYTES, cdiv, triton_ptr
from .rope_spec import ENTRY, HEAD_MAJOR, SEVERAL_POSITIONS, RopeSpec

# 2-head tiles and 16 warps (roomT, 2026-12-07): the ends where kernelinfer sessions stopped (seed 7171: BLOCK_H and
# num_warps at the list's top in 3 of 12 each). A decode step (T = 1, H = 32) in 2-head tiles is 16 programs, not 8,
# twice the step's bytes in flight (modelled 0.97x of 4 heads on the H100; the fitted BLOCK_H exponent alone would
# put it 1.07-1.13x slower); 16 warps hold a [BLOCK_H, D/2] tile in more lanes (token_head_grid 0.96-0.98x of 8 at
# T = 1 and 64). Correct under TRITON_INTERPRET=1 with the bug failing (scripts/roomT_interpret.py: 5 heads in
# 2-head tiles, a ragged last tile) and built for every target (scripts/room_compile_triton.py). The H100 (roomT/j4,
# 08:04 UTC, bugs failing): 2-head tiles 3.8 us at T = 64 against 4.0 for 4 and 8 heads, level at T = 1 (2.4: a
# launch-bound step); 16 warps level with 8 (2.4 / 2.4, 4.0 / 4.0) where the model has them 4-6% ahead
BLOCK_H = Param("BLOCK_H", (2, 4, 8, 16, 32), 8)
WARPS = Param("num_warps", (2, 4, 8, 16), 4)
OFF_BY_ONE = {"off_by_one": {"bound": "H - 1"}}


def program(p, task, kernel: str, grid: str, consts: dict) -> str:
    """The candidate: the shared rotate() helper, the rung's kernel and the wrapper, which
    launches the kernel once for q and once for k when it takes one tensor (x_ptr)."""
    kw = ", ".join(f"{k}={v}" for k, v in consts.items() if k != "HALF")
    warps = p.get("num_warps", 4)
    tensors = ("q", "k") if "x_ptr" in kernel.split(")")[0] else ("q, k",)
    launch = "".join(f"    rope_kernel[grid](positions, {x}, cos_sin_cache, T, H, HALF=D // 2, {kw}, "
                     f"num_warps={warps})\n" for x in tensors)
    return f"""{TRITON_PRELUDE}

@triton.jit
def rotate(x_ptrs, mask, cos, sin, HALF: tl.constexpr):
    # x_ptrs point at x1 = x[..., :HALF]; x2 sits HALF elements further. fp32 math, in place.
    x1 = tl.load(x_ptrs, mask=mask).to(tl.float32)
    x2 = tl.load(x_ptrs + HALF, mask=mask).to(tl.float32)
    tl.store(x_ptrs, (x1 * cos - x2 * sin).to(x_ptrs.dtype.element_ty), mask=mask)
    tl.store(x_ptrs + HALF, (x2 * cos + x1 * sin).to(x_ptrs.dtype.element_ty), mask=mask)

{kernel}

{ENTRY.py_def(task)}:
    T, H, D = q.shape
    grid = {grid}
{launch}    return q, k
"""


def programs(p, task) -> int:
    tiles = cdiv(task["T"], p["BLOCK_T"]) * cdiv(task["H"], p["BLOCK_H"])
    return min(tiles, task.gpu.sms * p["programs_per_sm"])


def threads_of(p, task) -> int:
    return p.get("num_warps", 4) * task.gpu.warp


# -- flat_pairs ----------------------------------------------------------------------------
def flat_pairs_launch(p, task):
    t, h, d = task["T"], task["H"], task["D"]
    return Launch(grid=cdiv(t * h * d // 2, p["BLOCK"]), threads=threads_of(p, task), regs=24,
                  bytes_per_access=DTYPE_BYTES[task.dtype], traffic=1.1, launches=2)


def flat_lanes(p, task) -> str:
    """What a lane of the flat program loads, as Triton compiles it: BLOCK / lanes consecutive pairs, whose x and cos/sin
    elements it loads as one vector where it proves them contiguous (HALF is a compile-time constant, so `offs % HALF`
    keeps runs of HALF; PTX for sm_90a, Triton 3.x, bf16: ld.global.b16 at one pair a lane, .b32 at 2, .v2.b32 at 4),
    and one 8-byte position load a pair; a block narrower than the program holds each pair in lanes / BLOCK lanes."""
    lanes, block, elt, half = p["num_warps"] * task.gpu.warp, p["BLOCK"], DTYPE_BYTES[task.dtype], task["D"] // 2
    where = f"(BLOCK {block} over {p['num_warps']} warps)"
    if block < lanes:
        return f"# each rotation pair in {lanes // block} lanes {where}: {elt}-byte accesses of x and cos/sin"
    per = block // lanes
    if per == 1:
        return f"# one rotation pair a lane {where}: {elt}-byte accesses of x and cos/sin"
    width = min(16, min(per, half) * elt)
    return (f"# {per} consecutive rotation pairs a lane {where}: x and cos/sin in {width}-byte accesses\n"
            f"    # (HALF = D/2 is a compile-time constant, so Triton proves runs of HALF contiguous)")


def flat_pairs_src(p, task, bound="T * H * HALF", token="row // H"):
    return program(p, task, f"""@triton.jit
def rope_kernel(pos_ptr, x_ptr, cs_ptr, T, H, HALF: tl.constexpr, BLOCK: tl.constexpr):
    # flat over the rotation pairs of one tensor.
    {flat_lanes(p, task)};
    # (token, head, i) from // and %, and every lane gathers its own position and cos/sin
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < {bound}
    row, i = offs // HALF, offs % HALF                 # row = token * H + head
    pos = tl.load(pos_ptr + {token}, mask=mask, other=0)
    cos = tl.load(cs_ptr + pos * 2 * HALF + i, mask=mask).to(tl.float32)
    sin = tl.load(cs_ptr + pos * 2 * HALF + HALF + i, mask=mask).to(tl.float32)
    rotate(x_ptr + row.to(tl.int64) * 2 * HALF + i, mask, cos, sin, HALF)
""",
                   f"(triton.cdiv(T * H * (D // 2), {p['BLOCK']}),)", flat_consts(p, task))


def flat_consts(p, task) -> dict:
    return {"HALF": task["D"] // 2, "BLOCK": p["BLOCK"]}


# -- head-tiled rungs ----------------------------------------------------------------------
def tile_launch(grid_of, extra_regs: int = 0, token_tail: bool = True):
    """Launch model of a rung moving [BLOCK_T, BLOCK_H, D/2] tiles; grid_of(p, task) programs."""
    def launch(p, task):
        t, h, d, elt, threads = task["T"], task["H"], task["D"], DTYPE_BYTES[task.dtype], threads_of(p, task)
        bh, bt = p["BLOCK_H"], p.get("BLOCK_T", 1)
        tile = bt * bh * d // 2                          # pairs per tensor per program
        vec = min(16, max(1, tile // threads) * elt)     # Triton vectorizes along the contiguous D/2 axis
        util = h / (cdiv(h, bh) * bh) * min(1.0, tile / threads)
        # ptxas (sm_90a, scripts/simS_regs.py, bf16 D=256 and D=128): 19-23 registers at 2 pairs a thread, 40-46 at
        # 8, 71-72 at 16, 79-107 at 32, 205 at 64; the estimate it replaces (24 + 4 a pair) said 152 at 32, which left
        # 2-warp programs at half the residency ptxas gives: H100 bf16 T=2048 H=16 D=256 (gpu-check s61717, held out)
        # token_head_grid BLOCK_H 16 on 2 warps 27.4 us, 1.04x the episode's best, simulated 1.30x; stored rows put
        # token_head_grid 2 -> 8 warps at -0.04 in log time where the model said -0.22
        regs = min(255, 16 + 3 * max(1, tile // threads))
        if token_tail:
            util *= t / (cdiv(t, bt) * bt)
        return Launch(grid=grid_of(p, task), threads=threads, regs=regs + extra_regs, bytes_per_access=vec,
                      lane_util=util)
    return launch


def head_consts(p, task) -> dict:
    consts = {"HALF": task["D"] // 2, "BLOCK_H": p["BLOCK_H"]}
    if "BLOCK_T" in p:
        consts["BLOCK_T"] = p["BLOCK_T"]
    if "programs_per_sm" in p:
        consts["NUM_PROGS"] = programs(p, task)
    return consts


HEAD_TILE = """    heads = {h0} + tl.arange(0, BLOCK_H)
    offs = ({row} * H + heads[:, None]).to(tl.int64) * 2 * HALF + i[None, :]
    mask = (heads[:, None] < {bound}) & (i[None, :] < HALF)
    rotate(q_ptr + offs, mask, cos, sin, HALF)
    rotate(k_ptr + offs, mask, cos, sin, HALF)
"""

COS_SIN = """    pos = tl.load(pos_ptr + t)
    cos = tl.load(cs_ptr + pos * 2 * HALF + i).to(tl.float32)[None, :]
    sin = tl.load(cs_ptr + pos * 2 * HALF + HALF + i).to(tl.float32)[None, :]
"""


def token_program_src(p, task, bound="H"):
    tile = HEAD_TILE.format(h0="h0", row="t", bound=bound).replace("\n    ", "\n        ")
    return program(p, task, f"""@triton.jit
def rope_kernel(pos_ptr, q_ptr, k_ptr, cs_ptr, T, H, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    # one program per token: its cos/sin row is loaded once and broadcast over [BLOCK_H, HALF]
    # head tiles of q and k; only T programs, so decode batches leave most SMs idle
    t = tl.program_id(0)
    i = tl.arange(0, HALF)
{COS_SIN}    for h0 in tl.range(0, H, BLOCK_H):
    {tile}""", "(T,)", head_consts(p, task))


def token_head_grid_src(p, task, bound="H"):
    return program(p, task, f"""@triton.jit
def rope_kernel(pos_ptr, q_ptr, k_ptr, cs_ptr, T, H, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    # axis 0: token, axis 1: block of BLOCK_H heads; q and k of those heads share cos/sin
    t = tl.program_id(0)
    i = tl.arange(0, HALF)
{COS_SIN}{HEAD_TILE.format(h0="tl.program_id(1) * BLOCK_H", row="t", bound=bound)}""",
                   f"(T, triton.cdiv(H, {p['BLOCK_H']}))", head_consts(p, task))


def tile3d(bound: str, indent: str) -> str:
    lines = ["tok = t0 + tl.arange(0, BLOCK_T)",
             "heads = h0 + tl.arange(0, BLOCK_H)",
             "pos = tl.load(pos_ptr + tok, mask=tok < T, other=0)[:, None, None]",
             "cs = cs_ptr + pos * 2 * HALF",
             "cos = tl.load(cs + i[None, None, :]).to(tl.float32)",
             "sin = tl.load(cs + HALF + i[None, None, :]).to(tl.float32)",
             "offs = (tok[:, None, None] * H + heads[None, :, None]).to(tl.int64) * 2 * HALF + i[None, None, :]",
             f"mask = (tok[:, None, None] < T) & (heads[None, :, None] < {bound}) & (i[None, None, :] < HALF)",
             "rotate(q_ptr + offs, mask, cos, sin, HALF)",
             "rotate(k_ptr + offs, mask, cos, sin, HALF)"]
    return "".join(f"{indent}{ln}\n" for ln in lines)


def multi_token_tile_src(p, task, bound="H"):
    return program(p, task, f"""@triton.jit
def rope_kernel(pos_ptr, q_ptr, k_ptr, cs_ptr, T, H, HALF: tl.constexpr, BLOCK_H: tl.constexpr,
                BLOCK_T: tl.constexpr):
    # a [BLOCK_T, BLOCK_H, HALF] tile of q and of k per program; cos/sin [BLOCK_T, 1, HALF]
    t0, h0 = tl.program_id(0) * BLOCK_T, tl.program_id(1) * BLOCK_H
    i = tl.arange(0, HALF)
{tile3d(bound, "    ")}""",
                   f"(triton.cdiv(T, {p['BLOCK_T']}), triton.cdiv(H, {p['BLOCK_H']}))", head_consts(p, task))


def persistent_src(p, task, bound="H"):
    return program(p, task, f"""@triton.jit
def rope_kernel(pos_ptr, q_ptr, k_ptr, cs_ptr, T, H, HALF: tl.constexpr, BLOCK_H: tl.constexpr,
                BLOCK_T: tl.constexpr, NUM_PROGS: tl.constexpr):
    # NUM_PROGS resident programs (#SMs x k, capped by the tile count) stride over the
    # (token block, head block) tiles: no tail of short-lived programs
    i = tl.arange(0, HALF)
    head_blocks = tl.cdiv(H, BLOCK_H)
    for tile in tl.range(tl.program_id(0), tl.cdiv(T, BLOCK_T) * head_blocks, NUM_PROGS):
        t0, h0 = (tile // head_blocks) * BLOCK_T, (tile % head_blocks) * BLOCK_H
{tile3d(bound, "        ")}""",
                   f"({programs(p, task)},)", head_consts(p, task))


def tiles(p, task) -> int:
    return cdiv(task["T"], p.get("BLOCK_T", 1)) * cdiv(task["H"], p["BLOCK_H"])


class RopeTriton(RopeSpec):
    impl = "triton"
    variants = (
        Rung("flat_pairs", "1-D blocks of rotation pairs, // and % per pair, q and k in two launches",
             (Param("BLOCK", (64, 128, 256), 128), Param("num_warps", (2, 4), 4)), memory_eff=0.75,
             launch=flat_pairs_launch, render=flat_pairs_src, consts=flat_consts,
             bugs={"broadcast_index": {"token": "row % T"}}, bug_tasks=HEAD_MAJOR),   # (rope_spec: off_by_one, broadcast_index)
        Rung("token_program", "one program per token: cos/sin loaded once, loop over head blocks of q and k",
             (BLOCK_H, WARPS), memory_eff=0.76, launch=tile_launch(lambda p, task: task["T"], token_tail=False),
             render=token_program_src, consts=head_consts, bugs=OFF_BY_ONE, bug_tasks=SEVERAL_POSITIONS),
        Rung("token_head_grid", "2-D grid (token, head block): q and k tiles of one head block per program",
             (BLOCK_H, WARPS), memory_eff=0.75, launch=tile_launch(tiles), render=token_head_grid_src,
             consts=head_consts, bugs=OFF_BY_ONE, bug_tasks=SEVERAL_POSITIONS),
        Rung("multi_token_tile", "[BLOCK_T, BLOCK_H, D/2] tiles: more independent loads per lane",
             (Param("BLOCK_T", (1, 2, 4), 2), BLOCK_H, WARPS), memory_eff=0.72, launch=tile_launch(tiles),
             render=multi_token_tile_src, consts=head_consts, bugs=OFF_BY_ONE, bug_tasks=SEVERAL_POSITIONS),
        Rung("persistent", "#SMs x k programs stride over the (token block, head block) tiles with tl.range",
             (Param("BLOCK_T", (1, 2, 4), 2), BLOCK_H, WARPS, Param("programs_per_sm", (8, 16, 32), 16)), memory_eff=0.66,
             launch=tile_launch(programs, extra_regs=8), render=persistent_src, consts=head_consts, bugs=OFF_BY_ONE,
             bug_tasks=SEVERAL_POSITIONS),
    )

    def triton_kernels(self, variant, params, task) -> list:
        ptr, consts = triton_ptr(task.dtype, task), variant.consts(params, task)
        tensors = {"x_ptr": ptr} if "BLOCK" in consts else {"q_ptr": ptr, "k_ptr": ptr}
        sig = {"pos_ptr": "*i64", **tensors, "cs_ptr": ptr, "T": "i32", "H": "i32", **dict.fromkeys(consts, "constexpr")}
        return [KernelSpec("rope_kernel", sig, consts, num_warps=params.get("num_warps", 4), num_stages=1)]
